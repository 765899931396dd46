//! The job protocol: given the full DeployItem, what this reconcile must do.
//!
//! Landscaper hands out work by setting `status.jobID`; a deployer acts only while
//! `jobID != jobIDFinished` (contract section 3.4). This module turns an item into one
//! [`JobStep`]; it performs no I/O.

use crate::landscaper::{DeployItem, Phase, annotations, operations};

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
    let status = item.status.as_ref();
    let job_id = status.map(|s| s.job_id.as_str()).unwrap_or_default();
    let finished = status
        .map(|s| s.job_id_finished.as_str())
        .unwrap_or_default();
    let test_reconcile = has_test_reconcile(item);
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
    use crate::landscaper::DeployItemStatus;

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
