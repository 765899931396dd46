//! The plugin protocol: the Rust form of the WIT records in `wit/deployer.wit` (description,
//! invocation, response, conditions, errors, Kubernetes operations).
//!
//! Owns: these records and their helpers (decoding the provider configuration with field paths,
//! Landscaper-shaped error constructors).
//! Must not touch: WIT bindings (see [`crate::wire`]) or any host/runtime concern.

use crate::codes;
use crate::resources::{
    Context, DeployItem, KUBERNETES_CLUSTER_TARGET_TYPE, Phase, ResolvedTarget, provider_config_of,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// Shorthands for the phases a plugin reports (`Response { phase: Some(phase::SUCCEEDED), .. }`).
pub mod phase {
    use crate::Phase;
    /// Job picked up, not started.
    pub const INIT: Phase = Phase::Init;
    /// Work in progress.
    pub const PROGRESSING: Phase = Phase::Progressing;
    /// Final: success.
    pub const SUCCEEDED: Phase = Phase::Succeeded;
    /// Final: failure.
    pub const FAILED: Phase = Phase::Failed;
    /// Deletion picked up.
    pub const INIT_DELETE: Phase = Phase::InitDelete;
    /// Deletion in progress.
    pub const DELETING: Phase = Phase::Deleting;
    /// Final: deletion failed.
    pub const DELETE_FAILED: Phase = Phase::DeleteFailed;
}

/// What a plugin says about itself (WIT `description`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    /// Plugin name, e.g. `mock`.
    pub name: String,
    /// Plugin version, e.g. `0.1.0`.
    pub version: String,
    /// DeployItem `spec.type` values handled.
    pub deploy_item_types: Vec<String>,
    /// Informational only: hooks are declared by `Hooks::describe` of the SDK (WIT `hooks`).
    pub hook_types: Vec<String>,
}

/// Input of one reconcile/delete step (WIT `invocation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    /// The full DeployItem (metadata, spec, status).
    pub deploy_item: Value,
    /// The resolved Target, if the item references one.
    pub target: Option<ResolvedTarget>,
    /// The Landscaper Context named by `spec.context`, with its registry pull secrets resolved.
    pub context: Option<Context>,
    /// The current `status.providerStatus`.
    pub previous_provider_status: Option<Value>,
}

/// Decodes `value` into `T`; the error names the field that failed, below `prefix`
/// (e.g. `spec.config.phase: invalid type: sequence, expected a string`).
pub fn decode_at<T: serde::de::DeserializeOwned>(value: &Value, prefix: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." || path.is_empty() {
            prefix.to_string()
        } else {
            format!("{prefix}.{path}")
        };
        format!("{at}: {}", e.inner())
    })
}

/// Refuses Landscaper v0.99's `kubeconfig` in a helm or manifest ProviderConfiguration (a
/// base64 kubeconfig used instead of the item's Target; removed in Landscaper v0.119). Ignoring
/// it, as an unknown field, would deploy to the Target's cluster instead of the one the item
/// names. `Err` says what to write instead.
pub fn refuse_provider_kubeconfig(config: &Value) -> Result<(), String> {
    match config.get("kubeconfig") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(()),
        Some(_) => Err(
            "spec.config.kubeconfig: a kubeconfig in the ProviderConfiguration \
             (Landscaper v0.99, removed in v0.119) is not supported: the item would be deployed \
             to its Target instead. Create a Target of type \
             landscaper.gardener.cloud/kubernetes-cluster with this kubeconfig, name it in \
             spec.target, and drop spec.config.kubeconfig"
                .into(),
        ),
    }
}

impl Invocation {
    /// An invocation for `deploy_item`, with `previous_provider_status` taken from its status.
    pub fn for_item(deploy_item: Value) -> Self {
        let previous_provider_status = deploy_item
            .pointer("/status/providerStatus")
            .filter(|v| !v.is_null())
            .cloned();
        Invocation {
            deploy_item,
            target: None,
            context: None,
            previous_provider_status,
        }
    }

