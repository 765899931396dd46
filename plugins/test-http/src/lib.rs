//! test-http: sends the HTTP requests its provider configuration lists, in order, with the
//! standard `wasi:http` client of `wstd` (so the stories exercise what any guest's client does),
//! and exports what came back. For the HTTP stories (tests/http_api.rs).
//!
//! `spec.config`: `{"requests": [{"method": "GET", "url": "<absolute, or relative to the
//! Target's url>", "headers": {"x": "y"}, "body": <JSON>}], "followRedirects": false,
//! "failOnError": false}`. Exports `{"results": [{"status": 200, "headers": {...}, "body":
//! "<text>"} | {"error": "<wasi:http error>"}], "target": <the resolved Target it was given>}`. With `failOnError`, the first failed request
//! is returned as a retryable error (reason `HttpRequestFailed`, message naming the URL).

use sdk_guest::{Ctx, Deployer, DeployerError, Description, Invocation, Response, export_deployer};
use serde_json::{Value, json};

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    #[serde(default)]
    requests: Vec<Request>,
    #[serde(default)]
    follow_redirects: bool,
    #[serde(default)]
    fail_on_error: bool,
    /// Send each request this many times (benchmarks: the result is the last one's, with
    /// `nanos`, the time all of them took, measured in the plugin).
    #[serde(default)]
    repeat: Option<u32>,
    /// `wstd` (default: wstd's async wasi:http client) or `sdk` (sdk-guest's blocking `ctx.http`).
    #[serde(default)]
    client: Option<String>,
}

#[derive(serde::Deserialize, Clone)]
// Natively (tests, clippy) nothing is sent: only the wasm32 build reads headers and body.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Request {
    #[serde(default = "get")]
    method: String,
    url: String,
    #[serde(default)]
    headers: serde_json::Map<String, Value>,
    #[serde(default)]
    body: Option<Value>,
}

fn get() -> String {
    "GET".into()
}

pub struct TestHttp;

/// `url` as given if absolute, else joined to the Target's `url`.
fn resolve(inv: &Invocation, url: &str) -> String {
    if url.contains("://") {
        return url.to_string();
    }
    let base = inv
        .target
        .as_ref()
        .and_then(|t| serde_json::from_str::<Value>(&t.content).ok())
        .and_then(|c| c["url"].as_str().map(String::from))
        .unwrap_or_default();
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        url.trim_start_matches('/')
    )
}

impl Deployer for TestHttp {
    fn describe() -> Description {
        Description {
            name: "test-http".into(),
            version: "0.1.0".into(),
            deploy_item_types: vec!["test.wasm-deployer.dev/http".into()],
            hook_types: vec![],
        }
    }

    fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        ctx.checkpoint("test-http: reconcile")?;
        let config: Config = inv.provider_config()?;
        let mut results = Vec::new();
        for r in &config.requests {
            let mut r = r.clone();
            r.url = resolve(&inv, &r.url);
            let repeat = config.repeat.unwrap_or(1).max(1);
            let sdk = config.client.as_deref() == Some("sdk");
            let send = |r: &Request| if sdk { sdk_send(ctx, r) } else { wire::send(r) };
            let started = std::time::Instant::now();
            let mut each = Vec::with_capacity(repeat as usize);
            for _ in 1..repeat {
                let t = std::time::Instant::now();
                send(&r);
                each.push(t.elapsed().as_nanos() as u64);
            }
            each.sort_unstable();
            let mut hops = 0;
            let mut result = loop {
                let result = send(&r);
                let location = result["headers"]["location"].as_str().map(String::from);
                let status = result["status"].as_u64().unwrap_or(0);
                match location {
                    Some(to)
                        if config.follow_redirects && (300..400).contains(&status) && hops < 5 =>
                    {
                        hops += 1;
                        r.url = if to.contains("://") {
                            to
                        } else {
                            resolve(&inv, &to)
                        };
                    }
                    _ => break result,
                }
            };
            if config.repeat.is_some() {
                result["nanos"] = json!(started.elapsed().as_nanos() as u64);
                // Per request, as the plugin's clock saw it (all but the last).
                let at = |p: f64| each.get(((each.len() as f64) * p) as usize).copied();
                result["p50Nanos"] = json!(at(0.5));
                result["p99Nanos"] = json!(at(0.99));
            }
            if config.fail_on_error && result.get("error").is_some() {
                return Err(DeployerError::retryable(
                    "HttpRequestFailed",
                    format!("{} {}: {}", r.method, r.url, result["error"]),
                ));
            }
            results.push(result);
        }
        // What the plugin was given of its Target (the stories check no secret is in it).
        let target = inv
            .target
            .as_ref()
            .map(|t| json!({"content": t.content, "target": t.target}));
        Ok(Response {
            phase: Some("Succeeded".into()),
            exports: Some(json!({ "results": results, "target": target })),
            ..Default::default()
        })
    }

    fn delete(_ctx: &Ctx, _inv: Invocation) -> Result<Response, DeployerError> {
        Ok(Response::default())
    }
}

/// One request with sdk-guest's blocking client, answered as `wire::send` answers.
fn sdk_send(ctx: &Ctx, r: &Request) -> Value {
    let mut request = sdk_guest::HttpRequest::new(&r.method, &r.url);
    for (k, v) in &r.headers {
        request = request.header(k, v.as_str().unwrap_or_default());
    }
    if let Some(b) = &r.body {
        request = request.body(b.to_string());
    }
    match ctx.http(request) {
        Err(e) => json!({"error": e.message}),
        Ok(response) => {
            let headers: serde_json::Map<String, Value> = response
                .headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), json!(v)))
                .collect();
            json!({"status": response.status, "headers": headers, "body": response.text()})
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod wire {
    use serde_json::{Value, json};
    use wstd::http::{Body, Client, Method};

    pub(super) fn send(r: &super::Request) -> Value {
        wstd::runtime::block_on(async move {
            let method = Method::from_bytes(r.method.as_bytes()).unwrap_or(Method::GET);
            let mut builder = wstd::http::Request::builder().method(method).uri(&r.url);
            for (k, v) in &r.headers {
                builder = builder.header(k.as_str(), v.as_str().unwrap_or_default());
            }
            let body = match &r.body {
                Some(b) => Body::from(b.to_string()),
                None => Body::empty(),
            };
            let request = match builder.body(body) {
                Ok(req) => req,
                Err(e) => return json!({"error": format!("building the request: {e}")}),
            };
            match Client::new().send(request).await {
                Err(e) => json!({"error": format!("{e:?}")}),
                Ok(mut response) => {
                    let status = response.status().as_u16();
                    let headers: serde_json::Map<String, Value> = response
                        .headers()
                        .iter()
                        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or_default())))
                        .collect();
                    match response.body_mut().contents().await {
                        Ok(bytes) => json!({"status": status, "headers": headers,
                                            "body": String::from_utf8_lossy(bytes)}),
                        Err(e) => json!({"status": status, "headers": headers,
                                         "error": format!("reading the body: {e:?}")}),
                    }
                }
            }
        })
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod wire {
    pub(super) fn send(_r: &super::Request) -> serde_json::Value {
        serde_json::json!({"error": "no HTTP natively"})
    }
}

export_deployer!(TestHttp);
