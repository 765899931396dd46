//! # plugin-runtime — runs deployer plugins
//!
//! Loads WASI components that export `wasm-deployer:plugin/deployer` and/or
//! `wasm-deployer:plugin/hooks` (see `wit/deployer.wit`, `wit/hooks.wit`) and runs them
//! under wasmtime 48 (component model, async):
//!
//! - one [`wasmtime::Engine`] per [`PluginRuntime`]; per component one `InstancePre`, keyed
//!   by the SHA-256 of the component bytes;
//! - a fresh `Store` (and instance) per invocation: nothing leaks between items, and a
//!   trapped instance is simply dropped;
//! - an on-disk artifact cache keyed by SHA-256 + engine compatibility hash and
//!   authenticated with a per-cache HMAC key (never loads a blob it did not write);
//! - epoch interruption (tick ≤ 10 ms) with a per-plugin deadline, plus a tokio timeout
//!   around the whole invocation → `ERR_TIMEOUT`;
//! - a memory cap per instance (default 64 MiB) → `ERR_INTERNAL_PROBLEM`;
//! - any other trap → `ERR_INTERNAL_PROBLEM` with the trap message (and the plugin's stderr);
//! - no preopens, environment, arguments or sockets: every capability is a WIT import that
//!   forwards to the controller's [`HostServices`] for the item.
//!
//! Native plugins ([`NativePlugin`]) run an `sdk_guest::Deployer` in-process behind the same
//! [`DeployerPlugin`] trait. [`PluginRegistry`] maps DeployItem types to plugins and
//! refuses two plugins claiming one type.
//!
//! Modules, in dependency order (no module imports one that imports it back):
//! `api` (the traits) ← `wasm::{bindings, store, convert, invoke}` ← `capabilities` (one per
//! WIT import, and which plugin is granted which) ← `wasm` (`WasmPlugin`) ← `epoch`, `cache` ←
//! `runtime` (engine, linkers, loading) ← `registry`; `native` beside `wasm`.
//!
//! Owns: everything between "bytes of a component" and "a `Response` or `DeployerError`".
//! Must not touch: Kubernetes (no kube dependency), status writes, timestamps — the
//! controller owns those.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use plugin_runtime::{PluginRuntime, PluginRegistry, RuntimeConfig, DeployerPlugin, NoopHost};
//! use std::sync::Arc;
//! let rt = PluginRuntime::new(RuntimeConfig { cache_dir: Some("/var/cache/wd".into()), ..Default::default() })?;
//! let plugins = rt.load_dir("target/plugins".as_ref()).await?;
//! let registry = PluginRegistry::new(plugins.into_iter().map(|p| p as Arc<dyn DeployerPlugin>).collect())?;
//! let mock = registry.for_type("landscaper.gardener.cloud/mock").unwrap();
//! let item = serde_json::json!({"spec": {"type": "landscaper.gardener.cloud/mock", "config": {
//!     "apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1", "kind": "ProviderConfiguration"}}});
//! let response = mock.reconcile(plugin_runtime::Invocation::for_item(item), Arc::new(NoopHost)).await;
//! # let _ = response; Ok(()) }
//! ```

#![warn(missing_docs)]

mod api;
mod cache;
mod capabilities;
mod epoch;
mod native;
mod registry;
mod runtime;
mod wasm;

pub use api::{
    DeployerPlugin, EncodedHookInput, HookPlugin, HostServices, HttpGrant, HttpObservation,
    HttpSettings, Limits, NoopHost, OcmComponentRequest,
};
pub use capabilities::http::{checked_url as checked_http_url, not_allowed as http_not_allowed};
pub use native::{NativeHooks, NativePlugin};
pub use registry::PluginRegistry;
pub use runtime::{
    LoadOutcome, LoadRecord, OptLevel, PluginRuntime, RuntimeConfig, RuntimeStats,
    pool_idle_resident_bytes,
};
pub use wasm::WasmPlugin;
pub use wasm::store::DENIED_NETWORK_ATTEMPTS;

/// The shared data model (re-exported from `sdk-guest`).
pub use sdk_guest::{
    ConditionReport, ConditionStatus, DeployerError, Description, FetchRequest, Fetched, HookInput,
    HookResult, HookSetup, HookType, Invocation, KubeOp, LogLevel, ObjectRef, OcmOrigin, PatchType,
    ResolvedTarget, ResourceInfo, Response, ServerVersion, codes, phase,
};
