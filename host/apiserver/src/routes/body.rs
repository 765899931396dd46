//! Request bodies (size limit, JSON/YAML/protobuf decoding) and rendering a stored object in a
//! requested version.
//!
//! Owns: the body limits. Must not touch: what a verb does with the body.

use super::query::media_type;
use crate::registry::ResourceType;
use crate::status::{ApiError, json_response};
use crate::store::Obj;
use axum::response::Response;
use serde_json::{Value, json};

/// A real kube-apiserver's request body limit (3 MiB).
pub(crate) const MAX_REQUEST_BYTES: usize = 3 << 20;

pub(super) async fn read_body(body: axum::body::Body) -> Result<bytes::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_REQUEST_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {MAX_REQUEST_BYTES}"),
            )
        })
}

/// Flow collections (`[`, `{`) nested deeper than this are refused before parsing: the YAML
/// parser takes time quadratic in that depth (100,000 levels held a request for minutes,
/// found by `tests/fuzz.rs`), and nothing deeper than 128 levels decodes anyway.
const MAX_YAML_FLOW_DEPTH: usize = 1000;

/// YAML to JSON, refusing absurd flow nesting first (as go-yaml refuses depths over 10,000).
pub(super) fn parse_yaml(bytes: &[u8]) -> Result<Value, String> {
    // Brackets inside quoted or plain scalars count too: tracking quotes would let a stray
    // apostrophe hide the nesting after it, and no real manifest has 1,000 open brackets.
    let mut depth = 0usize;
    for &b in bytes {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_YAML_FLOW_DEPTH {
                    return Err(format!(
                        "exceeded max depth of {MAX_YAML_FLOW_DEPTH} nested flow collections"
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    serde_yaml::from_slice(bytes).map_err(|e| e.to_string())
}

pub(super) fn decode_object(ct: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    let v: Value = match media_type(ct).as_str() {
        "application/json" => serde_json::from_slice(bytes).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/yaml" => parse_yaml(bytes).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; yaml parse error: {e}"))
        })?,
        "application/vnd.kubernetes.protobuf" => crate::proto::decode_object(bytes)?,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; the body is not a JSON object",
        ));
    }
    Ok(v)
}

pub(super) fn render(obj: &Obj, rt: &ResourceType, version: &str) -> Value {
    let av = rt.api_version(version);
    if obj.get("apiVersion").and_then(Value::as_str) == Some(av.as_str()) {
        return (**obj).clone();
    }
    let mut o = (**obj).clone();
    o["apiVersion"] = json!(av);
    o
}

pub(super) fn obj_response(code: u16, obj: &Obj, rt: &ResourceType, version: &str) -> Response {
    let av = rt.api_version(version);
    if obj.get("apiVersion").and_then(Value::as_str) == Some(av.as_str()) {
        return json_response(code, obj);
    }
    json_response(code, &render(obj, rt, version))
}
