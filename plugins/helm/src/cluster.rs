//! What a render learns from the item's Target cluster, as Helm's install and upgrade (and
//! Landscaper's template mode, which renders against the target) learn it: `.Capabilities`
//! from the cluster's `/version` and discovery (WIT `cluster-info`, 1.4), and `lookup` from
//! the cluster (WIT `cluster`: `discover`, `get`, `list`). Both modes build their
//! [`RenderOptions`] through [`TargetCluster::options`].
//!
//! Owns: Helm's `lookup` semantics (`pkg/engine/lookup_func.go`) over the host's calls. Must not
//! touch: rendering itself (`helm_engine`).

use std::collections::BTreeSet;

use helm_engine::{ClusterCapabilities, Lookup, RenderOptions};
use sdk_guest::{Ctx, DeployerError, KubeOp, ObjectRef};
use serde_json::Value;

/// The Target cluster of one render: its capabilities, read once per render (Helm reads them
/// once per action), and `lookup` on it.
pub(crate) struct TargetCluster<'c, 'a> {
    ctx: &'c Ctx<'a>,
    capabilities: ClusterCapabilities,
    served: BTreeSet<String>,
}

impl<'c, 'a> TargetCluster<'c, 'a> {
    /// Reads the cluster's version and API versions.
    pub(crate) fn read(ctx: &'c Ctx<'a>) -> Result<Self, DeployerError> {
        let version = ctx.server_version()?;
        let api_versions = ctx.api_versions()?;
        Ok(TargetCluster {
            ctx,
            served: api_versions.iter().cloned().collect(),
            capabilities: ClusterCapabilities {
                git_version: version.git_version,
                major: version.major,
                minor: version.minor,
                api_versions,
            },
        })
    }

    /// `opts` rendering against this cluster: its `.Capabilities` and `lookup`.
    pub(crate) fn options<'s>(&'s self, opts: RenderOptions<'s>) -> RenderOptions<'s> {
        RenderOptions {
            cluster: Some(self.capabilities.clone()),
            lookup: Some(self),
            ..opts
        }
    }
}

/// `schema.GroupVersionKind.String()` of Go: `group/version, Kind=kind` (core: `/v1, …`).
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

impl Lookup for TargetCluster<'_, '_> {
    fn lookup(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, String> {
        let info = match self.ctx.kube_discover(api_version, kind) {
            Ok(Some(info)) => info,
            // Helm asks discovery for the group version: one the cluster does not serve is an
            // error; in one it serves, a kind it does not know yields nothing.
            Ok(None) if self.served.contains(api_version) => return Ok(None),
            Ok(None) => {
                return Err(format!(
                    "unable to get apiresource from unstructured: {}: the server could not find the requested resource",
                    gvk_string(api_version, kind)
                ));
            }
            Err(e) => {
                return Err(format!(
                    "unable to get apiresource from unstructured: {}: {}",
                    gvk_string(api_version, kind),
                    e.message
                ));
            }
        };
        // Helm uses the namespace only for namespaced kinds and when it is not empty.
        let namespace = (info.namespaced && !namespace.is_empty()).then(|| namespace.to_string());
        if name.is_empty() {
            // The List object as the API returns it (`apiVersion`, `kind: <Kind>List`,
            // `metadata`, `items`).
            let list = self
                .ctx
                .kube(KubeOp::List {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    namespace,
                    label_selector: None,
                })
                .map_err(|e| e.message)?;
            return serde_json::from_str(list.as_deref().unwrap_or("{}"))
                .map(Some)
                .map_err(|e| format!("invalid list from the cluster: {e}"));
        }
        if info.namespaced && namespace.is_none() {
            // A namespaced kind by name without a namespace: Helm GETs the all-namespaces
            // path, which the API answers with NotFound — an empty map.
            return Ok(None);
        }
        let object = ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace,
            name: name.into(),
        };
        self.ctx.kube_get(&object).map_err(|e| e.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::fake::FakeCluster;
    use serde_json::json;

    #[test]
    fn gvk_strings_are_gos() {
        assert_eq!(gvk_string("v1", "Secret"), "/v1, Kind=Secret");
        assert_eq!(gvk_string("apps/v1", "Foo"), "apps/v1, Kind=Foo");
    }

    #[test]
    fn lookup_follows_helms_semantics_on_the_target_cluster() {
        let fake = FakeCluster::new();
        fake.put(json!({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "db", "namespace": "ns"},
                        "data": {"password": "cGFzcw=="}}));
        fake.unknown_kind("Nope");
        fake.unknown_kind("Widget");
        let ctx = Ctx::native(&fake);
        let cluster = TargetCluster::read(&ctx).unwrap();
        assert_eq!(cluster.capabilities.git_version, "v1.30.0-fake");
        assert!(cluster.served.contains("v1/Secret"));

        let found = cluster.lookup("v1", "Secret", "ns", "db").unwrap().unwrap();
        assert_eq!(found["data"]["password"], "cGFzcw==");
        assert_eq!(cluster.lookup("v1", "Secret", "ns", "gone").unwrap(), None);
        assert_eq!(cluster.lookup("v1", "Secret", "", "db").unwrap(), None);
        let list = cluster.lookup("v1", "Secret", "ns", "").unwrap().unwrap();
        assert_eq!(list["items"][0]["metadata"]["name"], "db");
        // A kind the served core group does not have: nothing; an unserved group: Helm's error.
        assert_eq!(cluster.lookup("v1", "Nope", "ns", "x").unwrap(), None);
        assert_eq!(
            cluster
                .lookup("example.com/v1", "Widget", "ns", "x")
                .unwrap_err(),
            "unable to get apiresource from unstructured: example.com/v1, Kind=Widget: the server could not find the requested resource"
        );
    }
}
