//! The catalog of dynamic plugins: for each declared plugin (a `WasmPlugin` object or an entry
//! of `plugins.sources`) it fetches, verifies and compiles the component when its source
//! changed, keeps the last good version, and swaps the host's serving set ([`LivePlugins`])
//! when the set of good plugins changed.
//!
//! Conditions, as a Deployment separates `Available` from `Progressing`: `Ready` says whether
//! the plugin serves (a version of it — the newest, or the last good one); `UpToDate` whether
//! the newest version is the one serving (`False`, with the refusal's reason and message,
//! when it was refused). `Fetched`, `Verified` and `Compiled` follow the newest version on its
//! way in: `False` at the step that refused it, `Unknown` after. So a refused update of a
//! serving plugin reads `Ready=True, UpToDate=False` in `kubectl get wasmplugins`.
//!
//! Owns: the state of every declared plugin and the swap. Must not touch: the DeployItem
//! contract; a plugin in flight finishes on the version it started with.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use plugin_runtime::{DeployerPlugin, HookPlugin, PluginRegistry, PluginRuntime, WasmPlugin};
use serde::{Deserialize, Serialize};

use super::live::LivePlugins;
use super::{PluginSpec, configmap, trust};
use crate::limits::Limits;
use crate::oci;

/// The four steps of a plugin's way in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Fetched,
    Verified,
    Compiled,
    Ready,
}

impl Stage {
    pub const ALL: [Stage; 4] = [
        Stage::Fetched,
        Stage::Verified,
        Stage::Compiled,
        Stage::Ready,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Fetched => "Fetched",
            Stage::Verified => "Verified",
            Stage::Compiled => "Compiled",
            Stage::Ready => "Ready",
        }
    }
}

/// Condition type: the newest declared version is the one serving.
pub const UP_TO_DATE: &str = "UpToDate";

/// A condition of a `WasmPlugin`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    /// When `status` last changed (RFC 3339, seconds): `kubectl describe` tells since when a
    /// plugin serves, or since when its newest version is refused.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_transition_time: String,
}

/// The status of one declared plugin (the `WasmPlugin` status). Every field is always written,
/// so a merge patch clears what no longer holds.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    pub conditions: Vec<Condition>,
    /// `sha256:` of the component serving now (the last good one).
    #[serde(default)]
    pub digest: String,
    #[serde(default)]
    pub plugin_name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub types: Vec<String>,
    #[serde(default)]
    pub hook_types: Vec<String>,
    /// The `wasm-deployer:plugin` WIT version the plugin was built against.
    #[serde(default)]
    pub wit_version: String,
    /// Why the newest version is not serving (empty when it is).
    #[serde(default)]
    pub last_error: String,
    #[serde(default)]
    pub observed_generation: Option<i64>,
}

