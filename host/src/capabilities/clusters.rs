//! Kubernetes clients and discovery per Target cluster, shared by every invocation.
//!
//! Owns: one client per kubeconfig (tests and dev mode register in-process clients) and the
//! discovery cache (GVK → resource and scope) per cluster. Must not touch: which cluster an
//! invocation may use — [`super::ItemServices`] decides that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource};
use plugin_runtime::DeployerError;

use super::errors::error;
use crate::landscaper::codes;

/// The identity of one cluster: [`cluster_key`] of its kubeconfig, shared, not copied.
pub(super) type ClusterKey = Arc<str>;

/// What discovery found for one kind on one cluster.
pub(super) type Discovered = Arc<(ApiResource, ApiCapabilities)>;

/// Discovery results per (cluster, apiVersion, kind).
type DiscoveryCache = HashMap<(ClusterKey, String, String), Discovered>;

/// Kubeconfig texts seen before, at most this many, with their cluster keys (a Target whose
/// kubeconfig changes often must not grow the map without bound).
const KNOWN_TEXTS: usize = 1024;

/// Kubernetes clients per Target kubeconfig, shared by all invocations. Tests and dev mode can
/// register an in-process client for a kubeconfig.
#[derive(Clone, Default)]
pub struct TargetClients {
    clients: Arc<Mutex<HashMap<ClusterKey, Client>>>,
    /// Kubeconfig text → its cluster key: parsing the YAML on every Kubernetes call of a plugin
    /// was a tenth of the host's CPU for a manifest job.
    keys: Arc<Mutex<HashMap<String, ClusterKey>>>,
    discovery: Arc<Mutex<DiscoveryCache>>,
}

/// The identity of a kubeconfig: its parsed form when it is YAML or JSON, so one cluster
/// written as YAML text (inline config) or as JSON (a `secretRef` without `key`) shares one
/// client and one discovery cache.
pub(super) fn cluster_key(kubeconfig: &str) -> String {
    serde_yaml::from_str::<serde_json::Value>(kubeconfig)
        .ok()
        .filter(serde_json::Value::is_object)
        .map(|v| v.to_string())
        .unwrap_or_else(|| kubeconfig.to_string())
}

impl TargetClients {
    /// Uses `client` for every Target whose kubeconfig is `kubeconfig` (as YAML or JSON).
    pub fn register(&self, kubeconfig: &str, client: Client) {
        let key = self.key_of(kubeconfig);
        self.clients
            .lock()
            .expect("target client cache poisoned")
            .insert(key, client);
    }

    /// [`cluster_key`] of `kubeconfig`, parsed once per distinct text.
    fn key_of(&self, kubeconfig: &str) -> ClusterKey {
        if let Some(key) = self.keys.lock().expect("poisoned").get(kubeconfig) {
            return key.clone();
        }
        let key: ClusterKey = cluster_key(kubeconfig).into();
        let mut keys = self.keys.lock().expect("poisoned");
        if keys.len() >= KNOWN_TEXTS {
            keys.clear();
        }
        keys.insert(kubeconfig.to_string(), key.clone());
        key
    }

    /// The client for `kubeconfig` and the key of its discovery cache.
    pub(super) async fn client_for(
        &self,
        kubeconfig: &str,
    ) -> Result<(Client, ClusterKey), DeployerError> {
        let key = self.key_of(kubeconfig);
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

    pub(super) async fn resource(
        &self,
        key: &ClusterKey,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Result<Discovered, DeployerError> {
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
    pub(super) async fn resource_opt(
        &self,
        key: &ClusterKey,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Discovered>, DeployerError> {
        let cache_key = (key.clone(), api_version.to_string(), kind.to_string());
        if let Some(hit) = self.discovery.lock().expect("poisoned").get(&cache_key) {
            return Ok(Some(hit.clone()));
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = match kube::discovery::pinned_kind(client, &gvk).await {
            Ok(found) => Arc::new(found),
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_kubeconfig_text_is_parsed_once_and_its_key_shared() {
        let clients = TargetClients::default();
        let yaml = "apiVersion: v1\nclusters:\n- name: c\n  cluster: {server: 'https://a'}\n";
        let first = clients.key_of(yaml);
        let again = clients.key_of(yaml);
        assert!(
            Arc::ptr_eq(&first, &again),
            "the second lookup is the first key"
        );
        assert_eq!(&*first, cluster_key(yaml));
        let json =
            r#"{"clusters":[{"cluster":{"server":"https://a"},"name":"c"}],"apiVersion":"v1"}"#;
        assert_eq!(clients.key_of(json), first, "the same cluster as JSON");
    }

    #[test]
    fn the_known_texts_stay_bounded() {
        let clients = TargetClients::default();
        for i in 0..KNOWN_TEXTS + 10 {
            clients.key_of(&format!("clusters: [{{name: c{i}}}]"));
        }
        assert!(clients.keys.lock().unwrap().len() <= KNOWN_TEXTS);
    }
}
