//! The job protocol: given the full DeployItem, what this reconcile must do.
//!
//! Landscaper hands out work by setting `status.jobID`; a deployer acts only while
//! `jobID != jobIDFinished` (contract section 3.4). This module turns an item into one
//! [`JobStep`]; it performs no I/O.

use crate::landscaper::{
    DeployItem, DeployItemStatus, Phase, TransitionTimes, annotations, operations,
};

/// A new jobID, as Landscaper mints them (a random UUID). The one place the host creates job IDs:
/// `test-reconcile` and dev mode's Landscaper stand-in use it.
pub fn mint_job_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The jobID a plugin sees during a re-apply outside any job (`reapply-<unix ms>`); it is never
/// written back, so it cannot be confused with a job Landscaper issued.
pub fn reapply_job_id(unix_millis: i64) -> String {
    format!("reapply-{unix_millis}")
}

/// Landscaper issuing a job: a fresh jobID, `jobIDGenerationTime` and
/// `transitionTimes = {triggerTime}`.
pub fn issue_job(status: &mut DeployItemStatus, now: &str) {
    status.job_id = mint_job_id();
    status.job_id_generation_time = Some(now.to_string());
    status.transition_times = Some(TransitionTimes {
        trigger_time: Some(now.to_string()),
        ..Default::default()
    });
}

/// `operation: test-reconcile` starts a job without Landscaper: a fresh jobID and triggerTime,
/// in memory (the pickup write that follows stores it).
pub fn start_test_reconcile(status: &mut DeployItemStatus, now: &str) {
    status.job_id = mint_job_id();
    status.transition_times = Some(TransitionTimes {
        trigger_time: Some(now.to_string()),
        ..Default::default()
    });
}

/// Only a settled, successful, not-deleting item is re-applied by a forced reconcile: a
/// `Failed` item waits for Landscaper's next job, a deleting one for its delete.
pub fn reapplicable(item: &DeployItem) -> bool {
    !item.is_being_deleted() && item.status().phase == Phase::Succeeded
}

/// What the controller does with an item it is responsible for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStep {
    /// `jobID == jobIDFinished`: nothing to do, nothing is written.
    Finished,
    /// The referenced Target does not exist: finish as `Failed` / `DeleteFailed`
    /// with reason `NoTargetFound`, without initialising the status.
    FailMissingTarget { deleting: bool },
    /// `spec.updateOnChangeOnly` on an unchanged, `Succeeded` item: finish at once without
    /// calling the plugin (one status write).
    FinishUnchanged,
    /// A new job: write `Init` / `InitDelete` and the pickup fields, then run the plugin.
    Start { deleting: bool },
    /// A job that was started earlier and is not finished: run the plugin again.
    Continue { deleting: bool },
}

/// True if the item carries `landscaper.gardener.cloud/operation: test-reconcile`.
pub fn has_test_reconcile(item: &DeployItem) -> bool {
    item.annotation(annotations::OPERATION) == Some(operations::TEST_RECONCILE)
}

/// Decides the step for `item`. `target_missing` is true when the item names a Target that does
/// not exist in its namespace.
pub fn next_step(item: &DeployItem, target_missing: bool) -> JobStep {
    step_for(item, target_missing, has_test_reconcile(item))
}