impl PluginStatus {
    pub fn condition(&self, stage: Stage) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == stage.as_str())
    }

    /// A version of the plugin serves (condition `Ready`).
    pub fn is_ready(&self) -> bool {
        self.condition(Stage::Ready)
            .is_some_and(|c| c.status == "True")
    }

    /// The condition `UpToDate`.
    pub fn up_to_date(&self) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == UP_TO_DATE)
    }

    /// The newest version serves (condition `UpToDate`).
    pub fn is_up_to_date(&self) -> bool {
        self.up_to_date().is_some_and(|c| c.status == "True")
    }

    /// Keeps `previous`'s `lastTransitionTime` of every condition whose status did not change
    /// (the host restarted, or the condition was set again).
    pub fn keep_transition_times(&mut self, previous: &PluginStatus) {
        for c in &mut self.conditions {
            if let Some(p) = previous
                .conditions
                .iter()
                .find(|p| p.type_ == c.type_ && p.status == c.status)
                .filter(|p| !p.last_transition_time.is_empty())
            {
                c.last_transition_time = p.last_transition_time.clone();
            }
        }
    }

    /// The conditions after a sync: `failed` is the newest version's refusal (`None`: it
    /// serves), `serving` whether a version of the plugin serves (the last good one, if the
    /// newest was refused).
    fn set(&mut self, failed: Option<(Stage, &str, String)>, serving: bool) {
        self.set_at(failed, serving, &crate::clock::now());
    }

    /// [`PluginStatus::set`] at `now` (a condition whose status changes transitions at `now`).
    fn set_at(&mut self, failed: Option<(Stage, &str, String)>, serving: bool, now: &str) {
        let condition = |type_: &str, status: &str, reason: &str, message: String| Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time: now.into(),
        };
        let mut conditions: Vec<Condition> = [Stage::Fetched, Stage::Verified, Stage::Compiled]
            .iter()
            .map(|&stage| match &failed {
                Some((at, reason, message)) if *at == stage => {
                    condition(stage.as_str(), "False", reason, message.clone())
                }
                Some((at, ..)) if *at < stage => {
                    condition(stage.as_str(), "Unknown", "NotReached", String::new())
                }
                _ => condition(stage.as_str(), "True", stage.as_str(), String::new()),
            })
            .collect();
        conditions.push(match (&failed, serving) {
            (None, _) => condition("Ready", "True", "Serving", String::new()),
            (Some(_), true) => condition(
                "Ready",
                "True",
                "LastGoodVersionServing",
                format!(
                    "{} {} ({}) serves; the newest version was refused (see UpToDate)",
                    self.plugin_name, self.version, self.digest
                ),
            ),
            (Some((_, reason, message)), false) => {
                condition("Ready", "False", reason, message.clone())
            }
        });
        conditions.push(match &failed {
            None => condition(UP_TO_DATE, "True", "NewestVersionServing", String::new()),
            Some((_, reason, message)) => condition(UP_TO_DATE, "False", reason, message.clone()),
        });
        let previous = std::mem::replace(&mut self.conditions, conditions);
        self.keep_transition_times(&PluginStatus {
            conditions: previous,
            ..Default::default()
        });
        self.last_error = failed.map(|(_, _, m)| m).unwrap_or_default();
    }

    /// The declaration's spec cannot be read: the newest version is refused before it is
    /// fetched; what served before (if anything) serves on.
    pub fn refuse_spec(&mut self, message: String) {
        let serving = self.is_ready();
        self.set(Some((Stage::Fetched, "InvalidSpec", message)), serving);
    }
}

/// A failure at one stage.
#[derive(Debug)]
struct Refused {
    stage: Stage,
    reason: &'static str,
    message: String,
}

fn refused(stage: Stage, reason: &'static str, message: impl Into<String>) -> Refused {
    Refused {
        stage,
        reason,
        message: message.into(),
    }
}

/// One declared plugin.
#[derive(Default)]
struct Entry {
    spec: PluginSpec,
    /// What the source looked like when last fetched (digest or resourceVersion).
    seen: String,
    /// The last good version, and the hook wiring it serves with.
    good: Option<Arc<WasmPlugin>>,
    wired: Vec<super::HookWiring>,
    status: PluginStatus,
}

/// Load counters, by result, and what serves.
#[derive(Default)]
pub struct CatalogMetrics {
    pub loaded: AtomicU64,
    pub unchanged: AtomicU64,
    pub refused: AtomicU64,
}

/// The static deployers and hook plugins (natives and the plugin directory).
type StaticPlugins = (Vec<Arc<dyn DeployerPlugin>>, Vec<Arc<dyn HookPlugin>>);

/// Dynamic plugins beside the static ones.
pub struct Catalog {
    runtime: Arc<PluginRuntime>,
    client: Client,
    /// Namespace of the declarations (ConfigMaps, Secrets by name).
    namespace: String,
    base_limits: Limits,
    /// Static plugins: natives and the plugin directory (which may grow after start-up:
    /// [`Catalog::add_static`]).
    base: std::sync::Mutex<StaticPlugins>,
    live: Arc<LivePlugins>,
    entries: tokio::sync::Mutex<BTreeMap<String, Entry>>,
    /// Keys every plugin must verify with when its declaration names none.
    host_verification: super::VerificationSpec,
    /// The hooks serving now, and the host's own `hooks:` (run first).
    hooks: Arc<crate::hooks::LiveHooks>,
    base_registrations: Vec<crate::config::HookRegistration>,
    /// CA certificates (PEM) trusted for OCI sources besides the system's (`fetch.caBundle`).
    ca_certs: Vec<String>,
    pub metrics: CatalogMetrics,
}

