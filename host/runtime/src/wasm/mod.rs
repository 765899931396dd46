//! Wasm component plugins: [`WasmPlugin`] (one per loaded component) and its calls.
//!
//! Modules: `bindings` (generated from `wit/`), `store` (what one instance may use), `invoke`
//! (instantiate, describe, classify failures), `convert` (WIT ↔ model). The host side of each
//! import is in `crate::capabilities`.
//!
//! Owns: the deployer and hook calls of a loaded component. Must not touch: engine/cache
//! management (`crate::runtime`) or Kubernetes itself.

pub(crate) mod bindings;
pub(crate) mod convert;
pub(crate) mod invoke;
pub(crate) mod store;

use std::sync::Arc;

use sdk_guest::{
    DeployerError, Description, HookInput, HookResult, HookSetup, Invocation, Response,
};

use crate::api::{DeployerPlugin, EncodedHookInput, HookPlugin, HostServices, Limits, Op};
use bindings::exports::wasm_deployer::plugin::hooks as wit_hooks;
use convert::{
    error_from_wit, hook_input_to_wit, hook_result_from_wit, invocation_to_wit, response_from_wit,
};
use invoke::{Prepared, classify, deadline_error, invalid_plugin_json};
use store::new_store;

/// A deployer plugin backed by a wasm component.
pub struct WasmPlugin {
    pub(crate) engine: wasmtime::Engine,
    pub(crate) prepared: Arc<Prepared>,
    pub(crate) description: Description,
    pub(crate) hook_setup: Option<HookSetup>,
    pub(crate) name: Arc<str>,
    pub(crate) limits: Limits,
    pub(crate) source: String,
    /// Deployer calls made on this loaded version (reconcile + delete).
    pub(crate) calls: std::sync::atomic::AtomicU64,
    /// Keeps the epoch ticker alive while any plugin exists.
    pub(crate) _ticker: Arc<crate::epoch::EpochTicker>,
    /// The runtime's instance-pool slots.
    pub(crate) slots: store::Slots,
}

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin")
            .field("description", &self.description)
            .field("source", &self.source)
            .field("sha256", &self.prepared.sha256)
            .field("limits", &self.limits)
            .finish()
    }
}

impl WasmPlugin {
    /// Calls `describe` (and `hooks.describe`) again in a fresh instance: what the plugin would
    /// say at its next load. `deployer-host plugin test` compares it with the first answer.
    pub async fn describe_again(&self) -> anyhow::Result<(Description, Option<HookSetup>)> {
        let d = invoke::describe(
            &self.engine,
            &self.prepared,
            &self.source,
            self.limits,
            &self.slots,
        )
        .await?;
        Ok((d.description, d.hook_setup))
    }

    /// The version of the `wasm-deployer:plugin` WIT package the component was built against
    /// (the highest version among its imports and exports of that package).
    pub fn wit_version(&self) -> Option<String> {
        wit_version_of(&self.engine, self.prepared.pre.component())
    }

    /// The component's imports and exports (interface names with versions), for
    /// `deployer-host plugin inspect`.
    pub fn interfaces(&self) -> (Vec<String>, Vec<String>) {
        let ty = self.prepared.pre.component().component_type();
        (
            ty.imports(&self.engine)
                .map(|(n, _)| n.to_string())
                .collect(),
            ty.exports(&self.engine)
                .map(|(n, _)| n.to_string())
                .collect(),
        )
    }

    /// Deployer calls made on this loaded version (which version served which jobs).
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// SHA-256 (hex) of the component bytes.
    pub fn sha256(&self) -> &str {
        &self.prepared.sha256
    }

    /// Where the component was loaded from (file path or the name given to `load_bytes`).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The limits applied to each invocation.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Whether the component exports `deployer` (it may export only `hooks`). Only then is
    /// it a [`DeployerPlugin`].
    pub fn exports_deployer(&self) -> bool {
        self.prepared.deployer.is_some()
    }

    /// The hook setup, if the component exports `hooks`.
    pub fn hook_setup(&self) -> Option<&HookSetup> {
        self.hook_setup.as_ref()
    }

    /// Create a fresh store and instance without calling anything (benchmarks: splits the
    /// invocation cost into instantiate vs call). Not part of the stable API.
    #[doc(hidden)]
    pub async fn instantiate_only(&self) -> anyhow::Result<()> {
        let slot = self.slots.acquire().await;
        let (mut store, _stdio) =
            new_store(&self.engine, self.name.clone(), self.limits, None, slot);
        self.prepared.pre.instantiate_async(&mut store).await?;
        Ok(())
    }

