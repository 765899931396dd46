//! The capabilities a plugin may use: [`Ctx`] (what plugin code calls) and [`NativeHost`]
//! (what a native embedding supplies).
//!
//! Owns: the single API through which a plugin logs, reads clocks, reports progress
//! checkpoints, talks to Kubernetes and sends HTTP requests. On `wasm32` every call goes to a
//! WIT import of `wasm-deployer:plugin` (HTTP: `wasi:http`); natively it goes to a
//! `&dyn NativeHost` (the plugin runtime's `NativePlugin` provides one).
//! Must not touch: any ambient resource (files, environment, network) — a plugin gets
//! nothing that does not pass through here.

use crate::http::{HttpRequest, HttpResponse, TransportError};
use crate::model::{
    DeployerError, FetchRequest, Fetched, KubeOp, LogLevel, ObjectRef, PatchType, ResourceInfo,
    ServerVersion,
};
use serde_json::Value;
use std::time::Duration;

/// Host services for a natively compiled plugin (the native twin of the WIT imports).
///
/// Implemented by the plugin runtime per invocation, scoped to the DeployItem. All methods
/// are blocking; the runtime runs native plugins on a blocking thread.
pub trait NativeHost: Send + Sync {
    /// Emit a log record.
    fn log(&self, level: LogLevel, message: &str);
    /// Wall clock, milliseconds since the Unix epoch.
    fn now_unix_millis(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
    /// Monotonic clock in nanoseconds (only differences are meaningful).
    fn monotonic_nanos(&self) -> u64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
    /// Progress checkpoint; `Err` (`ERR_TIMEOUT`) once the progressing timeout passed.
    fn checkpoint(&self, name: &str) -> Result<(), DeployerError>;
    /// Time left until the progressing timeout (`None` if it passed or is unknown).
    fn remaining(&self) -> Option<Duration>;
    /// One Kubernetes operation on the item's Target cluster (see [`KubeOp`] for results).
    fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError>;
    /// One Kubernetes operation (`Get`, `List` or `Delete`) on the cluster of the secondary
    /// Target `target_name` (a Target in the DeployItem's namespace).
    fn kube_on(&self, target_name: &str, op: KubeOp) -> Result<Option<String>, DeployerError> {
        let _ = op;
        Err(DeployerError::internal(
            "SecondaryTargetsUnavailable",
            format!("no access to secondary Target {target_name:?} in this context"),
        ))
    }
    /// One download done by the host (WIT `fetch`, 1.2): allowlisted, size-capped, cached by
    /// digest, with the Context's credentials.
    fn fetch(&self, request: FetchRequest) -> Result<Fetched, DeployerError> {
        Err(DeployerError::internal(
            "FetchUnavailable",
            format!(
                "no downloads in this context (asked for {})",
                request.location()
            ),
        ))
    }
    /// One outgoing HTTP request (WIT 1.5, `wasi:http`): the response, whatever its status, or
    /// why there is none. Default: refused (`HTTP-request-denied`), as the host refuses a URL
    /// it does not grant.
    fn http(&self, request: &HttpRequest) -> Result<HttpResponse, TransportError> {
        Err(TransportError::new(
            TransportError::REQUEST_DENIED,
            Some(format!(
                "no HTTP in this context (asked for {})",
                request.url
            )),
        ))
    }
}

/// A [`NativeHost`] with no Kubernetes access and no timeout; logs go nowhere.
/// Handy for unit tests and examples.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullHost;

impl NativeHost for NullHost {
    fn log(&self, _level: LogLevel, _message: &str) {}
    fn checkpoint(&self, _name: &str) -> Result<(), DeployerError> {
        Ok(())
    }
    fn remaining(&self) -> Option<Duration> {
        None
    }
    fn kube(&self, _op: KubeOp) -> Result<Option<String>, DeployerError> {
        Err(DeployerError::internal(
            "KubernetesUnavailable",
            "no Kubernetes access in this context",
        ))
    }
}

#[derive(Clone, Copy)]
enum HostRef<'a> {
    Native(&'a dyn NativeHost),
    #[cfg(target_arch = "wasm32")]
    Wasm,
}

/// The plugin's view of the host for one invocation.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    host: HostRef<'a>,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.host {
            HostRef::Native(_) => "Ctx(native)",
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => "Ctx(wasm)",
        })
    }
}

impl<'a> Ctx<'a> {
    /// A context backed by a native host (used by the runtime's `NativePlugin` and tests).
    pub fn native(host: &'a dyn NativeHost) -> Self {
        Ctx {
            host: HostRef::Native(host),
        }
    }

