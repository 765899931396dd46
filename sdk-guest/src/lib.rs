//! # sdk-guest — write wasm-deployer plugins in Rust
//!
//! A plugin is one `impl` of [`Deployer`] plus one [`export_deployer!`] line. Built for
//! `wasm32-wasip2` (`cargo xtask build-plugins`) the crate becomes a WASI component that
//! targets the `wasm-deployer:plugin/deployer-plugin` world in `wit/deployer.wit`. Built
//! natively, the same code runs in-process (the plugin runtime's `NativePlugin`), which the
//! host uses for benchmarks and differential tests.
//!
//! Owns: the traits a plugin implements ([`Deployer`], [`Hooks`]), the capability handle
//! [`Ctx`], outgoing HTTP over `wasi:http` ([`http`]: requests under the item's Target, the
//! shared error mapping), and the WIT glue (wasm32 only). The data — [`Invocation`], [`Response`],
//! [`DeployerError`], [`DeployItem`], [`Target`], [`Context`], ... — is the shared model
//! crate `landscaper-model`, re-exported here so a plugin depends on this crate alone.
//! Must not touch: Kubernetes status writes, timestamps, finalizers or export Secrets — the
//! host owns those; a plugin only *returns* data.
//!
//! Natively this crate depends on the model and serde only; `wit-bindgen` and `wasip2` (the
//! WASI 0.2 bindings its HTTP client uses) are only pulled in for `wasm32`.
//!
//! # Example
//!
//! ```
//! use sdk_guest::{
//!     export_deployer, ConditionReport, ConditionStatus, Ctx, Deployer, DeployerError,
//!     Description, Invocation, Response,
//! };
//!
//! #[derive(serde::Deserialize)]
//! #[serde(rename_all = "camelCase", deny_unknown_fields)]
//! struct Config {
//!     api_version: String,
//!     kind: String,
//!     message: String,
//! }
//!
//! pub struct Hello;
//!
//! impl Deployer for Hello {
//!     fn describe() -> Description {
//!         Description {
//!             name: "hello".into(),
//!             version: "0.1.0".into(),
//!             deploy_item_types: vec!["example.dev/hello".into()],
//!             hook_types: vec![],
//!         }
//!     }
//!
//!     fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
//!         ctx.checkpoint("hello: start reconcile")?;
//!         let config: Config = inv.provider_config()?; // ERR_CONFIGURATION_PROBLEM on error
//!         ctx.info(&format!("saying {:?} ({}/{})", config.message, config.api_version, config.kind));
//!         Ok(Response {
//!             phase: Some("Succeeded".into()),
//!             exports: Some(serde_json::json!({ "message": config.message })),
//!             conditions: vec![ConditionReport::new(
//!                 "Hello", ConditionStatus::True, "Said", "said hello",
//!             )],
//!             ..Default::default()
//!         })
//!     }
//!
//!     fn delete(_ctx: &Ctx, _inv: Invocation) -> Result<Response, DeployerError> {
//!         Ok(Response::default())
//!     }
//! }
//!
//! // Generates the WIT exports on wasm32; expands to nothing natively.
//! export_deployer!(Hello);
//!
//! // Natively, run it against a NullHost:
//! let item = serde_json::json!({
//!     "spec": { "type": "example.dev/hello",
//!               "config": { "apiVersion": "hello/v1", "kind": "Config", "message": "hi" } }
//! });
//! let host = sdk_guest::NullHost;
//! let out = Hello::reconcile(&Ctx::native(&host), Invocation::for_item(item)).unwrap();
//! assert_eq!(out.phase, Some(sdk_guest::Phase::Succeeded));
//!
//! let broken = serde_json::json!({ "spec": { "type": "example.dev/hello", "config": { "kind": 1 } } });
//! let err = Hello::reconcile(&Ctx::native(&host), Invocation::for_item(broken)).unwrap_err();
//! assert!(err.has_code(sdk_guest::codes::CONFIGURATION_PROBLEM));
//! ```

