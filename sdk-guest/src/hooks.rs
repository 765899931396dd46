//! Extension hooks, guest side: the [`Hooks`] trait a hook plugin implements (exported with
//! [`crate::export_hooks!`]). The data it sees and answers ([`HookInput`], [`HookResult`],
//! [`HookSetup`]) is the shared model's.
//!
//! Must not touch: aggregation or the flow — the host owns both (`docs/hooks.md`).

use crate::{Ctx, DeployerError, HookInput, HookResult, HookSetup};

/// A hook: what a hook plugin implements. Like [`crate::Deployer`], there is no `self`:
/// every call runs in a fresh instance.
pub trait Hooks {
    /// Name, version and the hook types the hook was written for.
    fn describe() -> HookSetup;
    /// Run the hook. `Ok(None)` = no opinion.
    fn run(ctx: &Ctx, input: HookInput) -> Result<Option<HookResult>, DeployerError>;
}
