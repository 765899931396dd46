//! Landscaper's error codes (`ErrorCode`, contract section 1.2.5) and which of them end a job.

/// `ERR_UNAUTHORIZED` (unrecoverable).
pub const UNAUTHORIZED: &str = "ERR_UNAUTHORIZED";
/// `ERR_CLEANUP`.
pub const CLEANUP: &str = "ERR_CLEANUP";
/// `ERR_CONFIGURATION_PROBLEM` (unrecoverable).
pub const CONFIGURATION_PROBLEM: &str = "ERR_CONFIGURATION_PROBLEM";
/// `ERR_INTERNAL_PROBLEM` (unrecoverable).
pub const INTERNAL_PROBLEM: &str = "ERR_INTERNAL_PROBLEM";
/// `ERR_TIMEOUT` (unrecoverable).
pub const TIMEOUT: &str = "ERR_TIMEOUT";
/// `ERR_CYCLIC_DEPENDENCIES` (unrecoverable).
pub const CYCLIC_DEPENDENCIES: &str = "ERR_CYCLIC_DEPENDENCIES";
/// `ERR_WEBHOOK`.
pub const WEBHOOK: &str = "ERR_WEBHOOK";
/// `ERR_UNFINISHED`.
pub const UNFINISHED: &str = "ERR_UNFINISHED";
/// `ERR_FOR_INFO_ONLY` (only lowers the log level).
pub const FOR_INFO_ONLY: &str = "ERR_FOR_INFO_ONLY";
/// `ERR_NO_RETRY`.
pub const NO_RETRY: &str = "ERR_NO_RETRY";

/// Codes that force a DeployItem into `Failed` / `DeleteFailed`.
pub const UNRECOVERABLE: [&str; 5] = [
    CONFIGURATION_PROBLEM,
    INTERNAL_PROBLEM,
    TIMEOUT,
    UNAUTHORIZED,
    CYCLIC_DEPENDENCIES,
];

/// True for the codes that end a job as `Failed` / `DeleteFailed` instead of retrying it.
pub fn is_unrecoverable(code: &str) -> bool {
    UNRECOVERABLE.contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_five_landscaper_codes_end_a_job() {
        for c in UNRECOVERABLE {
            assert!(is_unrecoverable(c), "{c}");
        }
        for c in [
            CLEANUP,
            WEBHOOK,
            UNFINISHED,
            FOR_INFO_ONLY,
            NO_RETRY,
            "ERR_X",
            "",
        ] {
            assert!(!is_unrecoverable(c), "{c}");
        }
    }
}
