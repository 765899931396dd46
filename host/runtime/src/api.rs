//! The host-facing plugin abstraction: [`DeployerPlugin`] (what the controller calls) and
//! [`HostServices`] (what the controller provides to a plugin for one invocation).
//!
//! Owns: the async trait boundary between the controller and any plugin implementation
//! (wasm component or native Rust).
//! Must not touch: Kubernetes clients (this crate does not depend on kube) — Kubernetes
//! access is whatever the controller puts behind [`HostServices::kube`].

use sdk_guest::{
    DeployerError, Description, FetchRequest, Fetched, HookInput, HookResult, HookSetup, HookType,
    Invocation, KubeOp, Response,
};
use std::sync::Arc;
use std::time::Duration;

/// A loaded deployer plugin. The controller stores `Arc<dyn DeployerPlugin>`.
///
/// Errors are always Landscaper-shaped [`DeployerError`]s: a plugin trap, deadline or memory
/// overrun becomes an error of *this* invocation (`ERR_TIMEOUT` / `ERR_INTERNAL_PROBLEM`),
/// never a panic or error of the host.
#[async_trait::async_trait]
pub trait DeployerPlugin: Send + Sync {
    /// What the plugin said in `describe` (called once at load).
    fn description(&self) -> &Description;

    /// Human-readable origin for logs and error messages, e.g.
    /// `wasm component /plugins/mock.wasm (sha256 3f2a…)` or `native (mock::Mock)`.
    fn origin(&self) -> String;

    /// One reconcile step.
    async fn reconcile(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError>;

    /// One delete step.
    async fn delete(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError>;
}

/// Services the controller provides to one invocation, scoped to the DeployItem (its
/// Target cluster, its progressing timeout).
#[async_trait::async_trait]
pub trait HostServices: Send + Sync {
    /// Progress checkpoint. Return `Err(DeployerError::progressing_timeout(name))`
    /// (`ERR_TIMEOUT`, message `timeout at: "<name>"`) once the item's progressing timeout
    /// (initTime + spec.timeout) has passed, `Ok(())` otherwise.
    fn checkpoint(&self, name: &str) -> Result<(), DeployerError>;

    /// Time left until the progressing timeout; `None` if it passed or is unknown.
    fn remaining(&self) -> Option<Duration> {
        None
    }

    /// One Kubernetes operation on the item's Target cluster. Results:
    /// `Get` → `Some(object json)` or `None` (NotFound); `Create`/`Update` →
    /// `Some(resulting object json)`; `Delete` → `Some(_)` if it existed, `None` if it was
    /// already gone. Errors should carry codes (e.g. `ERR_UNAUTHORIZED`).
    async fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError>;

    /// One Kubernetes operation (`Get`, `List`, `Delete`) on the cluster of the secondary
    /// Target `target_name`, which the host looks up in the DeployItem's namespace (WIT
    /// `secondary-targets`). Same results and errors as [`HostServices::kube`].
    async fn kube_on(
        &self,
        target_name: &str,
        op: KubeOp,
    ) -> Result<Option<String>, DeployerError> {
        let _ = op;
        Err(DeployerError::internal(
            "SecondaryTargetsUnavailable",
            format!("no access to secondary Target {target_name:?} in this context"),
        ))
    }

    /// One download for the plugin (WIT `fetch`, 1.2): the host checks its allowlist and
    /// size limit, uses the item's Context for credentials and answers from its cache by
    /// digest. Errors carry operation `fetch` and Landscaper codes.
    async fn fetch(&self, request: FetchRequest) -> Result<Fetched, DeployerError> {
        Err(DeployerError::internal(
            "FetchUnavailable",
            format!(
                "the host offers no downloads in this context (asked for {})",
                request.location()
            ),
        )
        .with_operation("fetch"))
    }

    /// The content of the OCM resource `resource_key` names (WIT `ocm`, 1.3; Landscaper's
    /// global resource key), read from the component repository of the item's Context: an OCI
    /// artifact yields its first layer whose media type is in `layer_media_types` (empty: the
    /// first layer); [`Fetched::ocm`] says which resource it was. Errors carry operation `ocm`
    /// (or `fetch` for the host's download limits) and Landscaper codes.
    async fn ocm_resource(
        &self,
        resource_key: &str,
        layer_media_types: &[String],
    ) -> Result<Fetched, DeployerError> {
        let _ = layer_media_types;
        Err(unavailable(resource_key))
    }

    /// Whether this invocation may send an HTTP request to `url` (WIT 1.5, `wasi:http`; the
    /// URL is checked first: scheme and lowercase authority, no userinfo, no dot segments), and
    /// with which credentials and CA. `Err`: refused, with the error the item fails with
    /// (`ERR_CONFIGURATION_PROBLEM`, `HttpNotAllowed`, naming the URL; or what is wrong with the
    /// Target that would grant it). Default: nothing is granted.
    async fn http_grant(&self, url: &str) -> Result<HttpGrant, DeployerError> {
        Err(DeployerError::configuration(
            "HttpNotAllowed",
            format!("no HTTP requests may be sent in this context (asked for {url})"),
        )
        .with_operation("http"))
    }

    /// The limits of this invocation's HTTP requests.
    fn http_settings(&self) -> HttpSettings {
        HttpSettings::default()
    }

    /// One HTTP request ended (for metrics): called once per request, when its response
    /// headers arrived or it failed.
    fn http_observed(&self, observation: &HttpObservation<'_>) {
        let _ = observation;
    }

    /// Host-internal (no WIT function): a component version for the host's own deployers
    /// (the container deployer's `componentDescriptor.ref` / `blueprint.ref`).
    async fn ocm_component(&self, request: OcmComponentRequest) -> Result<Fetched, DeployerError> {
        Err(unavailable(&request.component_name))
    }
}

/// A granted HTTP request: what granted it and what the host adds to it.
#[derive(Clone, Default)]
pub struct HttpGrant {
    /// What granted it, for logs: `Target default/api`, `http.allow https://x/`.
    pub granted_by: String,
    /// The `Authorization` header value the host sets (replacing any the plugin set); never
    /// shown to the plugin.
    pub authorization: Option<String>,
    /// CA certificates (PEM) trusted for this request besides the system's.
    pub ca_pem: Option<Arc<Vec<u8>>>,
}

impl std::fmt::Debug for HttpGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpGrant")
            .field("granted_by", &self.granted_by)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .field("ca_pem", &self.ca_pem.as_ref().map(|p| p.len()))
            .finish()
    }
}

