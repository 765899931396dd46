//! Stage 5, commit: the step's result becomes the item's status, in one write
//! (`HandleReconcileResult`: the error, the failure phase of unrecoverable codes, and — when the
//! phase is final — `jobIDFinished` and `finishedTime` with it). Then the item memory (a
//! finished job is settled, every write's object remembered), the Events, the `End` hook and
//! the requeue.
//!
//! Owns: every write to the DeployItem object — [`ItemCtx::write_status`] is the one status
//! write path (pickup, shortcuts, re-apply and finish all go through it), and the finalizer and
//! annotation patches. Must not touch: contract rules (they are in `crate::contract`).

use std::sync::atomic::Ordering;

use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::decide::Step;
use super::hooks::action;
use super::invoke::StepOutcome;
use super::item::{ItemCtx, TargetRef};
use crate::clock::now;
use crate::contract::status;
use crate::controller::context::Error;
use crate::landscaper::{DeployItem, FINALIZER};

impl ItemCtx {
    /// Folds the step's outcome into the status and writes it if anything changed (always when
    /// the job finished).
    pub(super) async fn commit(
        &self,
        mut item: DeployItem,
        target: &TargetRef,
        step: Step,
        outcome: StepOutcome,
    ) -> Result<Action, Error> {
        let Step {
            deleting,
            before,
            end_hooks,
            mut acc,
            ..
        } = step;
        if let Some(err) = &outcome.error {
            tracing::warn!(error = %err, "step failed");
            self.ctx
                .events
                .warning(&item, &err.reason, err.message.clone());
        }
        let mut s = item.status();
        let finished = status::handle_step_result(&mut s, outcome.error.as_ref(), deleting, &now());
        item.status = Some(s);
        if outcome.released {
            // The finalizer is gone; the API server removes the object. A final status write
            // would only race with that: NotFound (or a UID-precondition 409) is success here.
            if item.status() != before {
                match self.write_status(&item).await {
                    Err(e) if e.is_gone() => {}
                    other => {
                        other?;
                    }
                }
            }
            self.ctx.stats.jobs_finished.fetch_add(1, Ordering::Relaxed);
            self.ctx.stats.jobs.inc([&self.deploy_item_type, "Deleted"]);
            tracing::info!("deleted");
            self.end_hooks(&item, target.object.as_ref(), &mut acc)
                .await;
            return Ok(action(&acc, None));
        }
        if item.status() != before || finished {
            item = self.write_status(&item).await?;
        }
        let flow_requeue = if finished {
            self.finished(&item);
            None
        } else {
            Some(outcome.retry_after.unwrap_or(self.ctx.requeue_interval))
        };
        if end_hooks {
            self.end_hooks(&item, target.object.as_ref(), &mut acc)
                .await;
        }
        Ok(action(&acc, flow_requeue))
    }

    /// A finished job: counted, settled at its resourceVersion (`ItemMemory`), logged and reported.
    pub(super) fn finished(&self, item: &DeployItem) {
        self.ctx.stats.jobs_finished.fetch_add(1, Ordering::Relaxed);
        self.ctx.memory.settle(item);
        let s = item.status();
        let stats = &self.ctx.stats;
        stats.jobs.inc([&self.deploy_item_type, s.phase.as_str()]);
        // Timed from this host's pickup; a job another replica (or an earlier run of this
        // host) picked up is timed from its initTime, which has whole seconds.
        let duration = self.ctx.memory.job_finished(item).or_else(|| {
            s.transition_times
                .as_ref()
                .and_then(|t| t.init_time.as_deref())
                .and_then(crate::clock::seconds_since)
        });
        if let Some(secs) = duration {
            stats.job_durations.observe([&self.deploy_item_type], secs);
        }
        tracing::info!(phase = %s.phase, "job finished");
        let note = format!("job {} finished with phase {}", s.job_id, s.phase);
        if s.phase.is_failed() {
            self.ctx.events.warning(item, "JobFailed", note);
        } else {
            self.ctx.events.normal(item, "JobFinished", note);
        }
    }

    /// The one status write: a `PUT` of the status subresource, conditional on the item's
    /// resourceVersion (a 409 aborts the reconcile; the item is re-read and decided again).
    pub(super) async fn write_status(&self, item: &DeployItem) -> Result<DeployItem, Error> {
        let written = self
            .items
            .replace_status(&self.name, &PostParams::default(), item)
            .await?;
        self.ctx.memory.wrote(&written);
        Ok(written)
    }

    pub(super) async fn add_finalizer(&self, item: &DeployItem) -> Result<DeployItem, Error> {
        let mut finalizers = item.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(FINALIZER.to_string());
        self.patch_metadata(item, json!({ "finalizers": finalizers }))
            .await
    }

    /// Removes the finalizer; an item already gone is fine.
    pub(super) async fn remove_finalizer(&self, item: &DeployItem) -> Result<(), Error> {
        let finalizers: Vec<String> = item
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != FINALIZER)
            .collect();
        let result = match self
            .patch_metadata(item, json!({ "finalizers": finalizers }))
            .await
        {
            Ok(_) => Ok(()),
            Err(Error::Kube(kube::Error::Api(e))) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        };
        if result.is_ok() {
            // The object is gone or going: nothing of it needs remembering.
            self.ctx.memory.forget(&item.metadata);
        }
        result
    }

    /// A merge patch of `metadata`, conditional on the item's resourceVersion.
    pub(super) async fn patch_metadata(
        &self,
        item: &DeployItem,
        metadata: serde_json::Value,
    ) -> Result<DeployItem, Error> {
        let mut metadata = metadata;
        metadata["resourceVersion"] = json!(item.metadata.resource_version);
        let patch = json!({ "metadata": metadata });
        let written = self
            .items
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        self.ctx.memory.wrote(&written);
        Ok(written)
    }
}
