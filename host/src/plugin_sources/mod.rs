//! Plugin sources: where the host's wasm plugins come from besides its plugin directory —
//! ConfigMaps and OCI registries — and how a fetched plugin earns trust before it is compiled.
//!
//! ```text
//! WasmPlugin objects ─┐                                   ┌─ Fetched  (ConfigMap / OCI pull)
//! config `plugins.    ├─► catalog: per declared plugin ──►├─ Verified (digest pin, signature)
//!   sources` (static) ┘   (on change / every poll)        ├─ Compiled (imports checked, describe)
//!                                                         └─ Ready    (no type clash) ─► swap
//! ```
//!
//! A bad new version is refused and the last good one keeps serving; a removed plugin stops
//! claiming its types. Conditions go to the `WasmPlugin` status, the log, an Event and the
//! metrics (`catalog`).
//!
//! Owns: fetching, trusting and swapping dynamic plugins. Must not touch: how plugins run (the
//! runtime) or the DeployItem contract.

pub mod catalog;
pub mod configmap;
pub mod declarations;
pub mod live;
pub mod trust;

use serde::{Deserialize, Serialize};

use crate::limits::LimitsConfig;
use crate::oci;

/// API group and version of the `WasmPlugin` CRD.
pub const GROUP: &str = "wasm-deployer.dev";
pub const VERSION: &str = "v1alpha1";

/// Where one plugin's component comes from (exactly one).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciSource>,
}

/// A ConfigMap key holding the component in `binaryData` (raw or gzip).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMapSource {
    pub name: String,
    /// Default: the namespace of the declaration (the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Default: the only `binaryData` key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// An OCI artifact (tag or digest reference).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OciSource {
    /// `registry/repository:tag` or `registry/repository@sha256:...`.
    pub reference: String,
    /// Speak plain HTTP to this registry (never by default).
    #[serde(default)]
    pub plain_http: bool,
    /// `kubernetes.io/dockerconfigjson` Secrets (namespace of the declaration).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets: Vec<String>,
}

/// A Secret key holding PEM public keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyRef {
    pub name: String,
    #[serde(default = "default_key_name")]
    pub key: String,
}

fn default_key_name() -> String {
    "cosign.pub".into()
}

/// Signature verification of one plugin: with keys, an unsigned or wrongly signed plugin is
/// refused.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerificationSpec {
    /// PEM public key(s) (ECDSA P-256, as `cosign.pub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// Or from a Secret (namespace of the declaration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key_secret: Option<SecretKeyRef>,
}

/// One declared plugin: the spec of a `WasmPlugin`, or an entry of `plugins.sources`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSpec {
    pub source: SourceSpec,
    /// `sha256:<hex>` of the component: anything else is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default)]
    pub verification: VerificationSpec,
    /// Limits of this plugin's calls (default: the host's `plugins.limits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsConfig>,
    /// Where this plugin's extension hooks run (it must export `hooks`), after the host's own
    /// `hooks:` in execution order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookWiring>,
}

/// One place a hook plugin runs: for which DeployItem types, at which hook types.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookWiring {
    /// Empty or `*`: every type.
    #[serde(default)]
    pub deploy_item_types: Vec<String>,
    /// Landscaper's hook type names; empty: every type the plugin declares.
    #[serde(default)]
    pub hook_types: Vec<String>,
}

impl PluginSpec {
    /// The spec's own mistakes, before anything is fetched.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.source.config_map, &self.source.oci) {
            (Some(_), Some(_)) | (None, None) => {
                return Err("source: exactly one of configMap and oci must be set".into());
            }
            (None, Some(o)) => {
                oci::parse(&o.reference).map_err(|e| format!("source.oci.reference: {e:#}"))?;
            }
            (Some(c), None) if c.name.is_empty() => {
                return Err("source.configMap.name: Required value".into());
            }
            _ => {}
        }
        if let Some(limits) = &self.limits {
            limits
                .resolve(crate::limits::Limits::default())
                .map_err(|e| format!("limits: {e}"))?;
        }
        Ok(())
    }
}
