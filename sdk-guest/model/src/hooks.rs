//! Extension hooks as data: what a hook sees and answers ([`HookType`], [`HookInput`],
//! [`HookResult`], [`HookSetup`]).
//!
//! Owns: the hook model shared by hook plugins, the plugin runtime and the host.
//! Must not touch: aggregation or the flow — the host owns both (`docs/hooks.md`).
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// Calls the macro `$m!` with the case names of [`HookType`], in flow order — for code that
/// maps `HookType` onto a WIT binding's enum with the same cases (the runtime and this SDK).
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_hook_type {
    ($($m:tt)+) => {
        $($m)+! {
            Start,
            DuringResponsibilityCheck,
            AfterResponsibilityCheck,
            ShouldReconcile,
            BeforeAnyReconcile,
            BeforeAbort,
            BeforeForceReconcile,
            BeforeDelete,
            BeforeReconcile,
            End,
        }
    };
}

/// The points of the host's reconcile flow where hooks run, in flow order, with
/// Landscaper's exact names (WIT `hooks.hook-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum HookType {
    /// The very first step; no item, no target.
    Start,
    /// After the target responsibility check; a result overrides it.
    DuringResponsibilityCheck,
    /// After responsibility was confirmed.
    AfterResponsibilityCheck,
    /// After the "does this item need work" decision; may force a reconcile.
    ShouldReconcile,
    /// Before whichever of the four below runs.
    BeforeAnyReconcile,
    /// Before the host ends a job whose progressing timeout passed.
    BeforeAbort,
    /// Before a forced reconcile (forced by `ShouldReconcile`, or `test-reconcile`).
    BeforeForceReconcile,
    /// Before the delete step.
    BeforeDelete,
    /// Before the normal reconcile step.
    BeforeReconcile,
    /// After the deployer step and its status write.
    End,
}

impl HookType {
    /// Every hook type, in flow order.
    pub const ALL: [HookType; 10] = {
        macro_rules! all {
            ($($case:ident),* $(,)?) => { [$(HookType::$case),*] };
        }
        for_each_hook_type!(all)
    };

    /// The exact string Landscaper uses (`Start`, `ShouldReconcile`, ...): the case name.
    pub fn as_str(self) -> &'static str {
        macro_rules! names {
            ($($case:ident),* $(,)?) => {
                match self {
                    $(HookType::$case => stringify!($case),)*
                }
            };
        }
        for_each_hook_type!(names)
    }

    /// Parses Landscaper's string; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// For these two types `abort_reconcile` is AND-ed: `false` means "enforce continuation".
    pub fn inverted_abort(self) -> bool {
        matches!(
            self,
            HookType::DuringResponsibilityCheck | HookType::ShouldReconcile
        )
    }
}

impl std::fmt::Display for HookType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one hook (or the aggregate of several) says about the reconcile (Landscaper's
/// `HookResult`: `ReconcileResult{Requeue, RequeueAfter}` + `AbortReconcile`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookResult {
    /// Stop the reconcile after this stage.
    pub abort_reconcile: bool,
    /// Requeue the item immediately.
    pub requeue: bool,
    /// Requeue after this delay; `None` (or zero) = unset.
    pub requeue_after: Option<Duration>,
}

/// What a hook plugin declares (the seed's hook setup, WIT `hooks.hook-setup`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookSetup {
    /// Plugin name, as the host's `hooks:` configuration refers to it.
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// The hook types the hook was written for.
    pub hook_types: Vec<HookType>,
}

/// One hook call (WIT `hooks.hook-input`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookInput {
    /// Which point of the flow this is.
    pub hook_type: HookType,
    /// The DeployItem; `None` for [`HookType::Start`].
    pub deploy_item: Option<Value>,
    /// The item's Target object (no credentials); `None` for `Start` or without a Target.
    pub target: Option<Value>,
}
