//! The WIT ↔ model conversions, written once for both sides of the boundary.
//!
//! The runtime (wasmtime `bindgen!`) and the SDK (`wit_bindgen::generate!`) each get their own
//! Rust types for the same WIT records, with the same field and case names. The conversions
//! are therefore macros, expanded once on each side:
//!
//! ```ignore
//! mod convert {
//!     use crate::bindings::wasm_deployer::plugin::types as wit_types;
//!     landscaper_model::wit_types_conversions!();
//!     use crate::bindings::exports::wasm_deployer::plugin::hooks as wit_hooks;
//!     landscaper_model::wit_hooks_conversions!();
//! }
//! ```
//!
//! `wit_types_conversions!` needs `wit_types` (the bindings of WIT `types`) in scope;
//! `wit_hooks_conversions!` needs `wit_hooks` (WIT `hooks`) and the functions of
//! `wit_types_conversions!` of the same bindings. Both directions are generated; each side uses
//! the ones it needs. JSON carried as strings is decoded into [`WireError`]s that name the field,
//! so each side can say whose fault it was (the plugin's answer or the host's input).
//!
//! Owns: field-by-field mapping. Must not touch: error policy, which is each side's.

/// A JSON string field of a WIT record that did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The WIT field, e.g. `provider-status`.
    pub field: &'static str,
    /// What serde_json said.
    pub message: String,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid JSON in {}: {}", self.field, self.message)
    }
}

impl std::error::Error for WireError {}

/// Decodes the JSON text of WIT field `field`.
pub fn decode<T: serde::de::DeserializeOwned>(
    field: &'static str,
    text: &str,
) -> Result<T, WireError> {
    serde_json::from_str(text).map_err(|e| WireError {
        field,
        message: e.to_string(),
    })
}

/// Encodes `value` as the JSON text of WIT field `field`.
pub fn encode<T: serde::Serialize>(field: &'static str, value: &T) -> Result<String, WireError> {
    serde_json::to_string(value).map_err(|e| WireError {
        field,
        message: e.to_string(),
    })
}

