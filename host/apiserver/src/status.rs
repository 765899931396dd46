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

    pub fn unavailable(msg: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", msg)
    }

    /// 504, as a real server answers a request that outlived its timeout.
    pub fn timeout(msg: impl Into<String>) -> Self {
        Self::new(504, "Timeout", msg)
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

/// What a real kube-apiserver answers for a path nothing serves — an unknown group or
/// version, or a resource of a CRD group whose CRD is not installed: Go's plain-text
/// `404 page not found`, not a JSON `Status` (clients must tell the two apart by kind).
pub fn page_not_found() -> Response {
    let mut r = bytes_response(
        404,
        "text/plain; charset=utf-8",
        b"404 page not found\n".to_vec(),
    );
    r.headers_mut().insert(
        header::HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    r
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

/// The kind of one field error, as `k8s.io/apimachinery/pkg/util/validation/field` has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorType {
    Required,
    Invalid,
    /// A value of the wrong JSON type (rendered like `Invalid`).
    TypeInvalid,
    NotSupported,
    Forbidden,
    TooLong,
    Duplicate,
}

impl FieldErrorType {
    /// The `details.causes[].reason`.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorType::Required => "FieldValueRequired",
            FieldErrorType::Invalid => "FieldValueInvalid",
            FieldErrorType::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorType::NotSupported => "FieldValueNotSupported",
            FieldErrorType::Forbidden => "FieldValueForbidden",
            FieldErrorType::TooLong => "FieldValueTooLong",
            FieldErrorType::Duplicate => "FieldValueDuplicate",
        }
    }
    fn text(self) -> &'static str {
        match self {
            FieldErrorType::Required => "Required value",
            FieldErrorType::Invalid | FieldErrorType::TypeInvalid => "Invalid value",
            FieldErrorType::NotSupported => "Unsupported value",
            FieldErrorType::Forbidden => "Forbidden",
            FieldErrorType::TooLong => "Too long",
            FieldErrorType::Duplicate => "Duplicate value",
        }
    }
}

/// One field error: `field: Type[: value][: detail]`, exactly as Go's `field.Error` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub ty: FieldErrorType,
    /// Dotted path with `[i]` indexes, e.g. `spec.template.spec.containers[0].image`.
    pub field: String,
    /// The bad value already rendered as Go's `%q` / `%v` / `%#v` would (`None` for Required/Forbidden).
    pub value: Option<String>,
    pub detail: String,
}

impl FieldError {
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            ty: FieldErrorType::Required,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            ty: FieldErrorType::Forbidden,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }
    pub fn invalid(field: impl Into<String>, value: &Value, detail: impl Into<String>) -> Self {
        FieldError {
            ty: FieldErrorType::Invalid,
            field: field.into(),
            value: Some(go_value(value)),
            detail: detail.into(),
        }
    }
    /// `Invalid value` with a pre-rendered value (e.g. `map[string]string{...}`).
    pub fn invalid_raw(
        field: impl Into<String>,
        value: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            ty: FieldErrorType::Invalid,
            field: field.into(),
            value: Some(value.into()),
            detail: detail.into(),
        }
    }
    pub fn not_supported(field: impl Into<String>, value: &Value, valid: &[&str]) -> Self {
        let quoted: Vec<String> = valid.iter().map(|v| format!("{v:?}")).collect();
        FieldError {
            ty: FieldErrorType::NotSupported,
            field: field.into(),
            value: Some(go_value(value)),
            detail: if quoted.is_empty() {
                String::new()
            } else {
                format!("supported values: {}", quoted.join(", "))
            },
        }
    }

    /// The message without the field (`details.causes[].message`).
    pub fn body(&self) -> String {
        let mut s = self.ty.text().to_string();
        if let Some(v) = &self.value
            && !matches!(
                self.ty,
                FieldErrorType::Required | FieldErrorType::Forbidden | FieldErrorType::TooLong
            )
        {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// A JSON value as Go's `field.Error` prints a bad value: strings `%q`,
/// numbers and bools `%v`, null as `"null"`, maps and slices `%#v`.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "\"null\"".into(),
        Value::String(s) => go_quote(s),
        Value::Number(_) | Value::Bool(_) => v.to_string(),
        _ => go_sharp(v),
    }
}

/// Go's `%q` for a string (close enough: Rust's `{:?}` escapes the same way for printable text).
pub fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

fn go_sharp(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::String(s) => go_quote(s),
        Value::Number(_) | Value::Bool(_) => v.to_string(),
        Value::Array(a) => format!(
            "[]interface {{}}{{{}}}",
            a.iter().map(go_sharp).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "map[string]interface {{}}{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_sharp(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl ApiError {
    /// 422 Invalid with one cause per field error, as `apierrors.NewInvalid` builds it:
    /// `Kind.group "name" is invalid: <err>` for one error, `[<err>, <err>]` for several.
    /// `Ok` when `errs` is empty, else [`Self::invalid_fields`].
    pub fn unless_invalid(
        group: &str,
        kind: &str,
        name: &str,
        errs: &[FieldError],
    ) -> Result<(), Self> {
        if errs.is_empty() {
            Ok(())
        } else {
            Err(Self::invalid_fields(group, kind, name, errs))
        }
    }

    pub fn invalid_fields(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> Self {
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut d = details(group, kind, name);
        d["causes"] = Value::Array(
            errs.iter()
                .map(|e| json!({"reason": e.ty.reason(), "message": e.body(), "field": e.field}))
                .collect(),
        );
        let mut msgs: Vec<String> = Vec::new();
        for e in errs {
            let m = e.to_string();
            if !msgs.contains(&m) {
                msgs.push(m);
            }
        }
        let message = match msgs.len() {
            0 => format!("{gk} {} is invalid", go_quote(name)),
            1 => format!("{gk} {} is invalid: {}", go_quote(name), msgs[0]),
            _ => format!("{gk} {} is invalid: [{}]", go_quote(name), msgs.join(", ")),
        };
        Self::new(422, "Invalid", message).with_details(d)
    }
}