    /// The DeployItem as a typed model. Fails with `ERR_CONFIGURATION_PROBLEM`.
    pub fn deploy_item_typed(&self) -> Result<DeployItem, DeployerError> {
        serde_json::from_value(self.deploy_item.clone()).map_err(|e| {
            DeployerError::configuration("ParseDeployItem", format!("invalid DeployItem: {e}"))
        })
    }

    /// `spec.config` (the ProviderConfiguration) as raw JSON, if present (the contract's rule:
    /// not absent, `null` or empty, [`provider_config_of`]).
    pub fn provider_config_raw(&self) -> Option<&Value> {
        provider_config_of(self.deploy_item.pointer("/spec/config"))
    }

    /// `spec.config` as raw JSON, or the contract's `ProviderConfigurationMissing` error.
    pub fn provider_config_present(&self) -> Result<&Value, DeployerError> {
        self.provider_config_raw()
            .ok_or_else(DeployerError::provider_config_missing)
    }

    /// Decode `spec.config` into `T`.
    ///
    /// Errors (all `ERR_CONFIGURATION_PROBLEM`): reason `ProviderConfigurationMissing` if the
    /// config is absent or empty, reason `ParseProviderConfiguration` with the decode error
    /// (including the JSON path) otherwise.
    pub fn provider_config<T: serde::de::DeserializeOwned>(&self) -> Result<T, DeployerError> {
        let raw = self.provider_config_present()?;
        decode_at(raw, "spec.config").map_err(|e| {
            DeployerError::configuration(
                "ParseProviderConfiguration",
                format!("invalid provider configuration: {e}"),
            )
        })
    }

    /// `metadata.name` and `status.jobID` of the DeployItem (empty strings if unset).
    pub fn name_and_job(&self) -> (String, String) {
        let s = |p: &str| {
            self.deploy_item
                .pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        (s("/metadata/name"), s("/status/jobID"))
    }

    /// Checks that the item has a resolved Target of type
    /// `landscaper.gardener.cloud/kubernetes-cluster`, as the manifest and helm deployers need:
    /// none is retried (reason `NoTarget`; it may appear), another type is
    /// `ERR_CONFIGURATION_PROBLEM` (reason `TargetType`). `deployer` names the deployer in
    /// the message, e.g. `helm deployer`.
    pub fn require_kubernetes_target(
        &self,
        deployer: &str,
        operation: &str,
    ) -> Result<(), DeployerError> {
        let Some(target) = &self.target else {
            return Err(DeployerError::retryable(
                "NoTarget",
                format!(
                    "no target defined: the DeployItem needs a Target of type {KUBERNETES_CLUSTER_TARGET_TYPE}"
                ),
            )
            .with_operation(operation));
        };
        let type_ = &target.target.spec.type_;
        if type_ != KUBERNETES_CLUSTER_TARGET_TYPE {
            return Err(DeployerError::configuration(
                "TargetType",
                format!(
                    "Target {:?} has type {type_:?}; the {deployer} needs a Target of type {KUBERNETES_CLUSTER_TARGET_TYPE:?}",
                    target.target.metadata.name.as_deref().unwrap_or_default(),
                ),
            )
            .with_operation(operation));
        }
        Ok(())
    }

    /// `status.phase` of the DeployItem ([`Phase::Empty`] if unset).
    pub fn current_phase(&self) -> Phase {
        self.deploy_item
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .map(Phase::from)
            .unwrap_or_default()
    }
}

/// Status of a condition (WIT `condition-status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// `True`
    True,
    /// `False`
    False,
    /// `Unknown`
    Unknown,
    /// `Progressing`
    Progressing,
}

impl ConditionStatus {
    /// The Kubernetes string form (`True`, `False`, `Unknown`, `Progressing`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
            ConditionStatus::Progressing => "Progressing",
        }
    }
}

/// A condition reported by a plugin (WIT `condition-report`). Timestamps are the host's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionReport {
    /// Condition type, e.g. `DeployItemValidation`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Status.
    pub status: ConditionStatus,
    /// Reason (CamelCase).
    pub reason: String,
    /// Message.
    pub message: String,
    /// Optional `ERR_*` codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<String>,
}

