//! Kubernetes on a Target cluster (WIT `kubernetes` 1.0 and `cluster` 1.1): get, list (label
//! selectors), create, update, patch (merge, JSON, server-side apply), delete and discovery,
//! with the client of the item's resolved Target or of a secondary Target. A call goes out only
//! while the cluster's endpoint is reachable as far as the host knows (`clusters`), within
//! `targetClusters.requestTimeout`; the runtime also cuts it off half a second before the
//! invocation deadline. A cluster that cannot be reached is an error naming the Target, its API
//! server and the cause.
//!
//! Owns: one Kubernetes operation as the plugin asked for it, and its answer as JSON. Must not
//! touch: which Target (`super`, `secondary_targets`) or credentials (the plugin never sees them).

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{ApiResource, Scope};
use plugin_runtime::{DeployerError, KubeOp, ObjectRef, PatchType, ResourceInfo, ServerVersion};

use std::sync::Arc;

use super::ItemServices;
use super::clusters::{Cluster, TargetId, unreachable_cause};
use super::errors::{UNREACHABLE, error, internal, kube_error};
use super::secondary_targets::secondary_kubeconfig;
use crate::contract::target::{kubeconfig_of, no_kubeconfig_reason};
use crate::landscaper::{KUBERNETES_CLUSTER_TARGET_TYPE, codes};

impl ItemServices {
    /// The item's Target cluster (`None`) or the secondary Target `target_name`, and the
    /// Target's `namespace/name` (how errors name it).
    async fn cluster(
        &self,
        target_name: Option<&str>,
    ) -> Result<(Arc<Cluster>, TargetId), DeployerError> {
        match target_name {
            None => self.target_cluster().await,
            Some(name) => {
                let kubeconfig = secondary_kubeconfig(self.secondary.as_ref(), name).await?;
                let namespace = self
                    .secondary
                    .as_ref()
                    .map(|s| s.namespace.as_str())
                    .unwrap_or_default();
                let id: TargetId = format!("{namespace}/{name}").into();
                let cluster = self.clients.cluster_for(&kubeconfig, Some(&id)).await?;
                Ok((cluster, id))
            }
        }
    }

    /// The item's Target cluster, looked up once per invocation (a plugin's calls all go to
    /// the same Target).
    async fn target_cluster(&self) -> Result<(Arc<Cluster>, TargetId), DeployerError> {
        self.primary
            .get_or_try_init(|| self.resolve_target_cluster())
            .await
            .cloned()
    }

