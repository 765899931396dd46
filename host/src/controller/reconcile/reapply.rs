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
use super::item::{ItemCtx, StageError};
use crate::clock::now;
use crate::contract::job::reapply_job_id;
use crate::contract::status::{self, StepError};
use crate::contract::step::{Call, apply_conditions};
use crate::controller::context::Error;
use crate::hooks::{Accumulated, HookType};
use crate::landscaper::{DeployItem, Phase, Target, TransitionTimes};

/// What the plugin sees during a re-apply: the item as if a job had just started — a jobID
/// of its own (`reapply-<time>`, never written back), phase `Init`, initTime now — so every
/// plugin written for the job protocol reconciles from scratch instead of resuming the
/// finished job it finds in providerStatus. The stored status is never this view.
fn reapply_view(item: &DeployItem) -> DeployItem {
    let mut view = item.clone();
    let mut s = view.status();
    let at = now();
    s.job_id = reapply_job_id(jiff::Timestamp::now().as_millisecond());
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

/// What one re-apply attempt came to.
enum Attempt {
    /// Converged: record it.
    Done,
    /// Not converged yet (e.g. readiness): try again after this, write nothing.
    Again(Duration),
    Failed(StepError),
}

impl ItemCtx {
    /// A reconcile of a finished item forced by a `ShouldReconcile` hook (continuous
    /// reconcile): the plugin re-applies the item as it is, outside any job. Only
    /// `lastReconcileTime`, the error fields, providerStatus and conditions are written —
    /// never the phase or the jobID fields (`docs/hooks.md`).
    pub(super) async fn reapply(
        &self,
        mut item: DeployItem,
        target: Option<&Target>,
        mut acc: Accumulated,
    ) -> Result<Action, Error> {
        let error = match self
            .before_hooks(HookType::BeforeForceReconcile, &item, target, &mut acc)
            .await
        {
            Err(e) => Some(hook_step_error(&e)),
            Ok(true) => return Ok(action(&acc, None)),
            Ok(false) => match self.reapply_call(&mut item, target).await? {
                Attempt::Again(retry_after) => return Ok(action(&acc, Some(retry_after))),
                Attempt::Done => None,
                Attempt::Failed(err) => Some(err),
            },
        };
        self.ctx.stats.reapplies.fetch_add(1, Ordering::Relaxed);
        let mut s = item.status();
        status::record_reapply(&mut s, error.as_ref(), &now());
        item.status = Some(s);
        let item = self.write_status(&item).await?;
        match &error {
            Some(err) => {
                tracing::warn!(error = %err, "re-apply failed");
                self.ctx
                    .events
                    .warning(&item, "ReapplyFailed", err.to_string());
            }
            None => {
                tracing::info!("re-applied");
                self.ctx.events.normal(
                    &item,
                    "Reapplied",
                    format!(
                        "re-applied after job {} by a ShouldReconcile hook (continuous reconcile)",
                        item.status().job_id
                    ),
                );
            }
        }
        self.end_hooks(&item, target, &mut acc).await;
        Ok(action(&acc, None))
    }

    /// The plugin call of a re-apply; its providerStatus and conditions go into `item`.
    async fn reapply_call(
        &self,
        item: &mut DeployItem,
        target: Option<&Target>,
    ) -> Result<Attempt, Error> {
        let inputs = async {
            let resolved = self.resolve_target(target, Call::Reapply).await?;
            let context = self.read_context(item, Call::Reapply).await?;
            Ok::<_, StageError>((resolved, context))
        };
        let (resolved, context) = match inputs.await {
            Ok(inputs) => inputs,
            Err(StageError::Step(err)) => return Ok(Attempt::Failed(err)),
            Err(StageError::Api(e)) => return Err(e),
        };
        let mut view = reapply_view(item);
        let called = self
            .call_plugin(&mut view, resolved, context, Call::Reapply)
            .await;
        let mut s = item.status();
        s.conditions = view.status().conditions;
        let response = match called {
            Ok(r) => r,
            Err(err) => {
                item.status = Some(s);
                return Ok(Attempt::Failed(err));
            }
        };
        if let Some(after) = response.retry_after {
            item.status = Some(s);
            return Ok(Attempt::Again(after));
        }
        if let Some(ps) = &response.provider_status {
            s.provider_status = Some(ps.clone());
        }
        apply_conditions(&mut s, &response.conditions, &now());
        item.status = Some(s);
        Ok(Attempt::Done)
    }
}
