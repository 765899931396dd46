//! A REST API on loopback for the HTTP stories (`tests/http_api.rs`): plugins reach it through
//! the host under their `wasm-deployer.dev/http-api` Target. Plain HTTP or HTTPS (a fresh CA per
//! server, for the Target's `caData`), optionally requiring a bearer token or basic credentials,
//! recording every request. Binds `127.0.0.1:0` only and stops when dropped.
//!
//! Under `/api/v1/` ([`ApiServer::url`]): PUT stores a JSON body (201 new, 200 replaced), GET
//! returns it, DELETE removes it (404 when absent); `redirect?to=URL` answers 302, `big?bytes=N`
//! N bytes, `hang` never answers, `status/CODE` that status, `echo-headers` the request headers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// What the server requires of a request's `Authorization`.
#[derive(Clone, Debug, Default)]
pub struct ApiOptions {
    authorization: Option<String>,
}

impl ApiOptions {
    pub fn bearer(token: &str) -> Self {
        Self {
            authorization: Some(format!("Bearer {token}")),
        }
    }

    pub fn basic(user: &str, password: &str) -> Self {
        use base64::Engine as _;
        let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Self {
            authorization: Some(format!("Basic {pair}")),
        }
    }
}

/// One request as the server received it (header names lowercase).
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path_and_query: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

#[derive(Default)]
struct Shared {
    options: ApiOptions,
    requests: Mutex<Vec<Recorded>>,
    objects: Mutex<BTreeMap<String, Value>>,
}

/// The running API; stops when dropped.
pub struct ApiServer {
    shared: Arc<Shared>,
    base: String,
    ca_pem: Option<String>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ApiServer {
    /// Plain HTTP.
    pub async fn start(options: ApiOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/api/v1/", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            options,
            ..Default::default()
        });
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            shared,
            base,
            ca_pem: None,
            task,
        }
    }

    /// HTTPS with a certificate for `127.0.0.1` signed by a fresh CA ([`Self::ca_pem`]).
    pub async fn start_tls(options: ApiOptions) -> Self {
        let cert = embedded_apiserver::tls::ServingCert::generate(&[]).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://{}/api/v1/", listener.local_addr().unwrap());
        let listener =
            embedded_apiserver::tls::TlsListener::new(listener, cert.server_config().unwrap())
                .unwrap();
        let shared = Arc::new(Shared {
            options,
            ..Default::default()
        });
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            shared,
            base,
            ca_pem: Some(cert.ca_pem().to_string()),
            task,
        }
    }

    /// `http(s)://127.0.0.1:PORT/api/v1/`.
    pub fn url(&self) -> String {
        self.base.clone()
    }

    /// The CA that signed the HTTPS server's certificate (panics for plain HTTP).
    pub fn ca_pem(&self) -> &str {
        self.ca_pem.as_deref().expect("an HTTPS ApiServer")
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Stored objects by path below `/api/v1/` (e.g. `things/a`).
    pub fn objects(&self) -> BTreeMap<String, Value> {
        self.shared.objects.lock().unwrap().clone()
    }
}

/// A URL where nothing listens (connections are refused).
pub fn refusing_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/v1/", listener.local_addr().unwrap());
    drop(listener);
    url
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path_and_query = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.to_string());
    let lowercase: BTreeMap<String, String> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                v.to_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    shared.requests.lock().unwrap().push(Recorded {
        method: method.to_string(),
        path_and_query,
        headers: lowercase.clone(),
        body: body.to_vec(),
    });
    if let Some(want) = &shared.options.authorization
        && lowercase.get("authorization") != Some(want)
    {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "unauthorized"})),
        )
            .into_response();
    }
    let Some(path) = uri.path().strip_prefix("/api/v1/") else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "not under /api/v1/"})),
        )
            .into_response();
    };
    let query = uri.query().unwrap_or_default();
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .map(percent_decode)
    };
    match path {
        "redirect" => (
            StatusCode::FOUND,
            [(header::LOCATION, param("to").unwrap_or_default())],
        )
            .into_response(),
        "big" => {
            let n: usize = param("bytes").and_then(|b| b.parse().ok()).unwrap_or(0);
            (StatusCode::OK, "x".repeat(n)).into_response()
        }
        "hang" => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::OK.into_response()
        }
        "echo-headers" => axum::Json(json!(lowercase)).into_response(),
        p if p.starts_with("status/") => {
            let code: u16 = p["status/".len()..].parse().unwrap_or(500);
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, axum::Json(json!({"status": code}))).into_response()
        }
        _ => store(&shared, &method, path, &body),
    }
}

fn store(shared: &Shared, method: &Method, path: &str, body: &[u8]) -> Response {
    let mut objects = shared.objects.lock().unwrap();
    match *method {
        Method::PUT => match serde_json::from_slice::<Value>(body) {
            Err(e) => (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": format!("not JSON: {e}")})),
            )
                .into_response(),
            Ok(v) => {
                let status = if objects.insert(path.to_string(), v.clone()).is_none() {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                (status, axum::Json(json!({"path": path, "stored": v}))).into_response()
            }
        },
        Method::GET => match objects.get(path) {
            Some(v) => axum::Json(v.clone()).into_response(),
            None => (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"error": "not found"})),
            )
                .into_response(),
        },
        Method::DELETE => match objects.remove(path) {
            Some(_) => axum::Json(json!({"deleted": path})).into_response(),
            None => (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"error": "not found"})),
            )
                .into_response(),
        },
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
