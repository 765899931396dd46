//! Waiting inside a step that must never block: what a wait is waiting for ([`Pending`]),
//! which errors end a wait instead of becoming "not yet, call again", and the "not yet" answer
//! itself ([`not_yet`]), timed so the last poll falls before the progressing timeout.
//!
//! Owns: that classification and timing. Must not touch: what a deployer waits for or what it
//! persists (the caller passes its provider status).

use std::time::Duration;

use sdk_guest::{ConditionReport, ConditionStatus, Ctx, DeployerError, Response, codes, phase};

/// The last poll of a wait happens this long before the progressing timeout, so a wait that is
/// still not done ends with the timeout of its own checkpoint (as Landscaper's wait loops do:
/// `WaitForObjectsReady`, `Export`, the deletion group) instead of at the host's check before
/// the next call.
pub const LAST_POLL_MARGIN: Duration = Duration::from_millis(100);

/// What a deployer waiting for something answers: "not yet, call again after `after`"
/// (`Progressing`, the condition `condition_type` with `reason` and `message`, and
/// `provider_status` persisted), capped so the last poll falls [`LAST_POLL_MARGIN`] before the
/// progressing timeout. Once no time is left for another poll, the wait ends with `timeout`
/// (the reason kept in a `False` condition).
pub fn not_yet(
    ctx: &Ctx,
    condition_type: &str,
    provider_status: serde_json::Value,
    reason: &str,
    message: String,
    after: Duration,
    timeout: DeployerError,
) -> Result<Response, DeployerError> {
    ctx.debug(&message);
    let delay = match ctx.remaining() {
        None => after,
        Some(left) if left <= LAST_POLL_MARGIN => {
            return Err(timeout.with_condition(ConditionReport::new(
                condition_type,
                ConditionStatus::False,
                reason,
                message,
            )));
        }
        Some(left) => (left - LAST_POLL_MARGIN)
            .min(after)
            .max(Duration::from_millis(10)),
    };
    Ok(Response {
        phase: Some(phase::PROGRESSING),
        provider_status: Some(provider_status),
        conditions: vec![ConditionReport::new(
            condition_type,
            ConditionStatus::Progressing,
            reason,
            message,
        )],
        retry_after: Some(delay),
        ..Default::default()
    })
}

/// True for an error of a Kubernetes call that the host cut at the invocation deadline
/// (`ERR_TIMEOUT`): the invocation is over, so it ends the step as an error instead of
/// becoming "not ready yet, call again".
pub fn cut_off(e: &DeployerError) -> bool {
    e.has_code(codes::TIMEOUT)
}

/// True for an error of a read or delete that ends a wait (readiness, exports, deletion)
/// instead of becoming "not yet, call again": a call [`cut_off`] at the deadline, a
/// secondary Target that cannot be resolved or fails validation (`ERR_CONFIGURATION_PROBLEM`,
/// reasons `ResolveTarget`, `ValidateTarget`, `TargetKubeconfig`), and internal problems
/// (e.g. a host without secondary Targets). Everything else — a missing object or Target,
/// an API error — is retried, as Landscaper's wait loops do.
pub fn ends_wait(e: &DeployerError) -> bool {
    cut_off(e)
        || e.has_code(codes::INTERNAL_PROBLEM)
        || (e.has_code(codes::CONFIGURATION_PROBLEM)
            && matches!(
                e.reason.as_str(),
                "ResolveTarget" | "ValidateTarget" | "TargetKubeconfig"
            ))
}

/// What a step is waiting for: the checkpoint of the wait and why it is not done.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub checkpoint: String,
    pub why: String,
}

impl Pending {
    pub fn new(checkpoint: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            checkpoint: checkpoint.into(),
            why: why.into(),
        }
    }

    /// The progressing timeout at this wait's checkpoint.
    pub fn timeout(&self) -> DeployerError {
        DeployerError::progressing_timeout(&self.checkpoint)
    }
}
