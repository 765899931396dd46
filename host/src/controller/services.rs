//! The host capabilities one plugin invocation gets, scoped to its item: progress checkpoints
//! against the item's progressing timeout, and Kubernetes access to the item's Target cluster
//! only (the plugin never sees the credentials).
//!
//! Kubernetes: get, list (label selectors), create, update, patch (merge, JSON, server-side
//! apply), delete and discovery, with a client built from the item's resolved Target (or
//! the client registered for its kubeconfig) and discovery (GVK → resource and scope)
//! cached per Target cluster. The runtime bounds every call by the invocation deadline.
//!
//! Secondary Targets (`kube_on`, WIT `secondary-targets`): get, list and delete on the
//! cluster of a Target the provider configuration names by `targetName`, looked up in the
//! DeployItem's namespace, resolved (inline config or `secretRef`) and validated like the
//! item's own Target; clients and discovery are shared with the item's Targets.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use plugin_runtime::{DeployerError, HostServices, KubeOp, PatchType, ResourceInfo};

use crate::contract::ProgressingTimeout;
use crate::contract::target::{self, kubeconfig_of};
use crate::landscaper::{ResolvedTarget, Target, codes};

/// Discovery results per (kubeconfig, apiVersion, kind).
type DiscoveryCache = HashMap<(String, String, String), (ApiResource, ApiCapabilities)>;

/// Kubernetes clients per Target kubeconfig, shared by all invocations. Tests and dev mode can
/// register an in-process client for a kubeconfig.
#[derive(Clone, Default)]
pub struct TargetClients {
    clients: Arc<Mutex<HashMap<String, Client>>>,
    discovery: Arc<Mutex<DiscoveryCache>>,
}

/// The identity of a kubeconfig: its parsed form when it is YAML or JSON, so one cluster
/// written as YAML text (inline config) or as JSON (a `secretRef` without `key`) shares one
/// client and one discovery cache.
fn cluster_key(kubeconfig: &str) -> String {
    serde_yaml::from_str::<serde_json::Value>(kubeconfig)
        .ok()
        .filter(serde_json::Value::is_object)
        .map(|v| v.to_string())
        .unwrap_or_else(|| kubeconfig.to_string())
}

impl TargetClients {
    /// Uses `client` for every Target whose kubeconfig is `kubeconfig` (as YAML or JSON).
    pub fn register(&self, kubeconfig: &str, client: Client) {
        self.clients
            .lock()
            .expect("target client cache poisoned")
            .insert(cluster_key(kubeconfig), client);
    }

    /// The client for `kubeconfig` and the key of its discovery cache.
    async fn client_for(&self, kubeconfig: &str) -> Result<(Client, String), DeployerError> {
        let key = cluster_key(kubeconfig);
        if let Some(c) = self.clients.lock().expect("poisoned").get(&key) {
            return Ok((c.clone(), key));
        }
        let config_error = |m: String| error(codes::CONFIGURATION_PROBLEM, "TargetKubeconfig", m);
        let parsed = Kubeconfig::from_yaml(kubeconfig)
            .map_err(|e| config_error(format!("target kubeconfig is invalid: {e}")))?;
        let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
            .await
            .map_err(|e| config_error(format!("target kubeconfig is unusable: {e}")))?;
        let client = Client::try_from(config)
            .map_err(|e| config_error(format!("cannot build a client for the target: {e}")))?;
        self.clients
            .lock()
            .expect("poisoned")
            .insert(key.clone(), client.clone());
        Ok((client, key))
    }

