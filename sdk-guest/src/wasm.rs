//! WIT glue, compiled only for `wasm32`: the `wit-bindgen` bindings of the
//! `deployer-plugin` world and conversions between them and the plain types in `model`.
//!
//! Owns: calls into the WIT imports and the bodies of the WIT exports that
//! `export_deployer!` wires to a [`crate::Deployer`].
//! Must not touch: plugin logic or any WASI interface directly.

#![allow(missing_docs)]

pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "deployer-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_wit_bindings",
        default_bindings_module: "::sdk_guest::__private::bindings",
        runtime_path: "::sdk_guest::__private::wit_bindgen::rt",
    });
}

use crate::model::{
    ConditionReport, ConditionStatus, DeployerError, Description, Invocation, KubeOp, LogLevel,
    ResolvedTarget, Response,
};
use crate::{Ctx, Deployer};
use bindings::wasm_deployer::plugin as wit;
use std::time::Duration;

pub(crate) fn log(level: LogLevel, message: &str) {
    let level = match level {
        LogLevel::Trace => wit::types::LogLevel::Trace,
        LogLevel::Debug => wit::types::LogLevel::Debug,
        LogLevel::Info => wit::types::LogLevel::Info,
        LogLevel::Warn => wit::types::LogLevel::Warn,
        LogLevel::Error => wit::types::LogLevel::Error,
    };
    wit::log::log(level, message);
}

pub(crate) fn now_unix_millis() -> u64 {
    wit::clock::now_unix_millis()
}

pub(crate) fn monotonic_nanos() -> u64 {
    wit::clock::monotonic_nanos()
}

pub(crate) fn checkpoint(name: &str) -> Result<(), DeployerError> {
    wit::progress::checkpoint(name).map_err(error_from_wit)
}

pub(crate) fn remaining() -> Option<Duration> {
    wit::progress::remaining_millis().map(Duration::from_millis)
}

fn ref_to_wit(r: crate::ObjectRef) -> wit::kubernetes::ObjectRef {
    wit::kubernetes::ObjectRef {
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
    }
}

pub(crate) fn kube(op: KubeOp) -> Result<Option<String>, DeployerError> {
    let r = match op {
        KubeOp::Get(r) => wit::kubernetes::get(&ref_to_wit(r)),
        KubeOp::Create { object_json } => wit::kubernetes::create(&object_json).map(Some),
        KubeOp::Update { object_json } => wit::kubernetes::update(&object_json).map(Some),
        KubeOp::Delete(r) => {
            wit::kubernetes::delete(&ref_to_wit(r)).map(|existed| existed.then(String::new))
        }
        // 0.2 operations: `cluster` (only imported by plugins that use them).
        KubeOp::List {
            api_version,
            kind,
            namespace,
            label_selector,
        } => wit::cluster::list(
            &api_version,
            &kind,
            namespace.as_deref(),
            label_selector.as_deref(),
        )
        .map(Some),
        KubeOp::Patch {
            target,
            patch_json,
            patch_type,
            field_manager,
            force,
        } => {
            let options = wit::cluster::PatchOptions {
                patch_type: match patch_type {
                    crate::PatchType::Merge => wit::cluster::PatchType::Merge,
                    crate::PatchType::Json => wit::cluster::PatchType::Json,
                    crate::PatchType::Apply => wit::cluster::PatchType::Apply,
                },
                field_manager,
                force,
            };
            wit::cluster::patch(&ref_to_wit(target), &patch_json, &options).map(Some)
        }
        KubeOp::Discover { api_version, kind } => {
            wit::cluster::discover(&api_version, &kind).map(|info| {
                info.map(|i| {
                    serde_json::json!({
                        "apiVersion": i.api_version,
                        "kind": i.kind,
                        "plural": i.plural,
                        "namespaced": i.namespaced,
                    })
                    .to_string()
                })
            })
        }
    };
    r.map_err(error_from_wit)
}

