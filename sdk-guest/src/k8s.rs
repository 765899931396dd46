//! Typed serde models of the Landscaper objects a plugin reads: DeployItem, Target, Context.
//!
//! Owns: read-side models with the fields deployers use (contract sections 1.3–1.5); every
//! struct keeps unknown fields in `extra` so nothing is lost when re-serialised.
//! Must not touch: status writing — the host owns every status field and timestamp.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `metadata` of a Kubernetes object (the subset deployers use).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Resource version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
    /// Deletion timestamp (RFC 3339), set while the object is being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// Other metadata fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `ObjectReference` (`name`, `namespace`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ObjectReference {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace (may be empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A Landscaper DeployItem (`landscaper.gardener.cloud/v1alpha1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DeployItem {
    /// `apiVersion`.
    #[serde(default)]
    pub api_version: String,
    /// `kind`.
    #[serde(default)]
    pub kind: String,
    /// Metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: DeployItemSpec,
    /// Status.
    #[serde(default)]
    pub status: DeployItemStatus,
}

/// `DeployItem.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DeployItemSpec {
    /// Deployer type, e.g. `landscaper.gardener.cloud/mock`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Target reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ObjectReference>,
    /// Context name (defaults to `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// ProviderConfiguration (deployer specific, has `apiVersion`/`kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Progressing timeout as a Go duration string (default `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Skip unchanged, succeeded items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_on_change_only: Option<bool>,
    /// Other spec fields (e.g. `onDelete`).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `DeployItem.status` (read side).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DeployItemStatus {
    /// Current phase (empty if never processed).
    #[serde(default)]
    pub phase: String,
    /// Observed generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Current provider status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_status: Option<Value>,
    /// Reference to the export Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_ref: Option<ObjectReference>,
    /// Current job ID.
    #[serde(default, rename = "jobID", skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// Last finished job ID.
    #[serde(
        default,
        rename = "jobIDFinished",
        skip_serializing_if = "Option::is_none"
    )]
    pub job_id_finished: Option<String>,
    /// Conditions, as raw JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
    /// Other status fields (lastError, transitionTimes, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A Landscaper Target (`landscaper.gardener.cloud/v1alpha1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// `apiVersion`.
    #[serde(default)]
    pub api_version: String,
    /// `kind`.
    #[serde(default)]
    pub kind: String,
    /// Metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec.
    #[serde(default)]
    pub spec: TargetSpec,
}

/// `Target.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TargetSpec {
    /// Target type, e.g. `landscaper.gardener.cloud/kubernetes-cluster`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// Inline content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Secret reference (`name`, `key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<Value>,
}

/// A Landscaper Context (fields inline at top level, no `spec`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// Metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Repository context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_context: Option<Value>,
    /// OCM config reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocm_config: Option<Value>,
    /// Registry pull secrets (`[{name}]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registry_pull_secrets: Vec<Value>,
    /// Free-form configurations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configurations: Option<Map<String, Value>>,
    /// Other fields (apiVersion, kind, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
