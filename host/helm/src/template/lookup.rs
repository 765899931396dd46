//! The engine's one window onto a cluster: Helm's `lookup`.
//!
//! Owns: the [`Lookup`] trait (the render's caller implements it). Must not touch: anything
//! but the question asked.

/// Helm's `lookup` against a cluster (`pkg/engine/lookup_func.go`), for renders that have one
/// (a Helm install or upgrade, Landscaper's template mode). Without it `lookup` is empty, as in
/// `helm template`.
pub trait Lookup {
    /// `lookup apiVersion kind namespace name`: with a name, the object as the API returns it,
    /// `Ok(None)` when it does not exist; with an empty name, the List object of `namespace`
    /// (all namespaces, or the cluster-scoped kind, when `namespace` is empty). `Err` fails the
    /// render with that message (after Go's `error calling lookup: `).
    fn lookup(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<serde_json::Value>, String>;
}
