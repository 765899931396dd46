//! What to apply and how (contract 6.2–6.7), decoded: manifests with their policies and
//! patches, the update strategy, readiness checks, exports, deletion groups; its validation
//! (manifests are objects, jsonPaths parse, operators are known, deletion groups are
//! well-formed); and the references the managed list is made of.
//!
//! Owns: these types and their rules. Must not touch: the ProviderConfiguration envelope of a
//! deployer (its apiVersion, kind, versions) — each deployer decodes its own into a [`Spec`].

use crate::jsonpath::JsonPath;
use sdk_guest::DeployerError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Manifest policy (contract 6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Policy {
    /// Create, update, delete.
    #[default]
    Manage,
    /// Like manage, but only for objects carrying this item's ownership label.
    Fallback,
    /// Create and update, never delete.
    Keep,
    /// Nothing.
    Ignore,
    /// Create, never update, delete.
    Immutable,
}

impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "" | "manage" => Policy::Manage,
            "fallback" => Policy::Fallback,
            "keep" => Policy::Keep,
            "ignore" => Policy::Ignore,
            "immutable" => Policy::Immutable,
            other => {
                return Err(serde::de::Error::custom(format!(
                    "unknown policy {other:?} (expected manage, fallback, keep, ignore or immutable)"
                )));
            }
        })
    }
}

/// Update strategy (contract 6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateStrategy {
    /// PUT the desired object.
    Update,
    /// Server-side apply (keeps fields other managers own).
    Patch,
    /// Fill only missing/empty fields of the live object.
    Merge,
    /// Non-empty desired values override the live object.
    MergeOverwrite,
}

impl UpdateStrategy {
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "" | "update" => UpdateStrategy::Update,
            "patch" => UpdateStrategy::Patch,
            "merge" => UpdateStrategy::Merge,
            "mergeOverwrite" => UpdateStrategy::MergeOverwrite,
            other => return Err(format!("{other} is not a valid update strategy")),
        })
    }
}

/// One manifest entry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Policy (default `manage`).
    #[serde(default)]
    pub policy: Policy,
    /// The object (or a `List`).
    #[serde(default)]
    pub manifest: Value,
    /// Annotations merged in when the object is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotate_before_create: Option<BTreeMap<String, String>>,
    /// Annotations merged in right before deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotate_before_delete: Option<BTreeMap<String, String>>,
    /// Deep-merged into the live object after deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_after_deployment: Option<Value>,
    /// Deep-merged into the live object right before deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_before_delete: Option<Value>,
}

/// `TypedObjectReference`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TypedRef {
    /// apiVersion
    #[serde(default)]
    pub api_version: String,
    /// kind
    #[serde(default)]
    pub kind: String,
    /// name
    #[serde(default)]
    pub name: String,
    /// namespace (empty: cluster-scoped)
    #[serde(default)]
    pub namespace: String,
}

/// `readinessChecks`.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessChecks {
    /// Skip the default check.
    #[serde(default)]
    pub disable_default: bool,
    /// Custom checks.
    #[serde(default)]
    pub custom: Vec<CustomCheck>,
}

/// A custom readiness check.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct CustomCheck {
    /// Name (required).
    #[serde(default)]
    pub name: String,
    /// Skip it.
    #[serde(default)]
    pub disabled: bool,
    /// Individual objects.
    #[serde(default)]
    pub resource_selector: Vec<TypedRef>,
    /// Objects by labels (cluster-wide).
    #[serde(default)]
    pub label_selector: Option<LabelSelectorSpec>,
    /// Requirements, all must hold.
    #[serde(default)]
    pub requirements: Vec<Requirement>,
    /// Read the objects from this Target (in the DeployItem's namespace) instead of the
    /// item's Target.
    #[serde(default)]
    pub target_name: Option<String>,
}

/// `labelSelector` of a custom check.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorSpec {
    /// apiVersion
    #[serde(default)]
    pub api_version: String,
    /// kind
    #[serde(default)]
    pub kind: String,
    /// labels
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

/// One requirement.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    /// jsonPath of the field.
    #[serde(default)]
    pub json_path: String,
    /// Operator.
    #[serde(default)]
    pub operator: String,
    /// `[{"value": …}]`
    #[serde(default)]
    pub values: Vec<Value>,
}

