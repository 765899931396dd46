//! The semantics checklist of `apiserver.md` §6, one test per behaviour, in
//! checklist order (one module per checklist item).

mod builtin_kinds;
mod concurrency;
mod crd_discovery;
mod crd_schema;
mod errors;
mod faults;
mod finalizers;
mod metadata_only;
mod namespaces;
mod noop;
mod observability;
mod patches;
mod persistence;
mod rbac;
mod service_account_tokens;
mod simulate;
mod status_subresource;
mod watch;
mod webhooks;

use axum::body::Body;
use embedded_apiserver::{ApiServer, Options};
use futures::StreamExt;
use http::Request;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};
use std::time::Duration;
use tower::ServiceExt;

pub const LANDSCAPER_CRDS: &str = "../../charts/wasm-deployer/charts/landscaper-crds/crds";

pub fn server() -> ApiServer {
    ApiServer::new(Options::default()).expect("server")
}

pub fn server_with(f: impl FnOnce(&mut Options)) -> ApiServer {
    let mut o = Options::default();
    f(&mut o);
    ApiServer::new(o).expect("server")
}

/// One exact HTTP exchange through the router: (status, body as JSON or string).
pub async fn raw(
    s: &ApiServer,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: &str,
) -> (u16, Value) {
    raw_with(
        s,
        method,
        uri,
        &[("content-type", content_type.unwrap_or(""))],
        body,
    )
    .await
}

pub async fn raw_with(
    s: &ApiServer,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let mut b = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        if !v.is_empty() {
            b = b.header(*k, *v);
        }
    }
    let resp = s
        .router()
        .oneshot(b.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, v)
}

/// Start a raw watch and collect its lines (parsed) until the stream ends or `max` lines or `wait` elapses.
pub async fn watch_lines(
    s: &ApiServer,
    uri: &str,
    accept: Option<&str>,
    max: usize,
    wait: Duration,
) -> (u16, Vec<Value>, bool) {
    let mut b = Request::builder().method("GET").uri(uri);
    if let Some(a) = accept {
        b = b.header("accept", a);
    }
    let resp = s
        .router()
        .oneshot(b.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let mut stream = resp.into_body().into_data_stream();
    let mut buf = Vec::new();
    let mut lines = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    let mut ended = false;
    while lines.len() < max {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(chunk))) => {
                buf.extend_from_slice(&chunk);
                while let Some(pos) = buf.iter().position(|c| *c == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    lines
                        .push(serde_json::from_slice(&line).expect("each line is one JSON object"));
                }
            }
            Ok(_) => {
                ended = true;
                break;
            }
            Err(_) => break,
        }
    }
    (code, lines, ended)
}

pub fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>()},
        "data": {"k": "v"},
    }))
    .unwrap()
}

pub fn rv(o: &impl kube::Resource) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

pub fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub fn landscaper_crd(file: &str) -> String {
    std::fs::read_to_string(format!(
        "{LANDSCAPER_CRDS}/landscaper.gardener.cloud_{file}.yaml"
    ))
    .expect("landscaper CRD")
}

/// A small CRD with a status subresource: widgets.example.com/v1 Widget (namespaced).
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

pub fn widget_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

pub async fn with_widgets() -> (ApiServer, kube::Api<kube::api::DynamicObject>) {
    let s = server();
    s.install_object(widget_crd()).unwrap();
    let api = kube::Api::namespaced_with(s.client(), "default", &widget_resource());
    (s, api)
}

pub fn widget(name: &str, spec: Value) -> kube::api::DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec})).unwrap()
}

/// One request with a bearer token (empty: none) and a JSON body.
pub async fn call(
    s: &ApiServer,
    token: &str,
    method: &str,
    uri: &str,
    body: Value,
) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    raw_with(
        s,
        method,
        uri,
        &[
            ("authorization", if token.is_empty() { "" } else { &auth }),
            ("content-type", "application/json"),
        ],
        &body,
    )
    .await
}

/// Who `token` is: a SelfSubjectReview (status code, answer).
pub async fn who_am_i(s: &ApiServer, token: &str) -> (u16, Value) {
    call(
        s,
        token,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({}),
    )
    .await
}