#![warn(missing_docs)]

extern crate self as sdk_guest;

mod ctx;
mod deployer;
mod hooks;
pub mod http;
#[cfg(target_arch = "wasm32")]
mod wasm;

pub use ctx::{Ctx, NativeHost, NullHost};
pub use deployer::Deployer;
pub use hooks::Hooks;
pub use http::{HttpRequest, HttpResponse, InvocationHttp};
/// The shared data model (`landscaper-model`), so plugins need no other dependency.
pub use landscaper_model::{
    self as model, ConditionReport, ConditionStatus, Context, DeployItem, DeployItemSpec,
    DeployItemStatus, DeployerError, Description, FetchRequest, Fetched, HookInput, HookResult,
    HookSetup, HookType, Invocation, KubeOp, LogLevel, ObjectMeta, ObjectRef, ObjectReference,
    OcmOrigin, PatchType, Phase, ResolvedTarget, ResourceInfo, Response, ServerVersion, Target,
    TargetSpec, codes, decode_at, for_each_hook_type, format_rfc3339, plugin::phase,
    refuse_provider_kubeconfig,
};

/// The WIT package version this SDK speaks (`wasm-deployer:plugin@…`).
pub const WIT_VERSION: &str = "1.5.0";

/// Export a [`Deployer`] implementation as the plugin's WIT `deployer` interface.
///
/// Use exactly once per plugin crate, at the crate root: `export_deployer!(MyType);`.
/// On `wasm32` this generates the component exports; natively it expands to nothing.
#[macro_export]
macro_rules! export_deployer {
    ($ty:ident) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            use $crate::__private::bindings::exports::wasm_deployer::plugin::deployer as __wd;
            impl __wd::Guest for $ty {
                fn describe() -> __wd::Description {
                    $crate::__private::describe::<$ty>()
                }
                fn reconcile(
                    invocation: __wd::Invocation,
                ) -> ::core::result::Result<__wd::Response, __wd::DeployerError> {
                    $crate::__private::reconcile::<$ty>(invocation)
                }
                fn delete(
                    invocation: __wd::Invocation,
                ) -> ::core::result::Result<__wd::Response, __wd::DeployerError> {
                    $crate::__private::delete::<$ty>(invocation)
                }
            }
            $crate::__private::bindings::__export_wit_bindings!($ty with_types_in $crate::__private::bindings);
        };
    };
}

/// Export a [`Hooks`] implementation as the plugin's WIT `hooks` interface (world
/// `hook-plugin`, WIT 1.1).
///
/// Use once per plugin crate, at the crate root: `export_hooks!(MyHook);`. A plugin may
/// export hooks only, or hooks and a deployer (`export_deployer!(D); export_hooks!(H);`).
/// On `wasm32` this generates the component exports; natively it expands to nothing.
#[macro_export]
macro_rules! export_hooks {
    ($ty:ident) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            use $crate::__private::hook_bindings::exports::wasm_deployer::plugin::hooks as __wh;
            impl __wh::Guest for $ty {
                fn describe() -> __wh::HookSetup {
                    $crate::__private::hooks_describe::<$ty>()
                }
                fn run(
                    input: __wh::HookInput,
                ) -> ::core::result::Result<::core::option::Option<__wh::HookResult>, __wh::DeployerError>
                {
                    $crate::__private::hooks_run::<$ty>(input)
                }
            }
            $crate::__private::hook_bindings::__export_hook_bindings!($ty with_types_in $crate::__private::hook_bindings);
        };
    };
}

/// Implementation details of [`export_deployer!`] and [`export_hooks!`]; not a public API.
#[doc(hidden)]
#[cfg(target_arch = "wasm32")]
pub mod __private {
    pub use crate::wasm::{bindings, hook_bindings};
    pub use crate::wasm::{delete, describe, hooks_describe, hooks_run, reconcile};
    pub use wit_bindgen;
}

#[cfg(test)]
mod tests;