/// Limits of a plugin's outgoing HTTP requests (host configuration `http:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpSettings {
    /// Connecting (TCP and TLS), cut to the invocation's deadline. Default 5 s.
    pub connect_timeout: Duration,
    /// From sending to the response's headers, cut to the invocation's deadline. Default 30 s.
    pub request_timeout: Duration,
    /// Largest response body; a larger one fails the item. Default 4 MiB.
    pub max_response_bytes: u64,
    /// Requests in flight at once per invocation (a further one waits). Default 8.
    pub max_in_flight: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            max_response_bytes: 4 << 20,
            max_in_flight: 8,
        }
    }
}

/// One finished HTTP request of a plugin, for metrics.
#[derive(Clone, Copy, Debug)]
pub struct HttpObservation<'a> {
    /// The plugin's name.
    pub plugin: &'a str,
    /// `GET`, `PUT`, ...
    pub method: &'a str,
    /// The URL's authority (`host:port`).
    pub host: &'a str,
    /// The response status, if one came.
    pub status: Option<u16>,
    /// `ok` (a response came), `denied`, `refused`, `timeout`, `tls`, `dns` or `error`.
    pub outcome: &'a str,
    /// From the plugin's send to the response headers (or the failure).
    pub duration: Duration,
}

/// What a host without downloads answers.
fn unavailable(location: &str) -> DeployerError {
    DeployerError::internal(
        "FetchUnavailable",
        format!("the host offers no downloads in this context (asked for {location})"),
    )
    .with_operation("fetch")
}

/// A component version the host reads for its own deployers: component `component_name`
/// version `version` from `repository_context` (else the item's Context's). Without
/// `resource_name`: the resolved descriptor list as Landscaper writes it
/// (`{meta: {schemaVersion: v2}, components: [...]}`, the version and every version it
/// references) as JSON; with it: that resource's content as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct OcmComponentRequest {
    /// The repository (`repositoryContext`); `None`: the item's Context's.
    pub repository_context: Option<serde_json::Value>,
    /// The component's name, e.g. `example.com/acme/app`.
    pub component_name: String,
    /// The component's version.
    pub version: String,
    /// A resource of the version to read instead of the descriptor list.
    pub resource_name: Option<String>,
}

/// A loaded hook plugin (WIT `hooks` export). The controller stores `Arc<dyn HookPlugin>`
/// and runs it at the flow points its configuration names.
///
/// A hook has no Kubernetes access: it sees the item and its Target object and answers.
/// A trap, deadline or memory overrun is an error of this call (as for deployers).
#[async_trait::async_trait]
pub trait HookPlugin: Send + Sync {
    /// What the plugin said in `hooks.describe` (called once at load).
    fn setup(&self) -> &HookSetup;

    /// Human-readable origin for logs and error messages.
    fn origin(&self) -> String;

