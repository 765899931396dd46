//! Calling the webhooks of a write: the `AdmissionReview` request, the HTTPS POST (trusting
//! the configuration's `caBundle`, bounded by `timeoutSeconds`), the checks kube-apiserver
//! makes of the response, and the answers it gives: a refusal in the webhook's words, a failed
//! call as 500 (`failurePolicy: Fail`) or nothing (`Ignore`), a dry run a webhook with side
//! effects cannot take as 400.
//!
//! Owns: [`Review`] and [`validate`]. Must not touch: which webhooks are called (`rules`).

use super::attributes::{Attributes, Operation};
use super::config::Hook;
use super::rules::{Call, Target};
use crate::status::{ApiError, go_quote};
use serde_json::{Value, json};
use std::sync::Arc;

/// What the webhooks are told about a write besides its [`Attributes`].
pub(crate) struct Review<'a> {
    pub(crate) attrs: &'a Attributes<'a>,
    pub(crate) op: Operation,
    /// The object to be stored (in the requested version); `None` for a delete.
    pub(crate) object: Option<&'a Value>,
    /// The stored object (updates and deletes).
    pub(crate) old: Option<&'a Value>,
    /// `CreateOptions`, `UpdateOptions`, `PatchOptions` or `DeleteOptions`.
    pub(crate) options: Value,
}

/// Calls every webhook of `calls` at once; the first refusal (in configuration order) refuses
/// the write.
pub(crate) async fn validate(calls: &[Call], review: &Review<'_>) -> Result<(), ApiError> {
    let results = futures::future::join_all(calls.iter().map(|c| call_one(c, review))).await;
    results.into_iter().collect()
}

async fn call_one(call: &Call, review: &Review<'_>) -> Result<(), ApiError> {
    let hook = &call.hook;
    if review.attrs.dry_run && !hook.dry_run_safe {
        return Err(ApiError::bad_request(format!(
            "admission webhook {} does not support dry run",
            go_quote(&hook.name)
        )));
    }
    match post(call, review).await {
        Ok(None) => Ok(()),
        Ok(Some(status)) => Err(denied(&hook.name, &status)),
        Err(why) if hook.fail_closed => {
            tracing::warn!(webhook = %hook.name, %why, "failed calling webhook, failing closed");
            let msg = format!("failed calling webhook {}: {why}", go_quote(&hook.name));
            Err(
                ApiError::internal(format!("Internal error occurred: {msg}"))
                    .with_details(json!({"causes": [{"message": msg}]})),
            )
        }
        Err(why) => {
            tracing::warn!(webhook = %hook.name, %why, "failed calling webhook, failing open");
            Ok(())
        }
    }
}

/// One call: `Ok(None)` allowed, `Ok(Some(status))` refused with the response's `status`,
/// `Err(why)` the call failed.
async fn post(call: &Call, review: &Review<'_>) -> Result<Option<Value>, String> {
    let hook = &call.hook;
    let version = hook
        .review_version
        .ok_or("webhook does not accept known AdmissionReview versions (v1, v1beta1)")?;
    let target = call.target.as_ref().map_err(Clone::clone)?;
    let client = client(hook, target)?;
    let uid = uuid::Uuid::new_v4().to_string();
    let body = serde_json::to_vec(&request(call, review, version, &uid))
        .map_err(|e| format!("encoding the AdmissionReview: {e}"))?;
    // As client-go's REST client tells the server how long it waits.
    let url = format!("{}?timeout={}s", target.url, hook.timeout.as_secs());
    let failed = |e: reqwest::Error| {
        let why = match e.is_timeout() {
            // What Go's client says when the deadline passes.
            true => "context deadline exceeded".to_string(),
            false => error_chain(&e),
        };
        format!("Post {}: {why}", go_quote(&url))
    };
    let resp = client
        .post(&url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .timeout(hook.timeout)
        .body(body)
        .send()
        .await
        .map_err(failed)?;
    let code = resp.status();
    let bytes = resp.bytes().await.map_err(failed)?;
    if !code.is_success() {
        let text = String::from_utf8_lossy(&bytes);
        return Err(match text.trim() {
            "" => format!(
                "the server responded with the status code {} but did not return more information",
                code.as_u16()
            ),
            t => format!(
                "an error on the server ({}) has prevented the request from succeeding",
                go_quote(&t.chars().take(1024).collect::<String>())
            ),
        });
    }
    let answer: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("received an invalid AdmissionReview: {e}"))?;
    verdict(&answer, version, &uid)
}

