//! Throughput of the embedded API server, in-process through the axum Router
//! (no socket): creates/s, updates/s, status updates/s, and watch event
//! delivery with 1 and 10 watchers. Plain `main`, prints a table.
//!
//! Run: `cargo bench -p embedded-apiserver` (N objects, default 20000; override with BENCH_N).

use axum::body::Body;
use embedded_apiserver::{ApiServer, Options};
use futures::StreamExt;
use http::Request;
use serde_json::json;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const CONCURRENCY: usize = 4;

async fn send(s: &axum::Router, method: &str, uri: String, ct: &str, body: Vec<u8>) -> u16 {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct)
        .body(Body::from(body))
        .unwrap();
    let resp = s.clone().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let _ = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    code
}

/// Run `f(i)` for i in 0..n over CONCURRENCY tasks; returns ops/s.
async fn timed<F, Fut>(n: usize, f: F) -> (f64, Duration)
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..CONCURRENCY {
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while i < n {
                f(i).await;
                i += CONCURRENCY;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let el = start.elapsed();
    (n as f64 / el.as_secs_f64(), el)
}

fn cm(i: usize, v: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i}"), "labels": {"app": "bench", "shard": (i % 16).to_string()}},
        "data": {"key": format!("value-{v}"), "payload": "x".repeat(200)}
    }))
    .unwrap()
}