/// What the host's configuration says about delivered plugins.
pub struct CatalogSettings {
    /// Namespace of the declarations (ConfigMaps and Secrets named without one).
    pub namespace: String,
    /// Limits of a plugin whose declaration names none.
    pub base_limits: Limits,
    /// Keys every plugin must verify with when its declaration names none.
    pub host_verification: super::VerificationSpec,
    /// The host's own `hooks:` (run before delivered hooks).
    pub base_registrations: Vec<crate::config::HookRegistration>,
    /// CA certificates (PEM) trusted for OCI sources besides the system's: the host's
    /// `fetch.caBundle` (a private registry behind the company's CA).
    pub ca_certs: Vec<String>,
}

impl Catalog {
    /// A catalog that swaps `live` and `hooks`; the plugins serving in `live` now are the
    /// static ones, kept beside every delivered plugin.
    pub fn new(
        runtime: Arc<PluginRuntime>,
        client: Client,
        settings: CatalogSettings,
        live: Arc<LivePlugins>,
        hooks: Arc<crate::hooks::LiveHooks>,
    ) -> Self {
        let CatalogSettings {
            namespace,
            base_limits,
            host_verification,
            base_registrations,
            ca_certs,
        } = settings;
        let current = live.current();
        Catalog {
            runtime,
            client,
            namespace,
            base_limits,
            base: std::sync::Mutex::new((
                current.plugins().cloned().collect(),
                current.hooks().cloned().collect(),
            )),
            live,
            entries: Default::default(),
            host_verification,
            hooks,
            base_registrations,
            ca_certs,
            metrics: CatalogMetrics::default(),
        }
    }

    /// Adds a static plugin that finished loading after start-up (a large plugin of the plugin
    /// directory) and serves it; refused (and not kept) if it conflicts with a serving one.
    pub async fn add_static(&self, plugin: Arc<WasmPlugin>) -> Result<(), String> {
        let entries = self.entries.lock().await;
        {
            let mut base = self.base.lock().expect("base");
            if plugin.exports_deployer() {
                base.0.push(plugin.clone() as Arc<dyn DeployerPlugin>);
            }
            if plugin.hook_setup().is_some() {
                base.1.push(plugin.clone() as Arc<dyn HookPlugin>);
            }
        }
        let result = self.rebuild(&entries);
        if result.is_err() {
            let mut base = self.base.lock().expect("base");
            let origin = DeployerPlugin::origin(plugin.as_ref());
            let ours = |o: String| o == origin;
            base.0.retain(|p| !ours(p.origin()));
            base.1.retain(|h| !ours(h.origin()));
        }
        result
    }

    /// The status of `name`, if declared.
    pub async fn status(&self, name: &str) -> Option<PluginStatus> {
        self.entries
            .lock()
            .await
            .get(name)
            .map(|e| e.status.clone())
    }

    /// The loaded versions serving now (for call counts).
    pub async fn serving_plugins(&self) -> Vec<Arc<WasmPlugin>> {
        self.entries
            .lock()
            .await
            .values()
            .filter_map(|e| e.good.clone())
            .collect()
    }

    /// `(name, version, digest)` of every dynamic plugin serving now.
    pub async fn serving(&self) -> Vec<(String, String, String)> {
        self.entries
            .lock()
            .await
            .values()
            .filter_map(|e| e.good.as_ref())
            .map(|p| {
                (
                    p.description().name.clone(),
                    p.description().version.clone(),
                    format!("sha256:{}", p.sha256()),
                )
            })
            .collect()
    }