impl ConditionReport {
    /// A condition without codes.
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ConditionReport {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
            codes: Vec::new(),
        }
    }
}

/// Successful outcome of a step (WIT `response`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// New `status.phase`; `None` keeps the current phase.
    pub phase: Option<Phase>,
    /// New `status.providerStatus`; `None` keeps the current one.
    pub provider_status: Option<Value>,
    /// Exports; the host writes them into the export Secret (key `config`).
    pub exports: Option<Value>,
    /// Conditions to create/update.
    pub conditions: Vec<ConditionReport>,
    /// "Not yet, call me again after this delay."
    pub retry_after: Option<Duration>,
}

impl Response {
    /// A response setting `phase`.
    pub fn with_phase(phase: impl Into<Phase>) -> Self {
        Response {
            phase: Some(phase.into()),
            ..Default::default()
        }
    }

    /// A response that asks to be called again after `after`, without changing the phase.
    pub fn retry_after(after: Duration) -> Self {
        Response {
            retry_after: Some(after),
            ..Default::default()
        }
    }
}

/// A failed step (WIT `deployer-error`), mapped by the host onto `status.lastError`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DeployerError {
    /// `ERR_*` codes (see [`codes`]).
    pub codes: Vec<String>,
    /// Operation, e.g. `reconcile`. Left empty, the SDK and runtime fill in the name of the
    /// exported function (`reconcile` / `delete`).
    pub operation: String,
    /// Reason (CamelCase).
    pub reason: String,
    /// Message saying what is wrong.
    pub message: String,
    /// Conditions the host should still apply although the step failed (e.g. the mock's
    /// `DeployItemValidation=False`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionReport>,
}

impl DeployerError {
    /// An error with the given codes.
    pub fn new(codes: &[&str], reason: impl Into<String>, message: impl Into<String>) -> Self {
        DeployerError {
            codes: codes.iter().map(|c| c.to_string()).collect(),
            operation: String::new(),
            reason: reason.into(),
            message: message.into(),
            conditions: Vec::new(),
        }
    }

    /// `ERR_CONFIGURATION_PROBLEM`: the DeployItem (or its Target) is wrong; the item fails.
    pub fn configuration(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(&[codes::CONFIGURATION_PROBLEM], reason, message)
    }

    /// `ERR_INTERNAL_PROBLEM`: a bug or an unexpected state; the item fails.
    pub fn internal(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(&[codes::INTERNAL_PROBLEM], reason, message)
    }

    /// `ERR_TIMEOUT`: a timeout; the item fails.
    pub fn timeout(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(&[codes::TIMEOUT], reason, message)
    }

    /// Landscaper's progressing-timeout error for checkpoint `checkpoint`
    /// (operation `StandardTimeoutChecker.TimeoutExceeded`, reason `ProgressingTimeout`,
    /// message `timeout at: "<checkpoint>"`, code `ERR_TIMEOUT`).
    pub fn progressing_timeout(checkpoint: &str) -> Self {
        Self::timeout("ProgressingTimeout", format!("timeout at: {checkpoint:?}"))
            .with_operation("StandardTimeoutChecker.TimeoutExceeded")
    }

    /// The contract's error for an item without provider configuration
    /// (`ERR_CONFIGURATION_PROBLEM`, reason `ProviderConfigurationMissing`).
    pub fn provider_config_missing() -> Self {
        Self::configuration(
            "ProviderConfigurationMissing",
            "provider configuration missing",
        )
    }

    /// No code: the item stays unfinished and is retried (until the progressing timeout).
    pub fn retryable(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(&[], reason, message)
    }

    /// Set the operation.
    pub fn with_operation(mut self, operation: impl Into<String>) -> Self {
        self.operation = operation.into();
        self
    }

    /// Add a code (no duplicates).
    pub fn with_code(mut self, code: &str) -> Self {
        if !self.has_code(code) {
            self.codes.push(code.to_string());
        }
        self
    }

    /// Attach a condition the host applies despite the failure.
    pub fn with_condition(mut self, condition: ConditionReport) -> Self {
        self.conditions.push(condition);
        self
    }