    async fn resolve_target_cluster(&self) -> Result<(Arc<Cluster>, TargetId), DeployerError> {
        let target = self.target.as_ref().ok_or_else(|| {
            error(
                codes::CONFIGURATION_PROBLEM,
                "NoTarget",
                "the DeployItem has no target, so the plugin has no Kubernetes cluster".into(),
            )
        })?;
        if target.target.spec.type_ != KUBERNETES_CLUSTER_TARGET_TYPE {
            return Err(error(
                codes::CONFIGURATION_PROBLEM,
                "TargetType",
                format!(
                    "Target {:?} has type {:?}; Kubernetes access needs a Target of type {KUBERNETES_CLUSTER_TARGET_TYPE:?}",
                    target.target.metadata.name.as_deref().unwrap_or_default(),
                    target.target.spec.type_
                ),
            ));
        }
        let kubeconfig = kubeconfig_of(&target.content).ok_or_else(|| {
            let name = target.target.metadata.name.as_deref().unwrap_or_default();
            let message = no_kubeconfig_reason(name, &target.content);
            error(codes::CONFIGURATION_PROBLEM, "TargetKubeconfig", message)
        })?;
        let meta = &target.target.metadata;
        let id: TargetId = format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        )
        .into();
        let cluster = self.clients.cluster_for(&kubeconfig, Some(&id)).await?;
        Ok((cluster, id))
    }

    /// Runs one operation on `on`'s cluster: only when its endpoint is reachable as far as the
    /// host knows, within the request timeout, and with an error that names the Target, its
    /// API server and the cause when the cluster cannot be reached (the endpoint is then marked
    /// down, so that other items fail fast instead of waiting too).
    pub(super) async fn run(
        &self,
        on: Option<&str>,
        op: KubeOp,
    ) -> Result<Option<String>, DeployerError> {
        let (cluster, target) = self.cluster(on).await?;
        let settings = self.clients.settings();
        if let Err(refusal) = cluster.health.admit(&cluster.client, settings).await {
            self.retry_in(refusal.retry_in());
            return Err(unreachable_error(&target, &cluster, &refusal.cause()));
        }
        let within = settings.request_timeout;
        let cause = match tokio::time::timeout(within, self.operation(&cluster, op)).await {
            Ok(Err(e)) if e.reason == UNREACHABLE => e.message,
            Ok(answer) => return answer,
            Err(_) => format!("no answer within {}s", within.as_secs_f32()),
        };
        let retry = cluster.health.failed(&cause, settings);
        self.retry_in(retry);
        Err(unreachable_error(&target, &cluster, &cause))
    }

    async fn api_for(
        cluster: &Cluster,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, DeployerError> {
        let found = cluster.resource(api_version, kind).await?;
        let client = cluster.client.clone();
        let (resource, caps) = &*found;
        Ok(match (&caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client, ns, resource),
            (Scope::Namespaced, None) => Api::default_namespaced_with(client, resource),
            (Scope::Cluster, _) => Api::all_with(client, resource),
        })
    }

    /// An Api for listing: one namespace, or all namespaces (and cluster-scoped kinds).
    async fn api_for_list(
        cluster: &Cluster,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(Api<DynamicObject>, ApiResource), DeployerError> {
        let found = cluster.resource(api_version, kind).await?;
        let client = cluster.client.clone();
        let (resource, caps) = &*found;
        let api = match (&caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client, ns, resource),
            _ => Api::all_with(client, resource),
        };
        Ok((api, resource.clone()))
    }
}

impl ItemServices {
    /// One operation on `cluster`.
    async fn operation(&self, on: &Cluster, op: KubeOp) -> Result<Option<String>, DeployerError> {
        match op {
            KubeOp::Get(r) => self.get(on, &r).await,
            KubeOp::Create { object_json } => {
                let (api, obj) = self.api_for_object(on, &object_json).await?;
                let created = api
                    .create(&PostParams::default(), &obj)
                    .await
                    .map_err(kube_error)?;
                Ok(Some(serde_json::to_string(&created).map_err(internal)?))
            }
            KubeOp::Update { object_json } => {
                let (api, obj) = self.api_for_object(on, &object_json).await?;
                let name = obj.metadata.name.clone().unwrap_or_default();
                let updated = api
                    .replace(&name, &PostParams::default(), &obj)
                    .await
                    .map_err(kube_error)?;
                Ok(Some(serde_json::to_string(&updated).map_err(internal)?))
            }
            KubeOp::Delete(r) => self.delete(on, &r).await,
            KubeOp::List {
                api_version,
                kind,
                namespace,
                label_selector,
            } => {
                self.list(
                    on,
                    &api_version,
                    &kind,
                    namespace.as_deref(),
                    label_selector.as_deref(),
                )
                .await
            }
            KubeOp::Patch {
                target,
                patch_json,
                patch_type,
                field_manager,
                force,
            } => {
                let patch = PatchRequest {
                    patch_json: &patch_json,
                    patch_type,
                    field_manager,
                    force,
                };
                self.patch(on, &target, patch).await
            }
            KubeOp::Discover { api_version, kind } => self.discover(on, api_version, &kind).await,
            KubeOp::ServerVersion => self.server_version(on).await,
            KubeOp::ApiVersions => self.api_versions(on).await,
        }
    }

    /// The cluster's `/version` (what Helm reads for `.Capabilities.KubeVersion`).
    async fn server_version(&self, on: &Cluster) -> Result<Option<String>, DeployerError> {
        let client = on.client.clone();
        let info = client
            .apiserver_version()
            .await
            .map_err(|e| discovery_error("could not get server version from Kubernetes", e))?;
        let v = ServerVersion {
            major: info.major,
            minor: info.minor,
            git_version: info.git_version,
        };
        Ok(Some(serde_json::to_string(&v).map_err(internal)?))
    }

