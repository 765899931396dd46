//! Landscaper's resources as serde types: `DeployItem`, `Target`, `Context`, `SyncObject`,
//! and the names the contract gives to annotations, operations, the finalizer and the group.
//!
//! Every struct keeps fields it does not know in `extra`, so a read-modify-write (a status `PUT`)
//! never drops what another writer (the Landscaper, a newer CRD version) put there. Each
//! resource implements `k8s_openapi::Resource` and `Metadata`, which makes it a `kube::Resource`
//! for the host without this crate depending on kube. Their `metadata` is read without
//! `managedFields` ([`crate::meta`]).

use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

type Extra = BTreeMap<String, Value>;

/// API group of every Landscaper core resource.
pub const GROUP: &str = "landscaper.gardener.cloud";
/// API version of every Landscaper core resource.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every Landscaper core resource.
pub const API_VERSION: &str = "landscaper.gardener.cloud/v1alpha1";

/// The finalizer the Landscaper and every deployer put on a DeployItem.
pub const FINALIZER: &str = "finalizer.landscaper.gardener.cloud";

/// Annotations on DeployItems (contract section 2.1).
pub mod annotations {
    /// The item's type, so a deployer decides responsibility from metadata alone.
    pub const DEPLOYER_TYPE: &str = "landscaper.gardener.cloud/deployer-type";
    /// The item's Target name (or [`NO_TARGET_NAME`]).
    pub const DEPLOYER_TARGET_NAME: &str = "landscaper.gardener.cloud/deployer-target-name";
    /// Value of [`DEPLOYER_TARGET_NAME`] that means "this item has no target".
    pub const NO_TARGET_NAME: &str = ".noTargetName";
    /// `landscaper.gardener.cloud/operation` (values in [`super::operations`]).
    pub const OPERATION: &str = "landscaper.gardener.cloud/operation";
    /// `"true"`: delete the item without uninstalling what it deployed.
    pub const DELETE_WITHOUT_UNINSTALL: &str = "landscaper.gardener.cloud/delete-without-uninstall";
}

/// Values of the `landscaper.gardener.cloud/operation` annotation.
pub mod operations {
    /// Reconcile (handled by the Landscaper, not by deployers).
    pub const RECONCILE: &str = "reconcile";
    /// Force-reconcile (a no-op for deployers in current Landscaper).
    pub const FORCE_RECONCILE: &str = "force-reconcile";
    /// Start a job without the Landscaper (deployer tests).
    pub const TEST_RECONCILE: &str = "test-reconcile";
    /// Interrupt (handled by the Landscaper).
    pub const INTERRUPT: &str = "interrupt";
}

/// Target type of a Kubernetes cluster target.
pub const KUBERNETES_CLUSTER_TARGET_TYPE: &str = "landscaper.gardener.cloud/kubernetes-cluster";

/// Name of the Context an item uses when `spec.context` is empty.
pub const DEFAULT_CONTEXT: &str = "default";

/// Implements `k8s_openapi::Resource` and `Metadata` for a namespaced Landscaper kind.
macro_rules! landscaper_resource {
    ($ty:ident, $kind:literal, $plural:literal) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = API_VERSION;
            const GROUP: &'static str = GROUP;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = VERSION;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = NamespaceResourceScope;
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// A unit of work for one deployer: Landscaper creates it from an Execution and starts a job on
/// it; the deployer whose type it names runs the job and reports the outcome in `status`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployItem {
    /// The schema version of this object: `landscaper.gardener.cloud/v1alpha1`.
    #[serde(default = "deploy_item_api_version")]
    pub api_version: String,
    /// The kind of this object: `DeployItem`.
    #[serde(default = "deploy_item_kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default, deserialize_with = "crate::meta::without_managed_fields")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::object")
    )]
    pub metadata: ObjectMeta,
    /// What to deploy, where, and with which deployer.
    #[serde(default)]
    pub spec: DeployItemSpec,
    /// The state of the item's current job, written by Landscaper (job start) and its deployer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeployItemStatus>,
}

