//! Re-apply: a reconcile a `ShouldReconcile` hook forces on a finished item (continuous
//! reconcile), run outside any job (`docs/hooks.md`).
//!
//! Owns: which items may be re-applied, the plugin's view of the item during a re-apply
//! (its own jobID, phase `Init`), and the one status write after it.
//! Must not touch: `phase`, `jobID`, `jobIDFinished`, `observedGeneration` or the export —
//! "jobID == jobIDFinished ⇒ final phase" must hold throughout.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::runtime::controller::Action;

use super::hooks::{action, hook_step_error};
use super::{Call, Error, ItemCtx, apply_conditions, now};
use crate::contract::status::{self, StepError};
use crate::hooks::{Accumulated, HookType};
use crate::landscaper::{DeployItem, Phase, Target, TransitionTimes};

/// What the plugin sees during a re-apply: the item as if a job had just started — a jobID
/// of its own (`reapply-<time>`, never written back), phase `Init`, initTime now — so every
/// plugin written for the job protocol reconciles from scratch instead of resuming the
/// finished job it finds in providerStatus. The stored status is never this view.
pub(super) fn reapply_view(item: &DeployItem) -> DeployItem {
    let mut view = item.clone();
    let mut s = view.status();
    let at = now();
    s.job_id = format!("reapply-{}", jiff::Timestamp::now().as_millisecond());
    s.phase = Phase::Init;
    s.last_reconcile_time = Some(at.clone());
    let times = s
        .transition_times
        .get_or_insert_with(TransitionTimes::default);
    times.init_time = Some(at);
    times.finished_time = None;
    view.status = Some(s);
    view
}

/// Only a settled, successful, not-deleting item is re-applied by a forced reconcile: a
/// `Failed` item waits for Landscaper's next job, a deleting one for its delete.
pub(super) fn reapplicable(item: &DeployItem) -> bool {
    !item.is_being_deleted() && item.status().phase == Phase::Succeeded
}

impl ItemCtx {
    /// A reconcile of a finished item forced by a `ShouldReconcile` hook (continuous
    /// reconcile): the plugin re-applies the item as it is, outside any job. Only
    /// `lastReconcileTime`, the error fields, providerStatus and conditions are written —
    /// never the phase or the jobID fields (`docs/hooks.md`).
    pub(super) async fn reapply(
        &self,
        mut item: DeployItem,
        target_obj: Option<Target>,
        mut acc: Accumulated,
    ) -> Result<Action, Error> {
        let error = match self
            .before_hooks(
                HookType::BeforeForceReconcile,
                &item,
                target_obj.as_ref(),
                &mut acc,
            )
            .await
        {
            Err(e) => Some(hook_step_error(&e)),
            Ok(true) => return Ok(action(&acc, None)),
            Ok(false) => match self.reapply_call(&mut item, target_obj.clone()).await? {
                Ok(Some(retry_after)) => {
                    // Not converged yet (e.g. readiness): try again soon, write nothing.
                    return Ok(action(&acc, Some(retry_after)));
                }
                Ok(None) => None,
                Err(err) => Some(err),
            },
        };
        self.deployer
            .stats
            .reapplies
            .fetch_add(1, Ordering::Relaxed);
        let mut s = item.status();
        status::record_reapply(&mut s, error.as_ref(), &now());
        item.status = Some(s);
        let item = self.write_status(&item).await?;
        match &error {
            Some(err) => {
                tracing::warn!(error = %err, "re-apply failed");
                self.deployer
                    .events
                    .warning(&item, "ReapplyFailed", err.to_string());
            }
            None => {
                tracing::info!("re-applied");
                self.deployer.events.normal(
                    &item,
                    "Reapplied",
                    "re-applied by a ShouldReconcile hook (continuous reconcile)".into(),
                );
            }
        }
        self.end_hooks(&item, target_obj.as_ref(), &mut acc).await;
        Ok(action(&acc, None))
    }

    /// The plugin call of a re-apply. `Ok(Ok(Some(d)))`: the plugin asks to be called again
    /// after `d`; `Ok(Err(_))`: the attempt failed.
    async fn reapply_call(
        &self,
        item: &mut DeployItem,
        target_obj: Option<Target>,
    ) -> Result<Result<Option<Duration>, StepError>, Error> {
        let resolved = match self.resolve_target(target_obj, false).await? {
            Ok(r) => r,
            Err(err) => return Ok(Err(err)),
        };
        let context = match self.read_context(item).await? {
            Ok(c) => c,
            Err(err) => return Ok(Err(err.with_operation("reconcile"))),
        };
        let mut view = reapply_view(item);
        let called = self
            .call_plugin_checked(&mut view, resolved, context, Call::Reapply)
            .await;
        let mut s = item.status();
        s.conditions = view.status().conditions;
        item.status = Some(s);
        let response = match called {
            Ok(r) => r,
            Err(err) => return Ok(Err(err)),
        };
        if let Some(after) = response.retry_after {
            return Ok(Ok(Some(after)));
        }
        let mut s = item.status();
        if let Some(ps) = &response.provider_status {
            s.provider_status = Some(ps.clone());
        }
        apply_conditions(&mut s, &response.conditions, &now());
        item.status = Some(s);
        Ok(Ok(None))
    }
}
