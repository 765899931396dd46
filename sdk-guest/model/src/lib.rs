//! # landscaper-model — the one data model of wasm-deployer
//!
//! Landscaper's resources as the host and every plugin see them, and the plugin protocol
//! that crosses the WIT boundary, written once:
//!
//! - [`resources`]: `DeployItem`, `Target`, `Context`, `SyncObject`, their status types,
//!   [`Phase`], and the annotation, operation, finalizer and group names of the contract
//!   (`../shared/reference/landscaper-contract.md` sections 1–2). Metadata is Kubernetes'
//!   own `ObjectMeta`, so the host uses these types directly with kube's `Api<T>`.
//! - [`plugin`]: what a deployer plugin gets and answers ([`Invocation`], [`Response`],
//!   [`DeployerError`], conditions, Kubernetes operations).
//! - [`hooks`]: what a hook plugin gets and answers ([`HookType`], [`HookInput`],
//!   [`HookResult`], [`HookSetup`]).
//! - [`codes`]: Landscaper's `ERR_*` codes.
//! - `crd` (feature `schema`): Landscaper's CRDs, generated from [`resources`]' types.
//! - [`wire`]: the WIT ↔ model conversions, as macros expanded once on each side of the
//!   boundary (wasmtime bindings in the runtime, wit-bindgen bindings in the SDK).
//! - [`meta`]: `metadata` read without `managedFields`.
//! - [`duration`], [`time`]: Landscaper's duration strings and Kubernetes timestamps.
//!
//! Owns: data and the rules that are pure properties of the data (phase predicates,
//! "is the provider configuration present", which codes are unrecoverable).
//! Must not touch: I/O, clocks, Kubernetes clients, wasm runtimes — it builds natively and for
//! `wasm32-wasip2` with only serde, serde_json and k8s-openapi's data types.

pub mod codes;
#[cfg(feature = "schema")]
pub mod crd;
pub mod duration;
pub mod hooks;
pub mod meta;
pub mod plugin;
pub mod resources;
pub mod time;
pub mod wire;

pub use duration::{GoDuration, parse_go_duration};
pub use hooks::{HookInput, HookResult, HookSetup, HookType};
pub use plugin::{
    ConditionReport, ConditionStatus, DeployerError, Description, FetchRequest, Fetched,
    Invocation, KubeOp, LogLevel, ObjectRef, OcmOrigin, PatchType, ResourceInfo, Response,
    ServerVersion, decode_at, refuse_provider_kubeconfig,
};
pub use resources::*;
pub use time::format_rfc3339;

/// Kubernetes' metadata types, re-exported so plugins need no k8s-openapi dependency of their own.
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
