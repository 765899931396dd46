//! A REST API on loopback for the stories in which plugins send HTTP requests through the host
//! (`tests/http_api.rs`, the polyglot http-api stories): plugins reach it under their
//! `wasm-deployer.dev/http-api` Target. Plain HTTP ([`ApiServer::start`]) or HTTPS
//! ([`ApiServer::start_tls`]: a fresh CA per server, [`ApiServer::ca_pem`], for the Target's
//! `caData`), optionally requiring a bearer token or basic credentials ([`ApiOptions`]),
//! recording every request ([`ApiServer::requests`]). Binds `127.0.0.1:0` only; when dropped it
//! stops, and every connection it holds (a `hang` too) is closed.
//!
//! Under `/api/v1/` ([`ApiServer::url`]); any other path answers 404, before authentication:
//! - `<path>`: an object store. PUT stores a JSON body (201 new, 200 replaced, 400 not JSON) and
//!   answers `{"path", "stored", "version"}`; GET returns the body (404 when absent; its version
//!   in `x-object-version`); DELETE removes it (200, 404 when absent).
//! - `redirect?to=URL` (URL percent-encoded, absolute or relative): 302 with `Location: URL`.
//! - `big?bytes=N`: 200 with N bytes of `x`. `slow?ms=N`: 200 after N ms.
//! - `hang`: never answers (other requests go on). `status/CODE`: CODE with `{"status": CODE}`.
//! - `echo-headers`: 200 with the request's headers as a JSON object (lowercase names).
//!
//! A request without the `Authorization` the options require gets 401 `{"error":"unauthorized"}`.
//! Beside the server: [`refusing_url`] (nothing listens) and [`hanging_listener`] (connections
//! are accepted and never answered).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::serve::Listener;
use serde_json::{Value, json};

/// The API's root below the server's address.
const PREFIX: &str = "/api/v1/";

/// What a request's `Authorization` must carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Auth {
    /// Nothing: every request is admitted.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// `Authorization: Basic base64(<user>:<password>)`.
    Basic { user: String, password: String },
}

/// How an [`ApiServer`] behaves (`Default`: no authentication).
#[derive(Clone, Debug, Default)]
pub struct ApiOptions {
    pub auth: Auth,
}

impl ApiOptions {
    /// Every request is admitted.
    pub fn none() -> Self {
        Self::default()
    }

    /// Every request needs `Authorization: Bearer <token>`.
    pub fn bearer(token: &str) -> Self {
        Self {
            auth: Auth::Bearer(token.to_string()),
        }
    }

    /// Every request needs HTTP basic authentication as `user` with `password`.
    pub fn basic(user: &str, password: &str) -> Self {
        Self {
            auth: Auth::Basic {
                user: user.to_string(),
                password: password.to_string(),
            },
        }
    }
}

impl Auth {
    /// Whether `authorization` (the header's value, if any) satisfies this requirement. The
    /// scheme's case does not matter.
    fn admits(&self, authorization: Option<&str>) -> bool {
        use base64::Engine as _;
        let credentials = |scheme: &str| {
            let (given, rest) = authorization?.split_once(' ')?;
            given.eq_ignore_ascii_case(scheme).then(|| rest.trim())
        };
        match self {
            Auth::None => true,
            Auth::Bearer(token) => credentials("bearer") == Some(token.as_str()),
            Auth::Basic { user, password } => credentials("basic")
                .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
                .is_some_and(|pair| pair == format!("{user}:{password}").as_bytes()),
        }
    }

    /// The `WWW-Authenticate` of a 401.
    fn challenge(&self) -> &'static str {
        match self {
            Auth::Basic { .. } => "Basic realm=\"test-api\"",
            _ => "Bearer realm=\"test-api\"",
        }
    }
}

/// One request as the server received it, whatever it was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub method: String,
    /// E.g. `/api/v1/things/a?x=1`.
    pub path_and_query: String,
    /// Lowercase names; repeated headers' values joined with `, `.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The path without the query.
    pub fn path(&self) -> &str {
        self.path_and_query
            .split_once('?')
            .map_or(self.path_and_query.as_str(), |(p, _)| p)
    }

    /// The header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The body as JSON, if it is.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// A stored object and how often it was written since it was created.
struct Stored {
    body: Value,
    version: u64,
}

