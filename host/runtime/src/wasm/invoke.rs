//! Running one call on a fresh instance: the component's linked form ([`Prepared`]),
//! `describe` at load time, and turning what wasmtime reports (traps, the epoch deadline, the
//! memory limiter, `exit`) into the item's Landscaper-shaped error.
//!
//! Owns: instantiation and error classification. Must not touch: engine or cache management
//! (`crate::runtime`) or what an import does (`crate::capabilities`).

use std::sync::Arc;

use sdk_guest::{DeployerError, Description, HookSetup};
use wasmtime::Trap;

use super::bindings::exports::wasm_deployer::plugin::deployer as wit_deployer;
use super::bindings::exports::wasm_deployer::plugin::hooks as wit_hooks;
use super::convert::{description_from_wit, hook_setup_from_wit};
use super::store::{State, new_store};
use crate::api::{Limits, human_bytes};

/// The compiled, linked form of one component, shared by every plugin loaded from it.
pub(crate) struct Prepared {
    pub(crate) pre: wasmtime::component::InstancePre<State>,
    /// Present if the component exports `deployer`.
    pub(crate) deployer: Option<wit_deployer::GuestIndices>,
    /// Present if the component exports `hooks`.
    pub(crate) hooks: Option<wit_hooks::GuestIndices>,
    pub(crate) sha256: String,
}

impl Prepared {
    /// Finds the exports (by semver: a 1.0 component matches the 1.1 names). A component
    /// that exports neither interface is refused.
    pub(crate) fn new(
        pre: wasmtime::component::InstancePre<State>,
        sha256: String,
        source: &str,
    ) -> anyhow::Result<Self> {
        let deployer = wit_deployer::GuestIndices::new(&pre).ok();
        let hooks = wit_hooks::GuestIndices::new(&pre).ok();
        if deployer.is_none() && hooks.is_none() {
            anyhow::bail!(
                "{source} exports neither wasm-deployer:plugin/deployer nor \
                 wasm-deployer:plugin/hooks (WIT {}); build it for the deployer-plugin, \
                 hook-plugin or deployer-hook-plugin world",
                sdk_guest::WIT_VERSION
            );
        }
        Ok(Prepared {
            pre,
            deployer,
            hooks,
            sha256,
        })
    }
}

fn last_lines(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Turn a wasmtime error of an invocation into the item's error (`operation`: `reconcile`,
/// `delete`, or the hook type).
pub(crate) fn classify(
    operation: &str,
    plugin: &str,
    limits: Limits,
    err: wasmtime::Error,
    memory_hit: bool,
    stderr: &str,
) -> DeployerError {
    let trap = err.downcast_ref::<Trap>().copied();
    if trap == Some(Trap::Interrupt) {
        return deadline_error(operation, plugin, limits);
    }
    if memory_hit {
        return DeployerError::internal(
            "PluginMemoryLimitExceeded",
            format!(
                "plugin {plugin:?} exceeded its memory limit of {}",
                human_bytes(limits.memory_bytes)
            ),
        )
        .with_operation(operation);
    }
    if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return DeployerError::internal(
            "PluginExited",
            format!("plugin {plugin:?} called exit({})", exit.0),
        )
        .with_operation(operation);
    }
    let what = match trap {
        Some(t) => format!("plugin {plugin:?} trapped: {t}"),
        None => format!("plugin {plugin:?} failed: {err:#}"),
    };
    let message = if stderr.is_empty() {
        what
    } else {
        format!("{what}; stderr: {}", last_lines(stderr, 1024))
    };
    DeployerError::internal("PluginTrapped", message).with_operation(operation)
}

pub(crate) fn deadline_error(operation: &str, plugin: &str, limits: Limits) -> DeployerError {
    DeployerError::timeout(
        "PluginDeadlineExceeded",
        format!(
            "plugin {plugin:?} did not finish within its deadline of {:?} and was interrupted",
            limits.deadline
        ),
    )
    .with_operation(operation)
}

/// What a component says about itself at load time.
#[derive(Clone)]
pub(crate) struct Described {
    /// From `deployer.describe` (for a hooks-only component: name and version of the hook
    /// setup, no types).
    pub(crate) description: Description,
    /// From `hooks.describe`, if the component exports hooks.
    pub(crate) hook_setup: Option<HookSetup>,
}

/// Call `describe` of each export on a fresh instance (no host services).
pub(crate) async fn describe(
    engine: &wasmtime::Engine,
    prepared: &Prepared,
    source: &str,
    limits: Limits,
    slots: &super::store::Slots,
) -> anyhow::Result<Described> {
    let slot = slots.acquire().await;
    let (mut store, stdio) = new_store(engine, Arc::from(source), limits, None, slot);
    let call = async {
        let instance = prepared.pre.instantiate_async(&mut store).await?;
        let description = match &prepared.deployer {
            Some(ix) => Some(
                ix.load(&mut store, &instance)?
                    .call_describe(&mut store)
                    .await?,
            ),
            None => None,
        };
        let hook_setup = match &prepared.hooks {
            Some(ix) => Some(
                ix.load(&mut store, &instance)?
                    .call_describe(&mut store)
                    .await?,
            ),
            None => None,
        };
        wasmtime::Result::Ok((description, hook_setup))
    };
    let out = tokio::time::timeout(limits.deadline, call).await;
    let stderr = stdio.flush_to_log(source);
    match out {
        Err(_) => anyhow::bail!(
            "describe of {source} did not finish within {:?}",
            limits.deadline
        ),
        Ok(Err(e)) => {
            let e = classify(
                "describe",
                source,
                limits,
                e,
                store.data().limiter.hit,
                &stderr,
            );
            anyhow::bail!("describe of {source} failed: {}", e.message)
        }
        Ok(Ok((description, hook_setup))) => {
            let hook_setup = hook_setup.map(hook_setup_from_wit);
            let description = match (description, &hook_setup) {
                (Some(d), _) => description_from_wit(d),
                (None, Some(h)) => Description {
                    name: h.name.clone(),
                    version: h.version.clone(),
                    deploy_item_types: Vec::new(),
                    hook_types: h
                        .hook_types
                        .iter()
                        .map(|t| t.as_str().to_string())
                        .collect(),
                },
                (None, None) => unreachable!("Prepared::new refuses components without exports"),
            };
            Ok(Described {
                description,
                hook_setup,
            })
        }
    }
}

/// The plugin answered JSON that does not decode: the plugin's fault.
pub(crate) fn invalid_plugin_json(
    op: &str,
    plugin: &str,
    e: sdk_guest::model::wire::WireError,
) -> DeployerError {
    DeployerError::internal(
        "InvalidPluginResponse",
        format!("plugin {plugin:?} returned {e}"),
    )
    .with_operation(op)
}
