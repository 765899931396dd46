//! How a DeployItem's status changes: job start (`initStatus`), errors (`UpdatedError`,
//! `SetLastError`), conditions (`UpdatedCondition`) and the finish (`HandleReconcileResult`).
//!
//! Pure functions over [`DeployItemStatus`]; the caller supplies `now`, so every rule is unit-tested
//! with fixed times. Nothing here talks to the API server.

use landscaper_model::ConditionReport;

use crate::landscaper::{
    Condition, DeployItemStatus, DeployerInformation, LsError, Phase, TransitionTimes, codes,
};

/// Number of errors kept in `status.lastErrors`.
pub const MAX_LAST_ERRORS: usize = 5;

/// An error of one reconcile step, before timestamps are attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepError {
    pub operation: String,
    pub reason: String,
    pub message: String,
    pub codes: Vec<String>,
}

impl StepError {
    pub fn new(operation: &str, reason: &str, message: impl Into<String>) -> Self {
        Self {
            operation: operation.into(),
            reason: reason.into(),
            message: message.into(),
            codes: Vec::new(),
        }
    }

    pub fn with_code(mut self, code: &str) -> Self {
        if !self.codes.iter().any(|c| c == code) {
            self.codes.push(code.into());
        }
        self
    }

    /// The same error, attributed to `operation` (e.g. `delete`).
    pub fn with_operation(mut self, operation: &str) -> Self {
        self.operation = operation.to_string();
        self
    }

    pub fn is_unrecoverable(&self) -> bool {
        self.codes.iter().any(|c| codes::is_unrecoverable(c))
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.operation, self.reason, self.message)?;
        if !self.codes.is_empty() {
            write!(f, " ({})", self.codes.join(", "))?;
        }
        Ok(())
    }
}

/// Starts a job: `observedGeneration`, `initTime` (keeping `triggerTime`), `lastReconcileTime`,
/// `deployer`, and cleared error fields; sets `phase` (contract section 3.4 step 6).
pub fn init_status(
    status: &mut DeployItemStatus,
    generation: i64,
    deployer: &DeployerInformation,
    phase: Phase,
    now: &str,
) {
    status.phase = phase;
    status.observed_generation = generation;
    let times = status
        .transition_times
        .get_or_insert_with(TransitionTimes::default);
    times.init_time = Some(now.to_string());
    times.finished_time = None;
    status.last_reconcile_time = Some(now.to_string());
    status.deployer = Some(deployer.clone());
    status.last_error = None;
    status.first_error = None;
    status.last_errors.clear();
    // Deprecated field that Landscaper's defaulting removes on every reconcile.
    status.deploy_item_phase = None;
}

/// `UpdatedError`: the new `lastError` given the previous one.
pub fn updated_error(previous: Option<&LsError>, err: &StepError, now: &str) -> LsError {
    let mut codes = err.codes.clone();
    codes.dedup();
    match previous {
        None => LsError {
            operation: err.operation.clone(),
            reason: err.reason.clone(),
            message: err.message.clone(),
            last_transition_time: now.into(),
            last_update_time: now.into(),
            codes,
        },
        Some(prev) => {
            let last_transition_time = if prev.operation != err.operation {
                now.to_string()
            } else {
                prev.last_transition_time.clone()
            };
            let changed = prev.operation != err.operation
                || prev.reason != err.reason
                || prev.message != err.message
                || prev.codes != codes;
            LsError {
                operation: err.operation.clone(),
                reason: err.reason.clone(),
                message: err.message.clone(),
                last_transition_time,
                last_update_time: if changed {
                    now.to_string()
                } else {
                    prev.last_update_time.clone()
                },
                codes,
            }
        }
    }
}

/// `HandleReconcileResult` steps 1–5: records `err` (or clears `lastError`), forces a failure phase
/// for unrecoverable codes, and finishes the job if the phase is final. Returns true if the job is
/// finished by this status.
pub fn handle_step_result(
    status: &mut DeployItemStatus,
    err: Option<&StepError>,
    deleting: bool,
    now: &str,
) -> bool {
    match err {
        Some(err) => {
            record_error(status, err, now);
            if err.is_unrecoverable() {
                status.phase = if deleting {
                    Phase::DeleteFailed
                } else {
                    Phase::Failed
                };
            }
        }
        None => status.last_error = None,
    }
    if status.phase.is_final() {
        status.job_id_finished = status.job_id.clone();
        status
            .transition_times
            .get_or_insert_with(TransitionTimes::default)
            .finished_time = Some(now.to_string());
        true
    } else {
        false
    }
}