    async fn invoke(
        &self,
        op: Op,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        let limits = self.limits;
        let slot = self.slots.acquire().await;
        let (mut store, stdio) =
            new_store(&self.engine, self.name.clone(), limits, Some(host), slot);
        let wit_inv = invocation_to_wit(&inv).map_err(|e| {
            DeployerError::internal("EncodeInvocation", e.to_string()).with_operation(op.name())
        })?;
        drop(inv);
        let prepared = &self.prepared;
        let Some(indices) = &prepared.deployer else {
            return Err(DeployerError::internal(
                "NotADeployer",
                format!("plugin {:?} exports no deployer", self.name),
            )
            .with_operation(op.name()));
        };
        let call = async {
            let instance = prepared.pre.instantiate_async(&mut store).await?;
            let d = indices.load(&mut store, &instance)?;
            match op {
                Op::Reconcile => d.call_reconcile(&mut store, &wit_inv).await,
                Op::Delete => d.call_delete(&mut store, &wit_inv).await,
            }
        };
        let out = tokio::time::timeout(limits.deadline, call).await;
        let stderr = stdio.flush_to_log(&self.name);
        // A refused HTTP request or an oversized response ends the invocation with the host's
        // error, whatever the plugin made of it (capabilities::http).
        if let Some(e) = store.data().http.incident() {
            tracing::debug!(plugin = %self.name, op = op.name(), error = %e, "plugin invocation ended by its HTTP");
            return Err(e.or_operation(op.name()));
        }
        let result = match out {
            Err(_) => Err(deadline_error(op.name(), &self.name, limits)),
            Ok(Err(e)) => Err(classify(
                op.name(),
                &self.name,
                limits,
                e,
                store.data().limiter.hit,
                &stderr,
            )),
            Ok(Ok(Ok(r))) => {
                response_from_wit(r).map_err(|e| invalid_plugin_json(op.name(), &self.name, e))
            }
            Ok(Ok(Err(e))) => Err(store
                .data()
                .http
                .explain(error_from_wit(e).or_operation(op.name()))),
        };
        if let Err(e) = &result {
            tracing::debug!(plugin = %self.name, op = op.name(), error = %e, "plugin invocation failed");
        }
        result
    }
}

#[async_trait::async_trait]
impl HookPlugin for WasmPlugin {
    fn setup(&self) -> &HookSetup {
        static NONE: std::sync::OnceLock<HookSetup> = std::sync::OnceLock::new();
        self.hook_setup
            .as_ref()
            .unwrap_or_else(|| NONE.get_or_init(HookSetup::default))
    }

    fn origin(&self) -> String {
        DeployerPlugin::origin(self)
    }

    async fn run_hook(&self, input: HookInput) -> Result<Option<HookResult>, DeployerError> {
        self.call_hook(input.hook_type, hook_input_to_wit(&input))
            .await
    }

    /// The JSON goes into the guest as it is: no decode and re-encode on the host.
    async fn run_hook_encoded(
        &self,
        input: EncodedHookInput<'_>,
    ) -> Result<Option<HookResult>, DeployerError> {
        let wit_input = wit_hooks::HookInput {
            hook_type: convert::hook_type_to_wit(input.hook_type),
            deploy_item: input.deploy_item.map(str::to_string),
            target: input.target.map(str::to_string),
        };
        self.call_hook(input.hook_type, wit_input).await
    }
}

impl WasmPlugin {
    /// One hook call on a fresh instance.
    async fn call_hook(
        &self,
        hook_type: sdk_guest::HookType,
        wit_input: wit_hooks::HookInput,
    ) -> Result<Option<HookResult>, DeployerError> {
        let operation = hook_type.as_str();
        let Some(indices) = &self.prepared.hooks else {
            return Err(DeployerError::internal(
                "NotAHook",
                format!("plugin {:?} exports no hooks", self.name),
            )
            .with_operation(operation));
        };
        let limits = self.limits;
        let slot = self.slots.acquire().await;
        let (mut store, stdio) = new_store(&self.engine, self.name.clone(), limits, None, slot);
        let call = async {
            let instance = self.prepared.pre.instantiate_async(&mut store).await?;
            indices
                .load(&mut store, &instance)?
                .call_run(&mut store, &wit_input)
                .await
        };
        let out = tokio::time::timeout(limits.deadline, call).await;
        let stderr = stdio.flush_to_log(&self.name);
        match out {
            Err(_) => Err(deadline_error(operation, &self.name, limits)),
            Ok(Err(e)) => Err(classify(
                operation,
                &self.name,
                limits,
                e,
                store.data().limiter.hit,
                &stderr,
            )),
            Ok(Ok(Ok(r))) => Ok(r.map(hook_result_from_wit)),
            Ok(Ok(Err(e))) => Err(error_from_wit(e).or_operation(operation)),
        }
    }
}

#[async_trait::async_trait]
impl DeployerPlugin for WasmPlugin {
    fn description(&self) -> &Description {
        &self.description
    }

    fn origin(&self) -> String {
        format!(
            "wasm component {} (sha256 {})",
            self.source,
            &self.prepared.sha256[..12]
        )
    }

    async fn reconcile(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.invoke(Op::Reconcile, inv, host).await
    }

    async fn delete(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.invoke(Op::Delete, inv, host).await
    }
}

/// The highest version of the `wasm-deployer:plugin` package among a component's imports and
/// exports: the WIT it was built against.
pub(crate) fn wit_version_of(
    engine: &wasmtime::Engine,
    component: &wasmtime::component::Component,
) -> Option<String> {
    let ty = component.component_type();
    let names: Vec<String> = ty
        .imports(engine)
        .map(|(n, _)| n.to_string())
        .chain(ty.exports(engine).map(|(n, _)| n.to_string()))
        .collect();
    names
        .iter()
        .filter_map(|n| n.strip_prefix("wasm-deployer:plugin/")?.split_once('@'))
        .map(|(_, v)| v.to_string())
        .max_by_key(|v| version_key(v))
}

/// `1.10.0` sorts after `1.9.0`.
pub(crate) fn version_key(v: &str) -> Vec<u64> {
    v.split('.')
        .map(|p| p.parse::<u64>().unwrap_or(0))
        .collect()
}