    #[cfg(target_arch = "wasm32")]
    pub(crate) fn wasm() -> Ctx<'static> {
        Ctx {
            host: HostRef::Wasm,
        }
    }

    /// Log `message` at `level` (goes into the host's `tracing` output).
    pub fn log(&self, level: LogLevel, message: &str) {
        match self.host {
            HostRef::Native(h) => h.log(level, message),
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => crate::wasm::log(level, message),
        }
    }

    /// Log at debug level.
    pub fn debug(&self, message: &str) {
        self.log(LogLevel::Debug, message)
    }

    /// Log at info level.
    pub fn info(&self, message: &str) {
        self.log(LogLevel::Info, message)
    }

    /// Log at warn level.
    pub fn warn(&self, message: &str) {
        self.log(LogLevel::Warn, message)
    }

    /// Log at error level.
    pub fn error(&self, message: &str) {
        self.log(LogLevel::Error, message)
    }

    /// Wall clock in milliseconds since the Unix epoch.
    pub fn now_unix_millis(&self) -> u64 {
        match self.host {
            HostRef::Native(h) => h.now_unix_millis(),
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => crate::wasm::now_unix_millis(),
        }
    }

    /// Wall clock as RFC 3339 (UTC, seconds precision), e.g. `2026-01-01T00:00:00Z`.
    pub fn now_rfc3339(&self) -> String {
        crate::format_rfc3339(self.now_unix_millis())
    }

    /// Monotonic clock in nanoseconds.
    pub fn monotonic_nanos(&self) -> u64 {
        match self.host {
            HostRef::Native(h) => h.monotonic_nanos(),
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => crate::wasm::monotonic_nanos(),
        }
    }

    /// Report a progress checkpoint. Returns `Err` with `ERR_TIMEOUT` once the item's
    /// progressing timeout has passed; return that error from `reconcile`/`delete`.
    pub fn checkpoint(&self, name: &str) -> Result<(), DeployerError> {
        match self.host {
            HostRef::Native(h) => h.checkpoint(name),
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => crate::wasm::checkpoint(name),
        }
    }

    /// Time left until the progressing timeout.
    pub fn remaining(&self) -> Option<Duration> {
        match self.host {
            HostRef::Native(h) => h.remaining(),
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => crate::wasm::remaining(),
        }
    }

    /// Raw Kubernetes operation on the item's Target cluster.
    pub fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
        match self.host {
            HostRef::Native(h) => h.kube(op),
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => crate::wasm::kube(op),
        }
    }

    /// Raw Kubernetes operation on the cluster of the secondary Target `target_name` (a
    /// Target in the DeployItem's namespace, named by the provider configuration's
    /// `targetName`). Only `Get`, `List` and `Delete` are offered there. Needs WIT 1.1.
    pub fn kube_on(&self, target_name: &str, op: KubeOp) -> Result<Option<String>, DeployerError> {
        match self.host {
            HostRef::Native(h) => h.kube_on(target_name, op),
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => crate::wasm::kube_on(target_name, op),
        }
    }

    /// Downloads `url` through the host (WIT `fetch.http-get`). With `expected_digest`
    /// (`sha256:<hex>`), a cached copy is used without a request.
    pub fn http_get(
        &self,
        url: &str,
        expected_digest: Option<&str>,
    ) -> Result<Fetched, DeployerError> {
        self.fetch(FetchRequest::Http {
            url: url.to_string(),
            expected_digest: expected_digest.map(str::to_string),
        })
    }

    /// Pulls the first layer of `reference` whose media type is in `layer_media_types`
    /// through the host (WIT `fetch.oci-pull`).
    pub fn oci_pull(
        &self,
        reference: &str,
        layer_media_types: &[&str],
    ) -> Result<Fetched, DeployerError> {
        self.fetch(FetchRequest::Oci {
            reference: reference.to_string(),
            layer_media_types: layer_media_types.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// The content of the OCM resource `resource_key` (Landscaper's `getResourceKey`), read by
    /// the host from the component repository of the item's Context (WIT `ocm.get-resource`,
    /// 1.3). A resource that is an OCI artifact yields its first layer whose media type is in
    /// `layer_media_types` (empty: the first layer). [`Fetched::ocm`] says which resource it was.
    pub fn ocm_resource(
        &self,
        resource_key: &str,
        layer_media_types: &[&str],
    ) -> Result<Fetched, DeployerError> {
        self.fetch(FetchRequest::Ocm {
            resource_key: resource_key.to_string(),
            layer_media_types: layer_media_types.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// One download through the host (WIT `fetch`, or `ocm` for [`FetchRequest::Ocm`]).
    pub fn fetch(&self, request: FetchRequest) -> Result<Fetched, DeployerError> {
        match self.host {
            HostRef::Native(h) => h.fetch(request),
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => crate::wasm::fetch(request),
        }
    }

    /// Sends one HTTP request over `wasi:http` (see [`crate::http`]): the response, whatever
    /// its status (map 4xx and 5xx with [`HttpResponse::error_for_status`]), or the mapped
    /// transport error — retryable `HttpRequestFailed` naming the `wasi:http` error code, or
    /// `HttpNotAllowed` (`ERR_CONFIGURATION_PROBLEM`) if the host does not grant the URL.
    pub fn http(&self, request: HttpRequest) -> Result<HttpResponse, DeployerError> {
        let sent = match self.host {
            HostRef::Native(h) => h.http(&request),
            #[cfg(target_arch = "wasm32")]
            HostRef::Wasm => crate::wasm::http(&request),
        };
        sent.map_err(|e| e.to_error(&request.method, &request.url))
    }

    /// Read an object; `None` if it does not exist.
    pub fn kube_get(&self, object: &ObjectRef) -> Result<Option<Value>, DeployerError> {
        self.kube(KubeOp::Get(object.clone()))?
            .map(|s| parse_host_json(&s))
            .transpose()
    }

    /// Create an object; returns the created object.
    pub fn kube_create(&self, object: &Value) -> Result<Value, DeployerError> {
        let out = self.kube(KubeOp::Create {
            object_json: object.to_string(),
        })?;
        parse_host_json(out.as_deref().unwrap_or("null"))
    }

    /// Replace an object; returns the updated object.
    pub fn kube_update(&self, object: &Value) -> Result<Value, DeployerError> {
        let out = self.kube(KubeOp::Update {
            object_json: object.to_string(),
        })?;
        parse_host_json(out.as_deref().unwrap_or("null"))
    }

    /// Delete an object; `true` if it existed.
    pub fn kube_delete(&self, object: &ObjectRef) -> Result<bool, DeployerError> {
        Ok(self.kube(KubeOp::Delete(object.clone()))?.is_some())
    }

    /// List objects of one kind, in `namespace` (or everywhere if `None`), filtered by a
    /// label selector (`a=b,c!=d`). Returns the items, each with `apiVersion` and `kind`.
    /// Needs a host that provides WIT 0.2 (`cluster`).
    pub fn kube_list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<Value>, DeployerError> {
        let out = self.kube(KubeOp::List {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            label_selector: label_selector.map(Into::into),
        })?;
        let mut list = parse_host_json(out.as_deref().unwrap_or("{}"))?;
        Ok(match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        })
    }

    /// Patch an object (merge patch, JSON patch, or server-side apply with
    /// `field_manager`/`force`); returns the patched object. Needs WIT 0.2 (`cluster`).
    pub fn kube_patch(
        &self,
        object: &ObjectRef,
        patch: &Value,
        patch_type: PatchType,
        field_manager: Option<&str>,
        force: bool,
    ) -> Result<Value, DeployerError> {
        let out = self.kube(KubeOp::Patch {
            target: object.clone(),
            patch_json: patch.to_string(),
            patch_type,
            field_manager: field_manager.map(Into::into),
            force,
        })?;
        parse_host_json(out.as_deref().unwrap_or("null"))
    }

    /// How the Target cluster serves `api_version`/`kind`; `None` if it does not.
    /// Needs WIT 0.2 (`cluster`).
    pub fn kube_discover(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<ResourceInfo>, DeployerError> {
        self.kube(KubeOp::Discover {
            api_version: api_version.into(),
            kind: kind.into(),
        })?
        .map(|s| {
            serde_json::from_str(&s).map_err(|e| {
                DeployerError::internal(
                    "InvalidHostResponse",
                    format!("host returned invalid discovery info: {e}"),
                )
            })
        })
        .transpose()
    }

    /// The Target cluster's `/version` (WIT `cluster-info.server-version`, 1.4).
    pub fn server_version(&self) -> Result<ServerVersion, DeployerError> {
        let out = self.kube(KubeOp::ServerVersion)?;
        serde_json::from_str(out.as_deref().unwrap_or("null")).map_err(|e| {
            DeployerError::internal(
                "InvalidHostResponse",
                format!("host returned an invalid server version: {e}"),
            )
        })
    }

    /// Every `group/version` and `group/version/Kind` the Target cluster serves, sorted
    /// (WIT `cluster-info.api-versions`, 1.4; Helm's `GetVersionSet`). Asked anew on every
    /// call, so a CRD created a moment ago is in it.
    pub fn api_versions(&self) -> Result<Vec<String>, DeployerError> {
        let out = self.kube(KubeOp::ApiVersions)?;
        serde_json::from_str(out.as_deref().unwrap_or("null")).map_err(|e| {
            DeployerError::internal(
                "InvalidHostResponse",
                format!("host returned invalid API versions: {e}"),
            )
        })
    }
}

fn parse_host_json(s: &str) -> Result<Value, DeployerError> {
    serde_json::from_str(s).map_err(|e| {
        DeployerError::internal(
            "InvalidHostResponse",
            format!("host returned invalid JSON: {e}"),
        )
    })
}