fn deploy_item_api_version() -> String {
    API_VERSION.to_string()
}
fn deploy_item_kind() -> String {
    "DeployItem".to_string()
}

landscaper_resource!(DeployItem, "DeployItem", "deployitems");

/// What a DeployItem deploys, where, and with which deployer.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployItemSpec {
    /// The deployer type that serves this item, e.g. `landscaper.gardener.cloud/helm`,
    /// `landscaper.gardener.cloud/kubernetes-manifest`, `landscaper.gardener.cloud/mock`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// The Target (the cluster or environment) the item is deployed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ObjectReference>,
    /// The Context (repository, pull secrets, configurations) in the item's namespace; empty
    /// means `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The deployer's provider configuration: a Kubernetes-style object with `apiVersion` and
    /// `kind` whose content the deployer of `type` defines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::embedded_object")
    )]
    pub config: Option<Value>,
    /// How long a job may stay in progress before the deployer fails it (a duration such as
    /// `10m`; default 10 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Start a job only when the item's spec changed (its generation), not on every trigger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_on_change_only: Option<bool>,
    /// What to do when the item is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_delete: Option<OnDeleteConfig>,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: Extra,
}

/// What a deployer does when its item is deleted.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OnDeleteConfig {
    /// Remove the item without uninstalling when its target cluster no longer exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_uninstall_if_cluster_removed: Option<bool>,
}

/// A reference to a namespaced object by name.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// The object's name.
    #[serde(default)]
    pub name: String,
    /// The object's namespace; empty means the namespace of the referring object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `status` of a DeployItem (contract section 1.3.2).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployItemStatus {
    /// Where the current job stands: `Init`, `Progressing`, `Completing`, `Succeeded`, `Failed`,
    /// `InitDelete`, `Deleting` or `DeleteFailed`.
    #[serde(default, skip_serializing_if = "Phase::is_empty")]
    pub phase: Phase,
    /// The generation of the spec the deployer last worked on. Required by the CRD schema, so
    /// always written.
    #[serde(default)]
    pub observed_generation: i64,
    /// Conditions the deployer reports about the deployed objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The error of the last failed step; removed when a job succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LsError>,
    /// The most recent errors, newest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_errors: Vec<LsError>,
    /// The first error of the current run of failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<LsError>,
    /// When the deployer last worked on the item; Landscaper takes a job as picked up once this
    /// is at or after `jobIDGenerationTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub last_reconcile_time: Option<String>,
    /// Which deployer works on the item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployer: Option<DeployerInformation>,
    /// Deployer-specific state (an object with `apiVersion` and `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::embedded_object")
    )]
    pub provider_status: Option<Value>,
    /// The Secret (data key `config`) that holds the item's exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_ref: Option<ObjectReference>,
    /// The current job, set by Landscaper to start one. The deployer acts while it differs from
    /// `jobIDFinished`.
    #[serde(default, rename = "jobID", skip_serializing_if = "String::is_empty")]
    pub job_id: String,
    /// The last finished job, set by the deployer together with the final phase.
    #[serde(
        default,
        rename = "jobIDFinished",
        skip_serializing_if = "String::is_empty"
    )]
    pub job_id_finished: String,
    /// When Landscaper set `jobID`.
    #[serde(
        default,
        rename = "jobIDGenerationTime",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub job_id_generation_time: Option<String>,
    /// When the current job reached its stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition_times: Option<TransitionTimes>,
    /// The phase under its older name (read by older Landscaper versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_item_phase: Option<String>,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: Extra,
}

/// When a job reached its stages (contract section 1.2.6).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransitionTimes {
    /// When Landscaper started the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub trigger_time: Option<String>,
    /// When the deployer picked the job up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub init_time: Option<String>,
    /// When the deployer started waiting for the deployed objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub wait_time: Option<String>,
    /// When the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub finished_time: Option<String>,
}