/// Conversions between the model and the bindings of WIT interface `types`, which must be in
/// scope as `wit_types`. See the [module docs](self).
#[macro_export]
macro_rules! wit_types_conversions {
    () => {
        #[allow(dead_code)]
        pub(crate) fn condition_status_to_wit(
            s: $crate::ConditionStatus,
        ) -> wit_types::ConditionStatus {
            match s {
                $crate::ConditionStatus::True => wit_types::ConditionStatus::True,
                $crate::ConditionStatus::False => wit_types::ConditionStatus::False,
                $crate::ConditionStatus::Unknown => wit_types::ConditionStatus::Unknown,
                $crate::ConditionStatus::Progressing => wit_types::ConditionStatus::Progressing,
            }
        }

        #[allow(dead_code)]
        pub(crate) fn condition_status_from_wit(
            s: wit_types::ConditionStatus,
        ) -> $crate::ConditionStatus {
            match s {
                wit_types::ConditionStatus::True => $crate::ConditionStatus::True,
                wit_types::ConditionStatus::False => $crate::ConditionStatus::False,
                wit_types::ConditionStatus::Unknown => $crate::ConditionStatus::Unknown,
                wit_types::ConditionStatus::Progressing => $crate::ConditionStatus::Progressing,
            }
        }

        #[allow(dead_code)]
        pub(crate) fn condition_to_wit(c: $crate::ConditionReport) -> wit_types::ConditionReport {
            wit_types::ConditionReport {
                type_: c.type_,
                status: condition_status_to_wit(c.status),
                reason: c.reason,
                message: c.message,
                codes: c.codes,
            }
        }

        #[allow(dead_code)]
        pub(crate) fn condition_from_wit(c: wit_types::ConditionReport) -> $crate::ConditionReport {
            $crate::ConditionReport {
                type_: c.type_,
                status: condition_status_from_wit(c.status),
                reason: c.reason,
                message: c.message,
                codes: c.codes,
            }
        }

        #[allow(dead_code)]
        pub(crate) fn error_to_wit(e: $crate::DeployerError) -> wit_types::DeployerError {
            wit_types::DeployerError {
                codes: e.codes,
                operation: e.operation,
                reason: e.reason,
                message: e.message,
                conditions: e.conditions.into_iter().map(condition_to_wit).collect(),
            }
        }

        #[allow(dead_code)]
        pub(crate) fn error_from_wit(e: wit_types::DeployerError) -> $crate::DeployerError {
            $crate::DeployerError {
                codes: e.codes,
                operation: e.operation,
                reason: e.reason,
                message: e.message,
                conditions: e.conditions.into_iter().map(condition_from_wit).collect(),
            }
        }

        #[allow(dead_code)]
        pub(crate) fn description_to_wit(d: $crate::Description) -> wit_types::Description {
            wit_types::Description {
                name: d.name,
                version: d.version,
                deploy_item_types: d.deploy_item_types,
                hook_types: d.hook_types,
            }
        }

        #[allow(dead_code)]
        pub(crate) fn description_from_wit(d: wit_types::Description) -> $crate::Description {
            $crate::Description {
                name: d.name,
                version: d.version,
                deploy_item_types: d.deploy_item_types,
                hook_types: d.hook_types,
            }
        }

        #[allow(dead_code)]
        pub(crate) fn log_level_to_wit(l: $crate::LogLevel) -> wit_types::LogLevel {
            match l {
                $crate::LogLevel::Trace => wit_types::LogLevel::Trace,
                $crate::LogLevel::Debug => wit_types::LogLevel::Debug,
                $crate::LogLevel::Info => wit_types::LogLevel::Info,
                $crate::LogLevel::Warn => wit_types::LogLevel::Warn,
                $crate::LogLevel::Error => wit_types::LogLevel::Error,
            }
        }

        #[allow(dead_code)]
        pub(crate) fn log_level_from_wit(l: wit_types::LogLevel) -> $crate::LogLevel {
            match l {
                wit_types::LogLevel::Trace => $crate::LogLevel::Trace,
                wit_types::LogLevel::Debug => $crate::LogLevel::Debug,
                wit_types::LogLevel::Info => $crate::LogLevel::Info,
                wit_types::LogLevel::Warn => $crate::LogLevel::Warn,
                wit_types::LogLevel::Error => $crate::LogLevel::Error,
            }
        }

        #[allow(dead_code)]
        pub(crate) fn invocation_to_wit(
            inv: &$crate::Invocation,
        ) -> Result<wit_types::Invocation, $crate::wire::WireError> {
            use $crate::wire::encode;
            Ok(wit_types::Invocation {
                deploy_item: inv.deploy_item.to_string(),
                target: match &inv.target {
                    Some(t) => Some(wit_types::ResolvedTarget {
                        target: encode("target", &t.target)?,
                        content: t.content.clone(),
                    }),
                    None => None,
                },
                context: inv
                    .context
                    .as_ref()
                    .map(|c| encode("context", c))
                    .transpose()?,
                previous_provider_status: inv
                    .previous_provider_status
                    .as_ref()
                    .map(|p| p.to_string()),
            })
        }

        #[allow(dead_code)]
        pub(crate) fn invocation_from_wit(
            inv: wit_types::Invocation,
        ) -> Result<$crate::Invocation, $crate::wire::WireError> {
            use $crate::wire::decode;
            Ok($crate::Invocation {
                deploy_item: decode("deploy-item", &inv.deploy_item)?,
                target: match inv.target {
                    Some(t) => Some($crate::ResolvedTarget {
                        target: decode("target", &t.target)?,
                        content: t.content,
                    }),
                    None => None,
                },
                context: inv.context.map(|c| decode("context", &c)).transpose()?,
                previous_provider_status: inv
                    .previous_provider_status
                    .map(|p| decode("previous-provider-status", &p))
                    .transpose()?,
            })
        }

        #[allow(dead_code)]
        pub(crate) fn response_to_wit(r: $crate::Response) -> wit_types::Response {
            wit_types::Response {
                phase: r.phase.map(String::from),
                provider_status: r.provider_status.map(|v| v.to_string()),
                exports: r.exports.map(|v| v.to_string()),
                conditions: r.conditions.into_iter().map(condition_to_wit).collect(),
                retry_after_ms: r.retry_after.map(|d| d.as_millis() as u64),
            }
        }

        #[allow(dead_code)]
        pub(crate) fn response_from_wit(
            r: wit_types::Response,
        ) -> Result<$crate::Response, $crate::wire::WireError> {
            use $crate::wire::decode;
            Ok($crate::Response {
                phase: r.phase.map($crate::Phase::from),
                provider_status: r
                    .provider_status
                    .map(|s| decode("provider-status", &s))
                    .transpose()?,
                exports: r.exports.map(|s| decode("exports", &s)).transpose()?,
                conditions: r.conditions.into_iter().map(condition_from_wit).collect(),
                retry_after: r.retry_after_ms.map(::std::time::Duration::from_millis),
            })
        }
    };
}