/// [`next_step`], with `test_reconcile` saying whether the item carried
/// `operation: test-reconcile` (the host removes the annotation before it decides): such an item
/// is reconciled — never finished unchanged by `updateOnChangeOnly`.
pub fn step_for(item: &DeployItem, target_missing: bool, test_reconcile: bool) -> JobStep {
    let status = item.status.as_ref();
    let job_id = status.map(|s| s.job_id.as_str()).unwrap_or_default();
    let finished = status
        .map(|s| s.job_id_finished.as_str())
        .unwrap_or_default();
    if !test_reconcile && job_id == finished {
        return JobStep::Finished;
    }
    let deleting = item.is_being_deleted();
    if target_missing {
        return JobStep::FailMissingTarget { deleting };
    }
    let phase = status.map(|s| s.phase.clone()).unwrap_or_default();
    if phase.is_final() || phase.is_empty() {
        let generation = item.metadata.generation.unwrap_or_default();
        let observed = status.map(|s| s.observed_generation).unwrap_or_default();
        if !deleting
            && !test_reconcile
            && item.spec.update_on_change_only == Some(true)
            && generation == observed
            && phase == Phase::Succeeded
        {
            return JobStep::FinishUnchanged;
        }
        JobStep::Start { deleting }
    } else {
        JobStep::Continue { deleting }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(job: &str, finished: &str, phase: Phase) -> DeployItem {
        let mut di = DeployItem::default();
        di.metadata.generation = Some(1);
        di.status = Some(DeployItemStatus {
            job_id: job.into(),
            job_id_finished: finished.into(),
            phase,
            observed_generation: 1,
            ..Default::default()
        });
        di
    }

    #[test]
    fn given_equal_job_ids_nothing_happens() {
        assert_eq!(
            next_step(&item("1", "1", Phase::Succeeded), false),
            JobStep::Finished
        );
        assert_eq!(
            next_step(&DeployItem::default(), false),
            JobStep::Finished,
            "never triggered"
        );
        assert_eq!(
            next_step(&item("1", "1", Phase::Succeeded), true),
            JobStep::Finished
        );
    }

    #[test]
    fn given_a_new_job_id_on_a_final_or_empty_phase_a_job_starts() {
        for p in [
            Phase::Empty,
            Phase::Succeeded,
            Phase::Failed,
            Phase::DeleteFailed,
        ] {
            assert_eq!(
                next_step(&item("2", "1", p.clone()), false),
                JobStep::Start { deleting: false },
                "{p}"
            );
        }
    }

    #[test]
    fn given_an_unfinished_phase_the_job_continues() {
        for p in [
            Phase::Init,
            Phase::Progressing,
            Phase::InitDelete,
            Phase::Deleting,
        ] {
            assert_eq!(
                next_step(&item("2", "1", p.clone()), false),
                JobStep::Continue { deleting: false },
                "{p}"
            );
        }
    }

    #[test]
    fn given_a_deletion_timestamp_the_job_is_a_deletion() {
        let mut di = item("2", "1", Phase::Succeeded);
        di.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert_eq!(next_step(&di, false), JobStep::Start { deleting: true });
        assert_eq!(
            next_step(&di, true),
            JobStep::FailMissingTarget { deleting: true }
        );
    }

    #[test]
    fn update_on_change_only_skips_unchanged_succeeded_items() {
        let mut di = item("2", "1", Phase::Succeeded);
        di.spec.update_on_change_only = Some(true);
        assert_eq!(next_step(&di, false), JobStep::FinishUnchanged);
        di.metadata.generation = Some(2);
        assert_eq!(next_step(&di, false), JobStep::Start { deleting: false });
    }

    #[test]
    fn minted_job_ids_are_fresh_and_never_finished() {
        let (a, b) = (mint_job_id(), mint_job_id());
        assert_ne!(a, b);
        let mut s = DeployItemStatus {
            job_id: "1".into(),
            job_id_finished: "1".into(),
            ..Default::default()
        };
        start_test_reconcile(&mut s, "2026-01-01T00:00:00Z");
        assert_ne!(s.job_id, s.job_id_finished);
        assert_eq!(
            s.transition_times.unwrap().trigger_time.as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        let mut s = DeployItemStatus::default();
        issue_job(&mut s, "t");
        assert!(!s.job_id.is_empty() && s.job_id_generation_time.as_deref() == Some("t"));
        assert!(reapply_job_id(5).starts_with("reapply-"));
    }

    #[test]
    fn only_succeeded_items_not_being_deleted_are_reapplicable() {
        assert!(reapplicable(&item("1", "1", Phase::Succeeded)));
        assert!(!reapplicable(&item("1", "1", Phase::Failed)));
        let mut di = item("1", "1", Phase::Succeeded);
        di.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(!reapplicable(&di));
    }

    #[test]
    fn test_reconcile_is_reconciled_even_with_update_on_change_only() {
        // The host removed the annotation and started a fresh job in memory: the item is
        // unchanged and Succeeded, which updateOnChangeOnly alone would finish unchanged.
        let mut di = item("2", "1", Phase::Succeeded);
        di.spec.update_on_change_only = Some(true);
        assert_eq!(step_for(&di, false, false), JobStep::FinishUnchanged);
        assert_eq!(
            step_for(&di, false, true),
            JobStep::Start { deleting: false }
        );
    }

    #[test]
    fn test_reconcile_annotation_forces_a_job() {
        let mut di = item("1", "1", Phase::Succeeded);
        di.metadata.annotations = Some(
            [(
                annotations::OPERATION.to_string(),
                operations::TEST_RECONCILE.to_string(),
            )]
            .into(),
        );
        assert_eq!(next_step(&di, false), JobStep::Start { deleting: false });
    }
}
