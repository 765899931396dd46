//! How a Kubernetes capability's failures read to a plugin: Landscaper codes, operation
//! `kubernetes`, the API server's reason and message.
//!
//! Owns: mapping errors onto `DeployerError`. Must not touch: the calls themselves.

use plugin_runtime::DeployerError;

use crate::landscaper::codes;

pub(super) fn error(code: &str, reason: &str, message: String) -> DeployerError {
    DeployerError {
        codes: vec![code.to_string()],
        operation: "kubernetes".into(),
        reason: reason.into(),
        message,
        ..Default::default()
    }
}

pub(super) fn internal(e: serde_json::Error) -> DeployerError {
    error(codes::INTERNAL_PROBLEM, "Encode", e.to_string())
}

/// Maps an API error onto Landscaper codes: 401/403 are unrecoverable, the rest is retried; a
/// cluster that could not be reached is [`UNREACHABLE`] with the cause.
pub(super) fn kube_error(e: kube::Error) -> DeployerError {
    match &e {
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => {
            error(codes::UNAUTHORIZED, &s.reason, s.message.clone())
        }
        kube::Error::Api(s) => DeployerError {
            operation: "kubernetes".into(),
            reason: s.reason.clone(),
            message: s.message.clone(),
            ..Default::default()
        },
        other => match super::clusters::unreachable_cause(other) {
            Some(cause) => unreachable(cause),
            None => DeployerError {
                operation: "kubernetes".into(),
                reason: "Request".into(),
                message: crate::oci::error::error_chain(other),
                ..Default::default()
            },
        },
    }
}

/// The reason of a call's error when the cluster could not be reached (its message is the cause).
pub(super) const UNREACHABLE: &str = "TargetClusterUnreachable";

/// A call's error when the cluster could not be reached: retried (no code), its message the cause.
pub(super) fn unreachable(cause: String) -> DeployerError {
    DeployerError {
        operation: "kubernetes".into(),
        reason: UNREACHABLE.into(),
        message: cause,
        ..Default::default()
    }
}