/// The deployer that works on an item: always written with all three keys (the CRD requires them).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployerInformation {
    /// The deployer instance (its controller identity).
    #[serde(default)]
    pub identity: String,
    /// The deployer's name.
    #[serde(default)]
    pub name: String,
    /// The deployer's version.
    #[serde(default)]
    pub version: String,
}

/// An error as Landscaper records it (contract section 1.2.3).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LsError {
    /// The operation that failed.
    #[serde(default)]
    pub operation: String,
    /// A short, machine-readable cause.
    #[serde(default)]
    pub reason: String,
    /// What went wrong, for a person.
    #[serde(default)]
    pub message: String,
    /// When the error first occurred.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub last_transition_time: String,
    /// When the error last occurred.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub last_update_time: String,
    /// Landscaper's error codes (`ERR_*`), e.g. `ERR_CONFIGURATION_PROBLEM`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<String>,
}

/// A status condition (contract section 1.2.4).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the status last changed.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub last_transition_time: String,
    /// When the condition was last written.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub last_update_time: String,
    /// A short, machine-readable cause of the status.
    #[serde(default)]
    pub reason: String,
    /// The status explained, for a person.
    #[serde(default)]
    pub message: String,
    /// Landscaper's error codes (`ERR_*`) behind a `False` status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<String>,
}

/// A DeployItem phase. Unknown strings are kept verbatim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Phase {
    #[default]
    Empty,
    Init,
    Progressing,
    Completing,
    Succeeded,
    Failed,
    InitDelete,
    Deleting,
    DeleteFailed,
    Other(String),
}

impl Phase {
    pub fn as_str(&self) -> &str {
        match self {
            Phase::Empty => "",
            Phase::Init => "Init",
            Phase::Progressing => "Progressing",
            Phase::Completing => "Completing",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::InitDelete => "InitDelete",
            Phase::Deleting => "Deleting",
            Phase::DeleteFailed => "DeleteFailed",
            Phase::Other(s) => s,
        }
    }
    pub fn is_empty(&self) -> bool {
        matches!(self, Phase::Empty)
    }
    /// `Succeeded`, `Failed`, `DeleteFailed`.
    pub fn is_final(&self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed | Phase::DeleteFailed)
    }
    /// `InitDelete`, `Deleting`, `DeleteFailed`.
    pub fn is_deletion(&self) -> bool {
        matches!(
            self,
            Phase::InitDelete | Phase::Deleting | Phase::DeleteFailed
        )
    }
    pub fn is_failed(&self) -> bool {
        matches!(self, Phase::Failed | Phase::DeleteFailed)
    }
}

impl From<String> for Phase {
    fn from(s: String) -> Self {
        match s.as_str() {
            "" => Phase::Empty,
            "Init" => Phase::Init,
            "Progressing" => Phase::Progressing,
            "Completing" => Phase::Completing,
            "Succeeded" => Phase::Succeeded,
            "Failed" => Phase::Failed,
            "InitDelete" => Phase::InitDelete,
            "Deleting" => Phase::Deleting,
            "DeleteFailed" => Phase::DeleteFailed,
            _ => Phase::Other(s),
        }
    }
}

impl From<&str> for Phase {
    fn from(s: &str) -> Self {
        Phase::from(s.to_string())
    }
}

impl From<Phase> for String {
    fn from(p: Phase) -> String {
        p.as_str().to_string()
    }
}

/// A phase reads as its string (`phase.as_deref() == Some("Succeeded")`).
impl std::ops::Deref for Phase {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A phase is a string in the CRD: unknown values are kept, so there is no `enum` list.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Phase {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Phase".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string"})
    }
}

