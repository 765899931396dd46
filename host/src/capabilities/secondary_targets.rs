//! Secondary Targets (WIT `secondary-targets`): get, list and delete on the cluster of a Target
//! the provider configuration names by `targetName` (only those: any other name is denied and
//! logged), looked up in the DeployItem's namespace,
//! resolved (inline config or `secretRef`) and validated like the item's own Target; clients
//! and discovery are shared with the item's Targets.
//!
//! Owns: finding and resolving a secondary Target, and which operations it offers. Must not
//! touch: the operations themselves (`kubernetes`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use plugin_runtime::{DeployerError, KubeOp};

use super::errors::{error, kube_error};
use crate::contract::target::{self, kubeconfig_of};
use crate::landscaper::{Target, codes};

/// The data of the Secret a Target's `secretRef` names (in `namespace`, the item's): `None`
/// without a `secretRef` or when the Secret does not exist (resolution then says so).
pub async fn secret_ref_data(
    client: &Client,
    namespace: &str,
    target: &Target,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, kube::Error> {
    let Some(r) = &target.spec.secret_ref else {
        return Ok(None);
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    Ok(secrets.get_opt(&r.name).await?.map(|s| {
        s.data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect()
    }))
}

/// Where secondary Targets are looked up: the Landscaper cluster and the item's namespace.
pub(super) struct SecondaryTargets {
    pub(super) client: Client,
    pub(super) namespace: String,
    /// The Target names the item's provider configuration gives in `targetName` fields.
    pub(super) granted: BTreeSet<String>,
    /// Kubeconfigs of the Targets resolved during this invocation, by name.
    pub(super) resolved: Mutex<HashMap<String, String>>,
}

/// Looks the Target `name` up in the item's namespace, resolves it (inline config or
/// `secretRef`) and validates its kubeconfig like the item's own Target.
pub(super) async fn secondary_kubeconfig(
    secondary: Option<&SecondaryTargets>,
    name: &str,
) -> Result<String, DeployerError> {
    {
        let Some(secondary) = secondary else {
            return Err(error(
                codes::INTERNAL_PROBLEM,
                "SecondaryTargetsUnavailable",
                format!("no access to secondary Target {name:?} in this context"),
            ));
        };
        if !secondary.granted.contains(name) {
            tracing::warn!(target_name = %name, "denied: a secondary Target the provider configuration does not name");
            return Err(error(
                codes::CONFIGURATION_PROBLEM,
                "SecondaryTargetNotGranted",
                format!(
                    "secondary Target {name:?} is not named by a targetName in the item's provider configuration"
                ),
            ));
        }
        if let Some(k) = secondary.resolved.lock().expect("poisoned").get(name) {
            return Ok(k.clone());
        }
        let ns = &secondary.namespace;
        let targets: Api<Target> = Api::namespaced(secondary.client.clone(), ns);
        let target = targets
            .get_opt(name)
            .await
            .map_err(kube_error)?
            .ok_or_else(|| DeployerError {
                operation: "kubernetes".into(),
                reason: "TargetNotFound".into(),
                message: format!("secondary Target {name:?} not found in namespace {ns:?}"),
                ..Default::default()
            })?;
        let secret_data = secret_ref_data(&secondary.client, ns, &target)
            .await
            .map_err(kube_error)?;
        let config_problem = |reason: &str, m: String| {
            error(
                codes::CONFIGURATION_PROBLEM,
                reason,
                format!("secondary Target {name:?}: {m}"),
            )
        };
        let resolved = target::resolve(&target, secret_data.as_ref())
            .map_err(|m| config_problem("ResolveTarget", m))?;
        target::validate(&resolved).map_err(|m| config_problem("ValidateTarget", m))?;
        let kubeconfig = kubeconfig_of(&resolved.content).ok_or_else(|| {
            let why = target::no_kubeconfig_reason(name, &resolved.content);
            config_problem("TargetKubeconfig", why)
        })?;
        secondary
            .resolved
            .lock()
            .expect("poisoned")
            .insert(name.to_string(), kubeconfig.clone());
        Ok(kubeconfig)
    }
}

/// Only get, list and delete are offered on a secondary Target.
/// Every string value of a `targetName` field anywhere in a provider configuration.
pub(super) fn named_targets(config: &serde_json::Value) -> BTreeSet<String> {
    fn walk(v: &serde_json::Value, out: &mut BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match v {
                        serde_json::Value::String(name) if k == "targetName" => {
                            out.insert(name.clone());
                        }
                        other => walk(other, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(config, &mut out);
    out
}

pub(super) fn check_operation(target_name: &str, op: &KubeOp) -> Result<(), DeployerError> {
    match op {
        KubeOp::Get(_) | KubeOp::List { .. } | KubeOp::Delete(_) => Ok(()),
        other => Err(error(
            codes::INTERNAL_PROBLEM,
            "UnsupportedOperation",
            format!(
                "secondary Target {target_name:?}: only get, list and delete are offered, not {}",
                other.verb()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::named_targets;
    use serde_json::json;

    #[test]
    fn only_target_names_given_in_target_name_fields_are_granted() {
        let config = json!({
            "readinessChecks": {"custom": [{"name": "c", "targetName": "ready-on"}]},
            "exports": {"exports": [{"key": "k", "targetName": "export-from"}]},
            "deletionGroups": [{"customResourceGroup": {"targetName": "cleanup-on"}}],
            "note": "targetName: not-a-field",
            "targetName": {"nested": "not a string, not a name"},
        });
        let names: Vec<String> = named_targets(&config).into_iter().collect();
        assert_eq!(names, ["cleanup-on", "export-from", "ready-on"]);
        assert!(named_targets(&json!(null)).is_empty());
    }
}
