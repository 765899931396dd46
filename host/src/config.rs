//! Host configuration: who this deployer is (`status.deployer`), which items it takes
//! (namespace, target selectors), how many workers run, and the plugins' limits.
//!
//! Read from a YAML file (`--config`), then overridden by command-line flags. Unknown keys are
//! rejected so a typo never silently changes behaviour. Only parsing and validation live here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;

use crate::landscaper::{DeployerInformation, GoDuration, parse_go_duration};
use crate::targetselector::{self, TargetSelector};

pub use crate::limits::{Limits, LimitsConfig};

/// Default deployer name written to `status.deployer.name`.
pub const DEFAULT_NAME: &str = "wasm-deployer";

/// Which events the host publishes (`events:` in the configuration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EventMode {
    /// Pickup, finish and errors.
    All,
    /// Only errors (Warning events), as Landscaper's deployer library does: the default, so
    /// that replacing Landscaper's Go deployers adds no Events (and no API writes) per job.
    #[default]
    Errors,
    /// No events.
    None,
}

/// What the DeployItem watch keeps of each item (`itemCache:` in the configuration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ItemCache {
    /// Metadata only (the default): memory does not grow with the items' specs (inline charts,
    /// manifests), and an item that may need work is read once per reconcile.
    #[default]
    Metadata,
    /// Every item in full (spec and status, without managedFields), as controller-runtime's
    /// cache holds them for Landscaper's Go deployers: no read per reconcile, for the memory of
    /// every item.
    Full,
}

/// The configuration file (`--config`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostConfig {
    /// `status.deployer.identity`. Default: `<name>-<unix seconds at start-up>`.
    pub identity: Option<String>,
    /// `status.deployer.name`. Default: `wasm-deployer`.
    pub name: Option<String>,
    /// Only watch DeployItems in this namespace. Default: all namespaces.
    pub namespace: Option<String>,
    /// Only take items whose Target matches one of these selectors (OR). Default: every target.
    #[serde(default)]
    pub target_selectors: Vec<TargetSelector>,
    /// Concurrent reconciles. Default: 10.
    pub workers: Option<usize>,
    /// How often an unfinished job is polled. Default: `5s` (Landscaper's value).
    pub requeue_interval: Option<String>,
    /// Kubernetes Events on DeployItems: `all` (pickup, finish, errors), `errors` (default: a
    /// Warning per error, as Landscaper's deployers), `none`.
    pub events: Option<EventMode>,
    /// What the DeployItem watch keeps: `metadata` (default) or `full` (`docs/configuration.md`).
    #[serde(default)]
    pub item_cache: ItemCache,
    /// Plugin loading and limits.
    #[serde(default)]
    pub plugins: PluginsConfig,
    /// Horizontal scaling: locking is on by default iff `hpa.maxReplicas > 1`.
    #[serde(default)]
    pub hpa: HpaConfig,
    /// SyncObject locking.
    #[serde(default)]
    pub locking: LockingConfig,
    /// Extension hooks, in execution order (`docs/hooks.md`). Default: none (`dev`: the
    /// `continuous-reconcile` hook for every type, if that plugin is loaded).
    pub hooks: Option<Vec<HookRegistration>>,
    /// The native container deployer (`docs/container-deployer.md`).
    #[serde(default)]
    pub container: crate::container::ContainerConfig,
    /// Downloads plugins may ask for (WIT `fetch`: the helm deployer's charts): allowlist,
    /// plain-HTTP and insecure registries, size limit, timeout, cache.
    #[serde(default)]
    pub fetch: crate::capabilities::FetchConfig,
    /// Outgoing HTTP of plugins (WIT 1.5, `wasi:http`): URL prefixes every plugin may reach
    /// besides its `http-api` Targets, timeouts, response cap, requests in flight
    /// (`docs/plugins/http.md`).
    #[serde(default)]
    pub http: crate::capabilities::HttpConfig,
    /// The host's own CRD (`WasmPlugin`), kept up to date at start (`crate::crds`).
    #[serde(default)]
    pub crd_management: CrdManagement,
    /// Clients of Target clusters: how many are kept, when they are released, how long a call
    /// may wait on a cluster (`docs/scaling.md`).
    #[serde(default)]
    pub target_clusters: crate::capabilities::TargetClustersConfig,
}

/// `crdManagement:` — as Landscaper's `crdManagement` (`docs/install.md`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrdManagement {
    /// `deployer-host run` creates the WasmPlugin CRD when missing and replaces it when the
    /// installed one has a lower revision. Default: true.
    pub deploy_crd: Option<bool>,
}

impl CrdManagement {
    pub fn deploy_crd(&self) -> bool {
        self.deploy_crd.unwrap_or(true)
    }
}

/// One entry of `hooks:`: run a hook plugin for some DeployItem types.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookRegistration {
    /// The hook plugin's name (as its `hooks.describe` names it).
    pub plugin: String,
    /// DeployItem types it runs for; empty or `*` = every type.
    #[serde(default)]
    pub deploy_item_types: Vec<String>,
    /// Hook types it runs at (Landscaper's names); a subset of those the plugin declares.
    /// Empty = all it declares.
    #[serde(default)]
    pub hook_types: Vec<String>,
}

