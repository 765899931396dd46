//! rust-hold-hook: the example hook plugin in Rust, the same as `plugins/{python,js,c}/hold-hook`.
//!
//! Holds DeployItems annotated `examples.wasm-deployer.dev/hold: "true"` before their reconcile
//! and asks the host to look again in a second (`requeue: false` + `requeue_after`: `requeue:
//! true` would mean "now", a busy loop).

use std::time::Duration;

use sdk_guest::{
    Ctx, DeployerError, HookInput, HookResult, HookSetup, HookType, Hooks, export_hooks,
};

const HOLD_ANNOTATION: &str = "examples.wasm-deployer.dev/hold";

pub struct HoldHook;

impl Hooks for HoldHook {
    fn describe() -> HookSetup {
        HookSetup {
            name: "rust-hold-hook".into(),
            version: "0.1.0".into(),
            hook_types: vec![HookType::BeforeReconcile],
        }
    }

    fn run(ctx: &Ctx, input: HookInput) -> Result<Option<HookResult>, DeployerError> {
        let Some(item) = &input.deploy_item else {
            return Ok(None);
        };
        if item["metadata"]["annotations"][HOLD_ANNOTATION] != "true" {
            return Ok(None); // no opinion
        }
        ctx.info(&format!(
            "holding {}",
            item["metadata"]["name"].as_str().unwrap_or_default()
        ));
        Ok(Some(HookResult {
            abort_reconcile: true,
            requeue: false,
            requeue_after: Some(Duration::from_secs(1)),
        }))
    }
}

export_hooks!(HoldHook);