/// `exports.exports[]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Export {
    /// Export key (dotted path).
    #[serde(default)]
    pub key: String,
    /// jsonPath into `fromResource`.
    #[serde(default)]
    pub json_path: String,
    /// Source object.
    #[serde(default)]
    pub from_resource: Option<TypedRef>,
    /// Follow a reference.
    #[serde(default)]
    pub from_object_ref: Option<FromObjectRef>,
    /// Read `fromResource` (and `fromObjectRef`) from this Target (in the DeployItem's
    /// namespace) instead of the item's Target.
    #[serde(default)]
    pub target_name: Option<String>,
}

/// `fromObjectRef`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct FromObjectRef {
    /// apiVersion of the referenced object.
    #[serde(default)]
    pub api_version: String,
    /// kind of the referenced object.
    #[serde(default)]
    pub kind: String,
    /// jsonPath into the referenced object.
    #[serde(default)]
    pub json_path: String,
}

/// `exports`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
pub struct Exports {
    /// The export definitions.
    #[serde(default)]
    pub exports: Vec<Export>,
}

/// A deletion group definition (contract 6.6).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DeletionGroup {
    /// Predefined group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predefined_resource_group: Option<PredefinedGroup>,
    /// Custom group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_resource_group: Option<CustomGroup>,
}

/// `predefinedResourceGroup`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PredefinedGroup {
    /// `namespaced-resources` | `cluster-scoped-resources` | `crds` | `empty`
    #[serde(rename = "type", default)]
    pub type_: String,
    /// Clear finalizers.
    #[serde(default)]
    pub force_delete: bool,
}

/// `customResourceGroup`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct CustomGroup {
    /// Resource types.
    #[serde(default)]
    pub resources: Vec<ResourceType>,
    /// Clear finalizers.
    #[serde(default)]
    pub force_delete: bool,
    /// Delete every object of the listed types, managed or not.
    #[serde(default)]
    pub delete_all_resources: bool,
    /// Delete on this Target (in the DeployItem's namespace) instead of the item's Target;
    /// only with `deleteAllResources` (a managed object never lives there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_name: Option<String>,
}

/// One resource type of a custom group.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResourceType {
    /// apiVersion (`v1`, `apps/v1`) or just the group (`apps`).
    #[serde(default)]
    pub api_version: String,
    /// Kind in any form users write: `ConfigMap`, `configmap`, `configmaps`.
    #[serde(default)]
    pub kind: String,
    /// Only these names (empty: all).
    #[serde(default)]
    pub names: Vec<String>,
    /// Only these namespaces (empty: all).
    #[serde(default)]
    pub namespaces: Vec<String>,
}

/// The decoded, defaulted configuration of an apply (validate it with [`Spec::validate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// Update strategy (an unknown value fails only when an existing object must be updated,
    /// as in Landscaper; kept as the raw string for that message).
    pub update_strategy: Result<UpdateStrategy, String>,
    /// Readiness checks.
    pub readiness: ReadinessChecks,
    /// Manifests.
    pub manifests: Vec<Manifest>,
    /// Exports.
    pub exports: Vec<Export>,
    /// Deletion groups for uninstall.
    pub deletion_groups: Vec<DeletionGroup>,
    /// Deletion groups for orphans during update.
    pub deletion_groups_during_update: Vec<DeletionGroup>,
}

fn validation_error(message: String) -> DeployerError {
    DeployerError::configuration("ValidateProviderConfiguration", message)
}

/// Checks a deployer's `continuousReconcile` (the manifest and helm configurations both carry
/// one): `cron` and `every` exclude each other. The caller sets the operation.
pub fn validate_continuous_reconcile(cr: &Value) -> Result<(), DeployerError> {
    let has = |k: &str| cr.get(k).is_some_and(|v| !v.is_null() && v != "");
    if has("cron") && has("every") {
        return Err(validation_error(
            "spec.config.continuousReconcile: cron and every are mutually exclusive".into(),
        ));
    }
    Ok(())
}

