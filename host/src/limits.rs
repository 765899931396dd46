//! Limits of plugin invocations (deadline, memory), as the host configuration and a plugin's
//! declaration (`WasmPlugin.spec.limits`) give them, and resolved over the host's defaults.
//!
//! Owns: parsing and resolving limits. Must not touch: enforcing them (the runtime's).

use std::time::Duration;

use serde::Deserialize;

use crate::landscaper::{GoDuration, parse_go_duration};

/// Limits of one plugin invocation.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsConfig {
    /// Wall-clock deadline of one call (Go duration). Default: `30s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// Memory cap per instance in MiB. Default: 64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
}

/// Resolved limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub deadline: Duration,
    pub memory_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(30),
            memory_bytes: 64 << 20,
        }
    }
}

impl LimitsConfig {
    /// Applies these settings over `base`.
    pub fn resolve(&self, base: Limits) -> anyhow::Result<Limits> {
        let deadline = match self.deadline.as_deref() {
            None => base.deadline,
            Some(s) => match parse_go_duration(s).map_err(anyhow::Error::msg)? {
                GoDuration::Finite(d) if !d.is_zero() => d,
                _ => anyhow::bail!("plugin deadline must be a positive duration, got {s:?}"),
            },
        };
        let memory_bytes = match self.memory_mib {
            None => base.memory_bytes,
            Some(0) => anyhow::bail!("plugin memoryMib must be positive"),
            Some(m) => m << 20,
        };
        Ok(Limits {
            deadline,
            memory_bytes,
        })
    }
}
