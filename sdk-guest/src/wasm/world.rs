//! The WIT worlds' bindings (`wit-bindgen`), compiled only for `wasm32`: `deployer-plugin` and
//! `hook-plugin`, and the shared WIT ⇄ model conversions for each. The WASI interfaces the
//! deployer world imports (`wasi:http`, 1.5) are the `wasip2` crate's, not generated here.
//!
//! Owns: the generated bindings. Must not touch: what calls them (`imports.rs`, `exports.rs`).

#![allow(missing_docs)]

pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "deployer-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_wit_bindings",
        default_bindings_module: "::sdk_guest::__private::bindings",
        runtime_path: "::sdk_guest::__private::wit_bindgen::rt",
        // WIT 1.5's `wasi:http/outgoing-handler` and what it uses: the `wasip2` crate's
        // bindings, which the SDK's client (`super::http`) and async clients (`wstd`) use, so
        // there is one set of WASI types and nothing of WASI is generated here.
        with: {
            "wasi:http/outgoing-handler@0.2.12": ::wasip2::http::outgoing_handler,
            "wasi:http/types@0.2.12": ::wasip2::http::types,
            "wasi:io/error@0.2.12": ::wasip2::io::error,
            "wasi:io/poll@0.2.12": ::wasip2::io::poll,
            "wasi:io/streams@0.2.12": ::wasip2::io::streams,
            "wasi:clocks/monotonic-clock@0.2.12": ::wasip2::clocks::monotonic_clock,
        },
    });
}

/// The shared WIT ↔ model conversions (`landscaper_model::wire`) for the deployer bindings.
pub(super) mod convert {
    pub(super) use super::bindings::wasm_deployer::plugin::types as wit_types;
    landscaper_model::wit_types_conversions!();
}

pub mod hook_bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "hook-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_hook_bindings",
        default_bindings_module: "::sdk_guest::__private::hook_bindings",
        runtime_path: "::sdk_guest::__private::wit_bindgen::rt",
    });
}

/// The shared conversions for the hook bindings (a world of its own, so types of its own).
pub(super) mod hook_convert {
    pub(super) use super::hook_bindings::exports::wasm_deployer::plugin::hooks as wit_hooks;
    pub(super) use super::hook_bindings::wasm_deployer::plugin::types as wit_types;
    landscaper_model::wit_types_conversions!();
    landscaper_model::wit_hooks_conversions!();
}