    /// Run the hook once. `Ok(None)` = no opinion.
    async fn run_hook(&self, input: HookInput) -> Result<Option<HookResult>, DeployerError>;

    /// Run the hook once on input already encoded as JSON, which is what a wasm hook receives:
    /// the controller encodes an item once for every hook that sees that version of it. The
    /// default decodes the input and calls [`run_hook`](Self::run_hook).
    async fn run_hook_encoded(
        &self,
        input: EncodedHookInput<'_>,
    ) -> Result<Option<HookResult>, DeployerError> {
        let decode = |what: &str, json: Option<&str>| {
            json.map(serde_json::from_str::<serde_json::Value>)
                .transpose()
                .map_err(|e| {
                    DeployerError::internal("DecodeHookInput", format!("{what}: {e}"))
                        .with_operation(input.hook_type.as_str())
                })
        };
        self.run_hook(HookInput {
            hook_type: input.hook_type,
            deploy_item: decode("deploy-item", input.deploy_item)?,
            target: decode("target", input.target)?,
        })
        .await
    }
}

/// The input of one hook call as JSON text (see [`HookPlugin::run_hook_encoded`]).
#[derive(Clone, Copy, Debug)]
pub struct EncodedHookInput<'a> {
    /// Which point of the flow this is.
    pub hook_type: HookType,
    /// The DeployItem; `None` for `Start`.
    pub deploy_item: Option<&'a str>,
    /// The item's Target object (no credentials); `None` for `Start` or without a Target.
    pub target: Option<&'a str>,
}

/// [`HostServices`] with no progressing timeout and no Kubernetes access (tests, benchmarks,
/// `describe`).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopHost;

#[async_trait::async_trait]
impl HostServices for NoopHost {
    fn checkpoint(&self, _name: &str) -> Result<(), DeployerError> {
        Ok(())
    }

    async fn kube(&self, _op: KubeOp) -> Result<Option<String>, DeployerError> {
        Err(DeployerError::internal(
            "KubernetesUnavailable",
            "no Kubernetes access in this context",
        ))
    }
}

/// Per-plugin resource limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline of one invocation (instantiate + call, host calls included).
    /// Exceeding it fails the item with `ERR_TIMEOUT`. Default 30 s.
    pub deadline: Duration,
    /// Maximum size of each linear memory of an instance. Exceeding it fails the item with
    /// `ERR_INTERNAL_PROBLEM` ("plugin exceeded its memory limit of 64 MiB"). Default 64 MiB.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(30),
            memory_bytes: 64 << 20,
        }
    }
}

/// Which exported function an invocation calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Reconcile,
    Delete,
}

impl Op {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Reconcile => "reconcile",
            Op::Delete => "delete",
        }
    }
}

/// Human-readable size (`64 MiB`, `512 KiB`, `100 bytes`).
pub(crate) fn human_bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// Emit a plugin log record into `tracing` (target `plugin`, field `plugin`).
pub(crate) fn emit_log(plugin: &str, level: sdk_guest::LogLevel, message: &str) {
    use sdk_guest::LogLevel as L;
    match level {
        L::Trace => tracing::trace!(target: "plugin", plugin, "{message}"),
        L::Debug => tracing::debug!(target: "plugin", plugin, "{message}"),
        L::Info => tracing::info!(target: "plugin", plugin, "{message}"),
        L::Warn => tracing::warn!(target: "plugin", plugin, "{message}"),
        L::Error => tracing::error!(target: "plugin", plugin, "{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers with what it was given, to check the default `run_hook_encoded`.
    struct Echo(HookSetup);

    #[async_trait::async_trait]
    impl HookPlugin for Echo {
        fn setup(&self) -> &HookSetup {
            &self.0
        }
        fn origin(&self) -> String {
            "test".into()
        }
        async fn run_hook(&self, input: HookInput) -> Result<Option<HookResult>, DeployerError> {
            Ok(Some(HookResult {
                abort_reconcile: input.deploy_item.is_some_and(|i| i["abort"] == true),
                ..HookResult::default()
            }))
        }
    }

    #[tokio::test]
    async fn encoded_input_is_decoded_for_hooks_that_take_values() {
        let hook = Echo(HookSetup::default());
        let input = |item| EncodedHookInput {
            hook_type: HookType::End,
            deploy_item: Some(item),
            target: None,
        };
        let r = hook.run_hook_encoded(input(r#"{"abort": true}"#)).await;
        assert!(r.unwrap().unwrap().abort_reconcile);
        let e = hook.run_hook_encoded(input("{not json")).await.unwrap_err();
        assert_eq!(e.reason, "DecodeHookInput");
        assert_eq!(e.operation, "End");
        assert!(e.message.starts_with("deploy-item: "), "{}", e.message);
    }
}
