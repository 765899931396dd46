//! `plugin test … --target T.yaml` with a `wasm-deployer.dev/http-api` Target: the Target's API
//! played by a loopback server that stores what is PUT, removes what is DELETEd and records every
//! request, so the suite can check what the plugin sent — through the same grant and credential
//! handling as the host (the Target's `auth` from `--secret`, else a stand-in credential).
//!
//! Owns: the stand-in API and its checks. Must not touch: the lifecycle checks (`conformance`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::{Value, json};

use super::check::Check;

/// One request the stand-in API received.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

#[derive(Default)]
struct Api {
    objects: Mutex<BTreeMap<String, Value>>,
    received: Mutex<Vec<Received>>,
}

/// The Target's API on `127.0.0.1`, for as long as the suite runs.
pub struct StandIn {
    api: Arc<Api>,
    pub port: u16,
    _server: tokio::task::JoinHandle<()>,
}

impl StandIn {
    pub async fn start() -> anyhow::Result<Self> {
        let api = Arc::new(Api::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let app = Router::new().fallback(handle).with_state(api.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            api,
            port,
            _server: server,
        })
    }

    pub fn received(&self) -> Vec<Received> {
        self.api.received.lock().expect("received").clone()
    }

    /// `url` with its scheme and authority replaced by the stand-in's (the path is kept).
    pub fn rebase(&self, url: &str) -> String {
        let path = url
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
            .unwrap_or("/");
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

async fn handle(
    State(api): State<Arc<Api>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let path = uri.path().to_string();
    api.received.lock().expect("received").push(Received {
        method: method.to_string(),
        path: path.clone(),
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(String::from),
        body: body.to_vec(),
    });
    let mut objects = api.objects.lock().expect("objects");
    match method {
        Method::PUT | Method::POST => match serde_json::from_slice::<Value>(&body) {
            Ok(v) => {
                let new = objects.insert(path.clone(), v.clone()).is_none();
                let status = if new {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                (status, json!({"path": path, "stored": v}).to_string())
            }
            Err(e) => (
                StatusCode::BAD_REQUEST,
                json!({"error": format!("not JSON: {e}")}).to_string(),
            ),
        },
        Method::GET => match objects.get(&path) {
            Some(v) => (StatusCode::OK, v.to_string()),
            None => (
                StatusCode::NOT_FOUND,
                json!({"error": "not found"}).to_string(),
            ),
        },
        Method::DELETE => match objects.remove(&path) {
            Some(_) => (StatusCode::OK, json!({"deleted": path}).to_string()),
            None => (
                StatusCode::NOT_FOUND,
                json!({"error": "not found"}).to_string(),
            ),
        },
        _ => (StatusCode::METHOD_NOT_ALLOWED, String::new()),
    }
}

/// A Secret standing in for the one the Target's `auth` names, when `--secret` gave none.
pub fn stand_in_secret(target: &Value) -> Option<Value> {
    let auth = target.pointer("/spec/config/auth")?;
    let namespace = target["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let (name, data) = if let Some(r) = auth.pointer("/bearer/secretRef") {
        let key = r["key"].as_str().unwrap_or("token");
        (r["name"].as_str()?, json!({ key: "plugin-test-token" }))
    } else {
        let r = auth.pointer("/basic/secretRef")?;
        (
            r["name"].as_str()?,
            json!({"username": "plugin-test", "password": "plugin-test-password"}),
        )
    };
    Some(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": namespace}, "stringData": data}))
}

/// What the API received, checked: the plugin sent requests, each with the host's credential
/// (`expected_auth`), and — for an item whose configuration has `path` and `body`, as the
/// http-api scaffold's — a PUT of `body` to `<url>/<path>` and a DELETE of it.
pub fn checks(
    received: &[Received],
    base_path: &str,
    config: &Value,
    expected_auth: Option<&str>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let listed: Vec<String> = received
        .iter()
        .map(|r| format!("{} {} ({} bytes)", r.method, r.path, r.body.len()))
        .collect();
    checks.push(if received.is_empty() {
        Check::fail(
            "http-requests",
            "the plugin sent no request to its Target's API",
        )
    } else {
        Check::pass("http-requests", listed.join(", "))
    });
    let wrong_auth = received
        .iter()
        .filter(|r| r.authorization.as_deref() != expected_auth)
        .count();
    checks.push(if wrong_auth == 0 {
        Check::pass(
            "http-credentials",
            match expected_auth {
                Some(_) => "every request carried the Target's credential, added by the host",
                None => "the Target has no auth, and no request carried an Authorization",
            },
        )
    } else {
        Check::fail(
            "http-credentials",
            format!("{wrong_auth} request(s) without the Target's credential (or with another)"),
        )
    });
    if let (Some(path), Some(body)) = (config["path"].as_str(), config.get("body")) {
        let want = format!(
            "{}/{}",
            base_path.trim_end_matches('/'),
            path.trim_start_matches('/')
        );
        let put = received.iter().any(|r| {
            r.method == "PUT"
                && r.path == want
                && serde_json::from_slice::<Value>(&r.body).ok().as_ref() == Some(body)
        });
        checks.push(if put {
            Check::pass("http-api-put", format!("PUT {want} with spec.config.body"))
        } else {
            Check::fail(
                "http-api-put",
                format!(
                    "no PUT {want} with spec.config.body; received: {}",
                    listed.join(", ")
                ),
            )
        });
        let delete = received
            .iter()
            .any(|r| r.method == "DELETE" && r.path == want);
        checks.push(if delete {
            Check::pass("http-api-delete", format!("DELETE {want}"))
        } else {
            Check::fail(
                "http-api-delete",
                format!("no DELETE {want}; received: {}", listed.join(", ")),
            )
        });
    }
    checks
}
