//! Progress (WIT `progress`): a plugin's checkpoints against its item's progressing timeout
//! (contract section 3.9), and the time left.
//!
//! Owns: turning the contract's timeout check into the plugin's answer. Must not touch: the
//! timeout rules themselves (`crate::contract::timeout`).

use plugin_runtime::DeployerError;

use crate::contract::ProgressingTimeout;

/// `ERR_TIMEOUT` (`timeout at: "<name>"`) once the progressing timeout has passed.
pub fn checkpoint(timeout: &ProgressingTimeout, name: &str) -> Result<(), DeployerError> {
    timeout
        .check(name, jiff::Timestamp::now())
        .map(|_| ())
        .map_err(|e| e.to_plugin())
}

/// Time left until the progressing timeout; `None` if it passed or there is none.
pub fn remaining(timeout: &ProgressingTimeout) -> Option<std::time::Duration> {
    timeout
        .check("remaining", jiff::Timestamp::now())
        .ok()
        .flatten()
}
