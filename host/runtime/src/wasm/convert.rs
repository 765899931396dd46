//! The WIT ↔ model conversions for these bindings: the shared macros of
//! `landscaper_model::wire`, expanded once (the SDK expands the same ones for its bindings).

use super::bindings::exports::wasm_deployer::plugin::hooks as wit_hooks;
use super::bindings::wasm_deployer::plugin::types as wit_types;

sdk_guest::model::wit_types_conversions!();
sdk_guest::model::wit_hooks_conversions!();

/// A Kubernetes object reference of the `kubernetes`/`cluster` interfaces.
pub(crate) fn ref_from_wit(
    r: super::bindings::wasm_deployer::plugin::kubernetes::ObjectRef,
) -> sdk_guest::ObjectRef {
    sdk_guest::ObjectRef {
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
    }
}
