//! Test-only plugin: a component that exports only `hooks` but calls the Kubernetes capability,
//! so it imports `wasm-deployer:plugin/kubernetes`. Hooks are granted `log` and `clock` only;
//! the runtime must refuse to load it, naming the import.

use sdk_guest::{
    Ctx, DeployerError, HookInput, HookResult, HookSetup, HookType, Hooks, ObjectRef, export_hooks,
};

/// The plugin (hooks only).
pub struct GreedyHook;

impl Hooks for GreedyHook {
    fn describe() -> HookSetup {
        HookSetup {
            name: "test-greedy-hook".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            hook_types: vec![HookType::ShouldReconcile],
        }
    }

    fn run(ctx: &Ctx, _input: HookInput) -> Result<Option<HookResult>, DeployerError> {
        // Reads a Secret: exactly what a hook must not be able to do.
        ctx.kube_get(&ObjectRef::namespaced(
            "v1",
            "Secret",
            "default",
            "credentials",
        ))?;
        Ok(None)
    }
}

export_hooks!(GreedyHook);
