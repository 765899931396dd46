//! The container deployer's two configurations: the host's `container:` section (where pods run,
//! which images init/wait use, garbage collection) and a DeployItem's `ProviderConfiguration`
//! (`container.deployer.landscaper.gardener.cloud/v1alpha1`, contract section 9.1), with its
//! validation.
//!
//! Owns: parsing and validating both. Must not touch: the cluster.

use std::time::Duration;

use k8s_openapi::api::core::v1::ResourceRequirements;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::landscaper::{GoDuration, parse_go_duration};

/// API group of the provider configuration and status.
pub const GROUP: &str = "container.deployer.landscaper.gardener.cloud";
/// `apiVersion` of the provider configuration and status.
pub const API_VERSION: &str = "container.deployer.landscaper.gardener.cloud/v1alpha1";
/// The DeployItem type the container deployer takes.
pub const TYPE: &str = "landscaper.gardener.cloud/container";

/// Landscaper's default main image when neither the item nor the configuration names one.
const DEFAULT_MAIN_IMAGE: &str = "ubuntu:18.04";

/// One container's image and entry point (Landscaper's `ContainerSpec`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerSpec {
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub args: Option<Vec<String>>,
    #[serde(default)]
    pub image_pull_policy: Option<String>,
}

/// `container.garbageCollection`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GarbageCollectionConfig {
    /// Switch the collector off.
    #[serde(default)]
    pub disable: bool,
    /// How often it runs (Go duration). Default `1h` (Landscaper's `requeueTimeSeconds: 3600`).
    pub interval: Option<String>,
    /// Finished pods kept per DeployItem (the newest). Default 1.
    pub keep_pods: Option<usize>,
    /// Landscaper's key for `interval`, in seconds: accepted so a Landscaper configuration can be
    /// moved over as it is, with a deprecation line at start; `interval` wins when both are set.
    pub requeue_time_seconds: Option<u64>,
    /// Landscaper's number of collector workers: accepted and ignored (one collector runs per
    /// host), with a deprecation line at start.
    pub worker: Option<u32>,
}

impl GarbageCollectionConfig {
    /// The collector's interval: `interval`, else Landscaper's `requeueTimeSeconds`, else 1 h.
    fn interval(&self) -> anyhow::Result<Duration> {
        const KEY: &str = "container.garbageCollection";
        if let Some(workers) = self.worker {
            tracing::warn!(
                "{KEY}.worker ({workers}) is Landscaper's setting and is ignored: one collector runs per host"
            );
        }
        match (self.interval.as_deref(), self.requeue_time_seconds) {
            (Some(interval), Some(secs)) => {
                tracing::warn!(
                    "{KEY}.requeueTimeSeconds ({secs}) is deprecated and ignored: {KEY}.interval ({interval}) is set"
                );
                duration(&format!("{KEY}.interval"), Some(interval), Duration::ZERO)
            }
            (None, Some(0)) => {
                anyhow::bail!(
                    "{KEY}.requeueTimeSeconds must be a positive number of seconds, got 0"
                )
            }
            (None, Some(secs)) => {
                tracing::warn!(
                    "{KEY}.requeueTimeSeconds is deprecated: write `interval: {secs}s` instead"
                );
                Ok(Duration::from_secs(secs))
            }
            (interval, None) => duration(
                &format!("{KEY}.interval"),
                interval,
                Duration::from_secs(3600),
            ),
        }
    }
}

/// `container.debug`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DebugConfig {
    /// Never delete pods (only their finalizer is removed): for looking at them afterwards.
    #[serde(default)]
    pub keep_pod: bool,
}

/// The host configuration's `container:` section (Landscaper's container `Configuration`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerConfig {
    /// Run the container deployer at all. Default: true.
    pub enabled: Option<bool>,
    /// Namespace of the host cluster where pods (and their Secrets) are created. Default:
    /// `MY_POD_NAMESPACE`, else `default`.
    pub namespace: Option<String>,
    /// Image of the init and wait containers: the host's own image, which runs
    /// `deployer-host container init|wait`. Default: `$DEPLOYER_HOST_IMAGE`, else
    /// `deployer-host:<version>`.
    pub host_image: Option<String>,
    /// Overrides for the init container (image, command, args, pull policy).
    #[serde(default)]
    pub init_container: ContainerSpec,
    /// Overrides for the wait container.
    #[serde(default)]
    pub wait_container: ContainerSpec,
    /// Image used when an item names none. Default `ubuntu:18.04`, as Landscaper.
    #[serde(default)]
    pub default_image: ContainerSpec,
    /// Resources of the main container when the item sets none.
    pub default_resources: Option<ResourceRequirements>,
    /// How often a running pod is looked at. Default `5s`.
    pub poll_interval: Option<String>,
    /// How often the wait container polls its pod. Default `2s`.
    pub wait_poll_interval: Option<String>,
    #[serde(default)]
    pub garbage_collection: GarbageCollectionConfig,
    #[serde(default)]
    pub debug: DebugConfig,
}