    /// Brings `name` to `spec`: fetches when the source changed (or `force`), verifies and
    /// compiles a new version, and swaps it in if it can serve. Returns its status.
    pub async fn sync(
        &self,
        name: &str,
        spec: &PluginSpec,
        generation: Option<i64>,
    ) -> PluginStatus {
        let mut entries = self.entries.lock().await;
        let entry = entries.entry(name.to_string()).or_default();
        let spec_changed = entry.spec != *spec;
        entry.spec = spec.clone();
        entry.status.observed_generation = generation;
        let outcome = self.load(entry, spec_changed).await;
        match outcome {
            Ok(None) => {
                self.metrics.unchanged.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Some(plugin)) => {
                let previous = entry.good.replace(plugin.clone());
                let previous_wiring = std::mem::replace(&mut entry.wired, spec.hooks.clone());
                match self.rebuild(&entries) {
                    Ok(()) => {
                        self.metrics.loaded.fetch_add(1, Ordering::Relaxed);
                        let entry = entries.get_mut(name).expect("entry");
                        describe_into(&mut entry.status, &plugin);
                        entry.status.set(None, true);
                        tracing::info!(plugin = name, digest = %entry.status.digest, "plugin serving");
                    }
                    Err(clash) => {
                        // The new version cannot serve beside the others: back to the old one.
                        let entry = entries.get_mut(name).expect("entry");
                        entry.good = previous;
                        entry.wired = previous_wiring;
                        let _ = self.rebuild(&entries);
                        let entry = entries.get_mut(name).expect("entry");
                        self.metrics.refused.fetch_add(1, Ordering::Relaxed);
                        let reason = if clash.starts_with("hook wiring") {
                            "HookWiring"
                        } else {
                            "TypeConflict"
                        };
                        let serving = entry.good.is_some();
                        entry
                            .status
                            .set(Some((Stage::Ready, reason, clash)), serving);
                        tracing::warn!(plugin = name, error = %entry.status.last_error, "plugin refused");
                    }
                }
            }
            Err(r) => {
                self.metrics.refused.fetch_add(1, Ordering::Relaxed);
                let serving = entry.good.is_some();
                entry
                    .status
                    .set(Some((r.stage, r.reason, r.message)), serving);
                tracing::warn!(plugin = name, error = %entry.status.last_error, "plugin refused; the last good version (if any) keeps serving");
            }
        }
        entries
            .get(name)
            .map(|e| e.status.clone())
            .unwrap_or_default()
    }

    /// Forgets `name`: its types are no longer served by it.
    pub async fn remove(&self, name: &str) {
        let mut entries = self.entries.lock().await;
        if entries.remove(name).is_some() {
            let _ = self.rebuild(&entries);
            tracing::info!(plugin = name, "plugin removed");
        }
    }

    /// Names of the declared plugins.
    pub async fn names(&self) -> Vec<String> {
        self.entries.lock().await.keys().cloned().collect()
    }

    /// `Ok(None)`: nothing new; `Ok(Some)`: a new good version to swap in.
    async fn load(
        &self,
        entry: &mut Entry,
        force: bool,
    ) -> Result<Option<Arc<WasmPlugin>>, Refused> {
        let spec = &entry.spec;
        spec.validate()
            .map_err(|m| refused(Stage::Fetched, "InvalidSpec", m))?;
        let keys = self.keys(spec).await?;
        let (bytes, seen, blob_signature) = match (&spec.source.config_map, &spec.source.oci) {
            (Some(cm), _) => {
                let got = configmap::read(&self.client, &self.namespace, cm)
                    .await
                    .map_err(|e| refused(Stage::Fetched, "FetchFailed", format!("{e:#}")))?;
                if !force && got.resource_version == entry.seen && entry.good.is_some() {
                    return Ok(None);
                }
                (got.bytes, got.resource_version, got.signature)
            }
            (None, Some(o)) => {
                let options = self.registry_options(o).await?;
                let digest = oci::resolve(&o.reference, &options)
                    .await
                    .map_err(|e| refused(Stage::Fetched, "FetchFailed", format!("{e:#}")))?;
                if !force && digest == entry.seen && entry.good.is_some() {
                    return Ok(None);
                }
                let pulled = oci::pull(&o.reference, &options)
                    .await
                    .map_err(|e| refused(Stage::Fetched, "FetchFailed", format!("{e:#}")))?;
                if let Some(keys) = &keys {
                    verify_signatures(&o.reference, &pulled.manifest_digest, keys, &options)
                        .await?;
                }
                (pulled.bytes, pulled.manifest_digest, None)
            }
            (None, None) => unreachable!("validated"),
        };
        entry.seen = seen;
        trust::check_pin(&bytes, spec.digest.as_deref())
            .map_err(|e| refused(Stage::Verified, "DigestMismatch", e.to_string()))?;
        if spec.source.config_map.is_some()
            && let Some(keys) = &keys
        {
            let ok = blob_signature
                .as_deref()
                .is_some_and(|s| trust::verify_blob(&bytes, s, keys));
            if !ok {
                return Err(refused(
                    Stage::Verified,
                    if blob_signature.is_some() {
                        "BadSignature"
                    } else {
                        "Unsigned"
                    },
                    "the ConfigMap's plugin has no valid signature (<key>.sig), and verification is required",
                ));
            }
        }
        check_component(&bytes)?;
        let limits = match &spec.limits {
            Some(l) => Some(
                l.resolve(self.base_limits)
                    .map_err(|e| refused(Stage::Compiled, "InvalidLimits", e.to_string()))?,
            ),
            None => None,
        }
        .map(|l| plugin_runtime::Limits {
            deadline: l.deadline,
            memory_bytes: l.memory_bytes as usize,
        });
        let source_name = format!("{} ({})", describe_source(spec), trust::digest_of(&bytes));
        let plugin = self
            .runtime
            .load_bytes_with_limits(&source_name, &bytes, limits)
            .await
            .map_err(|e| refused(Stage::Compiled, "LoadFailed", format!("{e:#}")))?;
        // The same bytes again: nothing to swap, unless the declaration (wiring) changed.
        if !force
            && entry
                .good
                .as_ref()
                .is_some_and(|g| g.sha256() == plugin.sha256())
        {
            return Ok(None);
        }
        Ok(Some(plugin))
    }

