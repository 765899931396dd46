//! Outgoing HTTP (WIT 1.5, the standard `wasi:http/outgoing-handler`): requests to the API
//! under the item's Target of type `wasm-deployer.dev/http-api`, and the one error mapping all
//! SDKs share.
//!
//! ```
//! use sdk_guest::http::{HttpRequest, InvocationHttp};
//! # use sdk_guest::{Ctx, DeployerError, Invocation};
//! # fn put(ctx: &Ctx, inv: &Invocation) -> Result<(), DeployerError> {
//! let url = inv.http_url("things/a")?; // under the Target's `url`
//! let response = ctx
//!     .http(HttpRequest::put(&url).json(&serde_json::json!({"size": 3})))? // transport errors mapped
//!     .error_for_status("PUT", &url)?; // 4xx / 5xx mapped
//! ctx.info(&format!("PUT {url}: {}", response.status));
//! # Ok(()) }
//! ```
//!
//! The host sends a request only if its URL lies under the item's Target `url` (or a prefix of
//! its configuration's `http.allow`) and adds the Target's credentials (`Authorization`) itself:
//! a plugin never sees a token. It does not follow redirects: a 3xx comes back as it is.
//!
//! Error mapping ([`status_error`], [`TransportError::to_error`]):
//! - 401, 403: `ERR_UNAUTHORIZED`, reason `Unauthorized`;
//! - other 4xx: `ERR_CONFIGURATION_PROBLEM`, reason `HttpClientError`;
//! - 5xx: retryable (no code), reason `HttpServerError`;
//!   (all three: message `<METHOD> <URL>: <status> <body, first 500 characters>`)
//! - no response (refused, timeout, reset, TLS, ...): retryable, reason `HttpRequestFailed`,
//!   message `<METHOD> <URL>: <wasi:http error code>`;
//! - refused by the host (`HTTP-request-denied`): `ERR_CONFIGURATION_PROBLEM`, reason
//!   `HttpNotAllowed` (the host fails the item so anyway).
//!
//! Owns: the request and response records, the Target URL helpers, the error mapping; all of
//! it target-independent (tested natively). Sending is [`Ctx::http`]: on `wasm32` a blocking
//! client on `wasi:http` (`wasm/http.rs`), natively [`NativeHost::http`].
//! Must not touch: credentials (the host adds them) or the grant (the host checks it).
//!
//! [`Ctx::http`]: crate::Ctx::http
//! [`NativeHost::http`]: crate::NativeHost::http

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::{DeployerError, Invocation, codes};

/// The Target type that names an HTTP API (`spec.config.url`, optional `caData` and `auth`).
pub const HTTP_API_TARGET_TYPE: &str = "wasm-deployer.dev/http-api";

/// How many characters of a response body an error message quotes.
pub const BODY_IN_MESSAGE: usize = 500;

/// One outgoing request. Build it with [`HttpRequest::new`] (or `get`, `put`, ...), then send
/// it with [`Ctx::http`](crate::Ctx::http).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpRequest {
    /// `GET`, `PUT`, ... (upper case as sent).
    pub method: String,
    /// Absolute `http://` or `https://` URL, with path and query.
    pub url: String,
    /// Header names and values, in order (an `Authorization` is replaced by the host's).
    pub headers: Vec<(String, String)>,
    /// The body (empty: none).
    pub body: Vec<u8>,
    /// Connect and first-byte timeout; `None`: the host's (always cut to the invocation's
    /// deadline).
    pub timeout: Option<Duration>,
}

impl HttpRequest {
    /// A request with `method` (upper-cased) to `url`, no headers, no body.
    pub fn new(method: &str, url: &str) -> Self {
        HttpRequest {
            method: method.to_ascii_uppercase(),
            url: url.to_string(),
            ..Default::default()
        }
    }

    /// `GET url`.
    pub fn get(url: &str) -> Self {
        Self::new("GET", url)
    }

    /// `PUT url`.
    pub fn put(url: &str) -> Self {
        Self::new("PUT", url)
    }