/// Where a DeployItem is deployed to: a cluster (type
/// `landscaper.gardener.cloud/kubernetes-cluster`, a kubeconfig) or any other environment a
/// deployer understands (contract section 1.4).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The schema version of this object: `landscaper.gardener.cloud/v1alpha1`.
    #[serde(default = "target_api_version")]
    pub api_version: String,
    /// The kind of this object: `Target`.
    #[serde(default = "target_kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default, deserialize_with = "crate::meta::without_managed_fields")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::object")
    )]
    pub metadata: ObjectMeta,
    /// The target's type and how to reach it.
    #[serde(default)]
    pub spec: TargetSpec,
}

fn target_api_version() -> String {
    API_VERSION.to_string()
}
fn target_kind() -> String {
    "Target".to_string()
}

landscaper_resource!(Target, "Target", "targets");

/// A Target's type and how to reach it: inline (`config`) or from a Secret (`secretRef`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetSpec {
    /// The target's type, e.g. `landscaper.gardener.cloud/kubernetes-cluster`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// The target's content inline; for a cluster `{kubeconfig: <kubeconfig text>}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::crd::schemas::any"))]
    pub config: Option<Value>,
    /// A Secret in the Target's namespace that holds the content instead of `config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalSecretReference>,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: Extra,
}

/// A key of a Secret in the same namespace.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalSecretReference {
    /// The Secret's name.
    pub name: String,
    /// The data key; without it, the whole of the Secret's data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Shared settings of the DeployItems, Installations and Targets in one namespace (contract
/// section 1.5). Its fields are at the top level, not under `spec`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// The schema version of this object: `landscaper.gardener.cloud/v1alpha1`.
    #[serde(default = "context_api_version")]
    pub api_version: String,
    /// The kind of this object: `Context`.
    #[serde(default = "context_kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default, deserialize_with = "crate::meta::without_managed_fields")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::object")
    )]
    pub metadata: ObjectMeta,
    /// The repository that holds component versions, e.g.
    /// `{type: OCIRegistry, baseUrl: registry.example.com/components}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::crd::schemas::any"))]
    pub repository_context: Option<Value>,
    /// Secrets (`kubernetes.io/dockerconfigjson`) with credentials for registries, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registry_pull_secrets: Vec<LocalObjectReference>,
    /// Free-form configurations, keyed by name (e.g. `helmChartRepoCredentials`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::any_object")
    )]
    pub configurations: Option<BTreeMap<String, Value>>,
    /// A ConfigMap (data key `.ocmconfig`) with an OCM configuration: credentials and
    /// resolvers for component versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocm_config: Option<LocalObjectReference>,
    /// The name of a ConfigMap whose rules replace the versions of referenced components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_version_overwrites: Option<String>,
    /// Keys that verify the signatures of component versions, by signature name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_signatures: Option<BTreeMap<String, VerificationSignature>>,
    /// Read by Landscaper v0.99: components from an `OCIRegistry` repository need `true` there
    /// (newer Landscaper versions always use OCM). wasm-deployer does not read it.
    #[serde(default, rename = "useOCM", skip_serializing_if = "Option::is_none")]
    pub use_ocm: Option<bool>,
    /// Filled by the host for plugins: `{secret name: .dockerconfigjson content}` of
    /// [`Context::registry_pull_secrets`]. Never part of a stored Context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub resolved_registry_pull_secrets: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: Extra,
}

/// A reference to an object of the same namespace, by name.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-map-type" = "atomic")))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalObjectReference {
    /// The object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// How to verify a component version's signature: a public key, or a CA whose certificates sign.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerificationSignature {
    /// The Secret key that holds the public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key_secret_reference: Option<SecretKeyReference>,
    /// The Secret key that holds the CA certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_certificate_secret_reference: Option<SecretKeyReference>,
}

/// A key of a Secret, in any namespace.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyReference {
    /// The Secret's name.
    pub name: String,
    /// The Secret's namespace; empty means the referring object's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The data key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

fn context_api_version() -> String {
    API_VERSION.to_string()
}
fn context_kind() -> String {
    "Context".to_string()
}

landscaper_resource!(Context, "Context", "contexts");

