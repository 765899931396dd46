//! Extension hooks: which hook plugins run where, how their results are aggregated, and
//! what the aggregate does to the flow (the seed `extension-hooks.txt`; contract section 4;
//! `docs/hooks.md`).
//!
//! Owns: [`aggregate`] (the seed's rules, a pure function with property tests), the
//! per-reconcile [`Accumulated`] result, and [`HookSet`] — the configured registrations
//! (plugin, DeployItem types, hook types, in execution order) and running one stage.
//! Must not touch: the DeployItem or any Kubernetes object — the controller calls a stage
//! at its point of the flow and acts on the answer. Where the seed and Landscaper's code
//! disagree (the code drops `Requeue`), the seed is followed.

mod aggregation;
mod set;

pub use aggregation::{Accumulated, aggregate};
pub use sdk_guest::{HookResult, HookType};
pub use set::{HookError, HookSet, LiveHooks};