struct Shared {
    auth: Auth,
    requests: Mutex<Vec<Recorded>>,
    /// Woken on every recorded request.
    arrived: tokio::sync::Notify,
    objects: Mutex<BTreeMap<String, Stored>>,
}

impl Shared {
    fn record(&self, request: Recorded) {
        self.requests.lock().unwrap().push(request);
        self.arrived.notify_waiters();
    }
}

/// The running API on `127.0.0.1`; stops, closing its connections, when dropped.
pub struct ApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    scheme: &'static str,
    ca_pem: Option<String>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        // The accept loop owns every connection's task: aborting it ends them all.
        self.task.abort();
    }
}

impl ApiServer {
    /// Plain HTTP on a free loopback port.
    pub async fn start(options: ApiOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        Self::launch(listener, addr, "http", None, options)
    }

    /// HTTPS on a free loopback port, with a serving certificate for `127.0.0.1` and
    /// `localhost` signed by a CA generated for this server alone ([`Self::ca_pem`]).
    pub async fn start_tls(options: ApiOptions) -> Self {
        use embedded_apiserver::tls::{ServingCert, TlsListener};
        let cert = ServingCert::generate(&[]).expect("a test CA and serving certificate");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let listener = TlsListener::new(listener, cert.server_config().unwrap()).unwrap();
        let ca = Some(cert.ca_pem().to_string());
        Self::launch(listener, addr, "https", ca, options)
    }

    fn launch<L>(
        listener: L,
        addr: SocketAddr,
        scheme: &'static str,
        ca_pem: Option<String>,
        options: ApiOptions,
    ) -> Self
    where
        L: Listener,
    {
        let shared = Arc::new(Shared {
            auth: options.auth,
            requests: Mutex::default(),
            arrived: tokio::sync::Notify::new(),
            objects: Mutex::default(),
        });
        let app = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::max(64 << 20))
            .with_state(shared.clone());
        let task = tokio::spawn(serve(listener, app));
        Self {
            shared,
            addr,
            scheme,
            ca_pem,
            task,
        }
    }

    /// The API's base URL, `http(s)://127.0.0.1:PORT/api/v1/`.
    pub fn url(&self) -> String {
        format!("{}://{}{PREFIX}", self.scheme, self.addr)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The PEM of the CA that signed the HTTPS server's certificate (panics for plain HTTP).
    pub fn ca_pem(&self) -> &str {
        self.ca_pem
            .as_deref()
            .expect("ca_pem of a plain HTTP ApiServer (start it with start_tls)")
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Waits until at least `n` requests have arrived and returns them all; panics, listing
    /// those that did, after `timeout`.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.shared.arrived.notified();
            tokio::pin!(arrived);
            // Registered before looking, so that no request slips between the two.
            arrived.as_mut().enable();
            let requests = self.requests();
            if requests.len() >= n {
                return requests;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                let seen: Vec<String> = requests
                    .iter()
                    .map(|r| format!("{} {}", r.method, r.path_and_query))
                    .collect();
                panic!(
                    "timed out after {timeout:?} waiting for {n} requests at {}; {} arrived: {seen:?}",
                    self.url(),
                    requests.len()
                );
            }
        }
    }

    /// The stored objects by path below `/api/v1/` (e.g. `things/a`).
    pub fn objects(&self) -> BTreeMap<String, Value> {
        let objects = self.shared.objects.lock().unwrap();
        objects
            .iter()
            .map(|(path, stored)| (path.clone(), stored.body.clone()))
            .collect()
    }

    /// The version of the object at `path` (1 when created, one more for each PUT since).
    pub fn version(&self, path: &str) -> Option<u64> {
        let objects = self.shared.objects.lock().unwrap();
        objects.get(path).map(|s| s.version)
    }

    /// Stores `body` at `path` as a PUT would (for stories that start with existing objects).
    pub fn insert_object(&self, path: &str, body: Value) {
        put_object(&self.shared, path, body);
    }
}

