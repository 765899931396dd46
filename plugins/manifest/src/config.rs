//! ProviderConfiguration and ProviderStatus of the manifest deployer (contract 6.1, 6.2, 6.8):
//! `manifest.deployer.landscaper.gardener.cloud/v1alpha2`, and `v1alpha1` converted without
//! losing `exports` or the deletion groups (Landscaper drops them, contract 11.7).
//!
//! Owns: decoding the envelope (non-strict: unknown fields are ignored, as Landscaper's decoder
//! does) into the applier's [`Spec`] (defaulting `updateStrategy: update`, `policy: manage`,
//! validated by `Spec::validate`), and the provider status with its resume marker.
//! Must not touch: the cluster.

pub use manifest_applier::spec::*;
use sdk_guest::{DeployerError, decode_at, refuse_provider_kubeconfig};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// API version of the current configuration and status.
pub const V1ALPHA2: &str = "manifest.deployer.landscaper.gardener.cloud/v1alpha2";
/// Legacy API version.
pub const V1ALPHA1: &str = "manifest.deployer.landscaper.gardener.cloud/v1alpha1";

/// Operation of configuration errors (contract 3.14).
pub const INIT_OPERATION: &str = "InitManifestOperation";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawV1alpha2 {
    #[serde(default)]
    update_strategy: String,
    #[serde(default)]
    readiness_checks: ReadinessChecks,
    #[serde(default)]
    manifests: Vec<Manifest>,
    #[serde(default)]
    exports: Option<Exports>,
    #[serde(default)]
    deletion_groups: Vec<DeletionGroup>,
    #[serde(default)]
    deletion_groups_during_update: Vec<DeletionGroup>,
    #[serde(default)]
    continuous_reconcile: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawV1alpha1 {
    #[serde(default)]
    update_strategy: String,
    #[serde(default)]
    readiness_checks: ReadinessChecks,
    #[serde(default)]
    manifests: Vec<Value>,
    #[serde(default)]
    exports: Option<Exports>,
    #[serde(default)]
    deletion_groups: Vec<DeletionGroup>,
    #[serde(default)]
    deletion_groups_during_update: Vec<DeletionGroup>,
}

fn parse_error(message: String) -> DeployerError {
    DeployerError::configuration("ParseProviderConfiguration", message)
        .with_operation(INIT_OPERATION)
}

/// The manifest deployer's configuration: the applier's [`Spec`].
pub type Config = Spec;

/// Decodes `spec.config` (v1alpha2, or v1alpha1 converted), defaults and validates it.
pub fn parse(raw: &Value) -> Result<Config, DeployerError> {
    let api_version = raw.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = raw.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != "ProviderConfiguration" {
        return Err(parse_error(format!(
            "spec.config.kind must be ProviderConfiguration, got {kind:?}"
        )));
    }
    refuse_provider_kubeconfig(raw).map_err(parse_error)?;
    let config = match api_version {
        V1ALPHA2 => {
            let c: RawV1alpha2 = decode_at(raw, "spec.config").map_err(parse_error)?;
            if let Some(cr) = &c.continuous_reconcile {
                validate_continuous_reconcile(cr).map_err(|e| e.with_operation(INIT_OPERATION))?;
            }
            Config {
                update_strategy: UpdateStrategy::parse(&c.update_strategy),
                readiness: c.readiness_checks,
                manifests: c.manifests,
                exports: c.exports.map(|e| e.exports).unwrap_or_default(),
                deletion_groups: c.deletion_groups,
                deletion_groups_during_update: c.deletion_groups_during_update,
            }
        }
        V1ALPHA1 => {
            let c: RawV1alpha1 = decode_at(raw, "spec.config").map_err(parse_error)?;
            Config {
                update_strategy: UpdateStrategy::parse(&c.update_strategy),
                readiness: c.readiness_checks,
                manifests: c
                    .manifests
                    .into_iter()
                    .map(|m| Manifest {
                        manifest: m,
                        ..Manifest::default()
                    })
                    .collect(),
                // Kept, unlike Landscaper's conversion (contract 11.7).
                exports: c.exports.map(|e| e.exports).unwrap_or_default(),
                deletion_groups: c.deletion_groups,
                deletion_groups_during_update: c.deletion_groups_during_update,
            }
        }
        other => {
            return Err(parse_error(format!(
                "spec.config.apiVersion must be {V1ALPHA2} or {V1ALPHA1}, got {other:?}"
            )));
        }
    };
    config
        .validate()
        .map_err(|e| e.with_operation(INIT_OPERATION))?;
    Ok(config)
}

/// Where a job stands, so every step resumes from persisted state.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// The job this progress belongs to.
    #[serde(rename = "jobID", default)]
    pub job_id: String,
    /// `applied` (orphans gone, waiting for readiness), `ready` (waiting for exports).
    #[serde(default)]
    pub step: String,
    /// `patchAfterDeployment` actions still to do after readiness and exports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_patches: Vec<PendingPatch>,
}

