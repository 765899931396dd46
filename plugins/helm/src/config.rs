//! ProviderConfiguration and ProviderStatus of the helm deployer (contract 7.1, 7.6):
//! `helm.deployer.landscaper.gardener.cloud/v1alpha1`, field for field.
//!
//! Owns: decoding (non-strict: unknown fields are ignored, as Landscaper's decoder does),
//! defaulting (`helmDeployment: true`, `updateStrategy: update`) and validation with messages
//! that name the field; the provider status with the resume marker of a running job.
//! Must not touch: the cluster, the network.

use std::time::Duration;

use manifest_applier::spec::{
    DeletionGroup, Export, Exports, ManagedResource, ReadinessChecks, UpdateStrategy,
    validate_continuous_reconcile,
};
use sdk_guest::{DeployerError, decode_at, model::parse_go_duration, refuse_provider_kubeconfig};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// API version of the configuration and status.
pub const API_VERSION: &str = "helm.deployer.landscaper.gardener.cloud/v1alpha1";
/// Operation of configuration errors (contract 7.1).
pub const INIT_OPERATION: &str = "InitHelmOperation";

/// `chart` (contract 7.2).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Chart {
    /// OCI reference `host/repository:tag[@digest]`.
    #[serde(default)]
    pub r#ref: Option<String>,
    /// An archive, inline or remote.
    #[serde(default)]
    pub archive: Option<Archive>,
    /// A classic chart repository.
    #[serde(default)]
    pub helm_chart_repo: Option<HelmChartRepo>,
    /// A component descriptor resource (no longer supported by Landscaper either).
    #[serde(default)]
    pub from_resource: Option<Value>,
    /// An OCM resource reference (base64 of `{component, resource}`).
    #[serde(default)]
    pub resource_ref: Option<String>,
}

/// `chart.archive`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Archive {
    /// Base64 (standard) of a `.tgz`.
    #[serde(default)]
    pub raw: Option<String>,
    /// `{url}` of a `.tgz`.
    #[serde(default)]
    pub remote: Option<RemoteArchive>,
}

/// `chart.archive.remote`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct RemoteArchive {
    /// HTTP(S) URL.
    #[serde(default)]
    pub url: String,
}

/// `chart.helmChartRepo`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelmChartRepo {
    /// Repository URL (normalised: trimmed, one trailing `/` removed, `https://` if no scheme).
    #[serde(default)]
    pub helm_chart_repo_url: String,
    /// Chart name.
    #[serde(default)]
    pub helm_chart_name: String,
    /// Version or constraint, resolved against `index.yaml` as Helm does.
    #[serde(default)]
    pub helm_chart_version: String,
}

/// Flags of one Helm action (`helmDeploymentConfig.install|upgrade|uninstall`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionFlags {
    /// Roll back (upgrade) or uninstall (install) on failure.
    pub atomic: bool,
    /// Wait until every resource is ready before the release is `deployed`.
    pub wait: bool,
    /// Replace resources that cannot be updated.
    pub force: bool,
    /// Adopt existing resources that no release owns.
    pub take_ownership: bool,
    /// Skip `values.schema.json`.
    pub skip_schema_validation: bool,
    /// Helm's `--timeout` (Landscaper parses and ignores it; here it bounds the action).
    pub timeout: Option<Duration>,
}

/// `helmDeploymentConfig`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeploymentConfig {
    /// `install`.
    pub install: ActionFlags,
    /// `upgrade`.
    pub upgrade: ActionFlags,
    /// `uninstall` (only `wait` and `timeout`).
    pub uninstall: ActionFlags,
}