    async fn resource(
        &self,
        key: &str,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Result<(ApiResource, ApiCapabilities), DeployerError> {
        self.resource_opt(key, client, api_version, kind)
            .await?
            .ok_or_else(|| {
                error(
                    codes::CONFIGURATION_PROBLEM,
                    "GetApiResource",
                    format!("unknown kind {kind} in {api_version}: the cluster does not serve it"),
                )
            })
    }

    /// Discovery with "the cluster does not serve this kind" as `None`.
    async fn resource_opt(
        &self,
        key: &str,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<(ApiResource, ApiCapabilities)>, DeployerError> {
        let cache_key = (key.to_string(), api_version.to_string(), kind.to_string());
        if let Some(hit) = self.discovery.lock().expect("poisoned").get(&cache_key) {
            return Ok(Some(hit.clone()));
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = match kube::discovery::pinned_kind(client, &gvk).await {
            Ok(found) => found,
            Err(kube::Error::Api(s)) if s.code == 401 || s.code == 403 => {
                return Err(error(
                    codes::UNAUTHORIZED,
                    "GetApiResourceList",
                    s.message.clone(),
                ));
            }
            // The group/version is not served, or it does not contain the kind.
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(kube::Error::Discovery(_)) => return Ok(None),
            Err(e) => {
                return Err(DeployerError {
                    operation: "kubernetes".into(),
                    reason: "GetApiResourceList".into(),
                    message: format!("discovery of {kind} in {api_version} failed: {e}"),
                    ..Default::default()
                });
            }
        };
        self.discovery
            .lock()
            .expect("poisoned")
            .insert(cache_key, found.clone());
        Ok(Some(found))
    }
}

/// The data of the Secret a Target's `secretRef` names (in `namespace`, the item's): `None`
/// without a `secretRef` or when the Secret does not exist (resolution then says so).
pub(crate) async fn secret_ref_data(
    client: &Client,
    namespace: &str,
    target: &Target,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, kube::Error> {
    let Some(r) = &target.spec.secret_ref else {
        return Ok(None);
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    Ok(secrets.get_opt(&r.name).await?.map(|s| {
        s.data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect()
    }))
}

/// Where secondary Targets are looked up: the Landscaper cluster and the item's namespace.
struct SecondaryTargets {
    client: Client,
    namespace: String,
    /// Kubeconfigs of the Targets resolved during this invocation, by name.
    resolved: Mutex<HashMap<String, String>>,
}

/// Capabilities of one invocation.
pub struct ItemServices {
    timeout: ProgressingTimeout,
    target: Option<ResolvedTarget>,
    clients: TargetClients,
    secondary: Option<SecondaryTargets>,
}

impl ItemServices {
    pub fn new(
        timeout: ProgressingTimeout,
        target: Option<ResolvedTarget>,
        clients: TargetClients,
    ) -> Self {
        Self {
            timeout,
            target,
            clients,
            secondary: None,
        }
    }

    /// Gives the plugin secondary Targets (`targetName`, WIT `secondary-targets`): Targets
    /// read with `client` (the Landscaper cluster) from `namespace` (the DeployItem's).
    /// Without this, [`HostServices::kube_on`] answers `SecondaryTargetsUnavailable`.
    pub fn with_secondary_targets(mut self, client: Client, namespace: String) -> Self {
        self.secondary = Some(SecondaryTargets {
            client,
            namespace,
            resolved: Mutex::new(HashMap::new()),
        });
        self
    }

    /// The client of the item's Target cluster (`None`) or of the secondary Target
    /// `target_name`, and the key of its discovery cache.
    async fn cluster(&self, target_name: Option<&str>) -> Result<(Client, String), DeployerError> {
        match target_name {
            None => self.target_client().await,
            Some(name) => {
                let kubeconfig = self.secondary_kubeconfig(name).await?;
                self.clients.client_for(&kubeconfig).await
            }
        }
    }

    /// Looks the Target `name` up in the item's namespace, resolves it (inline config or
    /// `secretRef`) and validates its kubeconfig like the item's own Target.
    async fn secondary_kubeconfig(&self, name: &str) -> Result<String, DeployerError> {
        let Some(secondary) = &self.secondary else {
            return Err(error(
                codes::INTERNAL_PROBLEM,
                "SecondaryTargetsUnavailable",
                format!("no access to secondary Target {name:?} in this context"),
            ));
        };
        if let Some(k) = secondary.resolved.lock().expect("poisoned").get(name) {
            return Ok(k.clone());
        }
        let ns = &secondary.namespace;
        let targets: Api<Target> = Api::namespaced(secondary.client.clone(), ns);
        let target = targets
            .get_opt(name)
            .await
            .map_err(kube_error)?
            .ok_or_else(|| DeployerError {
                operation: "kubernetes".into(),
                reason: "TargetNotFound".into(),
                message: format!("secondary Target {name:?} not found in namespace {ns:?}"),
                ..Default::default()
            })?;
        let secret_data = secret_ref_data(&secondary.client, ns, &target)
            .await
            .map_err(kube_error)?;
        let config_problem = |reason: &str, m: String| {
            error(
                codes::CONFIGURATION_PROBLEM,
                reason,
                format!("secondary Target {name:?}: {m}"),
            )
        };
        let resolved = target::resolve(&target, secret_data.as_ref())
            .map_err(|m| config_problem("ResolveTarget", m))?;
        target::validate(&resolved).map_err(|m| config_problem("ValidateTarget", m))?;
        let kubeconfig = kubeconfig_of(&resolved.content).ok_or_else(|| {
            config_problem("TargetKubeconfig", "the target has no kubeconfig".into())
        })?;
        secondary
            .resolved
            .lock()
            .expect("poisoned")
            .insert(name.to_string(), kubeconfig.clone());
        Ok(kubeconfig)
    }

    /// The client of the item's Target cluster and the key of its discovery cache.
    async fn target_client(&self) -> Result<(Client, String), DeployerError> {
        let target = self.target.as_ref().ok_or_else(|| {
            error(
                codes::CONFIGURATION_PROBLEM,
                "NoTarget",
                "the DeployItem has no target, so the plugin has no Kubernetes cluster".into(),
            )
        })?;
        let kubeconfig = kubeconfig_of(&target.content).ok_or_else(|| {
            error(
                codes::CONFIGURATION_PROBLEM,
                "TargetKubeconfig",
                "the target has no kubeconfig".into(),
            )
        })?;
        self.clients.client_for(&kubeconfig).await
    }

    async fn api_for(
        &self,
        on: Option<&str>,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, DeployerError> {
        let (client, kubeconfig) = self.cluster(on).await?;
        let (resource, caps) = self
            .clients
            .resource(&kubeconfig, &client, api_version, kind)
            .await?;
        Ok(match (caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client, ns, &resource),
            (Scope::Namespaced, None) => Api::default_namespaced_with(client, &resource),
            (Scope::Cluster, _) => Api::all_with(client, &resource),
        })
    }

    /// An Api for listing: one namespace, or all namespaces (and cluster-scoped kinds).
    async fn api_for_list(
        &self,
        on: Option<&str>,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(Api<DynamicObject>, ApiResource), DeployerError> {
        let (client, kubeconfig) = self.cluster(on).await?;
        let (resource, caps) = self
            .clients
            .resource(&kubeconfig, &client, api_version, kind)
            .await?;
        let api = match (caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client, ns, &resource),
            _ => Api::all_with(client, &resource),
        };
        Ok((api, resource))
    }
}

#[async_trait::async_trait]
impl HostServices for ItemServices {
    fn checkpoint(&self, name: &str) -> Result<(), DeployerError> {
        self.timeout
            .check(name, jiff::Timestamp::now())
            .map(|_| ())
            .map_err(|e| DeployerError {
                codes: e.codes,
                operation: e.operation,
                reason: e.reason,
                message: e.message,
                ..Default::default()
            })
    }

    fn remaining(&self) -> Option<std::time::Duration> {
        self.timeout
            .check("remaining", jiff::Timestamp::now())
            .ok()
            .flatten()
    }

    async fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
        self.run(None, op).await
    }

    async fn kube_on(
        &self,
        target_name: &str,
        op: KubeOp,
    ) -> Result<Option<String>, DeployerError> {
        match op {
            KubeOp::Get(_) | KubeOp::List { .. } | KubeOp::Delete(_) => {
                self.run(Some(target_name), op).await
            }
            other => Err(error(
                codes::INTERNAL_PROBLEM,
                "UnsupportedOperation",
                format!(
                    "secondary Target {target_name:?}: only get, list and delete are offered, not {}",
                    op_name(&other)
                ),
            )),
        }
    }
}

fn op_name(op: &KubeOp) -> &'static str {
    match op {
        KubeOp::Get(_) => "get",
        KubeOp::List { .. } => "list",
        KubeOp::Create { .. } => "create",
        KubeOp::Update { .. } => "update",
        KubeOp::Patch { .. } => "patch",
        KubeOp::Delete(_) => "delete",
        KubeOp::Discover { .. } => "discover",
    }
}

impl ItemServices {
    /// One operation on the item's Target cluster (`on: None`) or a secondary Target.
    async fn run(&self, on: Option<&str>, op: KubeOp) -> Result<Option<String>, DeployerError> {
        match op {
            KubeOp::Get(r) => {
                let api = self
                    .api_for(on, &r.api_version, &r.kind, r.namespace.as_deref())
                    .await?;
                let obj = api.get_opt(&r.name).await.map_err(kube_error)?;
                obj.map(|o| serde_json::to_string(&o).map_err(internal))
                    .transpose()
            }
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
            KubeOp::Delete(r) => {
                let api = self
                    .api_for(on, &r.api_version, &r.kind, r.namespace.as_deref())
                    .await?;
                match api.delete(&r.name, &DeleteParams::background()).await {
                    Ok(_) => Ok(Some("true".into())),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
                    Err(e) => Err(kube_error(e)),
                }
            }
            KubeOp::List {
                api_version,
                kind,
                namespace,
                label_selector,
            } => {
                let (api, resource) = self
                    .api_for_list(on, &api_version, &kind, namespace.as_deref())
                    .await?;
                let mut params = ListParams::default();
                if let Some(sel) = label_selector.as_deref().filter(|s| !s.is_empty()) {
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
            KubeOp::Patch {
                target,
                patch_json,
                patch_type,
                field_manager,
                force,
            } => {
                let api = self
                    .api_for(
                        on,
                        &target.api_version,
                        &target.kind,
                        target.namespace.as_deref(),
                    )
                    .await?;
                let invalid = |m: String| error(codes::CONFIGURATION_PROBLEM, "InvalidPatch", m);
                let value: serde_json::Value = serde_json::from_str(&patch_json)
                    .map_err(|e| invalid(format!("patch is not valid JSON: {e}")))?;
                let mut params = PatchParams {
                    field_manager: field_manager.clone(),
                    ..PatchParams::default()
                };
                let patched = match patch_type {
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
                        if field_manager.as_deref().unwrap_or("").is_empty() {
                            return Err(invalid("server-side apply needs a field manager".into()));
                        }
                        params.force = force;
                        api.patch(&target.name, &params, &Patch::Apply(&value))
                            .await
                    }
                }
                .map_err(kube_error)?;
                Ok(Some(serde_json::to_string(&patched).map_err(internal)?))
            }
            KubeOp::Discover { api_version, kind } => {
                let (client, kubeconfig) = self.cluster(on).await?;
                let found = self
                    .clients
                    .resource_opt(&kubeconfig, &client, &api_version, &kind)
                    .await?;
                Ok(found.map(|(resource, caps)| {
                    serde_json::to_string(&ResourceInfo {
                        api_version,
                        kind: resource.kind,
                        plural: resource.plural,
                        namespaced: caps.scope == Scope::Namespaced,
                    })
                    .unwrap_or_default()
                }))
            }
        }
    }
}

impl ItemServices {
    async fn api_for_object(
        &self,
        on: Option<&str>,
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
        let api = self
            .api_for(
                on,
                &types.api_version,
                &types.kind,
                obj.metadata.namespace.as_deref(),
            )
            .await?;
        Ok((api, obj))
    }
}

fn error(code: &str, reason: &str, message: String) -> DeployerError {
    DeployerError {
        codes: vec![code.to_string()],
        operation: "kubernetes".into(),
        reason: reason.into(),
        message,
        ..Default::default()
    }
}

fn internal(e: serde_json::Error) -> DeployerError {
    error(codes::INTERNAL_PROBLEM, "Encode", e.to_string())
}

/// Maps an API error onto Landscaper codes: 401/403 are unrecoverable, the rest is retried.
fn kube_error(e: kube::Error) -> DeployerError {
    match &e {
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => {
            error(codes::UNAUTHORIZED, &s.reason, s.message.clone())
        }
        kube::Error::Api(s) => DeployerError {
            operation: "kubernetes".into(),
            reason: s.reason.clone(),
            message: s.message.clone(),
            ..Default::default()
        },
        other => DeployerError {
            operation: "kubernetes".into(),
            reason: "Request".into(),
            message: other.to_string(),
            ..Default::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn secondary_targets_offer_get_list_and_delete_only_when_given() {
        let services = ItemServices::new(
            ProgressingTimeout::unlimited(),
            None,
            TargetClients::default(),
        );
        let create = KubeOp::Create {
            object_json: "{}".into(),
        };
        let e = services.kube_on("other", create).await.unwrap_err();
        assert_eq!(e.reason, "UnsupportedOperation");
        assert!(e.message.contains("not create"), "{}", e.message);
        let get = KubeOp::Get(plugin_runtime::ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("default".into()),
            name: "x".into(),
        });
        let e = services.kube_on("other", get).await.unwrap_err();
        assert_eq!(e.reason, "SecondaryTargetsUnavailable");
        assert_eq!(e.codes, vec![codes::INTERNAL_PROBLEM.to_string()]);
    }

    #[test]
    fn one_kubeconfig_as_yaml_or_json_is_one_cluster() {
        let yaml = "apiVersion: v1\nclusters:\n- name: c\n  cluster: {server: 'https://a'}\n";
        let json =
            r#"{"clusters":[{"cluster":{"server":"https://a"},"name":"c"}],"apiVersion":"v1"}"#;
        assert_eq!(cluster_key(yaml), cluster_key(json));
        assert_ne!(
            cluster_key(yaml),
            cluster_key(&yaml.replace("https://a", "https://b"))
        );
        assert_eq!(cluster_key("not: [valid"), "not: [valid");
    }
}