/// Accepts connections and serves each as HTTP/1.1 in a task of its own; the tasks live in a
/// [`tokio::task::JoinSet`] owned here, so that they end when this future is dropped.
async fn serve<L: Listener>(mut listener: L, app: Router) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            (io, _) = listener.accept() => {
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                connections.spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"error": message.into()}))).into_response()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut lowercase = BTreeMap::<String, String>::new();
    for (name, value) in &headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        lowercase
            .entry(name.as_str().to_string())
            .and_modify(|v| *v = format!("{v}, {value}"))
            .or_insert_with(|| value.into_owned());
    }
    shared.record(Recorded {
        method: method.to_string(),
        path_and_query: uri
            .path_and_query()
            .map_or_else(|| uri.path().to_string(), |p| p.to_string()),
        headers: lowercase.clone(),
        body: body.to_vec(),
    });
    let Some(path) = uri.path().strip_prefix(PREFIX) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("{} is not under {PREFIX}", uri.path()),
        );
    };
    if !shared
        .auth
        .admits(lowercase.get("authorization").map(String::as_str))
    {
        let mut answer = error(StatusCode::UNAUTHORIZED, "unauthorized");
        answer.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(shared.auth.challenge()),
        );
        return answer;
    }
    let params = query_params(uri.query().unwrap_or_default());
    match special(path, &params, &lowercase).await {
        Some(answer) => answer,
        None => store(&shared, &method, path, &body),
    }
}

/// The answer of a special path (`None`: `path` is an object's).
async fn special(
    path: &str,
    params: &BTreeMap<String, String>,
    headers: &BTreeMap<String, String>,
) -> Option<Response> {
    let number = |name: &str| params.get(name).and_then(|n| n.parse::<u64>().ok());
    let needs = |name: &str| {
        let given = params.get(name).map(String::as_str).unwrap_or_default();
        let message = format!("{path} needs ?{name}=<number>, not {given:?}");
        error(StatusCode::BAD_REQUEST, message)
    };
    let answer = match path {
        "redirect" => match params.get("to").map(|to| HeaderValue::from_str(to)) {
            Some(Ok(to)) => (StatusCode::FOUND, [(header::LOCATION, to)]).into_response(),
            _ => error(StatusCode::BAD_REQUEST, "redirect needs ?to=<encoded URL>"),
        },
        "big" => match number("bytes") {
            Some(n) => {
                let body = vec![b'x'; n as usize];
                let kind = [(header::CONTENT_TYPE, "application/octet-stream")];
                (StatusCode::OK, kind, body).into_response()
            }
            None => needs("bytes"),
        },
        "slow" => match number("ms") {
            Some(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                axum::Json(json!({"sleptMs": ms})).into_response()
            }
            None => needs("ms"),
        },
        // Ends only when the server drops the connection's task.
        "hang" => std::future::pending().await,
        "echo-headers" => axum::Json(json!(headers)).into_response(),
        _ => status(path.strip_prefix("status/")?),
    };
    Some(answer)
}

/// `status/<code>`: that status (a final one, 200-999) with `{"status": code}`.
fn status(code: &str) -> Response {
    match code.parse::<u16>().ok().filter(|c| *c >= 200) {
        Some(code) => match StatusCode::from_u16(code) {
            Ok(status) => (status, axum::Json(json!({"status": code}))).into_response(),
            Err(_) => error(StatusCode::BAD_REQUEST, format!("no status {code}")),
        },
        None => error(
            StatusCode::BAD_REQUEST,
            format!("status/<code> needs a final status (200-999), not {code:?}"),
        ),
    }
}

/// The object store at `path`: GET, PUT, DELETE.
fn store(shared: &Shared, method: &Method, path: &str, body: &[u8]) -> Response {
    let not_found = || error(StatusCode::NOT_FOUND, format!("no object at {path}"));
    match *method {
        Method::PUT if path.is_empty() => error(
            StatusCode::BAD_REQUEST,
            format!("PUT needs an object path below {PREFIX}"),
        ),
        Method::PUT => match serde_json::from_slice::<Value>(body) {
            Ok(value) => {
                let (created, version) = put_object(shared, path, value.clone());
                let status = if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                let answer = json!({"path": path, "stored": value, "version": version});
                (status, axum::Json(answer)).into_response()
            }
            Err(e) => error(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {e}"),
            ),
        },
        Method::GET => match shared.objects.lock().unwrap().get(path) {
            Some(stored) => {
                let version = [("x-object-version", stored.version.to_string())];
                (version, axum::Json(stored.body.clone())).into_response()
            }
            None => not_found(),
        },
        Method::DELETE => match shared.objects.lock().unwrap().remove(path) {
            Some(_) => axum::Json(json!({"path": path, "deleted": true})).into_response(),
            None => not_found(),
        },
        _ => {
            let mut answer = error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{method} {path}: objects take GET, PUT and DELETE"),
            );
            let allow = HeaderValue::from_static("GET, PUT, DELETE");
            answer.headers_mut().insert(header::ALLOW, allow);
            answer
        }
    }
}