/// ProviderStatus v1alpha2.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    /// The managed objects.
    #[serde(default)]
    pub managed_resources: Vec<ManagedResource>,
    /// Resume marker of the running job (wasm-deployer extension; Landscaper ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
}

impl ProviderStatus {
    /// Decodes a previous status (v1alpha2, or v1alpha1 whose entries become `manage`).
    pub fn from_previous(raw: Option<&Value>) -> Result<ProviderStatus, DeployerError> {
        let Some(raw) = raw.filter(|v| v.as_object().is_some_and(|o| !o.is_empty())) else {
            return Ok(ProviderStatus::default());
        };
        let err = |m: String| {
            DeployerError::configuration("ParseProviderStatus", m).with_operation(INIT_OPERATION)
        };
        match raw.get("apiVersion").and_then(Value::as_str).unwrap_or("") {
            V1ALPHA1 => {
                #[derive(Deserialize)]
                #[serde(rename_all = "camelCase")]
                struct Old {
                    #[serde(default)]
                    managed_resources: Vec<TypedRef>,
                }
                let old: Old = decode_at(raw, "status.providerStatus").map_err(err)?;
                Ok(ProviderStatus {
                    managed_resources: old
                        .managed_resources
                        .into_iter()
                        .map(|r| ManagedResource {
                            resource: ObjectReference {
                                api_version: r.api_version,
                                kind: r.kind,
                                name: r.name,
                                namespace: r.namespace,
                                uid: String::new(),
                            },
                            ..Default::default()
                        })
                        .collect(),
                    progress: None,
                })
            }
            _ => decode_at(raw, "status.providerStatus").map_err(err),
        }
    }

    /// As JSON with apiVersion and kind.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or_else(|_| Value::Object(Map::new()));
        if let Some(o) = v.as_object_mut() {
            o.insert("apiVersion".into(), V1ALPHA2.into());
            o.insert("kind".into(), "ProviderStatus".into());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v1alpha2_defaults_strategy_and_policy() {
        let c = parse(&json!({
            "apiVersion": V1ALPHA2, "kind": "ProviderConfiguration", "unknownField": 1,
            "manifests": [{"manifest": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}}]
        }))
        .unwrap();
        assert_eq!(c.update_strategy, Ok(UpdateStrategy::Update));
        assert_eq!(c.manifests[0].policy, Policy::Manage);
    }

