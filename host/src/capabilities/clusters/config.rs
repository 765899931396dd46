//! `targetClusters:` in the host configuration: how many Target clusters the host keeps a client
//! for, when it lets them go, and how long it waits on one.
//!
//! Owns: parsing and defaults. Must not touch: the cache itself (`super::cache`).

use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;

use crate::landscaper::{GoDuration, parse_go_duration};

/// `targetClusters:` section (all optional; `docs/scaling.md` says how to size them).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetClustersConfig {
    /// Clients (one per distinct kubeconfig) kept at most; beyond it the least recently used
    /// one is released. Default 2000.
    pub max_clients: Option<usize>,
    /// A client unused this long is released. Default `10m`.
    pub idle_timeout: Option<String>,
    /// A kept-alive connection unused this long is closed. Default `60s`.
    pub connection_idle_timeout: Option<String>,
    /// TCP connect plus TLS handshake with a Target's API server. Default `10s`.
    pub connect_timeout: Option<String>,
    /// One Kubernetes call of a plugin, start to answer (the plugin's deadline bounds it too).
    /// Default `20s`.
    pub request_timeout: Option<String>,
    /// After a cluster could not be reached, calls to it fail at once for this long, doubling
    /// with each failed attempt up to `unreachableRetryMax`. Default `5s`.
    pub unreachable_retry: Option<String>,
    /// Longest wait between two attempts to reach a cluster. Default `1m`.
    pub unreachable_retry_max: Option<String>,
}

/// [`TargetClustersConfig`] with its defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSettings {
    pub max_clients: usize,
    pub idle_timeout: Duration,
    pub connection_idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub unreachable_retry: Duration,
    pub unreachable_retry_max: Duration,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            max_clients: 2000,
            idle_timeout: Duration::from_secs(600),
            connection_idle_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(20),
            unreachable_retry: Duration::from_secs(5),
            unreachable_retry_max: Duration::from_secs(60),
        }
    }
}

impl TargetClustersConfig {
    /// The settings, or what is wrong with a value.
    pub fn settings(&self) -> anyhow::Result<ClusterSettings> {
        let d = ClusterSettings::default();
        let duration = |key: &str, value: &Option<String>, default: Duration| match value {
            None => Ok(default),
            Some(text) => match parse_go_duration(text).map_err(anyhow::Error::msg) {
                Ok(GoDuration::Finite(v)) if !v.is_zero() => Ok(v),
                Ok(_) => Err(anyhow::anyhow!("must be a positive duration, got {text:?}")),
                Err(e) => Err(e),
            }
            .with_context(|| format!("targetClusters.{key}")),
        };
        let settings = ClusterSettings {
            max_clients: match self.max_clients {
                Some(0) => anyhow::bail!("targetClusters.maxClients must be at least 1"),
                Some(n) => n,
                None => d.max_clients,
            },
            idle_timeout: duration("idleTimeout", &self.idle_timeout, d.idle_timeout)?,
            connection_idle_timeout: duration(
                "connectionIdleTimeout",
                &self.connection_idle_timeout,
                d.connection_idle_timeout,
            )?,
            connect_timeout: duration("connectTimeout", &self.connect_timeout, d.connect_timeout)?,
            request_timeout: duration("requestTimeout", &self.request_timeout, d.request_timeout)?,
            unreachable_retry: duration(
                "unreachableRetry",
                &self.unreachable_retry,
                d.unreachable_retry,
            )?,
            unreachable_retry_max: duration(
                "unreachableRetryMax",
                &self.unreachable_retry_max,
                d.unreachable_retry_max,
            )?,
        };
        if settings.unreachable_retry_max < settings.unreachable_retry {
            anyhow::bail!("targetClusters.unreachableRetryMax must not be below unreachableRetry");
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(
            TargetClustersConfig::default().settings().unwrap(),
            ClusterSettings::default()
        );
        let config: TargetClustersConfig =
            serde_yaml::from_str("maxClients: 50\nidleTimeout: 30s\nrequestTimeout: 5s\n").unwrap();
        let s = config.settings().unwrap();
        assert_eq!(s.max_clients, 50);
        assert_eq!(s.idle_timeout, Duration::from_secs(30));
        assert_eq!(s.request_timeout, Duration::from_secs(5));
        assert_eq!(s.connect_timeout, Duration::from_secs(10));
    }

    #[test]
    fn bad_values_say_which_key() {
        let bad = |yaml: &str| {
            let c: TargetClustersConfig = serde_yaml::from_str(yaml).unwrap();
            format!("{:#}", c.settings().unwrap_err())
        };
        assert!(bad("maxClients: 0").contains("maxClients"));
        assert!(bad("idleTimeout: soon").contains("targetClusters.idleTimeout"));
        assert!(bad("connectTimeout: 0s").contains("positive"));
        assert!(bad("unreachableRetry: 2m").contains("unreachableRetryMax"));
        assert!(serde_yaml::from_str::<TargetClustersConfig>("maxClient: 3").is_err());
    }
}