impl Spec {
    /// Checks the configuration; errors (`ERR_CONFIGURATION_PROBLEM`, reason
    /// `ValidateProviderConfiguration`) name the field below `spec.config`. The caller sets
    /// the operation.
    pub fn validate(&self) -> Result<(), DeployerError> {
        for (i, m) in self.manifests.iter().enumerate() {
            let at = format!("spec.config.manifests[{i}]");
            let manifest = &m.manifest;
            if manifest.is_null() || manifest.as_object().is_some_and(|o| o.is_empty()) {
                return Err(validation_error(format!(
                    "{at}.manifest: must not be empty"
                )));
            }
            let Some(obj) = manifest.as_object() else {
                return Err(validation_error(format!(
                    "{at}.manifest: must be a Kubernetes object, got {}",
                    type_name(manifest)
                )));
            };
            // A List is expanded later; its items are checked then.
            if obj.get("items").is_none() {
                check_object(manifest)
                    .map_err(|e| validation_error(format!("{at}.manifest: {e}")))?;
            }
            for (what, v) in [
                ("patchAfterDeployment", &m.patch_after_deployment),
                ("patchBeforeDelete", &m.patch_before_delete),
            ] {
                if let Some(v) = v
                    && !v.is_object()
                {
                    return Err(validation_error(format!("{at}.{what}: must be an object")));
                }
            }
        }
        self.validate_readiness()?;
        for (i, e) in self.exports.iter().enumerate() {
            let at = format!("spec.config.exports.exports[{i}]");
            if e.key.is_empty() {
                return Err(validation_error(format!("{at}.key: required")));
            }
            if e.from_resource.is_some() {
                JsonPath::parse(&e.json_path)
                    .map_err(|m| validation_error(format!("{at}.jsonPath: {m}")))?;
            }
            if let Some(r) = &e.from_object_ref {
                JsonPath::parse(&r.json_path)
                    .map_err(|m| validation_error(format!("{at}.fromObjectRef.jsonPath: {m}")))?;
            }
        }
        validate_groups("spec.config.deletionGroups", &self.deletion_groups)?;
        validate_groups(
            "spec.config.deletionGroupsDuringUpdate",
            &self.deletion_groups_during_update,
        )?;
        Ok(())
    }

    fn validate_readiness(&self) -> Result<(), DeployerError> {
        for (i, c) in self.readiness.custom.iter().enumerate() {
            let at = format!("spec.config.readinessChecks.custom[{i}]");
            if c.name.is_empty() {
                return Err(validation_error(format!("{at}.name: required")));
            }
            if c.resource_selector.is_empty() && c.label_selector.is_none() {
                return Err(validation_error(format!(
                    "{at}: one of resourceSelector or labelSelector is required"
                )));
            }
            if let Some(ls) = &c.label_selector
                && ls.match_labels.is_empty()
            {
                return Err(validation_error(format!(
                    "{at}.labelSelector.matchLabels: must not be empty"
                )));
            }
            if c.requirements.is_empty() {
                return Err(validation_error(format!(
                    "{at}.requirements: at least one requirement is required"
                )));
            }
            for (j, r) in c.requirements.iter().enumerate() {
                let at = format!("{at}.requirements[{j}]");
                if r.json_path.is_empty() {
                    return Err(validation_error(format!("{at}.jsonPath: required")));
                }
                JsonPath::parse(&r.json_path)
                    .map_err(|m| validation_error(format!("{at}.jsonPath: {m}")))?;
                let op = r.operator.as_str();
                if !["!", "exists", "=", "==", "!=", "in", "notin"].contains(&op) {
                    return Err(validation_error(format!(
                        "{at}.operator: {op:?} is not a valid operator (!, exists, =, ==, !=, in, notin)"
                    )));
                }
                if !matches!(op, "!" | "exists") && r.values.is_empty() {
                    return Err(validation_error(format!(
                        "{at}.values: operator {op:?} needs a value"
                    )));
                }
                if !matches!(op, "in" | "notin") && r.values.len() > 1 {
                    return Err(validation_error(format!(
                        "{at}.values: operator {op:?} takes one value"
                    )));
                }
                if let Some(v) = r.values.iter().find(|v| v.get("value").is_none()) {
                    return Err(validation_error(format!(
                        "{at}.values: each value must be an object {{\"value\": …}}, got {v}"
                    )));
                }
            }
        }
        Ok(())
    }
}

