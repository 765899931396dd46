//! Waiting inside a step that must never block: what a wait is waiting for ([`Pending`]), and
//! which errors end a wait instead of becoming "not yet, call again".
//!
//! Owns: that classification. Must not touch: the answer to the host (the deployer decides how
//! long to wait and what to report).

use sdk_guest::{DeployerError, codes};

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