/// The lock of one DeployItem per controller (contract section 1.6): the deployer replica
/// named in `spec.podName` works on the item; others leave it alone.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncObject {
    /// The schema version of this object: `landscaper.gardener.cloud/v1alpha1`.
    #[serde(default = "sync_object_api_version")]
    pub api_version: String,
    /// The kind of this object: `SyncObject`.
    #[serde(default = "sync_object_kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default, deserialize_with = "crate::meta::without_managed_fields")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::object")
    )]
    pub metadata: ObjectMeta,
    /// Who holds the lock, on what.
    pub spec: SyncObjectSpec,
    /// The status (empty, as in Landscaper).
    // Named in the schema although empty: the CRD has a status subresource, and an API server
    // prunes a status its schema does not name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::object")
    )]
    pub status: Option<Value>,
}

fn sync_object_api_version() -> String {
    API_VERSION.into()
}
fn sync_object_kind() -> String {
    "SyncObject".into()
}

landscaper_resource!(SyncObject, "SyncObject", "syncobjects");

/// Who holds a SyncObject's lock, on what; every field is required by the CRD.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncObjectSpec {
    /// The pod (deployer replica) holding the lock; empty = unlocked.
    #[serde(default)]
    pub pod_name: String,
    /// The kind of the locked object (`DeployItem`).
    #[serde(default)]
    pub kind: String,
    /// The name of the locked object.
    #[serde(default)]
    pub name: String,
    /// When the lock was last taken or renewed.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub last_update_time: String,
    /// The controller the lock is for (one lock per item and controller).
    #[serde(default)]
    pub prefix: String,
}

impl SyncObject {
    /// A SyncObject `namespace/name` with `spec`.
    pub fn new(namespace: &str, name: &str, spec: SyncObjectSpec) -> Self {
        Self {
            api_version: sync_object_api_version(),
            kind: sync_object_kind(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            spec,
            status: None,
        }
    }
}

/// Landscaper's own health record, written by its central controller into its deployments'
/// namespace. The host never reads it; its CRD is installed with the others so Landscaper finds it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LsHealthCheck {
    /// The schema version of this object: `landscaper.gardener.cloud/v1alpha1`.
    #[serde(default = "ls_health_check_api_version")]
    pub api_version: String,
    /// The kind of this object: `LsHealthCheck`.
    #[serde(default = "ls_health_check_kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default, deserialize_with = "crate::meta::without_managed_fields")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::object")
    )]
    pub metadata: ObjectMeta,
    /// `Ok` or `Failed`.
    #[serde(default)]
    pub status: String,
    /// When the check last ran.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::crd::schemas::date_time")
    )]
    pub last_update_time: String,
    /// What the check found, for a person.
    #[serde(default)]
    pub description: String,
}

fn ls_health_check_api_version() -> String {
    API_VERSION.into()
}
fn ls_health_check_kind() -> String {
    "LsHealthCheck".into()
}

landscaper_resource!(LsHealthCheck, "LsHealthCheck", "lshealthchecks");

/// The resolved target handed to plugins: the Target object and its content
/// (`spec.config` as JSON text, or the referenced Secret's data).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResolvedTarget {
    pub target: Target,
    pub content: String,
}

impl DeployItem {
    /// The `landscaper.gardener.cloud/operation` annotation, if set.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    pub fn status(&self) -> DeployItemStatus {
        self.status.clone().unwrap_or_default()
    }

    pub fn is_being_deleted(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|x| x == finalizer))
    }

    /// The Context name the item uses (`spec.context`, defaulted to `default`).
    pub fn context_name(&self) -> &str {
        match self.spec.context.as_deref() {
            None | Some("") => DEFAULT_CONTEXT,
            Some(c) => c,
        }
    }

    /// `spec.config`, if the item has a provider configuration (see [`provider_config_of`]).
    pub fn provider_config(&self) -> Option<&Value> {
        provider_config_of(self.spec.config.as_ref())
    }

    /// The target name from `spec.target.name`, if set and non-empty.
    pub fn spec_target_name(&self) -> Option<&str> {
        self.spec
            .target
            .as_ref()
            .map(|t| t.name.as_str())
            .filter(|n| !n.is_empty())
    }
}

