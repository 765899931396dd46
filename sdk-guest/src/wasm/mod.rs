//! WIT glue, compiled only for `wasm32`: the `wit-bindgen` bindings of the `deployer-plugin`
//! and `hook-plugin` worlds (`world.rs`), the plugin's calls into the host (`imports.rs`), its
//! HTTP requests over `wasi:http` (`http.rs`) and the bodies of the exports (`exports.rs`).
//!
//! Owns: nothing of its own; it names the four parts. Must not touch: plugin logic, or any WASI
//! interface directly but `wasi:http` (in `http.rs`).

mod exports;
mod http;
mod imports;
mod world;

pub use exports::{delete, describe, hooks_describe, hooks_run, reconcile};
pub(crate) use http::http;
pub(crate) use imports::{
    checkpoint, fetch, kube, kube_on, log, monotonic_nanos, now_unix_millis, remaining,
};
pub use world::{bindings, hook_bindings};
