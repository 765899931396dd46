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

/// A `DeployItem` (`landscaper.gardener.cloud/v1alpha1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployItem {
    #[serde(default = "deploy_item_api_version")]
    pub api_version: String,
    #[serde(default = "deploy_item_kind")]
    pub kind: String,
    #[serde(default, deserialize_with = "crate::meta::without_managed_fields")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DeployItemSpec,
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

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployItemSpec {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_on_change_only: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `status` of a DeployItem (contract section 1.3.2).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployItemStatus {
    #[serde(default, skip_serializing_if = "Phase::is_empty")]
    pub phase: Phase,
    /// Required by the CRD schema, so always written.
    #[serde(default)]
    pub observed_generation: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LsError>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_errors: Vec<LsError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<LsError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployer: Option<DeployerInformation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_status: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_ref: Option<ObjectReference>,
    #[serde(default, rename = "jobID", skip_serializing_if = "String::is_empty")]
    pub job_id: String,
    #[serde(
        default,
        rename = "jobIDFinished",
        skip_serializing_if = "String::is_empty"
    )]
    pub job_id_finished: String,
    #[serde(
        default,
        rename = "jobIDGenerationTime",
        skip_serializing_if = "Option::is_none"
    )]
    pub job_id_generation_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition_times: Option<TransitionTimes>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `TransitionTimes` (contract section 1.2.6).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransitionTimes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_time: Option<String>,
}

/// `DeployerInformation`: always written with all three keys (the CRD requires them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployerInformation {
    #[serde(default)]
    pub identity: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
}

/// Landscaper's `Error` object (contract section 1.2.3).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LsError {
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default)]
    pub last_update_time: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<String>,
}

/// A status condition (contract section 1.2.4).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default)]
    pub last_update_time: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
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

/// A `Target` (contract section 1.4).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    #[serde(default = "target_api_version")]
    pub api_version: String,
    #[serde(default = "target_kind")]
    pub kind: String,
    #[serde(default, deserialize_with = "crate::meta::without_managed_fields")]
    pub metadata: ObjectMeta,
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

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetSpec {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalSecretReference>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalSecretReference {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A `Context` (contract section 1.5). Its fields are at the top level, not under `spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    #[serde(default = "context_api_version")]
    pub api_version: String,
    #[serde(default = "context_kind")]
    pub kind: String,
    #[serde(default, deserialize_with = "crate::meta::without_managed_fields")]
    pub metadata: ObjectMeta,
    /// The component repository (OCM/legacy repository context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_context: Option<Value>,
    /// Secrets (`kubernetes.io/dockerconfigjson`) for registries, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registry_pull_secrets: Vec<LocalObjectReference>,
    /// Free-form configurations, keyed by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configurations: Option<BTreeMap<String, Value>>,
    /// Filled by the host for plugins: `{secret name: .dockerconfigjson content}` of
    /// [`Context::registry_pull_secrets`]. Never part of a stored Context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_registry_pull_secrets: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A reference to an object of the same namespace, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalObjectReference {
    #[serde(default)]
    pub name: String,
}

fn context_api_version() -> String {
    API_VERSION.to_string()
}
fn context_kind() -> String {
    "Context".to_string()
}

landscaper_resource!(Context, "Context", "contexts");

/// A `SyncObject` (contract section 1.6): the lock of one DeployItem per controller.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncObject {
    #[serde(default = "sync_object_api_version")]
    pub api_version: String,
    #[serde(default = "sync_object_kind")]
    pub kind: String,
    #[serde(default, deserialize_with = "crate::meta::without_managed_fields")]
    pub metadata: ObjectMeta,
    pub spec: SyncObjectSpec,
}

fn sync_object_api_version() -> String {
    API_VERSION.into()
}
fn sync_object_kind() -> String {
    "SyncObject".into()
}

landscaper_resource!(SyncObject, "SyncObject", "syncobjects");

/// `spec` of a SyncObject; every field is required by the CRD.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncObjectSpec {
    /// The pod holding the lock; empty = unlocked.
    #[serde(default)]
    pub pod_name: String,
    /// Kind of the locked object (`DeployItem`).
    #[serde(default)]
    pub kind: String,
    /// Name of the locked object.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub last_update_time: String,
    /// Controller identifier.
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
        }
    }
}

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