/// Stores `value` at `path`: whether it is new, and its version.
fn put_object(shared: &Shared, path: &str, value: Value) -> (bool, u64) {
    let mut objects = shared.objects.lock().unwrap();
    match objects.get_mut(path) {
        Some(stored) => {
            stored.body = value;
            stored.version += 1;
            (false, stored.version)
        }
        None => {
            let stored = Stored {
                body: value,
                version: 1,
            };
            objects.insert(path.to_string(), stored);
            (true, 1)
        }
    }
}

/// A query's parameters, percent-decoded (`+` stays `+`); the first of a repeated name wins.
fn query_params(query: &str) -> BTreeMap<String, String> {
    let mut params = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        params
            .entry(percent_decode(name))
            .or_insert_with(|| percent_decode(value));
    }
    params
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', hi, lo]) => hex(*hi).zip(hex(*lo)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `http://127.0.0.1:PORT/` where nothing listens: connecting is refused (a port that was free
/// a moment ago; nothing else in the test process binds it deliberately).
pub fn refusing_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    drop(listener);
    url
}

/// A loopback listener that accepts connections and never reads from or writes to them (see
/// [`hanging_listener`]); it closes them and stops listening when dropped.
pub struct HangingListener {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl HangingListener {
    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for HangingListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A listener on a free loopback port whose connections are accepted (and held) but never
/// answered: a client connects, sends, and waits until its own timeout. Returns its URL,
/// `http://127.0.0.1:PORT/`, and the guard that keeps it listening. Call inside a Tokio runtime.
pub fn hanging_listener() -> (String, HangingListener) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            match listener.accept().await {
                Ok((stream, _)) => held.push(stream),
                // Out of descriptors, say: the backlog still completes handshakes meanwhile.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    });
    (format!("http://{addr}/"), HangingListener { addr, task })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A client that follows no redirects and gives up after `timeout`.
    fn client(timeout: Duration) -> reqwest::Client {
        deployer_host::oci::client::install_crypto();
        reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }

    async fn json_of(response: reqwest::Response) -> (u16, Value) {
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, body)
    }

