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

use crate::{Ctx, Deployer, DeployerError, Invocation, KubeOp, LogLevel, Response};
use bindings::wasm_deployer::plugin as wit;
use std::time::Duration;

/// The shared WIT ↔ model conversions (`landscaper_model::wire`) for the deployer bindings.
mod convert {
    pub(super) use super::bindings::wasm_deployer::plugin::types as wit_types;
    landscaper_model::wit_types_conversions!();
}
use convert::{
    description_to_wit, error_from_wit, error_to_wit, invocation_from_wit, log_level_to_wit,
    response_to_wit,
};

pub(crate) fn log(level: LogLevel, message: &str) {
    wit::log::log(log_level_to_wit(level), message);
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
        // 1.4: `cluster-info` (only imported by plugins that use it).
        KubeOp::ServerVersion => wit::cluster_info::server_version().map(|v| {
            let v = crate::ServerVersion {
                major: v.major,
                minor: v.minor,
                git_version: v.git_version,
            };
            Some(serde_json::to_string(&v).unwrap_or_default())
        }),
        KubeOp::ApiVersions => wit::cluster_info::api_versions()
            .map(|l| Some(serde_json::to_string(&l).unwrap_or_default())),
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

pub(crate) fn fetch(request: crate::FetchRequest) -> Result<crate::Fetched, DeployerError> {
    use wit::fetch as f;
    let blob = |b: f::Blob| crate::Fetched {
        digest: b.digest,
        media_type: b.media_type,
        data: b.data,
        cached: b.cached,
        manifest_digest: None,
        config_media_type: None,
        ocm: None,
    };
    match request {
        crate::FetchRequest::Http {
            url,
            expected_digest,
        } => f::http_get(&url, expected_digest.as_deref()).map(blob),
        crate::FetchRequest::Oci {
            reference,
            layer_media_types,
        } => f::oci_pull(&reference, &layer_media_types).map(|a| crate::Fetched {
            manifest_digest: Some(a.manifest_digest),
            config_media_type: Some(a.config_media_type),
            ..blob(a.layer)
        }),
        crate::FetchRequest::Ocm {
            resource_key,
            layer_media_types,
        } => wit::ocm::get_resource(&resource_key, &layer_media_types).map(|r| {
            let blob = blob(r.content);
            crate::Fetched {
                ocm: Some(crate::OcmOrigin {
                    component_name: r.component_name,
                    component_version: r.component_version,
                    name: r.name,
                    version: r.version,
                    r#type: r.type_,
                    access_type: r.access_type,
                }),
                ..blob
            }
        }),
    }
    .map_err(error_from_wit)
}

/// The host's input did not decode: the host's fault, reported as ERR_INTERNAL_PROBLEM.
fn host_input_error(e: landscaper_model::wire::WireError) -> DeployerError {
    DeployerError::internal("InvalidHostInput", format!("host sent {e}"))
}

pub fn describe<D: Deployer>() -> wit::types::Description {
    description_to_wit(D::describe())
}

fn run(
    operation: &str,
    inv: wit::types::Invocation,
    f: impl FnOnce(&Ctx<'static>, Invocation) -> Result<Response, DeployerError>,
) -> Result<wit::types::Response, wit::types::DeployerError> {
    let ctx = Ctx::wasm();
    invocation_from_wit(inv)
        .map_err(host_input_error)
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

use crate::Hooks;
use hook_bindings::exports::wasm_deployer::plugin::hooks as wh;

/// The shared conversions for the hook bindings (a world of its own, so types of its own).
mod hook_convert {
    pub(super) use super::hook_bindings::exports::wasm_deployer::plugin::hooks as wit_hooks;
    pub(super) use super::hook_bindings::wasm_deployer::plugin::types as wit_types;
    landscaper_model::wit_types_conversions!();
    landscaper_model::wit_hooks_conversions!();
}

pub fn hooks_describe<H: Hooks>() -> wh::HookSetup {
    hook_convert::hook_setup_to_wit(H::describe())
}

pub fn hooks_run<H: Hooks>(
    input: wh::HookInput,
) -> Result<Option<wh::HookResult>, wh::DeployerError> {
    let ctx = Ctx::wasm();
    let input = hook_convert::hook_input_from_wit(input)
        .map_err(|e| hook_convert::error_to_wit(host_input_error(e)))?;
    let hook_type = input.hook_type;
    H::run(&ctx, input)
        .map(|r| r.map(hook_convert::hook_result_to_wit))
        .map_err(|e| hook_convert::error_to_wit(e.or_operation(hook_type.as_str())))
}