/// kube-apiserver's `VerifyAdmissionResponse`.
fn verdict(answer: &Value, version: &str, uid: &str) -> Result<Option<Value>, String> {
    let want = format!("admission.k8s.io/{version}");
    let (av, kind) = (
        answer["apiVersion"].as_str().unwrap_or(""),
        answer["kind"].as_str().unwrap_or(""),
    );
    if av != want || kind != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of {want}, Kind=AdmissionReview, got {av}, Kind={kind}"
        ));
    }
    let response = answer
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let got = response["uid"].as_str().unwrap_or("");
    if version == "v1" && got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    if response["allowed"].as_bool() == Some(true) {
        return Ok(None);
    }
    Ok(Some(response.get("status").cloned().unwrap_or(Value::Null)))
}

/// The `AdmissionReview` a webhook gets.
fn request(call: &Call, r: &Review<'_>, review_version: &str, uid: &str) -> Value {
    let a = r.attrs;
    let rt = a.rt;
    // In the version the webhook asked for (matchPolicy Equivalent: conversion None).
    let at_version = |o: &Value| {
        let mut o = o.clone();
        if call.version != a.version {
            o["apiVersion"] = json!(rt.api_version(&call.version));
        }
        o
    };
    let mut req = json!({
        "uid": uid,
        "kind": {"group": rt.group, "version": call.version, "kind": rt.kind},
        "resource": {"group": rt.group, "version": call.version, "resource": rt.plural},
        "requestKind": {"group": rt.group, "version": a.version, "kind": rt.kind},
        "requestResource": {"group": rt.group, "version": a.version, "resource": rt.plural},
        "operation": r.op.as_str(),
        "userInfo": {"username": a.user.name, "groups": a.user.groups},
        "object": r.object.map(at_version),
        "oldObject": r.old.map(at_version),
        "dryRun": a.dry_run,
        "options": r.options,
    });
    for (k, v) in [
        ("name", a.name),
        ("namespace", a.namespace),
        ("subResource", a.subresource),
        ("requestSubResource", a.subresource),
    ] {
        if !v.is_empty() {
            req[k] = json!(v);
        }
    }
    json!({
        "apiVersion": format!("admission.k8s.io/{review_version}"),
        "kind": "AdmissionReview",
        "request": req,
    })
}

/// The refusal, as kube-apiserver's `ToStatusErr` (1.20) makes it: the webhook's status, with
/// a code of at least 400 (400 when it gave none) and its message prefixed by who refused.
fn denied(name: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook {} denied the request", go_quote(name));
    let text = |k: &str| status.get(k).and_then(Value::as_str).unwrap_or("");
    let message = match (text("message"), text("reason")) {
        (m, _) if !m.is_empty() => format!("{denied_by}: {m}"),
        (_, r) if !r.is_empty() => format!("{denied_by}: {r}"),
        _ => format!("{denied_by} without explanation"),
    };
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .filter(|c| (400..=599).contains(c))
        .unwrap_or(400) as u16;
    let mut e = ApiError::new(code, known_reason(text("reason")), message);
    e.details = status.get("details").filter(|d| d.is_object()).cloned();
    e
}

/// A `metav1.StatusReason` as the `'static` text [`ApiError`] carries; a reason of the
/// webhook's own making is left out (the message carries it).
fn known_reason(r: &str) -> &'static str {
    const REASONS: &[&str] = &[
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    REASONS.iter().find(|k| **k == r).copied().unwrap_or("")
}

/// The HTTPS client for a call: a `url` webhook's own (built once), or one for a Service
/// (built per call: it pins the Service's host name to the address resolved).
fn client(hook: &Hook, target: &Target) -> Result<reqwest::Client, String> {
    match &target.resolve {
        None => hook
            .client
            .get_or_init(|| build_client(&hook.ca_bundle, None))
            .clone(),
        Some((host, addr)) => build_client(&hook.ca_bundle, Some((host, *addr))),
    }
}

fn build_client(
    ca_pem: &[u8],
    resolve: Option<(&str, std::net::SocketAddr)>,
) -> Result<reqwest::Client, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut b = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("embedded-apiserver/", env!("CARGO_PKG_VERSION")));
    if ca_pem.is_empty() {
        // The system's roots, through reqwest's verifier, on the provider the tree uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("unable to load root certificates: {e}"))?;
        }
        if roots.is_empty() {
            return Err(
                "unable to load root certificates: unable to parse bytes as PEM block".into(),
            );
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        b = b.tls_backend_preconfigured(config);
    }
    if let Some((host, addr)) = resolve {
        b = b.resolve(host, addr);
    }
    b.build().map_err(|e| error_chain(&e))
}

/// An error's causes, `: `-separated, each said once, without the wrappers that only repeat
/// the URL or say "client error" (as Go's client says it: what went wrong, after the URL).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        let wrapper = err.source().is_some()
            && (s.starts_with("error sending request") || s.starts_with("client error ("));
        if !wrapper && !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}