/// Conversions between the model and the bindings of WIT interface `hooks`, which must be in
/// scope as `wit_hooks`, next to the expansion of [`wit_types_conversions!`] for the same
/// bindings. See the [module docs](self).
#[macro_export]
macro_rules! wit_hooks_conversions {
    () => {
        // The WIT enum and `HookType` have the same cases, in the same order.
        $crate::for_each_hook_type!($crate::__wit_hook_type_conversions);

        #[allow(dead_code)]
        pub(crate) fn hook_setup_to_wit(s: $crate::HookSetup) -> wit_hooks::HookSetup {
            wit_hooks::HookSetup {
                name: s.name,
                version: s.version,
                hook_types: s.hook_types.into_iter().map(hook_type_to_wit).collect(),
            }
        }

        /// Hook types come back sorted in flow order, without duplicates.
        #[allow(dead_code)]
        pub(crate) fn hook_setup_from_wit(s: wit_hooks::HookSetup) -> $crate::HookSetup {
            let mut hook_types: Vec<$crate::HookType> =
                s.hook_types.into_iter().map(hook_type_from_wit).collect();
            hook_types.sort();
            hook_types.dedup();
            $crate::HookSetup {
                name: s.name,
                version: s.version,
                hook_types,
            }
        }

        #[allow(dead_code)]
        pub(crate) fn hook_input_to_wit(input: &$crate::HookInput) -> wit_hooks::HookInput {
            wit_hooks::HookInput {
                hook_type: hook_type_to_wit(input.hook_type),
                deploy_item: input.deploy_item.as_ref().map(|v| v.to_string()),
                target: input.target.as_ref().map(|v| v.to_string()),
            }
        }

        #[allow(dead_code)]
        pub(crate) fn hook_input_from_wit(
            input: wit_hooks::HookInput,
        ) -> Result<$crate::HookInput, $crate::wire::WireError> {
            use $crate::wire::decode;
            Ok($crate::HookInput {
                hook_type: hook_type_from_wit(input.hook_type),
                deploy_item: input
                    .deploy_item
                    .map(|s| decode("deploy-item", &s))
                    .transpose()?,
                target: input.target.map(|s| decode("target", &s)).transpose()?,
            })
        }

        #[allow(dead_code)]
        pub(crate) fn hook_result_to_wit(r: $crate::HookResult) -> wit_hooks::HookResult {
            wit_hooks::HookResult {
                abort_reconcile: r.abort_reconcile,
                requeue: r.requeue,
                requeue_after_ms: r.requeue_after.map(|d| d.as_millis() as u64),
            }
        }

        #[allow(dead_code)]
        pub(crate) fn hook_result_from_wit(r: wit_hooks::HookResult) -> $crate::HookResult {
            $crate::HookResult {
                abort_reconcile: r.abort_reconcile,
                requeue: r.requeue,
                requeue_after: r
                    .requeue_after_ms
                    .filter(|ms| *ms > 0)
                    .map(::std::time::Duration::from_millis),
            }
        }
    };
}

/// The `HookType` ↔ WIT enum part of [`wit_hooks_conversions!`] (called with the case list).
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_hook_type_conversions {
    ($($case:ident),* $(,)?) => {
        #[allow(dead_code)]
        pub(crate) fn hook_type_to_wit(t: $crate::HookType) -> wit_hooks::HookType {
            match t {
                $($crate::HookType::$case => wit_hooks::HookType::$case,)*
            }
        }

        #[allow(dead_code)]
        pub(crate) fn hook_type_from_wit(t: wit_hooks::HookType) -> $crate::HookType {
            match t {
                $(wit_hooks::HookType::$case => $crate::HookType::$case,)*
            }
        }
    };
}
