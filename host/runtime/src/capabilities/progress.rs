//! `progress` (WIT): checkpoints against the item's progressing timeout and the time left,
//! answered by the invocation's [`crate::HostServices`]. Granted to deployers.

use super::wit;
use crate::wasm::convert::error_to_wit;
use crate::wasm::store::State;

impl wit::progress::Host for State {
    fn checkpoint(&mut self, name: String) -> Result<(), wit::types::DeployerError> {
        match &self.host {
            Some(h) => h.checkpoint(&name).map_err(error_to_wit),
            None => Ok(()),
        }
    }

    fn remaining_millis(&mut self) -> Option<u64> {
        self.host
            .as_ref()
            .and_then(|h| h.remaining())
            .map(|d| d.as_millis() as u64)
    }
}
