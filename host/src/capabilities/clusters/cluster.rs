//! One cached Target cluster: its client, what discovery found on it, and the reachability of
//! its endpoint.
//!
//! Owns: discovery per kind (GVK → resource and scope), forgotten when the endpoint goes down.
//! Must not touch: the cache's policy (`super::cache`) or which cluster an invocation may use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource};
use plugin_runtime::DeployerError;

use super::super::errors::{error, unreachable};
use super::connect::unreachable_cause;
use super::health::Health;
use crate::landscaper::codes;

/// What discovery found for one kind on one cluster.
pub type Discovered = Arc<(ApiResource, ApiCapabilities)>;

/// Discovery results per (apiVersion, kind), with the endpoint's health generation they hold for.
type DiscoveryCache = (u64, HashMap<(String, String), Discovered>);

/// A Target cluster as one kubeconfig reaches it.
pub struct Cluster {
    pub client: Client,
    /// The API server's URL, as errors name it.
    pub server: Arc<str>,
    pub health: Arc<Health>,
    /// Discovery per (apiVersion, kind), valid for one generation of the endpoint's health.
    discovery: Mutex<DiscoveryCache>,
}

impl Cluster {
    pub fn new(client: Client, server: Arc<str>, health: Arc<Health>) -> Self {
        Self {
            client,
            server,
            health,
            discovery: Mutex::default(),
        }
    }

    /// Discovery of `kind` in `api_version`, or an error when the cluster does not serve it.
    pub async fn resource(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Discovered, DeployerError> {
        self.resource_opt(api_version, kind).await?.ok_or_else(|| {
            error(
                codes::CONFIGURATION_PROBLEM,
                "GetApiResource",
                format!("unknown kind {kind} in {api_version}: the cluster does not serve it"),
            )
        })
    }

    /// Discovery with "the cluster does not serve this kind" as `None`.
    pub async fn resource_opt(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Discovered>, DeployerError> {
        let generation = self.health.generation();
        let cache_key = (api_version.to_string(), kind.to_string());
        {
            let mut cache = self.discovery.lock().expect("discovery cache poisoned");
            if cache.0 != generation {
                *cache = (generation, HashMap::new());
            }
            if let Some(hit) = cache.1.get(&cache_key) {
                return Ok(Some(hit.clone()));
            }
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = match kube::discovery::pinned_kind(&self.client, &gvk).await {
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
                if let Some(cause) = unreachable_cause(&e) {
                    return Err(unreachable(cause));
                }
                return Err(DeployerError {
                    operation: "kubernetes".into(),
                    reason: "GetApiResourceList".into(),
                    message: format!(
                        "discovery of {kind} in {api_version} failed: {}",
                        crate::oci::error::error_chain(&e)
                    ),
                    ..Default::default()
                });
            }
        };
        let mut cache = self.discovery.lock().expect("discovery cache poisoned");
        if cache.0 == generation {
            cache.1.insert(cache_key, found.clone());
        }
        Ok(Some(found))
    }
}
