//! `log` (WIT): a plugin's log records, into `tracing` with target `plugin` and the plugin's
//! name. Granted to every plugin.

use super::wit;
use crate::api::emit_log;
use crate::wasm::store::State;
use sdk_guest::LogLevel;

/// The shared `types` interface has no functions; it is linked with `log`.
impl wit::types::Host for State {}

impl wit::log::Host for State {
    fn log(&mut self, level: wit::types::LogLevel, message: String) {
        let level = match level {
            wit::types::LogLevel::Trace => LogLevel::Trace,
            wit::types::LogLevel::Debug => LogLevel::Debug,
            wit::types::LogLevel::Info => LogLevel::Info,
            wit::types::LogLevel::Warn => LogLevel::Warn,
            wit::types::LogLevel::Error => LogLevel::Error,
        };
        emit_log(&self.plugin, level, &message);
    }
}
