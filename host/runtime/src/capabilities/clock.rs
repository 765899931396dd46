//! `clock` (WIT): wall-clock time and a monotonic clock that starts with the invocation.
//! Granted to every plugin.

use super::wit;
use crate::wasm::store::State;

impl wit::clock::Host for State {
    fn now_unix_millis(&mut self) -> u64 {
        unix_millis()
    }

    fn now_rfc3339(&mut self) -> String {
        sdk_guest::format_rfc3339(unix_millis())
    }

    fn monotonic_nanos(&mut self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }
}

fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