/// The contract's rule for `spec.config`: a provider configuration is present unless it is
/// absent, `null` or an empty object. One rule for the host's check before a plugin runs and
/// for every plugin's decoding.
pub fn provider_config_of(config: Option<&Value>) -> Option<&Value> {
    config.filter(|v| !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_config_is_missing_when_absent_null_or_empty() {
        assert_eq!(provider_config_of(None), None);
        assert_eq!(provider_config_of(Some(&Value::Null)), None);
        assert_eq!(provider_config_of(Some(&serde_json::json!({}))), None);
        let c = serde_json::json!({"kind": "ProviderConfiguration"});
        assert_eq!(provider_config_of(Some(&c)), Some(&c));
        // Not an object: present (the plugin's decoding says what is wrong with it).
        assert!(provider_config_of(Some(&serde_json::json!("x"))).is_some());
    }

    #[test]
    fn context_keeps_its_typed_and_unknown_fields() {
        let json = serde_json::json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1",
            "kind": "Context",
            "metadata": {"name": "default", "namespace": "ns"},
            "registryPullSecrets": [{"name": "pull"}],
            "somethingNew": 1
        });
        let c: Context = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(c.registry_pull_secrets[0].name, "pull");
        assert_eq!(serde_json::to_value(&c).unwrap(), json);
    }

    #[test]
    fn a_landscaper_v1_context_reads_and_keeps_what_it_writes() {
        // Landscaper v1.x writes `ocmConfig: null` (no omitempty) and may carry
        // `verificationSignatures` (used by its Installation controller only).
        let json = serde_json::json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1",
            "kind": "Context",
            "metadata": {"name": "default", "namespace": "ns"},
            "ocmConfig": null,
            "verificationSignatures": {"sig": {"publicKeySecretReference":
                {"name": "keys", "namespace": "ns", "key": "pub.pem"}}}
        });
        let c: Context = serde_json::from_value(json.clone()).unwrap();
        assert!(c.ocm_config.is_none(), "null is no ocmConfig");
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(
            back["verificationSignatures"], json["verificationSignatures"],
            "kept through a write"
        );
        let with: Context = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "default", "namespace": "ns"},
            "ocmConfig": {"name": "ocm"}
        }))
        .unwrap();
        assert_eq!(with.ocm_config.unwrap().name, "ocm");
    }

    #[test]
    fn status_round_trip_keeps_unknown_fields() {
        let json = serde_json::json!({
            "phase": "Succeeded",
            "observedGeneration": 2,
            "jobID": "a",
            "jobIDFinished": "a",
            "somethingNew": {"x": 1}
        });
        let status: DeployItemStatus = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(status.phase, Phase::Succeeded);
        assert_eq!(serde_json::to_value(&status).unwrap(), json);
    }

    #[test]
    fn unknown_phase_is_kept_verbatim() {
        let p: Phase = serde_json::from_value(serde_json::json!("Weird")).unwrap();
        assert_eq!(p, Phase::Other("Weird".into()));
        assert_eq!(serde_json::to_value(&p).unwrap(), "Weird");
    }

    #[test]
    fn phase_predicates_match_the_contract() {
        for p in [Phase::Succeeded, Phase::Failed, Phase::DeleteFailed] {
            assert!(p.is_final(), "{p}");
        }
        for p in [
            Phase::Init,
            Phase::Progressing,
            Phase::InitDelete,
            Phase::Deleting,
        ] {
            assert!(!p.is_final(), "{p}");
        }
        assert!(Phase::InitDelete.is_deletion() && Phase::DeleteFailed.is_deletion());
        assert!(!Phase::Failed.is_deletion());
    }
}
