//! The bodies of the WIT exports that `export_deployer!` and `export_hooks!` wire to a
//! [`Deployer`] and [`Hooks`], compiled only for `wasm32`.
//!
//! Owns: decoding the host's input, calling the plugin, encoding its answer. Must not touch:
//! plugin logic or any WASI interface directly.

// Called only by the export macros' expansions (`__private`), not a public API.
#![allow(missing_docs)]

use super::world::bindings::wasm_deployer::plugin as wit;
use super::world::convert::{
    description_to_wit, error_to_wit, invocation_from_wit, response_to_wit,
};
use super::world::hook_bindings::exports::wasm_deployer::plugin::hooks as wh;
use super::world::hook_convert;
use crate::{Ctx, Deployer, DeployerError, Hooks, Invocation, Response};

fn host_input_error(e: landscaper_model::wire::WireError) -> DeployerError {
    DeployerError::internal("InvalidHostInput", format!("host sent {e}"))
}

pub fn describe<D: Deployer>() -> wit::types::Description {
    description_to_wit(D::describe())
}

fn run(
    operation: &str,
    inv: wit::types::Invocation,
    f: impl FnOnce(&Ctx<'static>, Invocation) -> Result<Response, DeployerError>,
) -> Result<wit::types::Response, wit::types::DeployerError> {
    let ctx = Ctx::wasm();
    invocation_from_wit(inv)
        .map_err(host_input_error)
        .and_then(|inv| f(&ctx, inv))
        .map(response_to_wit)
        .map_err(|e| error_to_wit(e.or_operation(operation)))
}

pub fn reconcile<D: Deployer>(
    inv: wit::types::Invocation,
) -> Result<wit::types::Response, wit::types::DeployerError> {
    run("reconcile", inv, D::reconcile)
}

pub fn delete<D: Deployer>(
    inv: wit::types::Invocation,
) -> Result<wit::types::Response, wit::types::DeployerError> {
    run("delete", inv, D::delete)
}

pub fn hooks_describe<H: Hooks>() -> wh::HookSetup {
    hook_convert::hook_setup_to_wit(H::describe())
}

pub fn hooks_run<H: Hooks>(
    input: wh::HookInput,
) -> Result<Option<wh::HookResult>, wh::DeployerError> {
    let ctx = Ctx::wasm();
    let input = hook_convert::hook_input_from_wit(input)
        .map_err(|e| hook_convert::error_to_wit(host_input_error(e)))?;
    let hook_type = input.hook_type;
    H::run(&ctx, input)
        .map(|r| r.map(hook_convert::hook_result_to_wit))
        .map_err(|e| hook_convert::error_to_wit(e.or_operation(hook_type.as_str())))
}