/// The resolved `container:` section.
#[derive(Clone, Debug)]
pub struct Settings {
    pub namespace: String,
    /// `deployer-id` label value (the host's configured identity, possibly empty).
    pub identity: String,
    pub init: ContainerSpec,
    pub wait: ContainerSpec,
    pub default_image: ContainerSpec,
    pub default_resources: Option<ResourceRequirements>,
    pub poll_interval: Duration,
    pub wait_poll_interval: Duration,
    pub gc_interval: Option<Duration>,
    pub keep_pods: usize,
    pub keep_pod: bool,
}

fn duration(key: &str, value: Option<&str>, default: Duration) -> anyhow::Result<Duration> {
    match value {
        None => Ok(default),
        Some(s) => match parse_go_duration(s).map_err(|e| anyhow::anyhow!("{key}: {e}"))? {
            GoDuration::Finite(d) if !d.is_zero() => Ok(d),
            _ => anyhow::bail!("{key} must be a positive duration, got {s:?}"),
        },
    }
}

impl ContainerConfig {
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// Resolves defaults; `identity` is the host's configured identity (may be empty).
    pub fn settings(&self, identity: &str) -> anyhow::Result<Settings> {
        let namespace = self
            .namespace
            .clone()
            .or_else(|| std::env::var("MY_POD_NAMESPACE").ok())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let host_image = self
            .host_image
            .clone()
            .or_else(|| std::env::var("DEPLOYER_HOST_IMAGE").ok())
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| format!("deployer-host:{}", env!("CARGO_PKG_VERSION")));
        let runner = |spec: &ContainerSpec, program: &str| ContainerSpec {
            image: Some(spec.image.clone().unwrap_or_else(|| host_image.clone())),
            command: Some(spec.command.clone().unwrap_or_else(|| {
                vec!["deployer-host".into(), "container".into(), program.into()]
            })),
            args: spec.args.clone(),
            image_pull_policy: Some(
                spec.image_pull_policy
                    .clone()
                    .unwrap_or_else(|| "IfNotPresent".into()),
            ),
        };
        let mut default_image = self.default_image.clone();
        if default_image.image.is_none() {
            default_image.image = Some(DEFAULT_MAIN_IMAGE.into());
        }
        let gc = &self.garbage_collection;
        Ok(Settings {
            namespace,
            identity: identity.to_string(),
            init: runner(&self.init_container, "init"),
            wait: runner(&self.wait_container, "wait"),
            default_image,
            default_resources: self.default_resources.clone(),
            poll_interval: duration(
                "container.pollInterval",
                self.poll_interval.as_deref(),
                Duration::from_secs(5),
            )?,
            wait_poll_interval: duration(
                "container.waitPollInterval",
                self.wait_poll_interval.as_deref(),
                Duration::from_secs(2),
            )?,
            gc_interval: if gc.disable {
                None
            } else {
                Some(gc.interval()?)
            },
            keep_pods: gc.keep_pods.unwrap_or(1).max(1),
            keep_pod: self.debug.keep_pod,
        })
    }
}

/// A reference to a Secret in the Landscaper cluster (`registryPullSecrets`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

/// A DeployItem's `spec.config` (contract section 9.1).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfiguration {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Written verbatim to `IMPORTS_PATH`.
    #[serde(default)]
    pub import_values: Option<Value>,
    /// `{inline: <component descriptor>}` or `{ref: {...}}`.
    #[serde(default)]
    pub component_descriptor: Option<Value>,
    /// `{inline: {filesystem: {path: content}}}` or `{ref: {resourceName}}`.
    #[serde(default)]
    pub blueprint: Option<Value>,
    #[serde(default)]
    pub registry_pull_secrets: Vec<SecretRef>,
    /// Resources of the main container (an extension: Landscaper has none).
    #[serde(default)]
    pub resources: Option<ResourceRequirements>,
    /// Validated as in every deployer; the host's hook does the re-applying.
    #[serde(default)]
    pub continuous_reconcile: Option<Value>,
}

