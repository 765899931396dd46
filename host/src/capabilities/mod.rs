//! The host's side of the capabilities one plugin invocation gets, each scoped to its item:
//! every WIT import a plugin calls ends in one of these modules (the runtime forwards it to
//! [`ItemServices`], the [`HostServices`] of the invocation). One module per capability:
//!
//! - [`progress`]: checkpoints against the item's progressing timeout (WIT `progress`);
//! - `kubernetes`: operations on the item's Target cluster (WIT `kubernetes`, `cluster`);
//! - `secondary_targets`: get/list/delete on Targets the plugin names (WIT `secondary-targets`);
//! - `clusters`: clients, discovery and reachability per Target cluster, shared by every
//!   invocation and released when no live Target uses them;
//! - [`fetch`]: downloads (HTTP(S), OCI) with the host's allowlist, limits, cache and the
//!   Context's credentials (WIT `fetch`);
//! - [`http`]: outgoing HTTP (WIT 1.5, `wasi:http`): what is granted (the item's `http-api`
//!   Targets, `http.allow`), the Targets' credentials, the `http:` limits and the metrics;
//! - [`ocm`]: OCM resources from the Context's component repository (WIT `ocm`), and component
//!   versions for the host's own deployers.
//!
//! `log` and `clock` need no host state; the runtime answers them itself. Adding a capability:
//! a WIT interface in a new minor version, a module here with its `HostServices` method, and a
//! runtime module that links it (`docs/architecture.md`).
//!
//! Must not touch: the DeployItem (its status is the controller's) or credentials in anything a
//! plugin sees.

mod clusters;
mod errors;
pub mod fetch;
pub mod http;
mod kubernetes;
pub mod ocm;
pub mod progress;
mod secondary_targets;

use plugin_runtime::{
    DeployerError, FetchRequest, Fetched, HostServices, HttpGrant, HttpObservation, HttpSettings,
    KubeOp, OcmComponentRequest,
};

use crate::contract::ProgressingTimeout;
use crate::landscaper::{Context, ResolvedTarget};

pub use clusters::{
    ClusterSettings, Release, TargetClientStats, TargetClients, TargetClustersConfig,
};
pub use fetch::{FetchConfig, Fetcher};
pub use http::{HttpConfig, HttpService};
use secondary_targets::SecondaryTargets;
pub use secondary_targets::secret_ref_data;

/// Capabilities of one invocation.
pub struct ItemServices {
    timeout: ProgressingTimeout,
    target: Option<ResolvedTarget>,
    clients: TargetClients,
    /// The item's Target cluster, once a call has needed it.
    primary: tokio::sync::OnceCell<(std::sync::Arc<clusters::Cluster>, clusters::TargetId)>,
    secondary: Option<SecondaryTargets>,
    fetch: Option<fetch::ItemFetch>,
    http: Option<http::ItemHttp>,
    /// When to try again, if a call failed because its cluster could not be reached.
    retry_hint: std::sync::Mutex<Option<std::time::Duration>>,
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
            primary: tokio::sync::OnceCell::new(),
            secondary: None,
            fetch: None,
            http: None,
            retry_hint: Default::default(),
        }
    }

    /// When the item should be tried again, if a call of this invocation failed because its
    /// Target cluster could not be reached (the shortest such wait): the controller requeues
    /// the item then instead of at its usual interval.
    pub fn retry_hint(&self) -> Option<std::time::Duration> {
        *self.retry_hint.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn retry_in(&self, wait: std::time::Duration) {
        let mut hint = self.retry_hint.lock().unwrap_or_else(|e| e.into_inner());
        *hint = Some(hint.map_or(wait, |h| h.min(wait)));
    }

    /// Gives the plugin downloads (WIT `fetch`) through `fetcher`, with the credentials of the
    /// item's `context` (Secrets it names are read with `client` from `namespace`, the
    /// item's). Without this, [`HostServices::fetch`] answers `FetchUnavailable`.
    pub fn with_fetch(
        mut self,
        fetcher: std::sync::Arc<Fetcher>,
        client: kube::Client,
        namespace: String,
        context: Option<Context>,
    ) -> Self {
        self.fetch = Some(fetch::ItemFetch {
            fetcher,
            item: crate::oci::ItemContext {
                client,
                namespace,
                context,
            },
        });
        self
    }

    /// Gives the plugin outgoing HTTP (WIT 1.5, `wasi:http`) under the URL of its Target and of
    /// the secondary Targets its provider configuration names by `targetName`, when they are of
    /// type `wasm-deployer.dev/http-api` (read with `client` from `namespace`, the item's, with
    /// their `auth` Secrets), and under `service`'s `http.allow`. Without this, every request is
    /// refused.
    pub fn with_http(
        mut self,
        service: std::sync::Arc<HttpService>,
        client: kube::Client,
        namespace: String,
        provider_config: Option<&serde_json::Value>,
    ) -> Self {
        self.http = Some(http::ItemHttp::new(
            service,
            client,
            namespace,
            self.target.clone(),
            provider_config
                .map(secondary_targets::named_targets)
                .unwrap_or_default(),
        ));
        self
    }

    /// Gives the plugin secondary Targets (`targetName`, WIT `secondary-targets`): the Targets
    /// the item's provider configuration names in a `targetName` field (any depth), read with
    /// `client` (the Landscaper cluster) from `namespace` (the DeployItem's). Any other name is
    /// denied — a plugin cannot reach another item's Target. Without this,
    /// [`HostServices::kube_on`] answers `SecondaryTargetsUnavailable`.
    pub fn with_secondary_targets(
        mut self,
        client: kube::Client,
        namespace: String,
        provider_config: Option<&serde_json::Value>,
    ) -> Self {
        self.secondary = Some(SecondaryTargets {
            client,
            namespace,
            granted: provider_config
                .map(secondary_targets::named_targets)
                .unwrap_or_default(),
            resolved: Default::default(),
        });
        self
    }
}