/// Records `err` in `lastError`, `firstError` (once) and the last five `lastErrors`.
pub fn record_error(status: &mut DeployItemStatus, err: &StepError, now: &str) {
    let last = updated_error(status.last_error.as_ref(), err, now);
    if status.first_error.is_none() {
        status.first_error = Some(last.clone());
    }
    status.last_errors.push(last.clone());
    if status.last_errors.len() > MAX_LAST_ERRORS {
        let excess = status.last_errors.len() - MAX_LAST_ERRORS;
        status.last_errors.drain(..excess);
    }
    status.last_error = Some(last);
}

/// The status after a hook-forced re-apply of a finished item (`docs/hooks.md`): the attempt
/// is the new `lastReconcileTime`, its error (if any) is recorded, and nothing else changes —
/// not the phase, not `jobID`/`jobIDFinished`, so "jobID == jobIDFinished ⇒ final phase"
/// holds throughout.
pub fn record_reapply(status: &mut DeployItemStatus, err: Option<&StepError>, now: &str) {
    status.last_reconcile_time = Some(now.to_string());
    match err {
        Some(err) => record_error(status, err, now),
        None => status.last_error = None,
    }
}

/// `CreateOrUpdateConditions` with the conditions a plugin reported (the host owns the
/// timestamps): `lastUpdateTime` moves when anything changed, `lastTransitionTime` only when
/// `status` changed.
pub fn update_conditions(conditions: &mut Vec<Condition>, updates: &[ConditionReport], now: &str) {
    for u in updates {
        let status = u.status.as_str();
        match conditions.iter_mut().find(|c| c.type_ == u.type_) {
            Some(c) => {
                let changed = c.status != status
                    || c.reason != u.reason
                    || c.message != u.message
                    || c.codes != u.codes;
                if c.status != status {
                    c.last_transition_time = now.into();
                }
                if changed {
                    c.last_update_time = now.into();
                }
                c.status = status.to_string();
                c.reason = u.reason.clone();
                c.message = u.message.clone();
                c.codes = u.codes.clone();
            }
            None => conditions.push(Condition {
                type_: u.type_.clone(),
                status: status.to_string(),
                last_transition_time: now.into(),
                last_update_time: now.into(),
                reason: u.reason.clone(),
                message: u.message.clone(),
                codes: u.codes.clone(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landscaper_model::ConditionStatus;

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-01T00:00:01Z";

    fn deployer() -> DeployerInformation {
        DeployerInformation {
            identity: "id".into(),
            name: "wasm-deployer".into(),
            version: "0.1.0".into(),
        }
    }

    #[test]
    fn init_sets_pickup_fields_and_clears_errors() {
        let mut s = DeployItemStatus {
            phase: Phase::Succeeded,
            job_id: "2".into(),
            job_id_finished: "1".into(),
            last_error: Some(LsError::default()),
            first_error: Some(LsError::default()),
            last_errors: vec![LsError::default()],
            transition_times: Some(TransitionTimes {
                trigger_time: Some(T0.into()),
                finished_time: Some(T0.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        init_status(&mut s, 3, &deployer(), Phase::Init, T1);
        assert_eq!(s.phase, Phase::Init);
        assert_eq!(s.observed_generation, 3);
        assert_eq!(s.last_reconcile_time.as_deref(), Some(T1));
        assert_eq!(s.deployer, Some(deployer()));
        assert!(s.last_error.is_none() && s.first_error.is_none() && s.last_errors.is_empty());
        let times = s.transition_times.unwrap();
        assert_eq!(
            times.trigger_time.as_deref(),
            Some(T0),
            "triggerTime is kept"
        );
        assert_eq!(times.init_time.as_deref(), Some(T1));
        assert!(times.finished_time.is_none());
    }

    #[test]
    fn recoverable_error_leaves_the_job_unfinished() {
        let mut s = DeployItemStatus {
            phase: Phase::Init,
            job_id: "2".into(),
            job_id_finished: "1".into(),
            ..Default::default()
        };
        let err = StepError::new("reconcile", "GetLandscaperContext", "not found");
        assert!(!handle_step_result(&mut s, Some(&err), false, T0));
        assert_eq!(s.phase, Phase::Init);
        assert_eq!(s.job_id_finished, "1");
        assert_eq!(
            s.last_error.as_ref().unwrap().reason,
            "GetLandscaperContext"
        );
        assert_eq!(s.first_error, s.last_error);
        assert_eq!(s.last_errors.len(), 1);
    }

    #[test]
    fn unrecoverable_error_fails_and_finishes_in_one_status() {
        for (deleting, phase) in [(false, Phase::Failed), (true, Phase::DeleteFailed)] {
            let mut s = DeployItemStatus {
                phase: Phase::Progressing,
                job_id: "2".into(),
                job_id_finished: "1".into(),
                ..Default::default()
            };
            let err = StepError::new("reconcile", "Bad", "broken")
                .with_code(codes::CONFIGURATION_PROBLEM);
            assert!(handle_step_result(&mut s, Some(&err), deleting, T1));
            assert_eq!(s.phase, phase);
            assert_eq!(s.job_id_finished, "2");
            assert_eq!(
                s.transition_times.unwrap().finished_time.as_deref(),
                Some(T1)
            );
            assert_eq!(
                s.last_error.unwrap().codes,
                vec![codes::CONFIGURATION_PROBLEM.to_string()]
            );
        }
    }

    #[test]
    fn only_the_newest_five_errors_are_kept_and_first_error_stays() {
        let mut s = DeployItemStatus::default();
        for i in 0..7 {
            let err = StepError::new("reconcile", "R", format!("e{i}"));
            handle_step_result(&mut s, Some(&err), false, T0);
        }
        assert_eq!(s.last_errors.len(), 5);
        assert_eq!(s.last_errors[0].message, "e2");
        assert_eq!(s.last_errors[4].message, "e6");
        assert_eq!(s.first_error.unwrap().message, "e0");
        assert_eq!(s.last_error.unwrap().message, "e6");
    }

    #[test]
    fn success_clears_last_error_but_keeps_history() {
        let mut s = DeployItemStatus::default();
        handle_step_result(&mut s, Some(&StepError::new("o", "r", "m")), false, T0);
        s.phase = Phase::Succeeded;
        assert!(handle_step_result(&mut s, None, false, T1));
        assert!(s.last_error.is_none());
        assert_eq!(s.last_errors.len(), 1);
        assert!(s.first_error.is_some());
    }

    #[test]
    fn updated_error_timestamps_follow_landscaper() {
        let e = StepError::new("reconcile", "R", "m");
        let first = updated_error(None, &e, T0);
        assert_eq!(
            (
                first.last_transition_time.as_str(),
                first.last_update_time.as_str()
            ),
            (T0, T0)
        );
        let same = updated_error(Some(&first), &e, T1);
        assert_eq!(
            (
                same.last_transition_time.as_str(),
                same.last_update_time.as_str()
            ),
            (T0, T0)
        );
        let msg = updated_error(Some(&first), &StepError::new("reconcile", "R", "m2"), T1);
        assert_eq!(
            (
                msg.last_transition_time.as_str(),
                msg.last_update_time.as_str()
            ),
            (T0, T1)
        );
        let op = updated_error(Some(&first), &StepError::new("delete", "R", "m"), T1);
        assert_eq!(
            (
                op.last_transition_time.as_str(),
                op.last_update_time.as_str()
            ),
            (T1, T1)
        );
    }

    #[test]
    fn conditions_move_timestamps_only_on_change() {
        let mut cs = Vec::new();
        let up = |status: &str, msg: &str| ConditionReport {
            type_: "DeployItemValidation".into(),
            status: match status {
                "True" => ConditionStatus::True,
                _ => ConditionStatus::False,
            },
            reason: "R".into(),
            message: msg.into(),
            codes: vec![],
        };
        update_conditions(&mut cs, &[up("True", "ok")], T0);
        update_conditions(&mut cs, &[up("True", "ok")], T1);
        assert_eq!(
            (
                cs[0].last_transition_time.as_str(),
                cs[0].last_update_time.as_str()
            ),
            (T0, T0)
        );
        update_conditions(&mut cs, &[up("True", "ok2")], T1);
        assert_eq!(
            (
                cs[0].last_transition_time.as_str(),
                cs[0].last_update_time.as_str()
            ),
            (T0, T1)
        );
        update_conditions(&mut cs, &[up("False", "ok2")], "2026-01-01T00:00:02Z");
        assert_eq!(cs[0].last_transition_time, "2026-01-01T00:00:02Z");
        assert_eq!(cs.len(), 1);
    }
}