pub(crate) fn kube_on(target_name: &str, op: KubeOp) -> Result<Option<String>, DeployerError> {
    use wit::secondary_targets as st;
    let r = match op {
        KubeOp::Get(r) => st::get(target_name, &ref_to_wit(r)),
        KubeOp::List {
            api_version,
            kind,
            namespace,
            label_selector,
        } => st::list(
            target_name,
            &api_version,
            &kind,
            namespace.as_deref(),
            label_selector.as_deref(),
        )
        .map(Some),
        KubeOp::Delete(r) => {
            st::delete(target_name, &ref_to_wit(r)).map(|existed| existed.then(String::new))
        }
        other => {
            return Err(DeployerError::internal(
                "UnsupportedSecondaryTargetOperation",
                format!(
                    "secondary Target {target_name:?}: only get, list and delete are offered, not {}",
                    other.verb()
                ),
            ));
        }
    };
    r.map_err(error_from_wit)
}

fn status_to_wit(s: ConditionStatus) -> wit::types::ConditionStatus {
    match s {
        ConditionStatus::True => wit::types::ConditionStatus::True,
        ConditionStatus::False => wit::types::ConditionStatus::False,
        ConditionStatus::Unknown => wit::types::ConditionStatus::Unknown,
        ConditionStatus::Progressing => wit::types::ConditionStatus::Progressing,
    }
}

fn status_from_wit(s: wit::types::ConditionStatus) -> ConditionStatus {
    match s {
        wit::types::ConditionStatus::True => ConditionStatus::True,
        wit::types::ConditionStatus::False => ConditionStatus::False,
        wit::types::ConditionStatus::Unknown => ConditionStatus::Unknown,
        wit::types::ConditionStatus::Progressing => ConditionStatus::Progressing,
    }
}

fn condition_to_wit(c: ConditionReport) -> wit::types::ConditionReport {
    wit::types::ConditionReport {
        type_: c.type_,
        status: status_to_wit(c.status),
        reason: c.reason,
        message: c.message,
        codes: c.codes,
    }
}

fn condition_from_wit(c: wit::types::ConditionReport) -> ConditionReport {
    ConditionReport {
        type_: c.type_,
        status: status_from_wit(c.status),
        reason: c.reason,
        message: c.message,
        codes: c.codes,
    }
}

fn error_to_wit(e: DeployerError) -> wit::types::DeployerError {
    wit::types::DeployerError {
        codes: e.codes,
        operation: e.operation,
        reason: e.reason,
        message: e.message,
        conditions: e.conditions.into_iter().map(condition_to_wit).collect(),
    }
}

fn error_from_wit(e: wit::types::DeployerError) -> DeployerError {
    DeployerError {
        codes: e.codes,
        operation: e.operation,
        reason: e.reason,
        message: e.message,
        conditions: e.conditions.into_iter().map(condition_from_wit).collect(),
    }
}

fn parse_json(what: &str, s: &str) -> Result<serde_json::Value, DeployerError> {
    serde_json::from_str(s).map_err(|e| {
        DeployerError::internal(
            "InvalidHostInput",
            format!("host sent invalid JSON for {what}: {e}"),
        )
    })
}

fn invocation_from_wit(inv: wit::types::Invocation) -> Result<Invocation, DeployerError> {
    Ok(Invocation {
        deploy_item: parse_json("deploy-item", &inv.deploy_item)?,
        target: inv
            .target
            .map(|t| {
                Ok::<_, DeployerError>(ResolvedTarget {
                    target: parse_json("target", &t.target)?,
                    content: t.content,
                })
            })
            .transpose()?,
        context: inv.context.map(|c| parse_json("context", &c)).transpose()?,
        previous_provider_status: inv
            .previous_provider_status
            .map(|p| parse_json("previous-provider-status", &p))
            .transpose()?,
    })
}