#[async_trait::async_trait]
impl HostServices for ItemServices {
    fn checkpoint(&self, name: &str) -> Result<(), DeployerError> {
        progress::checkpoint(&self.timeout, name)
    }

    fn remaining(&self) -> Option<std::time::Duration> {
        progress::remaining(&self.timeout)
    }

    async fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
        self.run(None, op).await
    }

    async fn kube_on(
        &self,
        target_name: &str,
        op: KubeOp,
    ) -> Result<Option<String>, DeployerError> {
        secondary_targets::check_operation(target_name, &op)?;
        self.run(Some(target_name), op).await
    }

    async fn fetch(&self, request: FetchRequest) -> Result<Fetched, DeployerError> {
        if let FetchRequest::Ocm {
            resource_key,
            layer_media_types,
        } = &request
        {
            return self.ocm_resource(resource_key, layer_media_types).await;
        }
        let fetch = self
            .fetch
            .as_ref()
            .ok_or_else(|| unavailable(request.location()))?;
        fetch.fetch(request).await
    }

    async fn http_grant(&self, url: &str) -> Result<HttpGrant, DeployerError> {
        match &self.http {
            Some(h) => h.grant(url).await,
            None => Err(DeployerError::configuration(
                "HttpNotAllowed",
                format!("HTTP request to {url} is not allowed: no HTTP in this context"),
            )
            .with_operation("http")),
        }
    }

    fn http_settings(&self) -> HttpSettings {
        self.http
            .as_ref()
            .map_or_else(HttpSettings::default, http::ItemHttp::settings)
    }

    fn http_observed(&self, observation: &HttpObservation<'_>) {
        if let Some(h) = &self.http {
            h.service.stats.observe(observation);
        }
    }

    async fn ocm_resource(
        &self,
        resource_key: &str,
        layer_media_types: &[String],
    ) -> Result<Fetched, DeployerError> {
        let fetch = self
            .fetch
            .as_ref()
            .ok_or_else(|| unavailable(resource_key))?;
        ocm::resource(fetch, resource_key, layer_media_types).await
    }

    async fn ocm_component(&self, request: OcmComponentRequest) -> Result<Fetched, DeployerError> {
        let fetch = self
            .fetch
            .as_ref()
            .ok_or_else(|| unavailable(&request.component_name))?;
        ocm::component(fetch, request).await
    }
}

/// What a plugin asking for a download gets when the host offers none.
fn unavailable(location: &str) -> DeployerError {
    DeployerError::internal(
        "FetchUnavailable",
        format!("the host offers no downloads in this context (asked for {location})"),
    )
    .with_operation("fetch")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::landscaper::codes;

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
}
