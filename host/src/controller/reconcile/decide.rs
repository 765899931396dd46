//! Stage 3, decide: what this reconcile does with the job (contract section 3.4), after the lock.
//!
//! `operation: test-reconcile` starts a job; then [`next_step`] picks one of: nothing (or a
//! hook-forced re-apply), fail at once for a missing Target, finish an unchanged item, start a
//! job (the pickup write), or continue one. Before the plugin runs, the `Before*` hooks may stop
//! the reconcile or fail the step.
//!
//! Owns: the writes a decision implies before the plugin (pickup, the two shortcuts, the
//! removal of the test-reconcile annotation). Must not touch: the plugin call or the final write.

use kube::runtime::controller::Action;
use serde_json::json;

use super::hooks::{Flow, action, hook_step_error};
use super::item::{ItemCtx, TargetRef};
use crate::clock::now;
use crate::contract::job::{self, reapplicable};
use crate::contract::{JobStep, StepError, step};
use crate::controller::context::Error;
use crate::hooks::{Accumulated, HookError, HookType};
use crate::landscaper::{DeployItem, DeployItemStatus, annotations};

/// The decision of this stage.
pub(super) enum Decided {
    /// Nothing (more) to do in this reconcile.
    Done(Action),
    /// Run the plugin step on the item.
    Run(Box<(Step, DeployItem)>),
}

/// A step about to run, as decided.
pub(super) struct Step {
    pub deleting: bool,
    /// The status before the step, to write only what changed.
    pub before: DeployItemStatus,
    /// A hook failed: the step fails with this error instead of calling the plugin.
    pub early_error: Option<StepError>,
    /// `End` runs after the write unless a hook failed before the lock.
    pub end_hooks: bool,
    pub acc: Accumulated,
}

impl ItemCtx {
    pub(super) async fn decide(
        &self,
        mut item: DeployItem,
        target: &TargetRef,
        flow: Flow,
    ) -> Result<Decided, Error> {
        let Flow {
            mut forced,
            hook_error,
            acc,
        } = flow;
        let test_reconcile = job::has_test_reconcile(&item);
        if test_reconcile {
            item = self.start_test_reconcile(&item).await?;
            forced = true;
        }
        match job::step_for(&item, target.missing, test_reconcile) {
            JobStep::Finished if forced && hook_error.is_none() && reapplicable(&item) => {
                let action = self.reapply(item, target.object.as_ref(), acc).await?;
                return Ok(Decided::Done(action));
            }
            JobStep::Finished => return Ok(Decided::Done(action(&acc, None))),
            JobStep::FailMissingTarget { deleting } => {
                let mut s = item.status();
                let err = step::fail_missing_target(&mut s, deleting, &now());
                item.status = Some(s);
                let item = self.write_status(&item).await?;
                self.ctx
                    .events
                    .warning(&item, &err.reason, err.message.clone());
                self.finished(&item);
                return Ok(Decided::Done(action(&acc, None)));
            }
            JobStep::FinishUnchanged => {
                let mut s = item.status();
                let generation = item.metadata.generation.unwrap_or_default();
                let deployer = step::deployer_for(&self.ctx.deployer, &item);
                step::finish_unchanged(&mut s, generation, &deployer, &now());
                item.status = Some(s);
                let item = self.write_status(&item).await?;
                self.finished(&item);
                return Ok(Decided::Done(action(&acc, None)));
            }
            JobStep::Start { deleting } => item = self.pick_up(item, deleting).await?,
            JobStep::Continue { .. } => {}
        }
        self.before_step(item, target, forced, hook_error, acc)
            .await
    }

    /// The `Before*` hooks of the step (or the error of a hook that failed before the lock).
    async fn before_step(
        &self,
        item: DeployItem,
        target: &TargetRef,
        forced: bool,
        hook_error: Option<HookError>,
        mut acc: Accumulated,
    ) -> Result<Decided, Error> {
        let deleting = item.is_being_deleted();
        let end_hooks = hook_error.is_none();
        let early_error = match &hook_error {
            Some(e) => Some(hook_step_error(e)),
            None => {
                let kind = if self.timed_out(&item, deleting) {
                    HookType::BeforeAbort
                } else if forced {
                    HookType::BeforeForceReconcile
                } else if deleting {
                    HookType::BeforeDelete
                } else {
                    HookType::BeforeReconcile
                };
                match self
                    .before_hooks(kind, &item, target.object.as_ref(), &mut acc)
                    .await
                {
                    Err(e) => Some(hook_step_error(&e)),
                    Ok(true) => {
                        // Stopped: the job stays open and is polled as usual.
                        let requeue = Some(self.ctx.requeue_interval);
                        return Ok(Decided::Done(action(&acc, requeue)));
                    }
                    Ok(false) => None,
                }
            }
        };
        let step = Step {
            deleting,
            before: item.status(),
            early_error,
            end_hooks,
            acc,
        };
        Ok(Decided::Run(Box::new((step, item))))
    }

    /// Starts a job: the pickup write (`Init` / `InitDelete`) and its Event.
    async fn pick_up(&self, mut item: DeployItem, deleting: bool) -> Result<DeployItem, Error> {
        let mut s = item.status();
        let generation = item.metadata.generation.unwrap_or_default();
        let deployer = step::deployer_for(&self.ctx.deployer, &item);
        step::start_job(&mut s, generation, &deployer, deleting, &now());
        item.status = Some(s);
        let item = self.write_status(&item).await?;
        self.ctx.memory.job_started(&item);
        let s = item.status();
        tracing::Span::current().record("phase", tracing::field::display(&s.phase));
        tracing::info!("picked up job");
        self.ctx.events.normal(
            &item,
            "PickedUp",
            format!(
                "job {} picked up by {} ({})",
                s.job_id, deployer.name, deployer.identity
            ),
        );
        Ok(item)
    }

    /// `operation: test-reconcile`: remove the annotation (a spec write), then start a fresh
    /// job in memory; the pickup write stores it.
    async fn start_test_reconcile(&self, item: &DeployItem) -> Result<DeployItem, Error> {
        let mut updated = self
            .patch_metadata(
                item,
                json!({ "annotations": { annotations::OPERATION: null } }),
            )
            .await?;
        let mut s = updated.status();
        job::start_test_reconcile(&mut s, &now());
        updated.status = Some(s);
        Ok(updated)
    }
}