    /// The verification keys of `spec`, if it asks for verification.
    async fn keys(
        &self,
        spec: &PluginSpec,
    ) -> Result<Option<Vec<p256::ecdsa::VerifyingKey>>, Refused> {
        let own = &spec.verification;
        let v = if own.public_key.is_some() || own.public_key_secret.is_some() {
            own
        } else {
            &self.host_verification
        };
        let pem = match (&v.public_key, &v.public_key_secret) {
            (Some(pem), _) => pem.clone(),
            (None, Some(r)) => {
                let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
                let s = secrets
                    .get_opt(&r.name)
                    .await
                    .map_err(|e| refused(Stage::Verified, "KeyUnavailable", e.to_string()))?
                    .ok_or_else(|| {
                        refused(
                            Stage::Verified,
                            "KeyUnavailable",
                            format!("Secret {} not found", r.name),
                        )
                    })?;
                let data = s.data.unwrap_or_default();
                let bytes = data.get(&r.key).ok_or_else(|| {
                    refused(
                        Stage::Verified,
                        "KeyUnavailable",
                        format!("Secret {} has no key {:?}", r.name, r.key),
                    )
                })?;
                String::from_utf8_lossy(&bytes.0).into_owned()
            }
            (None, None) => return Ok(None),
        };
        trust::public_keys(&pem)
            .map(Some)
            .map_err(|e| refused(Stage::Verified, "InvalidKey", e.to_string()))
    }

    async fn registry_options(
        &self,
        o: &super::OciSource,
    ) -> Result<oci::RegistryOptions, Refused> {
        let mut options = oci::RegistryOptions {
            ca_certs: self.ca_certs.clone(),
            ..Default::default()
        };
        if o.plain_http
            && let Ok(r) = oci::parse(&o.reference)
        {
            options.plain_http.push(r.resolve_registry().to_string());
        }
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        for name in &o.pull_secrets {
            let s = secrets
                .get_opt(name)
                .await
                .map_err(|e| refused(Stage::Fetched, "PullSecret", e.to_string()))?
                .ok_or_else(|| {
                    refused(
                        Stage::Fetched,
                        "PullSecret",
                        format!("pull secret {name} not found"),
                    )
                })?;
            if let Some(v) = s.data.unwrap_or_default().get(".dockerconfigjson") {
                options
                    .docker_configs
                    .push(String::from_utf8_lossy(&v.0).into_owned());
            }
        }
        Ok(options)
    }

