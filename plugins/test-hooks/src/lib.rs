//! Test-only plugin that exports **both** WIT interfaces (world `deployer-hook-plugin`):
//!
//! - hooks for all ten hook types, whose answers a test scripts per DeployItem through the
//!   annotation `hooks.test.wasm-deployer.dev/script`, a JSON object from hook type to
//!   action: `{"abortReconcile": .., "requeue": .., "requeueAfterMs": ..}` (that result),
//!   `"trap"` (panics → wasm trap), `"error"` (a retryable error), `"loop"` (spins until the
//!   deadline). Hook types not in the script (and `Start`, which has no item) answer `None`.
//! - a deployer for type `test.wasm-deployer.dev/hooked` that succeeds at once and counts
//!   its calls in `providerStatus.calls`.
//!
//! Owns: nothing outside tests — xtask builds it into `target/test-plugins/`.

use sdk_guest::{
    Ctx, Deployer, DeployerError, Description, HookInput, HookResult, HookSetup, HookType, Hooks,
    Invocation, Response, export_deployer, export_hooks,
};
use serde_json::{Value, json};
use std::time::Duration;

/// DeployItem type of the deployer part.
pub const DEPLOY_ITEM_TYPE: &str = "test.wasm-deployer.dev/hooked";
/// The annotation that scripts the hooks' answers.
pub const SCRIPT_ANNOTATION: &str = "hooks.test.wasm-deployer.dev/script";

/// The plugin (both exports).
pub struct TestHooks;

impl Hooks for TestHooks {
    fn describe() -> HookSetup {
        HookSetup {
            name: "test-hooks".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            hook_types: HookType::ALL.to_vec(),
        }
    }

    fn run(ctx: &Ctx, input: HookInput) -> Result<Option<HookResult>, DeployerError> {
        let Some(item) = &input.deploy_item else {
            return Ok(None);
        };
        let script = item["metadata"]["annotations"][SCRIPT_ANNOTATION]
            .as_str()
            .unwrap_or("{}");
        let script: Value = serde_json::from_str(script).map_err(|e| {
            DeployerError::configuration("InvalidHookScript", format!("{SCRIPT_ANNOTATION}: {e}"))
        })?;
        ctx.debug(&format!(
            "hook {} for {}",
            input.hook_type, item["metadata"]["name"]
        ));
        match &script[input.hook_type.as_str()] {
            Value::Null => Ok(None),
            Value::String(action) if action == "trap" => {
                panic!("scripted trap at {}", input.hook_type)
            }
            Value::String(action) if action == "error" => Err(DeployerError::new(
                &[],
                "ScriptedError",
                format!("scripted error at {}", input.hook_type),
            )),
            Value::String(action) if action == "loop" => loop {
                std::hint::spin_loop();
            },
            Value::Object(r) => Ok(Some(HookResult {
                abort_reconcile: r.get("abortReconcile").and_then(Value::as_bool) == Some(true),
                requeue: r.get("requeue").and_then(Value::as_bool) == Some(true),
                requeue_after: r
                    .get("requeueAfterMs")
                    .and_then(Value::as_u64)
                    .map(Duration::from_millis),
            })),
            other => Err(DeployerError::configuration(
                "InvalidHookScript",
                format!("unknown scripted action {other}"),
            )),
        }
    }
}

impl Deployer for TestHooks {
    fn describe() -> Description {
        Description {
            name: "test-hooks".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            deploy_item_types: vec![DEPLOY_ITEM_TYPE.into()],
            hook_types: Vec::new(),
        }
    }

    fn reconcile(_ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        let calls = inv
            .previous_provider_status
            .as_ref()
            .and_then(|p| p["calls"].as_u64())
            .unwrap_or(0);
        Ok(Response {
            phase: Some("Succeeded".into()),
            provider_status: Some(json!({
                "apiVersion": "test.wasm-deployer.dev/v1",
                "kind": "ProviderStatus",
                "calls": calls + 1,
            })),
            ..Default::default()
        })
    }

    fn delete(_ctx: &Ctx, _inv: Invocation) -> Result<Response, DeployerError> {
        Ok(Response::default())
    }
}

export_deployer!(TestHooks);
export_hooks!(TestHooks);