async fn watchers(
    s: &ApiServer,
    w: usize,
    from_rv: u64,
    expect: usize,
) -> Vec<tokio::task::JoinHandle<usize>> {
    let mut hs = Vec::new();
    for _ in 0..w {
        let r = s.router();
        hs.push(tokio::spawn(async move {
            let req = Request::get(format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={from_rv}&timeoutSeconds=600")).body(Body::empty()).unwrap();
            let mut body = r.oneshot(req).await.unwrap().into_body().into_data_stream();
            let mut lines = 0;
            while lines < expect {
                match body.next().await {
                    Some(Ok(chunk)) => lines += chunk.iter().filter(|b| **b == b'\n').count(),
                    _ => break,
                }
            }
            lines
        }));
    }
    hs
}

fn row(name: &str, n: usize, rate: f64, el: Duration) {
    println!(
        "| {name:<44} | {n:>8} | {:>10.0} | {:>8.2} |",
        rate,
        el.as_secs_f64()
    );
}

/// The table's head.
fn print_head() {
    println!(
        "embedded-apiserver throughput, in-process Router, {CONCURRENCY} concurrent clients, {} CPUs",
        std::thread::available_parallelism()
            .map(|p| p.get())
            .unwrap_or(0)
    );
    println!();
    println!(
        "| {:<44} | {:>8} | {:>10} | {:>8} |",
        "operation", "ops", "ops/s", "seconds"
    );
    println!(
        "|{}|{}|{}|{}|",
        "-".repeat(46),
        "-".repeat(10),
        "-".repeat(12),
        "-".repeat(10)
    );
}

/// `n` ConfigMaps created, then each updated and merge-patched once.
async fn configmap_writes(r: &axum::Router, n: usize) {
    let (rate, el) = timed(n, {
        let r = r.clone();
        move |i| {
            let r = r.clone();
            async move {
                assert_eq!(
                    send(
                        &r,
                        "POST",
                        "/api/v1/namespaces/default/configmaps".into(),
                        "application/json",
                        cm(i, 0)
                    )
                    .await,
                    201
                )
            }
        }
    })
    .await;
    row("create (POST ConfigMap)", n, rate, el);

    let (rate, el) = timed(n, {
        let r = r.clone();
        move |i| {
            let r = r.clone();
            async move {
                assert_eq!(
                    send(
                        &r,
                        "PUT",
                        format!("/api/v1/namespaces/default/configmaps/cm-{i}"),
                        "application/json",
                        cm(i, 1)
                    )
                    .await,
                    200
                )
            }
        }
    })
    .await;
    row("update (PUT ConfigMap, unconditional)", n, rate, el);

    let (rate, el) = timed(n, {
        let r = r.clone();
        move |i| {
            let r = r.clone();
            let p = serde_json::to_vec(&json!({"data": {"key": "patched"}})).unwrap();
            async move {
                assert_eq!(
                    send(
                        &r,
                        "PATCH",
                        format!("/api/v1/namespaces/default/configmaps/cm-{i}"),
                        "application/merge-patch+json",
                        p
                    )
                    .await,
                    200
                )
            }
        }
    })
    .await;
    row("patch (merge patch ConfigMap)", n, rate, el);
}

/// Status updates on a CRD with a status subresource: `n` DeployItems created, then each
/// one's status patched.
async fn deployitem_status_writes(s: &ApiServer, r: &axum::Router, n: usize) {
    s.install_yaml_documents(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/wasm-deployer/charts/landscaper-crds/crds/landscaper.gardener.cloud_deployitems.yaml")).unwrap()).unwrap();
    let base = "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/default/deployitems";
    let (rate, el) = timed(n, {
        let r = r.clone();
        move |i| {
            let r = r.clone();
            let b = serde_json::to_vec(&json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem", "metadata": {"name": format!("di-{i}")}, "spec": {"type": "mock"}})).unwrap();
            async move { assert_eq!(send(&r, "POST", base.into(), "application/json", b).await, 201) }
        }
    })
    .await;
    row("create (POST DeployItem CR)", n, rate, el);
    let (rate, el) = timed(n, {
        let r = r.clone();
        move |i| {
            let r = r.clone();
            let p = serde_json::to_vec(
                &json!({"status": {"phase": "Succeeded", "observedGeneration": 1}}),
            )
            .unwrap();
            async move {
                assert_eq!(
                    send(
                        &r,
                        "PATCH",
                        format!("{base}/di-{i}/status"),
                        "application/merge-patch+json",
                        p
                    )
                    .await,
                    200
                )
            }
        }
    })
    .await;
    row("status update (PATCH DeployItem /status)", n, rate, el);
}

/// `n` gets of the ConfigMaps, then a quarter as many creates through a `kube::Client` on top
/// of the Router (what controllers use).
async fn gets_and_client_creates(s: &ApiServer, r: &axum::Router, n: usize) {
    let (rate, el) = timed(n, {
        let r = r.clone();
        move |i| {
            let r = r.clone();
            async move {
                assert_eq!(
                    send(
                        &r,
                        "GET",
                        format!("/api/v1/namespaces/default/configmaps/cm-{i}"),
                        "",
                        vec![]
                    )
                    .await,
                    200
                )
            }
        }
    })
    .await;
    row("get ConfigMap", n, rate, el);

    let client = s.client();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client, "default");
    let m = n / 4;
    let (rate, el) = timed(m, {
        let api = api.clone();
        move |i| {
            let api = api.clone();
            async move {
                let c: k8s_openapi::api::core::v1::ConfigMap =
                    serde_json::from_slice(&cm(1_000_000 + i, 0)).unwrap();
                api.create(&Default::default(), &c).await.unwrap();
            }
        }
    })
    .await;
    row("create via kube::Api (in-process client)", m, rate, el);
}

/// Watch delivery: W watchers on configmaps, n updates.
async fn watch_delivery(s: &ApiServer, r: &axum::Router, n: usize) {
    for w in [1usize, 10] {
        let from = s.resource_version();
        let hs = watchers(s, w, from, n).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let start = Instant::now();
        let (_, write_el) = timed(n, {
            let r = r.clone();
            move |i| {
                let r = r.clone();
                let p = serde_json::to_vec(&json!({"data": {"key": format!("w{w}-{i}")}})).unwrap();
                async move {
                    assert_eq!(
                        send(
                            &r,
                            "PATCH",
                            format!("/api/v1/namespaces/default/configmaps/cm-{i}"),
                            "application/merge-patch+json",
                            p
                        )
                        .await,
                        200
                    )
                }
            }
        })
        .await;
        let mut total = 0;
        for h in hs {
            total += h.await.unwrap();
        }
        let el = start.elapsed();
        row(
            &format!("watch: {w} watcher(s), events delivered"),
            total,
            total as f64 / el.as_secs_f64(),
            el,
        );
        row(
            &format!("  writes while {w} watcher(s) attached"),
            n,
            n as f64 / write_el.as_secs_f64(),
            write_el,
        );
    }
}

/// The same creates with persistence on (append log, flushed per write), then a flush.
async fn persisted_creates(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let ps = ApiServer::new(Options {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    })
    .unwrap();
    let (rate, el) = timed(n, {
        let r = ps.router();
        move |i| {
            let r = r.clone();
            async move {
                assert_eq!(
                    send(
                        &r,
                        "POST",
                        "/api/v1/namespaces/default/configmaps".into(),
                        "application/json",
                        cm(i, 0)
                    )
                    .await,
                    201
                )
            }
        }
    })
    .await;
    row("create with data_dir (append log)", n, rate, el);
    let start = Instant::now();
    ps.flush().await.unwrap();
    row(
        "flush (compact snapshot + fsync)",
        n,
        n as f64 / start.elapsed().as_secs_f64(),
        start.elapsed(),
    );
}

fn main() {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        print_head();
        let s = ApiServer::new(Options {
            watch_history: 100_000,
            ..Default::default()
        })
        .unwrap();
        let r = s.router();
        configmap_writes(&r, n).await;
        deployitem_status_writes(&s, &r, n).await;
        gets_and_client_creates(&s, &r, n).await;
        watch_delivery(&s, &r, n).await;
        persisted_creates(n).await;

        let st = s.stats();
        println!();
        println!(
            "total committed writes: {}, requests: {}",
            st.writes, st.total_requests
        );
    });
}
