//! Kubernetes `Status` bodies: the error type every handler returns, rendered
//! exactly like the real API server (`kind: Status`, `code` in the body and
//! the matching HTTP status).

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

/// An API error that renders as a `Status` object.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `configmaps` or `deployitems.landscaper.gardener.cloud`, as used in messages.
pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

fn details(group: &str, kind: &str, name: &str) -> Value {
    let mut d = json!({ "kind": kind });
    if !name.is_empty() {
        d["name"] = json!(name);
    }
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, d: Value) -> Self {
        self.details = Some(d);
        self
    }

    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .with_details(details(group, plural, name))
    }

    pub fn namespace_not_found(ns: &str) -> Self {
        Self::not_found("", "namespaces", ns)
    }

    pub fn no_resource() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(details(group, plural, name))
    }

    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
        )
        .with_details(details(group, plural, name))
    }

    pub fn modified(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid; `kind` is the object's Kind (as the real server reports it).
    pub fn invalid(group: &str, kind: &str, name: &str, field: &str, msg: &str) -> Self {
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut d = details(group, kind, name);
        d["causes"] = json!([{ "reason": "FieldValueInvalid", "message": msg, "field": field }]);
        Self::new(
            422,
            "Invalid",
            format!("{gk} \"{name}\" is invalid: {field}: {msg}"),
        )
        .with_details(d)
    }

    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg)
    }

    pub fn method_not_allowed(msg: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", msg)
    }

    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {ct:?})"
            ),
        )
    }

    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(500, "InternalError", msg)
    }

    pub fn expired(msg: impl Into<String>) -> Self {
        Self::new(410, "Expired", msg)
    }

    pub fn is_not_found(&self) -> bool {
        self.code == 404
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// `Status` with `status: Success` (returned by DELETE when the object is gone).
pub fn success(group: &str, plural: &str, name: &str, uid: &str) -> Value {
    let mut d = details(group, plural, name);
    d["uid"] = json!(uid);
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d })
}

pub fn json_response(code: u16, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    bytes_response(code, "application/json", bytes)
}

pub fn bytes_response(code: u16, content_type: &str, body: Vec<u8>) -> Response {
    let mut r = Response::new(axum::body::Body::from(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json_response(self.code, &self.to_status())
    }
}