/// The decoded, defaulted and validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where the chart comes from.
    pub chart: Chart,
    /// Release name.
    pub name: String,
    /// Release namespace.
    pub namespace: String,
    /// Create the release namespace.
    pub create_namespace: bool,
    /// Helm values (the release's `config`).
    pub values: Value,
    /// A real Helm release (true, default) or template + apply (false).
    pub helm_deployment: bool,
    /// Flags of the Helm actions.
    pub deployment: DeploymentConfig,
    /// Update strategy of template mode.
    pub update_strategy: Result<UpdateStrategy, String>,
    /// Readiness checks.
    pub readiness: ReadinessChecks,
    /// Exports (`exports.exports` + the deprecated `exportsFromManifests`).
    pub exports: Vec<Export>,
    /// Template mode: uninstall groups.
    pub deletion_groups: Vec<DeletionGroup>,
    /// Template mode: orphan clean-up groups.
    pub deletion_groups_during_update: Vec<DeletionGroup>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    update_strategy: String,
    #[serde(default)]
    readiness_checks: ReadinessChecks,
    #[serde(default)]
    chart: Option<Chart>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    create_namespace: bool,
    #[serde(default)]
    values: Option<Value>,
    #[serde(default)]
    exports_from_manifests: Vec<Export>,
    #[serde(default)]
    exports: Option<Exports>,
    #[serde(default)]
    continuous_reconcile: Option<Value>,
    #[serde(default)]
    helm_deployment: Option<bool>,
    #[serde(default)]
    helm_deployment_config: Option<RawDeploymentConfig>,
    #[serde(default)]
    deletion_groups: Vec<DeletionGroup>,
    #[serde(default)]
    deletion_groups_during_update: Vec<DeletionGroup>,
}

#[derive(Deserialize, Default)]
struct RawDeploymentConfig {
    #[serde(default)]
    install: Option<Map<String, Value>>,
    #[serde(default)]
    upgrade: Option<Map<String, Value>>,
    #[serde(default)]
    uninstall: Option<Map<String, Value>>,
}

fn parse_error(message: String) -> DeployerError {
    DeployerError::configuration("ParseProviderConfiguration", message)
        .with_operation(INIT_OPERATION)
}

fn validation_error(message: String) -> DeployerError {
    DeployerError::configuration("ValidateProviderConfiguration", message)
        .with_operation(INIT_OPERATION)
}

const INSTALL_KEYS: [&str; 6] = [
    "atomic",
    "timeout",
    "force",
    "skipSchemaValidation",
    "takeOwnership",
    "wait",
];
const UNINSTALL_KEYS: [&str; 2] = ["timeout", "wait"];

