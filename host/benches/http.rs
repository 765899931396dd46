//! Outgoing HTTP (WIT 1.5) side by side in one run: a `PUT` of a small JSON body to a loopback
//! REST API (test support's `ApiServer`, keep-alive) —
//!
//! - **host client**: the request sent by the host's own stack (hyper + rustls connector, pooled
//!   connections, as `plugin_runtime`'s HTTP gate sends it), measured around each request;
//! - **Rust plugin**: the same request from inside `test-http` (wstd's `wasi:http` client), sent
//!   `N` times in one invocation, timed by the plugin's monotonic clock: what the round trip
//!   costs a plugin, through the grant check, the header handling and the WASI resources;
//! - **per language**: one reconcile of each language's http-api example (a fresh instance, the
//!   configuration parsed, one PUT, the answer exported), p50/p99 over many reconciles.
//!
//! `cargo xtask build-plugins && cargo xtask build-polyglot && cargo bench -p deployer-host --bench http`
//! (`BENCH_WRITE_DOCS=1` rewrites the section of docs/benchmarks.md). A missing example is left out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deployer_host::capabilities::http::Base;
use deployer_host::cli::plugin::call::OfflineHttp;
use deployer_host::cli::plugin::conformance::MemoryCluster;
use http_body_util::BodyExt;
use plugin_runtime::{DeployerPlugin, Invocation, PluginRuntime, RuntimeConfig};
use serde_json::{Value, json};
use test_support::bench::{env_usize, write_docs_section};
use test_support::http_api::{ApiOptions, ApiServer};
use test_support::workspace;

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times[((times.len() as f64 * p) as usize).min(times.len() - 1)]
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

const BODY: &str = r#"{"name":"bench","replicas":3,"labels":{"team":"dns"}}"#;

/// `n` PUTs with the host's stack; per-request times.
async fn host_client(url: &str, n: usize) -> Vec<Duration> {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, http_body_util::Full<bytes::Bytes>>(connector);
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 50 {
        let request = http::Request::put(url)
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                BODY.as_bytes(),
            )))
            .unwrap();
        let t = Instant::now();
        let response = client.request(request).await.unwrap();
        let _ = response.into_body().collect().await.unwrap().to_bytes();
        if i >= 50 {
            times.push(t.elapsed());
        }
    }
    times
}

fn invocation(ty: &str, config: Value, target_url: &str) -> Invocation {
    let target = json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
        "metadata": {"name": "api", "namespace": "default"},
        "spec": {"type": "wasm-deployer.dev/http-api", "config": {"url": target_url}}});
    Invocation {
        deploy_item: json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
            "metadata": {"name": "bench", "namespace": "default", "generation": 1},
            "spec": {"type": ty, "target": {"name": "api", "namespace": "default"}, "config": config},
            "status": {"phase": "Init"}}),
        target: Some(plugin_runtime::ResolvedTarget {
            target: serde_json::from_value(target).unwrap(),
            content: json!({"url": target_url}).to_string(),
        }),
        context: None,
        previous_provider_status: None,
    }
}

fn granted(url: &str) -> Arc<MemoryCluster> {
    let mut cluster = MemoryCluster::default();
    cluster.http = OfflineHttp {
        target: None,
        allow: vec![Base::parse(url).unwrap()],
    };
    Arc::new(cluster)
}

async fn load(file: &std::path::Path) -> Option<Arc<dyn DeployerPlugin>> {
    let bytes = std::fs::read(file).ok()?;
    let rt = PluginRuntime::new(RuntimeConfig::default()).unwrap();
    let plugin = rt
        .load_bytes(&file.display().to_string(), &bytes)
        .await
        .unwrap();
    Some(plugin as Arc<dyn DeployerPlugin>)
}