fn validate_groups(at: &str, groups: &[DeletionGroup]) -> Result<(), DeployerError> {
    for (i, g) in groups.iter().enumerate() {
        let at = format!("{at}[{i}]");
        match (&g.predefined_resource_group, &g.custom_resource_group) {
            (Some(p), None) => {
                if ![
                    "namespaced-resources",
                    "cluster-scoped-resources",
                    "crds",
                    "empty",
                ]
                .contains(&p.type_.as_str())
                {
                    return Err(validation_error(format!(
                        "{at}.predefinedResourceGroup.type: {:?} is not one of namespaced-resources, cluster-scoped-resources, crds, empty",
                        p.type_
                    )));
                }
            }
            (None, Some(c)) => {
                if c.resources.is_empty() {
                    return Err(validation_error(format!(
                        "{at}.customResourceGroup.resources: must not be empty"
                    )));
                }
                if c.target_name.as_deref().is_some_and(|t| !t.is_empty()) {
                    if !c.delete_all_resources {
                        return Err(validation_error(format!(
                            "{at}.customResourceGroup.targetName: only allowed with deleteAllResources: true (no managed object lives on another Target)"
                        )));
                    }
                    if c.force_delete {
                        return Err(validation_error(format!(
                            "{at}.customResourceGroup.forceDelete: not supported with targetName (the host offers get, list and delete on secondary Targets, so finalizers cannot be cleared there)"
                        )));
                    }
                }
                for (j, r) in c.resources.iter().enumerate() {
                    if r.kind.is_empty() || r.api_version.is_empty() {
                        return Err(validation_error(format!(
                            "{at}.customResourceGroup.resources[{j}]: apiVersion and kind are required"
                        )));
                    }
                }
            }
            _ => {
                return Err(validation_error(format!(
                    "{at}: exactly one of predefinedResourceGroup and customResourceGroup is required"
                )));
            }
        }
    }
    Ok(())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Checks that `v` is a Kubernetes object with apiVersion, kind and metadata.name.
pub fn check_object(v: &Value) -> Result<(), String> {
    let Some(o) = v.as_object() else {
        return Err(format!("must be a Kubernetes object, got {}", type_name(v)));
    };
    for key in ["apiVersion", "kind"] {
        if o.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(format!("{key} is missing"));
        }
    }
    if v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("metadata.name is missing".into());
    }
    Ok(())
}

/// `core/v1 ObjectReference` as stored in the status.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, Default, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// apiVersion
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// kind
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// name
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// namespace
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// uid
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectReference {
    /// The reference of a live object.
    pub fn of(obj: &Value) -> ObjectReference {
        let s = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        ObjectReference {
            api_version: s("/apiVersion"),
            kind: s("/kind"),
            name: s("/metadata/name"),
            namespace: s("/metadata/namespace"),
            uid: s("/metadata/uid"),
        }
    }

    /// The SDK's object ref.
    pub fn to_ref(&self) -> sdk_guest::ObjectRef {
        sdk_guest::ObjectRef {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            namespace: (!self.namespace.is_empty()).then(|| self.namespace.clone()),
            name: self.name.clone(),
        }
    }

    /// Group of the apiVersion (`""` for core).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    /// Same object: same UID if both have one, else same group, kind, namespace and name.
    pub fn same(&self, other: &ObjectReference) -> bool {
        if !self.uid.is_empty() && !other.uid.is_empty() {
            return self.uid == other.uid;
        }
        self.group() == other.group()
            && self.kind == other.kind
            && self.name == other.name
            && self.namespace == other.namespace
    }

    /// `<ns>/<name>` (or `<name>`), for messages.
    pub fn display(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }

    /// Sort key: Landscaper sorts by the string form of the reference.
    pub fn sort_key(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}",
            self.kind, self.namespace, self.name, self.api_version, self.uid
        )
    }
}

/// One `managedResources` entry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ManagedResource {
    /// Policy of the manifest that produced it.
    #[serde(default)]
    pub policy: Policy,
    /// Copied from the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotate_before_delete: Option<BTreeMap<String, String>>,
    /// Copied from the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_before_delete: Option<Value>,
    /// The object.
    pub resource: ObjectReference,
    /// wasm-deployer extension (Landscaper ignores it): the secondary Target of an object a
    /// `deleteAllResources` group with `targetName` found and is still deleting. Absent for
    /// objects on the item's own Target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_name: Option<String>,
}

impl ManagedResource {
    /// The cluster the object lives on.
    pub fn cluster(&self) -> crate::cluster::Cluster<'_> {
        crate::cluster::Cluster::of(self.target_name.as_deref())
    }

    /// Same object on the same cluster.
    pub fn same(&self, other: &ManagedResource) -> bool {
        self.cluster() == other.cluster() && self.resource.same(&other.resource)
    }
}

/// A queued `patchAfterDeployment`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PendingPatch {
    /// The object.
    pub resource: ObjectReference,
    /// The patch.
    pub patch: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn continuous_reconcile_takes_cron_or_every_not_both() {
        assert!(validate_continuous_reconcile(&json!({"every": "1h"})).is_ok());
        assert!(validate_continuous_reconcile(&json!({"cron": "* * * * *", "every": ""})).is_ok());
        let e = validate_continuous_reconcile(&json!({"cron": "* * * * *", "every": "1h"}))
            .unwrap_err();
        assert_eq!(e.reason, "ValidateProviderConfiguration");
        assert_eq!(
            e.message,
            "spec.config.continuousReconcile: cron and every are mutually exclusive"
        );
    }
}
