//! The hook points of one reconcile: running a stage with the item and its Target object,
//! the Before* and End stages of a step, and turning hook outcomes into the reconcile's
//! Action or the step's error (`docs/hooks.md`).
//!
//! Owns: what a hook sees (never the Target's inline kubeconfig) and how its error is
//! recorded. Must not touch: which hooks run where (`crate::hooks::HookSet`) or the
//! aggregation rules (`crate::hooks::aggregate`).

use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::runtime::controller::Action;
use plugin_runtime::DeployerError;

use super::item::ItemCtx;
use crate::contract::status::StepError;
use crate::controller::context::Context;
use crate::hooks::{Accumulated, HookError, HookResult, HookType};
use crate::landscaper::{DeployItem, Target};

/// What the hook stages before the lock decided, carried into the step.
pub(super) struct Flow {
    /// A reconcile nobody asked for through a new jobID: forced by `ShouldReconcile`, or
    /// `operation: test-reconcile`.
    pub(super) forced: bool,
    /// A hook failed before the step: recorded as the step's error.
    pub(super) hook_error: Option<HookError>,
    pub(super) acc: Accumulated,
}

/// The Action of a reconcile: the flow's requeue (`None` = wait for a change), shortened by
/// what the hooks asked for.
pub(super) fn action(acc: &Accumulated, flow: Option<Duration>) -> Action {
    match acc.requeue(flow) {
        Some(d) => Action::requeue(d.max(Duration::from_millis(10))),
        None => Action::await_change(),
    }
}

/// What hooks see of one version of an item: the item and its Target object as JSON,
/// encoded once on first use and shared by every hook of every stage run on that version. The
/// Target's inline `config` (it may hold credentials) is never passed to hooks.
pub(super) struct HookView<'a> {
    item: &'a DeployItem,
    target: Option<&'a Target>,
    json: OnceLock<Result<(String, Option<String>), String>>,
}

impl<'a> HookView<'a> {
    pub(super) fn new(item: &'a DeployItem, target: Option<&'a Target>) -> Self {
        HookView {
            item,
            target,
            json: OnceLock::new(),
        }
    }

    fn json(&self) -> &Result<(String, Option<String>), String> {
        self.json.get_or_init(|| {
            let item =
                super::plugin_view::item_json_for_plugins(self.item).map_err(|e| e.to_string())?;
            let target = self
                .target
                .map(|t| {
                    let mut v = super::plugin_view::for_plugins(serde_json::to_value(t)?);
                    if let Some(spec) = v.get_mut("spec").and_then(|s| s.as_object_mut()) {
                        spec.remove("config");
                    }
                    Ok::<_, serde_json::Error>(v.to_string())
                })
                .transpose()
                .map_err(|e| e.to_string())?;
            Ok((item, target))
        })
    }
}

/// Runs one hook stage for an item of `deploy_item_type`.
pub(super) async fn run_stage(
    ctx: &Context,
    hook_type: HookType,
    deploy_item_type: &str,
    view: &HookView<'_>,
) -> Result<Option<HookResult>, HookError> {
    ctx.stats.hook_stages.fetch_add(1, Ordering::Relaxed);
    let (item_json, target_json) = view.json().as_ref().map_err(|e| HookError {
        index: 0,
        hook_type,
        plugin: String::new(),
        error: DeployerError::internal("EncodeHookInput", e.clone()),
    })?;
    ctx.hooks
        .run(
            hook_type,
            Some(deploy_item_type),
            Some(item_json.as_str()),
            target_json.as_deref(),
        )
        .await
}

/// A hook error as the step's error (Landscaper: operation `ExecuteHooks`, reason
/// `ExecuteReconcile`); the hook's codes decide whether the job fails (a trap carries
/// `ERR_INTERNAL_PROBLEM`).
pub(super) fn hook_step_error(e: &HookError) -> StepError {
    StepError {
        operation: "ExecuteHooks".into(),
        reason: "ExecuteReconcile".into(),
        message: e.to_string(),
        codes: e.error.codes.clone(),
    }
}

impl ItemCtx {
    /// `BeforeAnyReconcile`, then `kind`. `Ok(true)`: the hooks stopped the reconcile.
    pub(super) async fn before_hooks(
        &self,
        kind: HookType,
        item: &DeployItem,
        target: Option<&Target>,
        acc: &mut Accumulated,
    ) -> Result<bool, HookError> {
        let hooks = self.ctx.hooks.current();
        let item_type = &self.deploy_item_type;
        let view = HookView::new(item, target);
        for t in [HookType::BeforeAnyReconcile, kind] {
            if hooks.has(Some(item_type), t) {
                acc.add(run_stage(&self.ctx, t, item_type, &view).await?);
                if acc.aborted() {
                    tracing::info!(hook_type = %t, "reconcile stopped by an extension hook");
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// `End` hooks, after the step's status write. Nothing is left to stop or record in the
    /// job, so an error is reported as an Event and in the log.
    pub(super) async fn end_hooks(
        &self,
        item: &DeployItem,
        target: Option<&Target>,
        acc: &mut Accumulated,
    ) {
        let item_type = &self.deploy_item_type;
        if !self.ctx.hooks.has(Some(item_type), HookType::End) {
            return;
        }
        let view = HookView::new(item, target);
        match run_stage(&self.ctx, HookType::End, item_type, &view).await {
            Ok(r) => acc.add(r),
            Err(e) => {
                tracing::warn!(error = %e, "End hook failed");
                self.ctx
                    .events
                    .warning(item, "ExtensionHookFailed", e.to_string());
            }
        }
    }
}
