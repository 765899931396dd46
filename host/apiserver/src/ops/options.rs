//! The options of a write request and the outcome of a DELETE, shared by the API semantics and
//! the HTTP layer.
//!
//! Owns: [`WriteOpts`], [`PatchKind`], [`DeleteOpts`], [`Deleted`], the stored-size limit.
//! Must not touch: the store.

use crate::store::Obj;

/// The largest object etcd stores (its default `--max-request-bytes`, 1.5 MiB).
pub(crate) const MAX_STORED_BYTES: usize = 3 << 19;

/// Request options shared by all writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    /// `fieldValidation=Strict`: a field the schema does not know is an error, not pruned
    /// silently (kubectl sends it by default).
    pub strict_fields: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

/// DeleteOptions (body and query).
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    pub propagation: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

/// Outcome of a DELETE.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// Removed; the last state (with the deletion's rv).
    Gone(Obj),
    /// Kept because of finalizers; `deletionTimestamp` is set.
    Terminating(Obj),
}