    /// Builds the serving set from the static plugins and every good dynamic one; refuses a set
    /// in which two plugins claim one type (naming both).
    fn rebuild(&self, entries: &BTreeMap<String, Entry>) -> Result<(), String> {
        let (mut plugins, mut hooks) = self.base.lock().expect("base").clone();
        for p in entries.values().filter_map(|e| e.good.clone()) {
            if p.exports_deployer() {
                plugins.push(p.clone() as Arc<dyn DeployerPlugin>);
            }
            if p.hook_setup().is_some() {
                hooks.push(p as Arc<dyn HookPlugin>);
            }
        }
        let registry = PluginRegistry::with_hooks(plugins, hooks).map_err(|e| format!("{e:#}"))?;
        let mut registrations = self.base_registrations.clone();
        for e in entries.values() {
            let Some(setup) = e.good.as_ref().and_then(|p| p.hook_setup()) else {
                continue;
            };
            for w in &e.wired {
                registrations.push(crate::config::HookRegistration {
                    plugin: setup.name.clone(),
                    deploy_item_types: w.deploy_item_types.clone(),
                    hook_types: w.hook_types.clone(),
                });
            }
        }
        let hooks = crate::hooks::HookSet::from_config(&registrations, &registry)
            .map_err(|e| format!("hook wiring: {e:#}"))?;
        self.hooks.replace(hooks);
        self.live.replace(Arc::new(registry));
        Ok(())
    }
}

fn describe_source(spec: &PluginSpec) -> String {
    match (&spec.source.config_map, &spec.source.oci) {
        (Some(c), _) => format!(
            "configmap {}{}",
            c.namespace
                .as_deref()
                .map(|n| format!("{n}/"))
                .unwrap_or_default(),
            c.name
        ),
        (None, Some(o)) => format!("oci {}", o.reference),
        _ => "nothing".into(),
    }
}

fn describe_into(status: &mut PluginStatus, plugin: &WasmPlugin) {
    let d = plugin.description();
    status.digest = format!("sha256:{}", plugin.sha256());
    status.plugin_name = d.name.clone();
    status.version = d.version.clone();
    status.types = d.deploy_item_types.clone();
    status.hook_types = plugin
        .hook_setup()
        .map(|h| {
            h.hook_types
                .iter()
                .map(|t| t.as_str().to_string())
                .collect()
        })
        .unwrap_or_default();
    status.wit_version = plugin.wit_version().unwrap_or_default();
}

/// The cosign signatures of `manifest_digest` in `reference`'s repository: at least one must
/// verify with `keys`.
async fn verify_signatures(
    reference: &str,
    manifest_digest: &str,
    keys: &[p256::ecdsa::VerifyingKey],
    options: &oci::RegistryOptions,
) -> Result<(), Refused> {
    let sigs = oci::signatures(reference, manifest_digest, options)
        .await
        .map_err(|e| refused(Stage::Verified, "SignatureFetchFailed", format!("{e:#}")))?;
    if sigs.is_empty() {
        return Err(refused(
            Stage::Verified,
            "Unsigned",
            format!(
                "{reference} ({manifest_digest}) has no signature, and verification is required"
            ),
        ));
    }
    let errors: Vec<String> = sigs
        .iter()
        .filter_map(|(payload, sig)| {
            trust::verify_payload(payload, sig, manifest_digest, keys)
                .err()
                .map(|e| e.to_string())
        })
        .collect();
    if errors.len() == sigs.len() {
        return Err(refused(
            Stage::Verified,
            "BadSignature",
            format!("{reference}: no signature verifies: {}", errors.join("; ")),
        ));
    }
    Ok(())
}