    /// Helm's `GetVersionSet`: every served `group/version` (core `v1`) and `group/version/Kind`
    /// of each group version's resources (subresources included: their kind counts), asked
    /// anew on every call — no cache, so a CRD created a moment ago is in it, as Helm re-reads
    /// discovery per action. A group version whose resources cannot be read (an unavailable
    /// aggregated API) stays listed without kinds, as Helm tolerates `GroupDiscoveryFailed`.
    async fn api_versions(&self, on: &Cluster) -> Result<Option<String>, DeployerError> {
        const WHAT: &str = "could not get apiVersions from Kubernetes";
        let started = std::time::Instant::now();
        let client = on.client.clone();
        let core = client
            .list_core_api_versions()
            .await
            .map_err(|e| discovery_error(WHAT, e))?;
        let groups = client
            .list_api_groups()
            .await
            .map_err(|e| discovery_error(WHAT, e))?;
        let mut group_versions: Vec<(String, bool)> =
            core.versions.into_iter().map(|v| (v, true)).collect();
        for g in groups.groups {
            group_versions.extend(g.versions.into_iter().map(|v| (v.group_version, false)));
        }
        let resources = futures::future::join_all(group_versions.iter().map(|(gv, core)| {
            let client = client.clone();
            async move {
                if *core {
                    client.list_core_api_resources(gv).await
                } else {
                    client.list_api_group_resources(gv).await
                }
            }
        }))
        .await;
        let mut set = std::collections::BTreeSet::new();
        for ((gv, _), listed) in group_versions.iter().zip(resources) {
            set.insert(gv.clone());
            match listed {
                Ok(list) => {
                    for r in list.resources {
                        set.insert(format!("{gv}/{}", r.kind));
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 401 || s.code == 403 => {
                    return Err(kube_error(kube::Error::Api(s)));
                }
                Err(e) => {
                    tracing::debug!(group_version = %gv, error = %e, "discovery of a group version failed; listed without kinds")
                }
            }
        }
        let set: Vec<String> = set.into_iter().collect();
        tracing::debug!(
            group_versions = group_versions.len(),
            entries = set.len(),
            millis = started.elapsed().as_millis() as u64,
            "discovered the API versions of a Target cluster"
        );
        Ok(Some(serde_json::to_string(&set).map_err(internal)?))
    }

    async fn get(&self, on: &Cluster, r: &ObjectRef) -> Result<Option<String>, DeployerError> {
        let api = Self::api_for(on, &r.api_version, &r.kind, r.namespace.as_deref()).await?;
        let obj = api.get_opt(&r.name).await.map_err(kube_error)?;
        obj.map(|o| serde_json::to_string(&o).map_err(internal))
            .transpose()
    }

    async fn delete(&self, on: &Cluster, r: &ObjectRef) -> Result<Option<String>, DeployerError> {
        let api = Self::api_for(on, &r.api_version, &r.kind, r.namespace.as_deref()).await?;
        match api.delete(&r.name, &DeleteParams::background()).await {
            Ok(_) => Ok(Some("true".into())),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(kube_error(e)),
        }
    }

    async fn list(
        &self,
        on: &Cluster,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Option<String>, DeployerError> {
        let (api, resource) = Self::api_for_list(on, api_version, kind, namespace).await?;
        let mut params = ListParams::default();
        if let Some(sel) = label_selector.filter(|s| !s.is_empty()) {
            params = params.labels(sel);
        }
        let list = api.list(&params).await.map_err(kube_error)?;
        let items: Vec<serde_json::Value> = list
            .items
            .into_iter()
            .map(|mut o| {
                // List items come without apiVersion/kind; give them back.
                o.types = Some(kube::core::TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                });
                serde_json::to_value(o).map_err(internal)
            })
            .collect::<Result<_, _>>()?;
        let out = serde_json::json!({
            "apiVersion": resource.api_version,
            "kind": format!("{}List", resource.kind),
            "metadata": {"resourceVersion": list.metadata.resource_version},
            "items": items,
        });
        Ok(Some(out.to_string()))
    }

    async fn patch(
        &self,
        on: &Cluster,
        target: &ObjectRef,
        patch: PatchRequest<'_>,
    ) -> Result<Option<String>, DeployerError> {
        let api = Self::api_for(
            on,
            &target.api_version,
            &target.kind,
            target.namespace.as_deref(),
        )
        .await?;
        let invalid = |m: String| error(codes::CONFIGURATION_PROBLEM, "InvalidPatch", m);
        let value: serde_json::Value = serde_json::from_str(patch.patch_json)
            .map_err(|e| invalid(format!("patch is not valid JSON: {e}")))?;
        let mut params = PatchParams {
            field_manager: patch.field_manager.clone(),
            ..PatchParams::default()
        };
        let patched = match patch.patch_type {
            PatchType::Merge => {
                api.patch(&target.name, &params, &Patch::Merge(&value))
                    .await
            }
            PatchType::Json => {
                let ops: json_patch::Patch = serde_json::from_value(value)
                    .map_err(|e| invalid(format!("not a JSON patch (RFC 6902): {e}")))?;
                api.patch(&target.name, &params, &Patch::Json::<()>(ops))
                    .await
            }
            PatchType::Apply => {
                if patch.field_manager.as_deref().unwrap_or("").is_empty() {
                    return Err(invalid("server-side apply needs a field manager".into()));
                }
                params.force = patch.force;
                api.patch(&target.name, &params, &Patch::Apply(&value))
                    .await
            }
        }
        .map_err(kube_error)?;
        Ok(Some(serde_json::to_string(&patched).map_err(internal)?))
    }

    async fn discover(
        &self,
        on: &Cluster,
        api_version: String,
        kind: &str,
    ) -> Result<Option<String>, DeployerError> {
        let found = on.resource_opt(&api_version, kind).await?;
        Ok(found.map(|found| {
            let (resource, caps) = &*found;
            serde_json::to_string(&ResourceInfo {
                api_version,
                kind: resource.kind.clone(),
                plural: resource.plural.clone(),
                namespaced: caps.scope == Scope::Namespaced,
            })
            .unwrap_or_default()
        }))
    }
}

/// A failed discovery request in Helm's words (`<what>: <cause>`); 401/403 as `ERR_UNAUTHORIZED`.
fn discovery_error(what: &str, e: kube::Error) -> DeployerError {
    match e {
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => kube_error(kube::Error::Api(s)),
        e if unreachable_cause(&e).is_some() => kube_error(e),
        e => DeployerError {
            operation: "kubernetes".into(),
            reason: "ServerDiscovery".into(),
            message: format!("{what}: {e}"),
            ..Default::default()
        },
    }
}

/// The parts of a [`KubeOp::Patch`] besides its target.
struct PatchRequest<'a> {
    patch_json: &'a str,
    patch_type: PatchType,
    field_manager: Option<String>,
    force: bool,
}

impl ItemServices {
    async fn api_for_object(
        &self,
        on: &Cluster,
        object_json: &str,
    ) -> Result<(Api<DynamicObject>, DynamicObject), DeployerError> {
        let obj: DynamicObject = serde_json::from_str(object_json).map_err(|e| {
            error(
                codes::CONFIGURATION_PROBLEM,
                "InvalidObject",
                format!("object is not valid JSON: {e}"),
            )
        })?;
        let types = obj.types.clone().ok_or_else(|| {
            error(
                codes::CONFIGURATION_PROBLEM,
                "InvalidObject",
                "object has no apiVersion/kind".into(),
            )
        })?;
        let api = Self::api_for(
            on,
            &types.api_version,
            &types.kind,
            obj.metadata.namespace.as_deref(),
        )
        .await?;
        Ok((api, obj))
    }
}

/// A call's error when `target`'s cluster cannot be reached: which Target, which API server,
/// and why (refused, timed out, TLS, ...). Retried (no code) until the progressing timeout.
fn unreachable_error(target: &str, cluster: &Cluster, cause: &str) -> DeployerError {
    DeployerError {
        operation: "kubernetes".into(),
        reason: UNREACHABLE.into(),
        message: format!(
            "the cluster of Target {target} ({}) is unreachable: {cause}",
            cluster.server
        ),
        ..Default::default()
    }
}