impl ProviderConfiguration {
    /// Landscaper's validation plus what this deployer cannot do yet. Each message names the
    /// field.
    pub fn validate(&self) -> Result<(), String> {
        if !self.api_version.is_empty() && self.api_version != API_VERSION {
            return Err(format!(
                "spec.config.apiVersion: {:?} is not supported, expected {API_VERSION:?}",
                self.api_version
            ));
        }
        if !self.kind.is_empty() && self.kind != "ProviderConfiguration" {
            return Err(format!(
                "spec.config.kind: {:?} is not supported, expected \"ProviderConfiguration\"",
                self.kind
            ));
        }
        if let Some(image) = &self.image
            && (image.trim().is_empty() || image.chars().any(char::is_whitespace))
        {
            return Err(format!(
                "spec.config.image: {image:?} is not an image reference"
            ));
        }
        for (i, s) in self.registry_pull_secrets.iter().enumerate() {
            if s.name.is_empty() {
                return Err(format!(
                    "spec.config.registryPullSecrets[{i}].name: Required value"
                ));
            }
            if s.namespace.is_empty() {
                return Err(format!(
                    "spec.config.registryPullSecrets[{i}].namespace: Required value"
                ));
            }
        }
        if let Some(cd) = &self.component_descriptor {
            match (cd.get("inline"), cd.get("ref")) {
                (Some(inline), None) if inline.is_object() => {}
                (None, Some(r)) => {
                    for field in ["componentName", "version"] {
                        if r[field].as_str().is_none_or(str::is_empty) {
                            return Err(format!(
                                "spec.config.componentDescriptor.ref.{field}: Required value"
                            ));
                        }
                    }
                }
                _ => {
                    return Err(
                        "spec.config.componentDescriptor: exactly one of inline (an object) or ref must be set"
                            .into(),
                    );
                }
            }
        }
        if let Some(bp) = &self.blueprint {
            match (bp.get("inline"), bp.get("ref")) {
                (Some(inline), None) => {
                    let fs = inline.get("filesystem").ok_or(
                        "spec.config.blueprint.inline.filesystem: Required value".to_string(),
                    )?;
                    check_filesystem(fs, "spec.config.blueprint.inline.filesystem")?;
                }
                (None, Some(r)) => {
                    if r["resourceName"].as_str().is_none_or(str::is_empty) {
                        return Err("spec.config.blueprint.ref.resourceName: Required value".into());
                    }
                    if self
                        .component_descriptor
                        .as_ref()
                        .and_then(|c| c.get("ref"))
                        .is_none()
                    {
                        return Err("spec.config.blueprint.ref: the blueprint is a resource of the component version componentDescriptor.ref names, and there is none".into());
                    }
                }
                _ => {
                    return Err(
                        "spec.config.blueprint: exactly one of inline or ref must be set".into(),
                    );
                }
            }
        }
        if let Some(cr) = &self.continuous_reconcile {
            let cron = cr.get("cron").and_then(Value::as_str).unwrap_or_default();
            let every = cr.get("every").and_then(Value::as_str).unwrap_or_default();
            if !cron.is_empty() && !every.is_empty() {
                return Err(
                    "spec.config.continuousReconcile: only one of cron and every may be set".into(),
                );
            }
            if !every.is_empty() {
                parse_go_duration(every)
                    .map_err(|e| format!("spec.config.continuousReconcile.every: {e}"))?;
            }
        }
        Ok(())
    }

    /// The main container's image: the item's, else the configured default.
    pub fn main_image(&self, settings: &Settings) -> String {
        self.image
            .clone()
            .or_else(|| settings.default_image.image.clone())
            .unwrap_or_else(|| DEFAULT_MAIN_IMAGE.into())
    }
}