/// `n` PUTs of `url` from inside test-http with `client` (`sdk` or `wstd`), timed by the
/// plugin's monotonic clock: the mean per request.
async fn in_plugin(
    plugin: &Arc<dyn DeployerPlugin>,
    base: &str,
    url: &str,
    client: &str,
    n: usize,
) -> (Duration, Duration, Duration) {
    let cluster = granted(base);
    let config = |repeat: usize| {
        json!({"apiVersion": "test.wasm-deployer.dev/v1", "kind": "ProviderConfiguration",
            "repeat": repeat, "client": client,
            "requests": [{"method": "PUT", "url": url, "body": serde_json::from_str::<Value>(BODY).unwrap(),
                          "headers": {"content-type": "application/json"}}]})
    };
    // Warm the connection pool and the instance's code first.
    let ty = "test.wasm-deployer.dev/http";
    plugin
        .reconcile(invocation(ty, config(50), base), cluster.clone())
        .await
        .unwrap();
    cluster.http_times.lock().unwrap().clear();
    let r = plugin
        .reconcile(invocation(ty, config(n), base), cluster.clone())
        .await
        .unwrap();
    let result = &r.exports.as_ref().unwrap()["results"][0];
    let nanos = |k: &str| Duration::from_nanos(result[k].as_u64().unwrap());
    // The host's part: from the gate's send to the response headers.
    let mut gate = cluster.http_times.lock().unwrap().clone();
    (
        nanos("p50Nanos"),
        nanos("p99Nanos"),
        percentile(&mut gate, 0.5),
    )
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let n = env_usize("BENCH_HTTP_REQUESTS", 2000);
    let calls = env_usize("BENCH_HTTP_RECONCILES", 500);
    rt.block_on(async {
        let api = ApiServer::start(ApiOptions::default()).await;
        let base = api.url();
        let url = format!("{base}things/bench");
        let mut rows = Vec::new();

        let mut host = host_client(&url, n).await;
        let host_p50 = percentile(&mut host, 0.5);
        rows.push(format!("| host client (hyper, pooled) | {} | {} | {n} |", us(host_p50), us(percentile(&mut host, 0.99))));

        let test_http = workspace().join("target/test-plugins/test-http.wasm");
        if let Some(plugin) = load(&test_http).await {
            for client in ["sdk", "wstd"] {
                let (p50, p99, gate) = in_plugin(&plugin, &base, &url, client, n).await;
                let ratio = p50.as_secs_f64() / host_p50.as_secs_f64();
                let met = p50.as_secs_f64() <= 1.5 * host_p50.as_secs_f64() + 50e-6;
                rows.push(format!(
                    "| Rust plugin, {client} client (the plugin's clock; the host's gate: {} p50) | {} | {} | {n} |",
                    us(gate),
                    us(p50),
                    us(p99)
                ));
                rows.push(format!(
                    "| → {client} / host client, p50 | {ratio:.2}× (+{}) | goal ≤ 1.5× + 50 µs: {} | |",
                    us(p50.saturating_sub(host_p50)),
                    if met { "met" } else { "not met" }
                ));
            }
        }

        for (lang, file) in [
            ("rust", "target/polyglot-plugins/rust/rust-http-api.wasm"),
            ("c", "target/polyglot-plugins/c/c-http-api.wasm"),
            ("go", "target/polyglot-plugins/go/go-http-api.wasm"),
            ("js", "target/polyglot-plugins/js/js-http-api.wasm"),
            ("python", "target/polyglot-plugins/python/python-http-api.wasm"),
        ] {
            let Some(plugin) = load(&workspace().join(file)).await else {
                eprintln!("{lang}: {file} missing, left out");
                continue;
            };
            let ty = plugin.description().deploy_item_types[0].clone();
            let cluster = granted(&base);
            let config = json!({"apiVersion": "example.wasm-deployer.dev/v1", "kind": "ProviderConfiguration",
                "path": format!("things/{lang}"), "body": serde_json::from_str::<Value>(BODY).unwrap()});
            let calls = if lang == "rust" || lang == "c" { calls } else { calls / 5 };
            let mut times = Vec::with_capacity(calls);
            for i in 0..calls + 5 {
                let inv = invocation(&ty, config.clone(), &base);
                let t = Instant::now();
                let r = plugin.reconcile(inv, cluster.clone()).await;
                if i >= 5 {
                    times.push(t.elapsed());
                }
                if let Err(e) = r {
                    panic!("{lang}: {e:?}");
                }
            }
            rows.push(format!("| {lang}: one reconcile of its http-api example (fresh instance + 1 PUT) | {} | {} | {calls} |",
                us(percentile(&mut times, 0.5)), us(percentile(&mut times, 0.99))));
        }
        let table = format!("| PUT on loopback | p50 | p99 | requests |\n|---|---|---|---|\n{}\n", rows.join("\n"));
        print!("{table}");
        if std::env::var_os("BENCH_WRITE_DOCS").is_some() {
            write_docs_section("http", "\n## Outgoing HTTP (WIT 1.5)\n\n", &table);
        }
    });
}
