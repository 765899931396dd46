//! The plugin's calls into the host (WIT imports), compiled only for `wasm32`: what [`Ctx`]
//! does when it runs inside a component.
//!
//! Owns: calls into the WIT imports. Must not touch: plugin logic, the exports.
//!
//! [`Ctx`]: crate::Ctx

use std::time::Duration;

use super::world::bindings::wasm_deployer::plugin as wit;
use super::world::convert::{error_from_wit, log_level_to_wit};
use crate::{DeployerError, KubeOp, LogLevel};

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