    #[test]
    fn v1alpha1_keeps_exports_and_deletion_groups() {
        let c = parse(&json!({
            "apiVersion": V1ALPHA1, "kind": "ProviderConfiguration", "updateStrategy": "patch",
            "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}],
            "exports": {"exports": [{"key": "k", "jsonPath": ".data", "fromResource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "default"}}]},
            "deletionGroups": [{"predefinedResourceGroup": {"type": "crds"}}],
            "deletionGroupsDuringUpdate": [{"predefinedResourceGroup": {"type": "empty"}}]
        }))
        .unwrap();
        assert_eq!(c.update_strategy, Ok(UpdateStrategy::Patch));
        assert_eq!(c.manifests[0].policy, Policy::Manage);
        assert_eq!(c.manifests[0].manifest["metadata"]["name"], "a");
        assert_eq!(c.exports.len(), 1);
        assert_eq!(c.deletion_groups.len(), 1);
        assert_eq!(c.deletion_groups_during_update.len(), 1);
    }

    #[test]
    fn secondary_targets_are_accepted_where_landscaper_accepts_them() {
        let config = |group: Value| {
            parse(&json!({
                "apiVersion": V1ALPHA2, "kind": "ProviderConfiguration",
                "readinessChecks": {"custom": [{"name": "c", "targetName": "other",
                    "resourceSelector": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "default"}],
                    "requirements": [{"jsonPath": ".data", "operator": "exists"}]}]},
                "exports": {"exports": [{"key": "k", "jsonPath": ".data", "targetName": "other",
                    "fromResource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "default"}}]},
                "deletionGroups": [{"customResourceGroup": group}]
            }))
        };
        let resources = json!([{"apiVersion": "v1", "kind": "ConfigMap"}]);
        let c = config(
            json!({"targetName": "other", "deleteAllResources": true, "resources": resources}),
        )
        .unwrap();
        assert_eq!(c.readiness.custom[0].target_name.as_deref(), Some("other"));
        assert_eq!(c.exports[0].target_name.as_deref(), Some("other"));
        let e = config(json!({"targetName": "other", "resources": resources})).unwrap_err();
        assert!(
            e.message.contains(
                "deletionGroups[0].customResourceGroup.targetName: only allowed with deleteAllResources: true"
            ),
            "{}",
            e.message
        );
        let e = config(json!({"targetName": "other", "deleteAllResources": true,
            "forceDelete": true, "resources": resources}))
        .unwrap_err();
        assert!(
            e.message
                .contains("forceDelete: not supported with targetName"),
            "{}",
            e.message
        );
    }

    #[test]
    fn invalid_input_names_the_field() {
        let bad = |config: Value| parse(&config).unwrap_err();
        let base = |extra: Value| {
            let mut c = json!({"apiVersion": V1ALPHA2, "kind": "ProviderConfiguration"});
            c.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            c
        };
        let e = bad(base(
            json!({"manifests": [{"manifest": {"kind": "ConfigMap"}}]}),
        ));
        assert_eq!(e.reason, "ValidateProviderConfiguration");
        assert!(
            e.message
                .contains("manifests[0].manifest: apiVersion is missing"),
            "{}",
            e.message
        );
        let e = bad(base(
            json!({"manifests": [{"policy": "own", "manifest": {}}]}),
        ));
        assert_eq!(e.reason, "ParseProviderConfiguration");
        assert!(e.message.contains("unknown policy"), "{}", e.message);
        let e = bad(base(json!({"readinessChecks": {"custom": [{"name": "c",
            "resourceSelector": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a"}],
            "requirements": [{"jsonPath": ".data[", "operator": "=", "values": [{"value": 1}]}]}]}})));
        assert!(
            e.message.contains("requirements[0].jsonPath"),
            "{}",
            e.message
        );
        let e = bad(base(json!({"deletionGroupsDuringUpdate": [{}]})));
        assert!(
            e.message.contains("deletionGroupsDuringUpdate[0]"),
            "{}",
            e.message
        );
        assert!(e.is_unrecoverable());
    }

    #[test]
    fn a_v0_99_kubeconfig_in_the_configuration_is_refused_not_ignored() {
        for api_version in [V1ALPHA2, V1ALPHA1] {
            let mut c = json!({"apiVersion": api_version, "kind": "ProviderConfiguration",
                "manifests": [], "kubeconfig": "YXBpVmVyc2lvbjogdjE="});
            let e = parse(&c).unwrap_err();
            assert_eq!(e.reason, "ParseProviderConfiguration");
            assert!(
                e.message.starts_with("spec.config.kubeconfig: "),
                "{}",
                e.message
            );
            assert!(e.message.contains("spec.target"), "{}", e.message);
            assert!(e.is_unrecoverable());
            // Empty, as v0.99's own defaulting writes it, is no kubeconfig.
            c["kubeconfig"] = json!("");
            parse(&c).unwrap();
        }
    }

    #[test]
    fn v1alpha1_status_converts_to_manage_entries() {
        let s = ProviderStatus::from_previous(Some(&json!({
            "apiVersion": V1ALPHA1, "kind": "ProviderStatus",
            "managedResources": [{"apiVersion": "v1", "kind": "Secret", "name": "s", "namespace": "default"}]
        })))
        .unwrap();
        assert_eq!(s.managed_resources[0].policy, Policy::Manage);
        assert_eq!(s.managed_resources[0].resource.name, "s");
    }
}