/// `hpa:` section: how many replicas may run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HpaConfig {
    pub max_replicas: Option<u32>,
}

/// `locking:` section.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LockingConfig {
    /// Force locking on or off. Default: on iff `hpa.maxReplicas > 1`.
    pub enabled: Option<bool>,
    /// SyncObject name prefix (controller identifier). Default: the deployer name.
    pub prefix: Option<String>,
    /// Wait before retrying an item locked by another live replica. Default `1m`.
    pub retry_after: Option<String>,
    /// How long the list of replica pods is trusted. Default `1m`.
    pub pod_cache_timeout: Option<String>,
    /// Interval of the orphaned-SyncObject cleanup. Default `3h`; `none` disables it.
    pub cleanup_interval: Option<String>,
    /// Split the items among the live replicas by Leases (`crate::membership`), so that only
    /// one replica tries each job's lock. Default on (with locking, where the pod name is
    /// known); `false`: every replica races for every lock, as Landscaper's deployers do.
    pub membership: Option<bool>,
    /// How long a replica's Lease counts without a renewal (renewed every third of it).
    /// Default `15s`.
    pub lease_duration: Option<String>,
}

/// `plugins:` section of the configuration.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginsConfig {
    /// Directory of `.wasm` components. Default: `target/plugins`.
    pub dir: Option<PathBuf>,
    /// Directory for compiled artifacts. Default: `<dir>/.cache`.
    pub cache_dir: Option<PathBuf>,
    /// Limits for every plugin.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Limits per plugin name (as the plugin's `describe` names itself).
    #[serde(default)]
    pub per_plugin: BTreeMap<String, LimitsConfig>,
    /// Plugins from ConfigMaps or OCI registries, by name (a static list for development and
    /// offline use; `WasmPlugin` objects declare them in the cluster).
    #[serde(default)]
    pub sources: BTreeMap<String, crate::plugin_sources::PluginSpec>,
    /// Namespace of `WasmPlugin` objects and of the ConfigMaps and Secrets they name. Default:
    /// `MY_POD_NAMESPACE`, else `default`.
    pub namespace: Option<String>,
    /// Watch `WasmPlugin` objects. Default: true.
    pub watch_objects: Option<bool>,
    /// Load every `binaryData` key of the ConfigMaps matching this label selector (in
    /// `plugins.namespace`) as a plugin, e.g. `wasm-deployer.dev/plugins=true`.
    pub config_map_selector: Option<String>,
    /// Keys every dynamic plugin must be signed with (a `WasmPlugin` may name its own).
    #[serde(default)]
    pub verification: crate::plugin_sources::VerificationSpec,
    /// How often OCI tags are resolved again (and everything re-checked). Default `1m`.
    pub poll_interval: Option<String>,
    /// Plugin instances that may live at once in the pooling allocator (address space reserved
    /// up front: 4 GiB per memory). Default 256; 0 allocates each instance on demand, for hosts
    /// whose address space is costly (user-mode emulation such as qemu-user, sandboxes).
    pub instance_slots: Option<usize>,
}