/// `bytes` are a WebAssembly component (not a core module, not something else).
fn check_component(bytes: &[u8]) -> Result<(), Refused> {
    if !bytes.starts_with(b"\0asm") {
        return Err(refused(
            Stage::Compiled,
            "NotWasm",
            "the plugin is not WebAssembly (no \\0asm header)",
        ));
    }
    if bytes.get(4..8) == Some(&[1, 0, 0, 0]) {
        return Err(refused(
            Stage::Compiled,
            "CoreModule",
            "the plugin is a core WebAssembly module, not a component: build it for wasm32-wasip2 (or wrap it with `wasm-tools component new`)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond<'a>(s: &'a PluginStatus, t: &str) -> (&'a str, &'a str) {
        let c = s
            .conditions
            .iter()
            .find(|c| c.type_ == t)
            .unwrap_or_else(|| panic!("no {t}"));
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn a_serving_plugin_whose_newest_version_is_refused_stays_ready_and_is_not_up_to_date() {
        let mut s = PluginStatus {
            plugin_name: "mock".into(),
            version: "0.1.0".into(),
            digest: "sha256:ab".into(),
            ..Default::default()
        };
        s.set(None, true);
        assert!(s.is_ready() && s.is_up_to_date());
        assert_eq!(cond(&s, "Ready"), ("True", "Serving"));

        s.set(
            Some((Stage::Compiled, "NotWasm", "not WebAssembly".into())),
            true,
        );
        assert!(s.is_ready(), "the last good version serves");
        assert!(!s.is_up_to_date());
        assert_eq!(cond(&s, "Ready"), ("True", "LastGoodVersionServing"));
        assert_eq!(cond(&s, UP_TO_DATE), ("False", "NotWasm"));
        assert_eq!(s.up_to_date().unwrap().message, "not WebAssembly");
        assert_eq!(cond(&s, "Fetched"), ("True", "Fetched"));
        assert_eq!(cond(&s, "Compiled"), ("False", "NotWasm"));
        assert!(
            s.condition(Stage::Ready)
                .unwrap()
                .message
                .contains("mock 0.1.0 (sha256:ab)")
        );
        assert_eq!(s.last_error, "not WebAssembly");
    }

    #[test]
    fn a_plugin_that_never_served_is_neither_ready_nor_up_to_date() {
        let mut s = PluginStatus::default();
        s.set(
            Some((Stage::Verified, "Unsigned", "has no signature".into())),
            false,
        );
        assert!(!s.is_ready() && !s.is_up_to_date());
        assert_eq!(cond(&s, "Ready"), ("False", "Unsigned"));
        assert_eq!(cond(&s, "Compiled"), ("Unknown", "NotReached"));
        // An unreadable spec: the same, before anything is fetched.
        s.refuse_spec("spec: missing field `source`".into());
        assert_eq!(cond(&s, "Ready"), ("False", "InvalidSpec"));
        assert_eq!(cond(&s, UP_TO_DATE), ("False", "InvalidSpec"));
    }

    #[test]
    fn a_condition_transitions_when_its_status_changes_and_only_then() {
        let at = |s: &PluginStatus, t: &str| {
            s.conditions
                .iter()
                .find(|c| c.type_ == t)
                .unwrap()
                .last_transition_time
                .clone()
        };
        let refused = || Some((Stage::Compiled, "NotWasm", "not WebAssembly".to_string()));
        let mut s = PluginStatus::default();
        s.set_at(None, true, "2026-01-01T00:00:00Z");
        // Refused later: Ready stays True (same time), UpToDate flips (new time).
        s.set_at(refused(), true, "2026-01-01T00:01:00Z");
        assert_eq!(at(&s, "Ready"), "2026-01-01T00:00:00Z");
        assert_eq!(at(&s, UP_TO_DATE), "2026-01-01T00:01:00Z");
        // Refused again (another pass): nothing transitions.
        s.set_at(refused(), true, "2026-01-01T00:02:00Z");
        assert_eq!(at(&s, UP_TO_DATE), "2026-01-01T00:01:00Z");
        // A host that restarts computes new times; what the object had is kept where the
        // status is the same.
        let written = s.clone();
        let mut restarted = PluginStatus::default();
        restarted.set_at(None, true, "2026-01-01T00:03:00Z");
        restarted.keep_transition_times(&written);
        assert_eq!(at(&restarted, "Ready"), "2026-01-01T00:00:00Z");
        assert_eq!(at(&restarted, UP_TO_DATE), "2026-01-01T00:03:00Z");
    }

    #[test]
    fn an_unreadable_spec_of_a_serving_plugin_keeps_it_ready() {
        let mut s = PluginStatus::default();
        s.set(None, true);
        s.refuse_spec("spec: bad".into());
        assert!(s.is_ready());
        assert_eq!(cond(&s, UP_TO_DATE), ("False", "InvalidSpec"));
    }
}