/// A blueprint filesystem: a JSON object whose values are file contents (strings) or
/// directories (objects). Paths must stay inside the content directory.
pub fn check_filesystem(fs: &Value, at: &str) -> Result<(), String> {
    let Some(map) = fs.as_object() else {
        return Err(format!("{at}: must be an object of file names to contents"));
    };
    for (name, value) in map {
        let bad = name.is_empty()
            || name == "."
            || name.split('/').any(|p| p == "..")
            || name.starts_with('/');
        if bad {
            return Err(format!(
                "{at}: {name:?} is not a relative path inside the blueprint"
            ));
        }
        match value {
            Value::String(_) => {}
            Value::Object(_) => check_filesystem(value, &format!("{at}.{name}"))?,
            _ => {
                return Err(format!(
                    "{at}.{name}: must be a string (file content) or an object (directory)"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(v: Value) -> ProviderConfiguration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn landscapers_example_validates() {
        let c = config(json!({
            "apiVersion": API_VERSION, "kind": "ProviderConfiguration",
            "image": "alpine:3.19", "command": ["sh", "-c"], "args": ["echo hi"],
            "importValues": {"a": 1},
            "componentDescriptor": {"inline": {"meta": {"schemaVersion": "v2"}, "component": {}}},
            "blueprint": {"inline": {"filesystem": {"blueprint.yaml": "x", "data": {"a.txt": "y"}}}},
            "registryPullSecrets": [{"name": "s", "namespace": "ls"}],
            "continuousReconcile": {"every": "1h"}
        }));
        c.validate().unwrap();
    }

    #[test]
    fn every_broken_field_is_named() {
        let cases = [
            (
                json!({"apiVersion": "container.deployer.landscaper.gardener.cloud/v2"}),
                "spec.config.apiVersion",
            ),
            (json!({"image": "has space"}), "spec.config.image"),
            (
                json!({"registryPullSecrets": [{"name": "s"}]}),
                "registryPullSecrets[0].namespace",
            ),
            (
                json!({"componentDescriptor": {"ref": {"componentName": "x"}}}),
                "componentDescriptor.ref.version: Required value",
            ),
            (
                json!({"componentDescriptor": {"inline": "x"}}),
                "exactly one",
            ),
            (
                json!({"blueprint": {"ref": {"resourceName": "bp"}}}),
                "componentDescriptor.ref names, and there is none",
            ),
            (
                json!({"blueprint": {"inline": {"filesystem": {"../x": "a"}}}}),
                "relative path",
            ),
            (
                json!({"blueprint": {"inline": {"filesystem": {"a": 1}}}}),
                "filesystem.a",
            ),
            (
                json!({"continuousReconcile": {"every": "soon"}}),
                "continuousReconcile.every",
            ),
        ];
        for (value, needle) in cases {
            let err = config(value.clone()).validate().unwrap_err();
            assert!(err.contains(needle), "{value}: {err}");
        }
    }

    #[test]
    fn settings_default_to_landscapers_values_and_the_host_image() {
        let s = ContainerConfig {
            namespace: Some("deployer".into()),
            host_image: Some("reg/deployer-host:1".into()),
            ..Default::default()
        }
        .settings("id")
        .unwrap();
        assert_eq!(s.namespace, "deployer");
        assert_eq!(s.init.image.as_deref(), Some("reg/deployer-host:1"));
        assert_eq!(
            s.wait.command,
            Some(vec![
                "deployer-host".into(),
                "container".into(),
                "wait".into()
            ])
        );
        assert_eq!(s.default_image.image.as_deref(), Some("ubuntu:18.04"));
        assert_eq!(s.gc_interval, Some(Duration::from_secs(3600)));
        assert_eq!(s.keep_pods, 1);
        let bad = ContainerConfig {
            poll_interval: Some("0s".into()),
            ..Default::default()
        };
        assert!(bad.settings("").is_err());
    }

    /// Migration: Landscaper's container deployer configuration names the collector's interval
    /// `requeueTimeSeconds` and its workers `worker`; a host given that configuration as it is
    /// starts (with a deprecation line), and the interval means the same.
    #[test]
    fn landscapers_garbage_collection_keys_are_accepted() {
        let parse = |yaml: &str| serde_yaml::from_str::<ContainerConfig>(yaml).unwrap();
        let landscaper = parse("garbageCollection: {worker: 5, requeueTimeSeconds: 600}");
        let s = landscaper.settings("").unwrap();
        assert_eq!(s.gc_interval, Some(Duration::from_secs(600)));
        let both = parse("garbageCollection: {interval: 2m, requeueTimeSeconds: 600}");
        assert_eq!(
            both.settings("").unwrap().gc_interval,
            Some(Duration::from_secs(120))
        );
        let zero = parse("garbageCollection: {requeueTimeSeconds: 0}");
        let err = zero.settings("").unwrap_err().to_string();
        assert!(err.contains("requeueTimeSeconds"), "{err}");
        assert!(
            serde_yaml::from_str::<ContainerConfig>("garbageCollection: {workers: 5}").is_err()
        );
    }
}