impl HostConfig {
    /// Reads and validates a configuration file.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading configuration {}", path.display()))?;
        let config: HostConfig = serde_yaml::from_str(&text)
            .with_context(|| format!("parsing configuration {}", path.display()))?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        targetselector::validate(&self.target_selectors).context("targetSelectors")?;
        self.requeue_interval()?;
        self.fetch.validate()?;
        self.http.validate()?;
        self.target_clusters.settings()?;
        self.plugins.limits.resolve(Limits::default())?;
        for (name, l) in &self.plugins.per_plugin {
            l.resolve(Limits::default())
                .with_context(|| format!("plugins.perPlugin.{name}"))?;
        }
        for (name, spec) in &self.plugins.sources {
            spec.validate()
                .map_err(|e| anyhow::anyhow!("plugins.sources.{name}: {e}"))?;
        }
        if let Some(p) = &self.plugins.poll_interval {
            parse_go_duration(p).map_err(|e| anyhow::anyhow!("plugins.pollInterval: {e}"))?;
        }
        for (key, value) in [
            ("locking.retryAfter", &self.locking.retry_after),
            ("locking.podCacheTimeout", &self.locking.pod_cache_timeout),
            ("locking.cleanupInterval", &self.locking.cleanup_interval),
            ("locking.leaseDuration", &self.locking.lease_duration),
        ] {
            if let Some(v) = value {
                parse_go_duration(v).map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
            }
        }
        self.container
            .settings(self.identity.as_deref().unwrap_or_default())
            .context("container")?;
        if self.workers == Some(0) {
            anyhow::bail!("workers must be at least 1");
        }
        Ok(())
    }

    /// Locking is on whenever more than one replica may run (or when forced).
    pub fn locking_enabled(&self) -> bool {
        self.locking
            .enabled
            .unwrap_or(self.hpa.max_replicas.unwrap_or(1) > 1)
    }

    /// The lock configuration for this replica (pod identity from `MY_POD_NAME` /
    /// `MY_POD_NAMESPACE`).
    pub fn lock_config(&self) -> crate::locking::LockConfig {
        let prefix = self
            .locking
            .prefix
            .clone()
            .or_else(|| self.name.clone())
            .unwrap_or_else(|| DEFAULT_NAME.to_string());
        let mut lock = crate::locking::LockConfig::from_env(&prefix);
        let dur = |s: &Option<String>, default: Duration| match s.as_deref().map(parse_go_duration)
        {
            Some(Ok(GoDuration::Finite(d))) => d,
            _ => default,
        };
        lock.retry_after = dur(&self.locking.retry_after, lock.retry_after);
        lock.pod_cache_timeout = dur(&self.locking.pod_cache_timeout, lock.pod_cache_timeout);
        lock
    }

    /// The replica membership of this host (`None`: off, no locking, or no pod name to hold a
    /// Lease by).
    pub fn membership_config(&self) -> Option<crate::membership::MembershipConfig> {
        if !self.locking_enabled() || self.locking.membership == Some(false) {
            return None;
        }
        let lock = self.lock_config();
        if lock.pod_name == crate::locking::NO_POD_NAME {
            return None;
        }
        let lease_duration = match self
            .locking
            .lease_duration
            .as_deref()
            .map(parse_go_duration)
        {
            Some(Ok(GoDuration::Finite(d))) if !d.is_zero() => d,
            _ => crate::membership::DEFAULT_LEASE_DURATION,
        };
        Some(crate::membership::MembershipConfig {
            prefix: lock.prefix,
            pod_name: lock.pod_name,
            namespace: lock.pod_namespace,
            lease_duration,
        })
    }

    /// Interval of the SyncObject cleanup; `None` = disabled.
    pub fn cleanup_interval(&self) -> Option<Duration> {
        match self
            .locking
            .cleanup_interval
            .as_deref()
            .map(parse_go_duration)
        {
            None => Some(Duration::from_secs(3 * 3600)),
            Some(Ok(GoDuration::Finite(d))) if !d.is_zero() => Some(d),
            _ => None,
        }
    }

    pub fn workers(&self) -> usize {
        self.workers.unwrap_or(10)
    }

    pub fn requeue_interval(&self) -> anyhow::Result<Duration> {
        match self.requeue_interval.as_deref() {
            None => Ok(Duration::from_secs(5)),
            Some(s) => match parse_go_duration(s).map_err(anyhow::Error::msg)? {
                GoDuration::Finite(d) if !d.is_zero() => Ok(d),
                _ => anyhow::bail!("requeueInterval must be a positive duration, got {s:?}"),
            },
        }
    }

    /// The triple written to `status.deployer`.
    pub fn deployer_information(&self) -> DeployerInformation {
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| DEFAULT_NAME.to_string());
        let identity = self.identity.clone().unwrap_or_else(|| {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            format!("{name}-{secs}")
        });
        DeployerInformation {
            identity,
            name,
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    pub fn plugins_dir(&self) -> PathBuf {
        self.plugins
            .dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("target/plugins"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_configuration_parses() {
        let yaml = r#"
identity: my-host
name: wasm-deployer
namespace: landscaper
workers: 4
requeueInterval: 2s
targetSelectors:
  - annotations:
      - key: somekey
        operator: "="
        values: [do]
plugins:
  dir: /plugins
  limits: {deadline: 10s, memoryMib: 32}
  perPlugin:
    helm: {deadline: 2m, memoryMib: 256}
"#;
        let c: HostConfig = serde_yaml::from_str(yaml).unwrap();
        c.validate().unwrap();
        assert_eq!(c.workers(), 4);
        assert_eq!(c.requeue_interval().unwrap(), Duration::from_secs(2));
        let base = c.plugins.limits.resolve(Limits::default()).unwrap();
        assert_eq!(
            base,
            Limits {
                deadline: Duration::from_secs(10),
                memory_bytes: 32 << 20
            }
        );
        let helm = c.plugins.per_plugin["helm"].resolve(base).unwrap();
        assert_eq!(helm.deadline, Duration::from_secs(120));
        assert_eq!(c.deployer_information().identity, "my-host");
    }

    #[test]
    fn typos_and_bad_values_are_rejected() {
        assert!(serde_yaml::from_str::<HostConfig>("workerz: 3").is_err());
        let c: HostConfig = serde_yaml::from_str("requeueInterval: soon").unwrap();
        assert!(c.validate().is_err());
        let c: HostConfig = serde_yaml::from_str(
            "targetSelectors: [{labels: [{key: a, operator: in, values: []}]}]",
        )
        .unwrap();
        assert!(c.validate().is_err());
    }

    #[test]
    fn default_identity_is_name_and_start_time() {
        let info = HostConfig::default().deployer_information();
        assert_eq!(info.name, "wasm-deployer");
        assert!(info.identity.starts_with("wasm-deployer-"));
        assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    }
}