    /// Whether `code` is among the codes.
    pub fn has_code(&self, code: &str) -> bool {
        self.codes.iter().any(|c| c == code)
    }

    /// Whether any code is unrecoverable (the host then sets `Failed`/`DeleteFailed`).
    pub fn is_unrecoverable(&self) -> bool {
        self.codes.iter().any(|c| codes::is_unrecoverable(c))
    }

    /// Fill in `operation` if it is empty.
    pub fn or_operation(mut self, operation: &str) -> Self {
        if self.operation.is_empty() {
            self.operation = operation.to_string();
        }
        self
    }
}

impl fmt::Display for DeployerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.operation)?;
        if !self.operation.is_empty() {
            write!(f, ": ")?;
        }
        write!(f, "{}: {}", self.reason, self.message)?;
        if !self.codes.is_empty() {
            write!(f, " [{}]", self.codes.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for DeployerError {}

/// Log levels (WIT `log-level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LogLevel {
    /// trace
    Trace,
    /// debug
    Debug,
    /// info
    Info,
    /// warn
    Warn,
    /// error
    Error,
}

/// Identifies one Kubernetes object (WIT `kubernetes.object-ref`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `apiVersion`, e.g. `v1`.
    pub api_version: String,
    /// `kind`, e.g. `ConfigMap`.
    pub kind: String,
    /// Namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// A namespaced object reference.
    pub fn namespaced(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }
}

/// One Kubernetes operation on the item's Target cluster (WIT `kubernetes` interface).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KubeOp {
    /// Read an object. Result: `Some(json)`, or `None` if not found.
    Get(ObjectRef),
    /// Create an object. Result: `Some(created object json)`.
    Create {
        /// The object as JSON.
        object_json: String,
    },
    /// Replace an object. Result: `Some(updated object json)`.
    Update {
        /// The object as JSON.
        object_json: String,
    },
    /// Delete an object. Result: `Some(_)` if it existed, `None` if it was already gone.
    Delete(ObjectRef),
    /// List objects of one kind (WIT `cluster.list`, 0.2). Result: `Some(List object json)`
    /// whose `items` carry `apiVersion` and `kind`.
    List {
        /// `apiVersion`, e.g. `v1`.
        api_version: String,
        /// `kind`, e.g. `ConfigMap`.
        kind: String,
        /// Namespace; `None` lists all namespaces (and cluster-scoped kinds).
        namespace: Option<String>,
        /// Label selector in Kubernetes syntax (`a=b,c in (d),!e`).
        label_selector: Option<String>,
    },
    /// Patch an object (WIT `cluster.patch`, 0.2). Result: `Some(patched object json)`.
    Patch {
        /// The object to patch.
        target: ObjectRef,
        /// The patch document as JSON.
        patch_json: String,
        /// Merge, JSON or server-side apply.
        patch_type: PatchType,
        /// Field manager (required for [`PatchType::Apply`]).
        field_manager: Option<String>,
        /// Server-side apply: take over conflicting fields.
        force: bool,
    },
    /// Discovery of a kind (WIT `cluster.discover`, 0.2). Result: `Some(`[`ResourceInfo`]` as
    /// json)`, or `None` if the cluster does not serve the kind.
    Discover {
        /// `apiVersion`, e.g. `apps/v1`.
        api_version: String,
        /// `kind`, e.g. `Deployment`.
        kind: String,
    },
    /// The server's `/version` (WIT `cluster-info.server-version`, 1.4). Result:
    /// `Some(`[`ServerVersion`]` as json)`.
    ServerVersion,
    /// Every served `group/version` and `group/version/Kind` (WIT `cluster-info.api-versions`,
    /// 1.4; Helm's `GetVersionSet`). Result: `Some(json array of strings)`, sorted.
    ApiVersions,
}