    #[tokio::test]
    async fn objects_are_stored_read_replaced_and_deleted() {
        let api = ApiServer::start(ApiOptions::none()).await;
        let c = client(Duration::from_secs(5));
        let at = format!("{}things/a", api.url());
        assert!(api.url().starts_with("http://127.0.0.1:") && api.url().ends_with("/api/v1/"));

        let put = c.put(&at).body(r#"{"size": 1}"#).send().await.unwrap();
        assert_eq!(
            json_of(put).await,
            (
                201,
                json!({"path": "things/a", "stored": {"size": 1}, "version": 1})
            )
        );
        let put = c.put(&at).json(&json!({"size": 2})).send().await.unwrap();
        assert_eq!(json_of(put).await.0, 200);
        assert_eq!(api.version("things/a"), Some(2));
        let get = c.get(&at).send().await.unwrap();
        assert_eq!(get.headers()["x-object-version"], "2");
        assert_eq!(json_of(get).await, (200, json!({"size": 2})));
        assert_eq!(
            api.objects(),
            BTreeMap::from([("things/a".into(), json!({"size": 2}))])
        );

        let bad = c.put(&at).body("not json").send().await.unwrap();
        let (status, body) = json_of(bad).await;
        assert_eq!(status, 400);
        assert!(
            body["error"].as_str().unwrap().contains("not JSON"),
            "{body}"
        );

        assert_eq!(json_of(c.delete(&at).send().await.unwrap()).await.0, 200);
        assert_eq!(json_of(c.get(&at).send().await.unwrap()).await.0, 404);
        assert_eq!(json_of(c.delete(&at).send().await.unwrap()).await.0, 404);
        assert!(api.objects().is_empty());

        // Outside the prefix: 404, whatever is stored.
        api.insert_object("things/b", json!(1));
        let outside = api.url().replace("/api/v1/", "/things/b");
        assert_eq!(json_of(c.get(&outside).send().await.unwrap()).await.0, 404);
        let post = c
            .post(format!("{}things/b", api.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(post.status().as_u16(), 405);
    }

    #[tokio::test]
    async fn bearer_and_basic_auth_admit_only_the_right_credentials() {
        let bearer = ApiServer::start(ApiOptions::bearer("t0ken")).await;
        let basic = ApiServer::start(ApiOptions::basic("user", "pa55")).await;
        let c = client(Duration::from_secs(5));
        let unauthorized = (401, json!({"error": "unauthorized"}));
        for (api, request) in [
            (&bearer, c.get(format!("{}status/200", bearer.url()))),
            (
                &bearer,
                c.get(format!("{}status/200", bearer.url()))
                    .bearer_auth("other"),
            ),
            (
                &bearer,
                c.get(format!("{}status/200", bearer.url()))
                    .basic_auth("t0ken", None::<&str>),
            ),
            (&basic, c.get(format!("{}status/200", basic.url()))),
            (
                &basic,
                c.get(format!("{}status/200", basic.url()))
                    .basic_auth("user", Some("x")),
            ),
            (
                &basic,
                c.get(format!("{}status/200", basic.url()))
                    .bearer_auth("pa55"),
            ),
        ] {
            let answer = request.send().await.unwrap();
            assert!(answer.headers().contains_key("www-authenticate"));
            assert_eq!(json_of(answer).await, unauthorized, "{}", api.url());
        }
        let ok = c
            .get(format!("{}status/200", bearer.url()))
            .bearer_auth("t0ken");
        assert_eq!(json_of(ok.send().await.unwrap()).await.0, 200);
        let ok = c
            .get(format!("{}status/200", basic.url()))
            .basic_auth("user", Some("pa55"));
        assert_eq!(json_of(ok.send().await.unwrap()).await.0, 200);
        // Every request is recorded, the refused ones too.
        assert_eq!(bearer.requests().len(), 4);
        assert_eq!(
            bearer.requests()[3].header("Authorization"),
            Some("Bearer t0ken")
        );
    }

    #[tokio::test]
    async fn tls_is_served_under_the_servers_own_ca() {
        let api = ApiServer::start_tls(ApiOptions::basic("user", "pa55")).await;
        assert!(api.url().starts_with("https://127.0.0.1:"), "{}", api.url());
        assert!(api.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let ca = reqwest::Certificate::from_pem(api.ca_pem().as_bytes()).unwrap();
        deployer_host::oci::client::install_crypto();
        let trusting = reqwest::Client::builder()
            .add_root_certificate(ca)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let localhost = api.url().replace("127.0.0.1", "localhost");
        for (base, status) in [(api.url(), 201), (localhost, 200)] {
            let put = trusting
                .put(format!("{base}things/tls"))
                .basic_auth("user", Some("pa55"));
            let answer = put.json(&json!({"tls": true})).send().await.unwrap();
            assert_eq!(answer.status().as_u16(), status, "{base}");
        }
        assert_eq!(api.requests().len(), 2);
        // A client that does not trust the CA gets no answer.
        let other = ApiServer::start_tls(ApiOptions::none()).await;
        let ca = reqwest::Certificate::from_pem(other.ca_pem().as_bytes()).unwrap();
        let wrong = reqwest::Client::builder()
            .add_root_certificate(ca)
            .build()
            .unwrap();
        let refused = wrong.get(format!("{}status/200", api.url())).send().await;
        assert!(refused.is_err(), "{refused:?}");
    }

    #[tokio::test]
    async fn redirect_big_status_slow_and_echo_answer_as_asked() {
        let api = ApiServer::start(ApiOptions::none()).await;
        let c = client(Duration::from_secs(5));
        let url = |rest: &str| format!("{}{rest}", api.url());
        for (to, location) in [
            (
                "https%3A%2F%2Fexample.invalid%2Fx%3Fa%3D1",
                "https://example.invalid/x?a=1",
            ),
            ("things%2Fb", "things/b"),
        ] {
            let answer = c
                .get(url(&format!("redirect?to={to}")))
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status().as_u16(), 302);
            assert_eq!(answer.headers()["location"], location);
        }
        assert_eq!(c.get(url("redirect")).send().await.unwrap().status(), 400);

        let big = c.get(url("big?bytes=300000")).send().await.unwrap();
        let body = big.bytes().await.unwrap();
        assert_eq!(body.len(), 300_000);
        assert!(body.iter().all(|b| *b == b'x'));

        for code in [200u16, 404, 429, 503] {
            let answer = c.get(url(&format!("status/{code}"))).send().await.unwrap();
            assert_eq!(json_of(answer).await, (code, json!({"status": code})));
        }
        assert_eq!(c.get(url("status/abc")).send().await.unwrap().status(), 400);

        let started = std::time::Instant::now();
        let slow = c.get(url("slow?ms=300")).send().await.unwrap();
        assert_eq!(json_of(slow).await, (200, json!({"sleptMs": 300})));
        assert!(started.elapsed() >= Duration::from_millis(300));

        let echo = c.get(url("echo-headers")).header("X-Custom", "v1");
        let (status, headers) = json_of(echo.send().await.unwrap()).await;
        assert_eq!(status, 200);
        assert_eq!(headers["x-custom"], "v1");
        assert!(headers["host"].as_str().unwrap().starts_with("127.0.0.1:"));
    }

    #[tokio::test]
    async fn a_hanging_request_blocks_nothing_and_ends_with_the_server() {
        let api = ApiServer::start(ApiOptions::none()).await;
        let c = client(Duration::from_millis(700));
        let hang = tokio::spawn(c.get(format!("{}hang", api.url())).send());
        api.wait_for_requests(1, Duration::from_secs(5)).await;
        let started = std::time::Instant::now();
        let ok = c.get(format!("{}status/200", api.url())).send().await;
        assert_eq!(ok.unwrap().status(), 200);
        assert!(started.elapsed() < Duration::from_millis(500));
        let hung = hang.await.unwrap().unwrap_err();
        assert!(hung.is_timeout(), "{hung:?}");

        // A connection held by `hang` is closed when the server drops.
        let mut raw = tokio::net::TcpStream::connect(api.addr()).await.unwrap();
        let request = "GET /api/v1/hang HTTP/1.1\r\nHost: x\r\n\r\n";
        raw.write_all(request.as_bytes()).await.unwrap();
        api.wait_for_requests(3, Duration::from_secs(5)).await;
        drop(api);
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut rest));
        let read = read.await.expect("the connection closes");
        assert!(read.is_err() || rest.is_empty(), "{read:?} {rest:?}");
    }

    #[tokio::test]
    async fn requests_are_recorded_as_received() {
        let api = ApiServer::start(ApiOptions::none()).await;
        let c = client(Duration::from_secs(5));
        let url = format!("{}things/r?dry=1&x=%2F", api.url());
        let later = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let put = c.put(url).header("X-Trace", "abc").header("x-multi", "1");
            put.header("X-Multi", "2")
                .json(&json!({"k": "v"}))
                .send()
                .await
        });
        let requests = api.wait_for_requests(1, Duration::from_secs(5)).await;
        assert_eq!(later.await.unwrap().unwrap().status(), 201);
        let r = &requests[0];
        assert_eq!(r.method, "PUT");
        assert_eq!(r.path_and_query, "/api/v1/things/r?dry=1&x=%2F");
        assert_eq!(r.path(), "/api/v1/things/r");
        assert_eq!(r.headers["x-trace"], "abc");
        assert_eq!(r.headers["x-multi"], "1, 2");
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(r.json(), Some(json!({"k": "v"})));
        assert_eq!(api.objects()["things/r"], json!({"k": "v"}));
    }

    #[tokio::test]
    async fn refusing_and_hanging_endpoints_fail_as_they_should() {
        let c = client(Duration::from_millis(400));
        let refused = c.get(refusing_url()).send().await.unwrap_err();
        assert!(refused.is_connect(), "{refused:?}");

        let (url, guard) = hanging_listener();
        assert_eq!(url, format!("http://{}/", guard.addr()));
        let started = std::time::Instant::now();
        let hung = c.get(format!("{url}api/v1/x")).send().await.unwrap_err();
        assert!(hung.is_timeout() && !hung.is_connect(), "{hung:?}");
        assert!(started.elapsed() >= Duration::from_millis(400));
        drop(guard);
        let gone = c.get(&url).send().await.unwrap_err();
        assert!(gone.is_connect(), "{gone:?}");
    }
}