    /// `POST url`.
    pub fn post(url: &str) -> Self {
        Self::new("POST", url)
    }

    /// `PATCH url`.
    pub fn patch(url: &str) -> Self {
        Self::new("PATCH", url)
    }

    /// `DELETE url`.
    pub fn delete(url: &str) -> Self {
        Self::new("DELETE", url)
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets `value` as the JSON body, with `Content-Type: application/json` (and `Accept`, if
    /// none is set yet).
    pub fn json(mut self, value: &Value) -> Self {
        self.body = value.to_string().into_bytes();
        self.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
        self.headers
            .push(("Content-Type".into(), "application/json".into()));
        if self.header_value("accept").is_none() {
            self.headers
                .push(("Accept".into(), "application/json".into()));
        }
        self
    }

    /// Sets the connect and first-byte timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }
}

fn header_in<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A response: whatever status it has (see [`HttpResponse::error_for_status`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Header names (lower case) and values (lossy UTF-8), in order.
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; `null` if it is empty or not JSON.
    pub fn json_or_null(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// `Ok(self)` for 1xx, 2xx and 3xx; the mapped error for 4xx and 5xx ([`status_error`]).
    /// `method` and `url` name the request in the message.
    pub fn error_for_status(self, method: &str, url: &str) -> Result<Self, DeployerError> {
        match status_error(method, url, self.status, &self.body) {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }
}

/// The error for a 4xx or 5xx response (`None` otherwise): 401 and 403 `ERR_UNAUTHORIZED`
/// (`Unauthorized`), other 4xx `ERR_CONFIGURATION_PROBLEM` (`HttpClientError`), 5xx retryable
/// (`HttpServerError`); message `<METHOD> <URL>: <status> <body start>`.
pub fn status_error(method: &str, url: &str, status: u16, body: &[u8]) -> Option<DeployerError> {
    let message = || {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        let mut quoted: String = text.chars().take(BODY_IN_MESSAGE).collect();
        if quoted.len() < text.len() {
            quoted.push_str("...");
        }
        let method = method.to_ascii_uppercase();
        if quoted.is_empty() {
            format!("{method} {url}: {status}")
        } else {
            format!("{method} {url}: {status} {quoted}")
        }
    };
    match status {
        401 | 403 => Some(DeployerError::new(
            &[codes::UNAUTHORIZED],
            "Unauthorized",
            message(),
        )),
        400..=499 => Some(DeployerError::configuration("HttpClientError", message())),
        500..=599 => Some(DeployerError::retryable("HttpServerError", message())),
        _ => None,
    }
}

/// A request that got no response: the `wasi:http` `error-code` case in its WIT spelling
/// (`connection-refused`, `HTTP-request-denied`, ...) and what the host said about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    /// The `error-code` case, e.g. `connection-timeout`.
    pub code: String,
    /// Its payload or further detail, if any.
    pub detail: Option<String>,
}

impl TransportError {
    /// The code with which the host refuses a request it does not grant.
    pub const REQUEST_DENIED: &'static str = "HTTP-request-denied";

    /// A transport error with `code` (WIT spelling) and optional detail.
    pub fn new(code: &str, detail: Option<String>) -> Self {
        TransportError {
            code: code.to_string(),
            detail,
        }
    }

    /// Refused by the host: the URL is not granted to this plugin.
    pub fn is_denied(&self) -> bool {
        self.code == Self::REQUEST_DENIED
    }

    /// The mapped error: `HttpNotAllowed` (`ERR_CONFIGURATION_PROBLEM`) if denied, else
    /// retryable `HttpRequestFailed`; the message names `method`, `url` and the code.
    pub fn to_error(&self, method: &str, url: &str) -> DeployerError {
        let method = method.to_ascii_uppercase();
        if self.is_denied() {
            DeployerError::configuration(
                "HttpNotAllowed",
                format!(
                    "{method} {url}: not allowed by the host ({self}): a plugin may send requests \
                     only under its item's Target url or a prefix of the host's http.allow"
                ),
            )
        } else {
            DeployerError::retryable("HttpRequestFailed", format!("{method} {url}: {self}"))
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wasi:http error {}", self.code)?;
        match &self.detail {
            Some(d) if !d.is_empty() => write!(f, " ({d})"),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for TransportError {}

/// `base` and a relative `path` joined with exactly one `/` (`https://h/v1` or `https://h/v1/`
/// with `things/a` or `/things/a`: `https://h/v1/things/a`). An empty path gives `base`.
pub fn join(base: &str, path: &str) -> String {
    if path.is_empty() {
        return base.to_string();
    }
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// Checks that `path` may be joined to a base URL: not an absolute URL (`https://...`,
/// `//host/...`), no `..` segment (also percent-encoded). The error says what is wrong.
pub fn check_relative_path(path: &str) -> Result<(), String> {
    let before_query = path.split(['?', '#']).next().unwrap_or_default();
    if path.contains("://") || path.starts_with("//") {
        return Err(format!(
            "path {path:?} is an absolute URL; it must be relative to the Target's url"
        ));
    }
    let dot_dot = before_query.split(['/', '\\']).any(|segment| {
        let s = segment.to_ascii_lowercase().replace("%2e", ".");
        s == ".."
    });
    if dot_dot {
        return Err(format!(
            "path {path:?} contains \"..\"; it must stay under the Target's url"
        ));
    }
    Ok(())
}

/// The base URL of an `http-api` Target's content (`{"url": ...}`, as JSON text).
fn url_of(target_name: &str, content: &str) -> Result<String, DeployerError> {
    let problem = |m: String| DeployerError::configuration("TargetUrl", m);
    let config: Value = serde_json::from_str(content).map_err(|e| {
        problem(format!(
            "Target {target_name:?}: its config is not JSON ({e})"
        ))
    })?;
    let url = match config.get("url") {
        Some(Value::String(u)) if !u.trim().is_empty() => u.trim(),
        Some(_) => {
            return Err(problem(format!(
                "Target {target_name:?}: spec.config.url must be a non-empty string"
            )));
        }
        None => {
            return Err(problem(format!(
                "Target {target_name:?} has no url (spec.config.url)"
            )));
        }
    };
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
        return Err(problem(format!(
            "Target {target_name:?}: url {url:?} is not an http:// or https:// URL"
        )));
    }
    Ok(url.to_string())
}

/// The Target URL helpers on [`Invocation`]: `use sdk_guest::http::InvocationHttp;`.
pub trait InvocationHttp {
    /// `spec.config.url` of the item's Target, which must have type
    /// [`HTTP_API_TARGET_TYPE`]. `ERR_CONFIGURATION_PROBLEM` if there is no Target (`NoTarget`),
    /// it has another type (`TargetType`), or no valid `url` (`TargetUrl`).
    fn http_target_url(&self) -> Result<String, DeployerError>;

    /// [`join`] of the Target's URL and the relative `path`, checked by
    /// [`check_relative_path`] (`ERR_CONFIGURATION_PROBLEM`, reason `InvalidPath`).
    fn http_url(&self, path: &str) -> Result<String, DeployerError> {
        check_relative_path(path).map_err(|m| DeployerError::configuration("InvalidPath", m))?;
        Ok(join(&self.http_target_url()?, path))
    }
}

impl InvocationHttp for Invocation {
    fn http_target_url(&self) -> Result<String, DeployerError> {
        let Some(target) = &self.target else {
            return Err(DeployerError::configuration(
                "NoTarget",
                format!(
                    "no target defined: the DeployItem needs a Target of type {HTTP_API_TARGET_TYPE}"
                ),
            ));
        };
        let name = target.target.metadata.name.as_deref().unwrap_or_default();
        let type_ = &target.target.spec.type_;
        if type_ != HTTP_API_TARGET_TYPE {
            return Err(DeployerError::configuration(
                "TargetType",
                format!(
                    "Target {name:?} has type {type_:?}; HTTP requests need a Target of type {HTTP_API_TARGET_TYPE:?}"
                ),
            ));
        }
        url_of(name, &target.content)
    }
}