fn response_to_wit(r: Response) -> wit::types::Response {
    wit::types::Response {
        phase: r.phase,
        provider_status: r.provider_status.map(|v| v.to_string()),
        exports: r.exports.map(|v| v.to_string()),
        conditions: r.conditions.into_iter().map(condition_to_wit).collect(),
        retry_after_ms: r.retry_after.map(|d| d.as_millis() as u64),
    }
}

pub fn describe<D: Deployer>() -> wit::types::Description {
    let Description {
        name,
        version,
        deploy_item_types,
        hook_types,
    } = D::describe();
    wit::types::Description {
        name,
        version,
        deploy_item_types,
        hook_types,
    }
}

fn run(
    operation: &str,
    inv: wit::types::Invocation,
    f: impl FnOnce(&Ctx<'static>, Invocation) -> Result<Response, DeployerError>,
) -> Result<wit::types::Response, wit::types::DeployerError> {
    let ctx = Ctx::wasm();
    invocation_from_wit(inv)
        .and_then(|inv| f(&ctx, inv))
        .map(response_to_wit)
        .map_err(|e| error_to_wit(e.or_operation(operation)))
}

pub fn reconcile<D: Deployer>(
    inv: wit::types::Invocation,
) -> Result<wit::types::Response, wit::types::DeployerError> {
    run("reconcile", inv, D::reconcile)
}

pub fn delete<D: Deployer>(
    inv: wit::types::Invocation,
) -> Result<wit::types::Response, wit::types::DeployerError> {
    run("delete", inv, D::delete)
}

// ---- hooks (WIT 1.1 `hooks` export, world `hook-plugin`) ----------------------------------

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

use crate::hooks::{HookInput, HookResult, HookSetup, HookType, Hooks};
use hook_bindings::exports::wasm_deployer::plugin::hooks as wh;

// The WIT enum and `HookType` have the same cases, in the same order.
macro_rules! hook_type_conversions {
    ($($case:ident),* $(,)?) => {
        fn hook_type_to_wit(t: HookType) -> wh::HookType {
            match t {
                $(HookType::$case => wh::HookType::$case,)*
            }
        }

        fn hook_type_from_wit(t: wh::HookType) -> HookType {
            match t {
                $(wh::HookType::$case => HookType::$case,)*
            }
        }
    };
}

crate::for_each_hook_type!(hook_type_conversions);

fn hook_error_to_wit(e: DeployerError) -> wh::DeployerError {
    let e = error_to_wit(e);
    wh::DeployerError {
        codes: e.codes,
        operation: e.operation,
        reason: e.reason,
        message: e.message,
        conditions: Vec::new(),
    }
}

pub fn hooks_describe<H: Hooks>() -> wh::HookSetup {
    let HookSetup {
        name,
        version,
        hook_types,
    } = H::describe();
    wh::HookSetup {
        name,
        version,
        hook_types: hook_types.into_iter().map(hook_type_to_wit).collect(),
    }
}

pub fn hooks_run<H: Hooks>(
    input: wh::HookInput,
) -> Result<Option<wh::HookResult>, wh::DeployerError> {
    let ctx = Ctx::wasm();
    let decode = |what: &str, s: Option<String>| s.map(|s| parse_json(what, &s)).transpose();
    let input = (|| {
        Ok::<_, DeployerError>(HookInput {
            hook_type: hook_type_from_wit(input.hook_type),
            deploy_item: decode("deploy-item", input.deploy_item)?,
            target: decode("target", input.target)?,
        })
    })()
    .map_err(hook_error_to_wit)?;
    let hook_type = input.hook_type;
    H::run(&ctx, input)
        .map(|r| {
            r.map(|r: HookResult| wh::HookResult {
                abort_reconcile: r.abort_reconcile,
                requeue: r.requeue,
                requeue_after_ms: r.requeue_after.map(|d| d.as_millis() as u64),
            })
        })
        .map_err(|e| hook_error_to_wit(e.or_operation(hook_type.as_str())))
}