impl KubeOp {
    /// The operation's verb (`get`, `create`, ...), for messages.
    pub fn verb(&self) -> &'static str {
        match self {
            KubeOp::Get(_) => "get",
            KubeOp::Create { .. } => "create",
            KubeOp::Update { .. } => "update",
            KubeOp::Delete(_) => "delete",
            KubeOp::List { .. } => "list",
            KubeOp::Patch { .. } => "patch",
            KubeOp::Discover { .. } => "discover",
            KubeOp::ServerVersion => "get server version",
            KubeOp::ApiVersions => "discover API versions",
        }
    }
}

/// The type of a [`KubeOp::Patch`] (WIT `cluster.patch-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PatchType {
    /// JSON merge patch (RFC 7386).
    Merge,
    /// JSON patch (RFC 6902): an array of operations.
    Json,
    /// Server-side apply (needs a field manager).
    Apply,
}

/// What discovery knows about a kind (WIT `cluster.resource-info`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInfo {
    /// `apiVersion` as asked.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Plural resource name, e.g. `deployments`.
    pub plural: String,
    /// Whether objects of the kind are namespaced.
    pub namespaced: bool,
}

/// A cluster's `/version` (WIT `cluster-info.server-version`, 1.4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerVersion {
    /// `major`, e.g. `1`.
    pub major: String,
    /// `minor`, e.g. `20`.
    pub minor: String,
    /// `gitVersion`, e.g. `v1.20.15`.
    pub git_version: String,
}

/// A download the host does for the plugin (WIT `fetch`, 1.2): the plugin has no sockets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FetchRequest {
    /// HTTP(S) GET of `url`; with `expected_digest` (`sha256:<hex>`) a cached copy is used
    /// without a request, and a download with another digest fails.
    Http {
        /// `http://…` or `https://…`.
        url: String,
        /// `sha256:<hex>`, if known (e.g. from a chart repository index).
        expected_digest: Option<String>,
    },
    /// OCI pull of `reference`: its first layer with one of `layer_media_types`.
    Oci {
        /// `host[:port]/repository:tag` or `…@sha256:<hex>`.
        reference: String,
        /// Accepted layer media types.
        layer_media_types: Vec<String>,
    },
    /// The content of an OCM resource (WIT `ocm`, 1.3), named by Landscaper's global resource
    /// key (`getResourceKey`: base64 of `{component: {name, version}, resource: {name, …}}`),
    /// from the component repository of the item's Context (`repositoryContext`).
    Ocm {
        /// The key as the blueprint's `getResourceKey` produced it.
        resource_key: String,
        /// For a resource that is an OCI artifact: the layer media types to take (the first
        /// matching layer); empty = the first layer.
        layer_media_types: Vec<String>,
    },
}

impl FetchRequest {
    /// The URL or reference, for messages.
    pub fn location(&self) -> &str {
        match self {
            FetchRequest::Http { url, .. } => url,
            FetchRequest::Oci { reference, .. } => reference,
            FetchRequest::Ocm { resource_key, .. } => resource_key,
        }
    }
}

/// What a [`FetchRequest`] brought (WIT `fetch.blob` / `fetch.oci-artifact`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fetched {
    /// `sha256:<hex>` of `data`.
    pub digest: String,
    /// HTTP `Content-Type`, or the OCI layer's media type.
    pub media_type: String,
    /// The bytes.
    #[serde(skip)]
    pub data: Vec<u8>,
    /// Served from the host's cache without a download.
    pub cached: bool,
    /// OCI only: the manifest digest the reference resolved to.
    pub manifest_digest: Option<String>,
    /// OCI only: the media type of the manifest's config.
    pub config_media_type: Option<String>,
    /// OCM only: which resource of which component version this is.
    pub ocm: Option<OcmOrigin>,
}

/// Where an OCM resource came from (WIT `ocm.resource`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OcmOrigin {
    /// The component name, e.g. `example.com/acme/app`.
    pub component_name: String,
    /// The component version.
    pub component_version: String,
    /// The resource's name.
    pub name: String,
    /// The resource's version.
    pub version: String,
    /// The resource's type, e.g. `helmChart`, `blueprint`, `ociImage`.
    pub r#type: String,
    /// The access type the content came through: `localBlob`, `ociArtifact`, …
    pub access_type: String,
}