fn flags(
    at: &str,
    map: Option<&Map<String, Value>>,
    allowed: &[&str],
) -> Result<ActionFlags, DeployerError> {
    let mut f = ActionFlags::default();
    let Some(map) = map else {
        return Ok(f);
    };
    for (key, value) in map {
        if !allowed.contains(&key.as_str()) {
            return Err(validation_error(format!(
                "{at}.{key}: Unsupported value: {key:?}: supported values: {}",
                allowed
                    .iter()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let boolean = || {
            value.as_bool().ok_or_else(|| {
                validation_error(format!("{at}.{key}: must be a boolean, got {value}"))
            })
        };
        match key.as_str() {
            "atomic" => f.atomic = boolean()?,
            "wait" => f.wait = boolean()?,
            "force" => f.force = boolean()?,
            "takeOwnership" => f.take_ownership = boolean()?,
            "skipSchemaValidation" => f.skip_schema_validation = boolean()?,
            "timeout" => {
                let text = value.as_str().ok_or_else(|| {
                    validation_error(format!(
                        "{at}.timeout: must be a duration string such as \"5m\", got {value}"
                    ))
                })?;
                match parse_go_duration(text)
                    .map_err(|e| validation_error(format!("{at}.timeout: {e}")))?
                {
                    sdk_guest::model::GoDuration::Finite(d) if !d.is_zero() => f.timeout = Some(d),
                    _ => {
                        return Err(validation_error(format!(
                            "{at}.timeout: must be a positive duration, got {text:?}"
                        )));
                    }
                }
            }
            _ => unreachable!("checked against the allowed keys"),
        }
    }
    Ok(f)
}

/// Normalises a chart repository URL as Landscaper does: trim, strip one trailing `/`, prefix
/// `https://` when there is no scheme.
pub fn normalise_repo_url(url: &str) -> String {
    let url = url.trim();
    let url = url.strip_suffix('/').unwrap_or(url);
    if url.contains("://") {
        url.to_string()
    } else {
        format!("https://{url}")
    }
}

/// Decodes `spec.config`, defaults and validates it.
pub fn parse(raw: &Value) -> Result<Config, DeployerError> {
    let api_version = raw.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = raw.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != "ProviderConfiguration" || api_version != API_VERSION {
        return Err(parse_error(format!(
            "spec.config must be a {API_VERSION} ProviderConfiguration, got apiVersion {api_version:?} kind {kind:?}"
        )));
    }
    refuse_provider_kubeconfig(raw).map_err(parse_error)?;
    let c: Raw = decode_at(raw, "spec.config").map_err(parse_error)?;

    let chart = c.chart.unwrap_or_default();
    validate_chart(&chart)?;
    validate_release(&c.name, &c.namespace)?;
    let values = parse_values(c.values)?;
    if let Some(cr) = &c.continuous_reconcile {
        validate_continuous_reconcile(cr).map_err(|e| e.with_operation(INIT_OPERATION))?;
    }
    let deployment = deployment_config(c.helm_deployment_config.unwrap_or_default())?;
    validate_exports_from_manifests(&c.exports_from_manifests)?;
    let mut exports = c.exports.map(|e| e.exports).unwrap_or_default();
    exports.extend(c.exports_from_manifests);

    let config = Config {
        chart,
        name: c.name,
        namespace: c.namespace,
        create_namespace: c.create_namespace,
        values,
        helm_deployment: c.helm_deployment.unwrap_or(true),
        deployment,
        update_strategy: UpdateStrategy::parse(&c.update_strategy),
        readiness: c.readiness_checks,
        exports,
        deletion_groups: c.deletion_groups,
        deletion_groups_during_update: c.deletion_groups_during_update,
    };
    // Readiness checks, exports and deletion groups: the applier's validation.
    config
        .as_spec(Vec::new())
        .validate()
        .map_err(|e| e.with_operation(INIT_OPERATION))?;
    Ok(config)
}

/// The chart must come from somewhere, and each source must be complete.
fn validate_chart(chart: &Chart) -> Result<(), DeployerError> {
    let has = |o: &Option<String>| o.as_deref().is_some_and(|s| !s.trim().is_empty());
    if !has(&chart.r#ref)
        && chart.archive.is_none()
        && chart.helm_chart_repo.is_none()
        && chart.from_resource.is_none()
        && !has(&chart.resource_ref)
    {
        return Err(validation_error(
            "spec.config.chart: must not be empty: either ref, fromResource, helmChartRepo or resourceRef must be set".into(),
        ));
    }
    if let Some(a) = &chart.archive
        && !has(&a.raw)
        && a.remote.as_ref().is_none_or(|r| r.url.trim().is_empty())
    {
        return Err(validation_error(
            "spec.config.chart.archive: either raw or remote.url must be set".into(),
        ));
    }
    if let Some(r) = &chart.helm_chart_repo {
        for (field, value) in [
            ("helmChartRepoUrl", &r.helm_chart_repo_url),
            ("helmChartName", &r.helm_chart_name),
            ("helmChartVersion", &r.helm_chart_version),
        ] {
            if value.trim().is_empty() {
                return Err(validation_error(format!(
                    "spec.config.chart.helmChartRepo.{field}: Required value"
                )));
            }
        }
    }
    Ok(())
}

/// Release name and namespace are required; the name follows Helm's rule (a DNS-1123
/// subdomain of at most 53 characters).
fn validate_release(name: &str, namespace: &str) -> Result<(), DeployerError> {
    if name.trim().is_empty() {
        return Err(validation_error(
            "spec.config.name: Required value: the release name must not be empty".into(),
        ));
    }
    if namespace.trim().is_empty() {
        return Err(validation_error(
            "spec.config.namespace: Required value: the release namespace must not be empty".into(),
        ));
    }
    let name_ok = name.len() <= 53
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    if !name_ok {
        return Err(validation_error(format!(
            "spec.config.name: Invalid value: {name:?}: a Helm release name must be a lowercase DNS-1123 subdomain of at most 53 characters"
        )));
    }
    Ok(())
}

/// `spec.config.values`: an object (none, or `null`: `{}`).
fn parse_values(values: Option<Value>) -> Result<Value, DeployerError> {
    let values = values.unwrap_or_else(|| Value::Object(Map::new()));
    if !values.is_object() && !values.is_null() {
        return Err(DeployerError::configuration(
            "ParseHelmValues",
            format!("spec.config.values: must be an object of Helm values, got {values}"),
        )
        .with_operation(INIT_OPERATION));
    }
    Ok(if values.is_null() {
        Value::Object(Map::new())
    } else {
        values
    })
}

fn deployment_config(raw: RawDeploymentConfig) -> Result<DeploymentConfig, DeployerError> {
    Ok(DeploymentConfig {
        install: flags(
            "spec.config.helmDeploymentConfig.install",
            raw.install.as_ref(),
            &INSTALL_KEYS,
        )?,
        upgrade: flags(
            "spec.config.helmDeploymentConfig.upgrade",
            raw.upgrade.as_ref(),
            &INSTALL_KEYS,
        )?,
        uninstall: flags(
            "spec.config.helmDeploymentConfig.uninstall",
            raw.uninstall.as_ref(),
            &UNINSTALL_KEYS,
        )?,
    })
}

fn validate_exports_from_manifests(exports: &[Export]) -> Result<(), DeployerError> {
    for (i, e) in exports.iter().enumerate() {
        let at = format!("spec.config.exportsFromManifests[{i}]");
        if e.key.is_empty() {
            return Err(validation_error(format!("{at}.key: Required value")));
        }
        if e.json_path.is_empty() {
            return Err(validation_error(format!("{at}.jsonPath: Required value")));
        }
    }
    Ok(())
}

impl Config {
    /// The applier's view of this configuration with `manifests` to apply (template mode).
    pub fn as_spec(
        &self,
        manifests: Vec<manifest_applier::spec::Manifest>,
    ) -> manifest_applier::spec::Spec {
        manifest_applier::spec::Spec {
            update_strategy: self.update_strategy.clone(),
            readiness: self.readiness.clone(),
            manifests,
            exports: self
                .exports
                .iter()
                .filter(|e| e.from_resource.is_some())
                .cloned()
                .collect(),
            deletion_groups: self.deletion_groups.clone(),
            deletion_groups_during_update: self.deletion_groups_during_update.clone(),
        }
    }

    /// Exports read from the release's values (`jsonPath: .Values.x`, no `fromResource`).
    pub fn value_exports(&self) -> impl Iterator<Item = &Export> {
        self.exports.iter().filter(|e| e.from_resource.is_none())
    }
}

/// Where a job stands, so every step resumes from persisted state.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// The job this progress belongs to.
    #[serde(rename = "jobID", default)]
    pub job_id: String,
    /// `release` (the Helm action runs), `applied` (readiness next), `ready` (exports next),
    /// `done`.
    #[serde(default)]
    pub step: String,
    /// The Helm action's own resume state (release mode).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub action: Value,
    /// Exports read from the release values when the chart was rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_exports: Option<Value>,
    /// The failure of this job's first attempt, persisted with phase `Progressing` before it
    /// is reported (so a retried error shows `Progressing`, as in Landscaper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<DeployerError>,
}

/// ProviderStatus (contract 7.6).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    /// The managed objects: the workload kinds of the release (release mode), or every applied
    /// object with policies and uids (template mode).
    #[serde(default)]
    pub managed_resources: Vec<ManagedResource>,
    /// Release mode: the release's name, namespace and deployed revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ReleaseRef>,
    /// Resume marker of the running job (wasm-deployer extension; Landscaper ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
}

/// Which release a release-mode item owns.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRef {
    /// Release name.
    pub name: String,
    /// Release namespace.
    pub namespace: String,
    /// Deployed revision.
    #[serde(default)]
    pub revision: i64,
    /// Chart `name-version`.
    #[serde(default)]
    pub chart: String,
}

impl ProviderStatus {
    /// Decodes a previous status (empty → default).
    pub fn from_previous(raw: Option<&Value>) -> Result<ProviderStatus, DeployerError> {
        let Some(raw) = raw.filter(|v| v.as_object().is_some_and(|o| !o.is_empty())) else {
            return Ok(ProviderStatus::default());
        };
        decode_at(raw, "status.providerStatus").map_err(|m| {
            DeployerError::configuration("ParseProviderStatus", m).with_operation(INIT_OPERATION)
        })
    }

    /// As JSON, with `apiVersion` and `kind`.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("apiVersion".into(), API_VERSION.into());
            o.insert("kind".into(), "ProviderStatus".into());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "apiVersion": API_VERSION, "kind": "ProviderConfiguration",
            "name": "web", "namespace": "apps",
            "chart": {"archive": {"raw": "H4sI"}},
        })
    }

    fn with(patch: Value) -> Value {
        let mut v = base();
        for (k, x) in patch.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    #[test]
    fn a_v0_99_kubeconfig_in_the_configuration_is_refused_not_ignored() {
        let e = parse(&with(json!({"kubeconfig": "YXBpVmVyc2lvbjogdjE="}))).unwrap_err();
        assert_eq!(e.reason, "ParseProviderConfiguration");
        assert!(
            e.message.starts_with("spec.config.kubeconfig: "),
            "{}",
            e.message
        );
        assert!(e.is_unrecoverable());
        parse(&with(json!({"kubeconfig": ""}))).unwrap();
        parse(&with(json!({"kubeconfig": null}))).unwrap();
    }

    #[test]
    fn defaults_are_a_real_release_with_update_and_empty_values() {
        let c = parse(&base()).unwrap();
        assert!(c.helm_deployment);
        assert_eq!(c.values, json!({}));
        assert_eq!(c.deployment, DeploymentConfig::default());
        assert!(matches!(c.update_strategy, Ok(UpdateStrategy::Update)));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (json!({"chart": {}}), "spec.config.chart: must not be empty"),
            (json!({"name": ""}), "spec.config.name: Required value"),
            (
                json!({"namespace": ""}),
                "spec.config.namespace: Required value",
            ),
            (json!({"name": "Web_1"}), "spec.config.name: Invalid value"),
            (
                json!({"chart": {"archive": {}}}),
                "spec.config.chart.archive: either raw or remote.url",
            ),
            (
                json!({"chart": {"helmChartRepo": {"helmChartRepoUrl": "x", "helmChartName": "n"}}}),
                "helmChartRepo.helmChartVersion: Required value",
            ),
            (
                json!({"helmDeploymentConfig": {"install": {"recreate": true}}}),
                "spec.config.helmDeploymentConfig.install.recreate: Unsupported value",
            ),
            (
                json!({"helmDeploymentConfig": {"uninstall": {"atomic": true}}}),
                "uninstall.atomic: Unsupported value",
            ),
            (
                json!({"helmDeploymentConfig": {"upgrade": {"timeout": "soon"}}}),
                "spec.config.helmDeploymentConfig.upgrade.timeout",
            ),
            (
                json!({"values": [1]}),
                "spec.config.values: must be an object",
            ),
        ];
        for (patch, want) in cases {
            let e = parse(&with(patch.clone())).unwrap_err();
            assert!(e.message.contains(want), "{patch}: {}", e.message);
            assert!(e.is_unrecoverable(), "{patch}");
            assert_eq!(e.operation, INIT_OPERATION);
        }
    }

    #[test]
    fn deployment_flags_and_timeouts_are_read() {
        let c = parse(&with(json!({
            "helmDeployment": false,
            "helmDeploymentConfig": {
                "install": {"atomic": true, "wait": true, "timeout": "2m"},
                "upgrade": {"force": true, "takeOwnership": true, "skipSchemaValidation": true},
                "uninstall": {"wait": true},
            }
        })))
        .unwrap();
        assert!(!c.helm_deployment);
        assert!(c.deployment.install.atomic && c.deployment.install.wait);
        assert_eq!(c.deployment.install.timeout, Some(Duration::from_secs(120)));
        assert!(c.deployment.upgrade.force && c.deployment.upgrade.take_ownership);
        assert!(c.deployment.upgrade.skip_schema_validation);
        assert!(c.deployment.uninstall.wait);
    }

    #[test]
    fn repository_urls_are_normalised_as_landscaper_does() {
        assert_eq!(normalise_repo_url(" charts.io/x/ "), "https://charts.io/x");
        assert_eq!(
            normalise_repo_url("http://127.0.0.1:8/"),
            "http://127.0.0.1:8"
        );
    }

    #[test]
    fn deprecated_exports_from_manifests_are_appended() {
        let c = parse(&with(json!({
            "exports": {"exports": [{"key": "a", "jsonPath": ".Values.a"}]},
            "exportsFromManifests": [{"key": "b", "jsonPath": ".Values.b"}],
        })))
        .unwrap();
        let keys: Vec<_> = c.value_exports().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["a", "b"]);
    }
}
