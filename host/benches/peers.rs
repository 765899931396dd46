//! Side by side with Landscaper's Go deployers: the same N DeployItems on the same API server,
//! served by Landscaper's Go mock or manifest deployer (`../shared/tools/real-landscaper
//! deployer KIND`, client rate limits lifted) and by our host (`deployer-host run`), at the same
//! worker count where the peer has one (the Go mock deployer has one worker, fixed).
//!
//! `cargo bench -p deployer-host --bench peers` (or `cargo xtask bench`). Environment:
//! `BENCH_PEERS_ITEMS` (default 1000), `BENCH_PEERS_WORKERS` (default `1,5,16`), `BENCH_ROUNDS`
//! (default 2; rows alternate their order every round), `BENCH_PEERS_KINDS` (default
//! `mock,manifest`), `BENCH_WRITE_DOCS=1` (the table into `docs/benchmarks.md`).
//!
//! Per row, a fresh embedded API server (in this process, served on loopback; the deployer
//! reaches it over HTTP as it would a cluster) holds N items with no job. One item is triggered
//! as the deployer process starts (start-up to its first finished job), then the other N-1 at
//! once, as Landscaper triggers them: a status write of `jobID`, `jobIDGenerationTime` and
//! `transitionTimes.triggerTime`. Measured for those N-1: jobs/s until the last finished, CPU of
//! the deployer process per job (user + system, /proc), API requests per job (the server's
//! counters minus the bench's own), and the process' peak RSS (VmHWM). The API server runs in
//! this process, so it is not in the deployer's CPU figures.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use deployer_host::landscaper::DeployItem;
use embedded_apiserver::ApiServer;
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;

mod common;

use common::{KillOnDrop, env_usize, workspace, write_docs_section};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Mock,
    Manifest,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Mock => "mock",
            Kind::Manifest => "manifest",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deployer {
    Go,
    Ours,
}

#[derive(Clone, Debug)]
struct Row {
    kind: Kind,
    workers: usize,
    deployer: Deployer,
}

#[derive(Clone, Debug, Default)]
struct Measured {
    jobs_per_s: f64,
    cpu_ms_per_job: f64,
    requests_per_job: f64,
    peak_rss_kib: u64,
    first_job_s: f64,
}

fn item(i: usize, kind: Kind) -> serde_json::Value {
    let config = match kind {
        Kind::Mock => json!({
            "apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
            "kind": "ProviderConfiguration", "phase": "Succeeded",
        }),
        Kind::Manifest => json!({
            "apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha2",
            "kind": "ProviderConfiguration", "updateStrategy": "update",
            "manifests": (0..3).map(|k| json!({"policy": "manage", "manifest": {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("peer-{i}-{k}"), "namespace": "default"},
                "data": {"key": format!("value-{k}")},
            }})).collect::<Vec<_>>(),
        }),
    };
    let ty = match kind {
        Kind::Mock => "landscaper.gardener.cloud/mock",
        Kind::Manifest => "landscaper.gardener.cloud/kubernetes-manifest",
    };
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": format!("peer-{i}"), "namespace": "default"},
        "spec": {"type": ty, "target": {"name": "default", "namespace": "default"}, "config": config},
    })
}

/// CPU time (user + system) of a process in milliseconds, from /proc (clock ticks of 10 ms).
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after ')'.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) * 10.0
}

/// Peak resident set size of a process in KiB (VmHWM).
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn real_landscaper() -> PathBuf {
    workspace().join("../shared/tools/real-landscaper/real-landscaper")
}

/// Starts the row's deployer against `kubeconfig`; returns the process and its pid.
fn start_deployer(row: &Row, kubeconfig: &Path, dir: &Path) -> (Option<KillOnDrop>, u32) {
    match row.deployer {
        Deployer::Ours => {
            let config = dir.join("host.yaml");
            std::fs::write(&config, format!("workers: {}\n", row.workers)).unwrap();
            let child = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
                .args(["run", "--kubeconfig"])
                .arg(kubeconfig)
                .arg("--config")
                .arg(&config)
                .arg("--plugins")
                .arg(workspace().join("target/plugins"))
                .env("RUST_LOG", "error")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("deployer-host run");
            let pid = child.id();
            (Some(KillOnDrop(child)), pid)
        }
        Deployer::Go => {
            let out = Command::new(real_landscaper())
                .arg("deployer")
                .arg(row.kind.name())
                .arg(dir)
                .arg(kubeconfig)
                .arg(row.workers.to_string())
                .output()
                .expect("real-landscaper deployer");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let pid: u32 = std::fs::read_to_string(dir.join("deployer.pid"))
                .expect("deployer.pid")
                .trim()
                .parse()
                .unwrap();
            (None, pid)
        }
    }
}

fn stop_pid(pid: u32) {
    let _ = Command::new("kill").arg(pid.to_string()).status();
    for _ in 0..50 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
}

/// Triggers a job on `name` as Landscaper does (one status write).
async fn trigger(items: &Api<DeployItem>, name: &str) {
    let now = jiff::Timestamp::now().to_string();
    // (the status schema requires observedGeneration; Landscaper writes the whole status)
    let patch = json!({"status": {
        "observedGeneration": 0,
        "jobID": uuid::Uuid::new_v4().to_string(),
        "jobIDGenerationTime": now,
        "transitionTimes": {"triggerTime": now},
    }});
    items
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("trigger");
}

async fn measure(row: &Row, n: usize) -> Measured {
    let dir = tempfile::tempdir().unwrap();
    let server = ApiServer::new(Default::default()).expect("server");
    for crd in deployer_host::dev::LANDSCAPER_CRDS {
        server.install_yaml_documents(crd).expect("CRD");
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let kubeconfig_text = ApiServer::kubeconfig_yaml(&url);
    server
        .install_object(json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
            "metadata": {"name": "default", "namespace": "default"},
            "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                     "config": {"kubeconfig": kubeconfig_text}},
        }))
        .expect("target");
    server
        .install_object(json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
            "metadata": {"name": "default", "namespace": "default"},
        }))
        .expect("context");
    for i in 0..n {
        server.install_object(item(i, row.kind)).expect("item");
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await
    });
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, &kubeconfig_text).unwrap();

    let client = server.client();
    let items: Api<DeployItem> = Api::namespaced(client, "default");
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
    let watch = tokio::spawn({
        let items = items.clone();
        async move {
            let mut listed = Some(listed_tx);
            let mut events = std::pin::pin!(watcher(items, watcher::Config::default()));
            while let Some(Ok(event)) = events.next().await {
                let o = match event {
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => o,
                    watcher::Event::InitDone => {
                        if let Some(l) = listed.take() {
                            let _ = l.send(());
                        }
                        continue;
                    }
                    _ => continue,
                };
                let s = o.status.clone().unwrap_or_default();
                if !s.job_id.is_empty() && s.job_id == s.job_id_finished {
                    let _ = done_tx.send(o.metadata.name.clone().unwrap_or_default());
                }
            }
        }
    });
    listed_rx.await.expect("watch listed");

    // Start-up: the first item's job is issued as the process starts.
    trigger(&items, "peer-0").await;
    let started = Instant::now();
    let (child, pid) = start_deployer(row, &kubeconfig, dir.path());
    let timeout = Duration::from_secs(600);
    let first = tokio::time::timeout(timeout, done_rx.recv())
        .await
        .expect("first job within 10 minutes")
        .expect("watch");
    assert_eq!(first, "peer-0");
    let first_job_s = started.elapsed().as_secs_f64();

    // The burst: N-1 jobs at once.
    let cpu_before = cpu_ms(pid);
    let requests_before = server.stats().total_requests;
    let burst = Instant::now();
    futures::stream::iter(1..n)
        .for_each_concurrent(32, |i| {
            let items = items.clone();
            async move { trigger(&items, &format!("peer-{i}")).await }
        })
        .await;
    let mut finished = HashSet::new();
    while finished.len() < n - 1 {
        let name = tokio::time::timeout(timeout, done_rx.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{row:?}: only {} of {} jobs finished",
                    finished.len(),
                    n - 1
                )
            })
            .expect("watch");
        if name != "peer-0" {
            finished.insert(name);
        }
    }
    let elapsed = burst.elapsed().as_secs_f64();
    let cpu = cpu_ms(pid) - cpu_before;
    // The bench's own requests: one trigger per job (its watch is one long request, already open).
    let requests = server.stats().total_requests - requests_before - (n as u64 - 1);
    let peak = peak_rss_kib(pid);
    match child {
        Some(c) => drop(c),
        None => stop_pid(pid),
    }
    watch.abort();
    let _ = stop.send(());
    let jobs = (n - 1) as f64;
    Measured {
        jobs_per_s: jobs / elapsed,
        cpu_ms_per_job: cpu / jobs,
        requests_per_job: requests as f64 / jobs,
        peak_rss_kib: peak,
        first_job_s,
    }
}

/// A compared pair (kind, workers) and its rounds: Landscaper's Go deployer, then ours.
type PairResults = ((Kind, usize), Vec<Measured>, Vec<Measured>);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    assert!(
        workspace().join("target/plugins/mock.wasm").exists(),
        "run `cargo xtask build-plugins` first (or `cargo xtask bench`)"
    );
    let n = env_usize("BENCH_PEERS_ITEMS", 1000).max(2);
    let rounds = env_usize("BENCH_ROUNDS", 2).max(1);
    let workers: Vec<usize> = std::env::var("BENCH_PEERS_WORKERS")
        .unwrap_or_else(|_| "1,5,16".into())
        .split(',')
        .filter_map(|w| w.trim().parse().ok())
        .collect();
    let kinds: Vec<Kind> = std::env::var("BENCH_PEERS_KINDS")
        .unwrap_or_else(|_| "mock,manifest".into())
        .split(',')
        .filter_map(|k| match k.trim() {
            "mock" => Some(Kind::Mock),
            "manifest" => Some(Kind::Manifest),
            _ => None,
        })
        .collect();
    // The pairs compared: (kind, workers). The Go mock deployer has one worker, fixed: its
    // rows compare with ours at 1 worker, and ours runs the other counts alone.
    let mut pairs = Vec::new();
    for &kind in &kinds {
        for &w in &workers {
            pairs.push((kind, w));
        }
    }
    let go_has = |kind: Kind, w: usize| kind != Kind::Mock || w == 1;
    let mut results: Vec<PairResults> =
        pairs.iter().map(|p| (*p, Vec::new(), Vec::new())).collect();
    rt.block_on(async {
        for round in 0..rounds {
            for (pair, go, ours) in &mut results {
                let (kind, w) = *pair;
                // Alternate which of the pair runs first.
                let order: Vec<Deployer> = if round % 2 == 0 {
                    vec![Deployer::Go, Deployer::Ours]
                } else {
                    vec![Deployer::Ours, Deployer::Go]
                };
                for deployer in order {
                    if deployer == Deployer::Go && !go_has(kind, w) {
                        continue;
                    }
                    let row = Row {
                        kind,
                        workers: w,
                        deployer,
                    };
                    let m = measure(&row, n).await;
                    eprintln!(
                        "round {round} {} w={w} {:?}: {:.0} jobs/s, {:.2} ms CPU/job, {:.1} req/job, peak RSS {:.1} MiB, first job {:.2} s",
                        kind.name(),
                        deployer,
                        m.jobs_per_s,
                        m.cpu_ms_per_job,
                        m.requests_per_job,
                        m.peak_rss_kib as f64 / 1024.0,
                        m.first_job_s
                    );
                    match deployer {
                        Deployer::Go => go.push(m),
                        Deployer::Ours => ours.push(m),
                    }
                }
            }
        }
    });
    let mut table = format!(
        "{n} items per row, a fresh embedded API server per row, {rounds} rounds (medians; ratios are medians of the rounds' paired ratios).\n\n\
         | kind | workers | deployer | jobs/s | CPU ms/job | API requests/job | peak RSS | start to first job | jobs/s vs Go | CPU/job vs Go |\n\
         |---|---|---|---|---|---|---|---|---|---|\n"
    );
    let fmt_row = |kind: Kind, w: usize, who: &str, v: &[Measured], ratio: Option<(f64, f64)>| {
        let med = |f: fn(&Measured) -> f64| median(v.iter().map(f).collect());
        format!(
            "| {} | {w} | {who} | {:.0} | {:.2} | {:.1} | {:.1} MiB | {:.2} s | {} | {} |\n",
            kind.name(),
            med(|m| m.jobs_per_s),
            med(|m| m.cpu_ms_per_job),
            med(|m| m.requests_per_job),
            med(|m| m.peak_rss_kib as f64) / 1024.0,
            med(|m| m.first_job_s),
            ratio.map_or("".into(), |r| format!("**{:.1}×**", r.0)),
            ratio.map_or("".into(), |r| format!("**{:.2}×**", r.1)),
        )
    };
    for ((kind, w), go, ours) in &results {
        if !go.is_empty() {
            table.push_str(&fmt_row(*kind, *w, "Landscaper (Go)", go, None));
        }
        let ratio = (!go.is_empty()).then(|| {
            let pairs = go.iter().zip(ours);
            (
                median(
                    pairs
                        .clone()
                        .map(|(g, o)| o.jobs_per_s / g.jobs_per_s)
                        .collect(),
                ),
                median(
                    pairs
                        .map(|(g, o)| o.cpu_ms_per_job / g.cpu_ms_per_job)
                        .collect(),
                ),
            )
        });
        table.push_str(&fmt_row(*kind, *w, "wasm-deployer", ours, ratio));
    }
    println!("{table}");
    if std::env::var("BENCH_WRITE_DOCS").is_ok() {
        write_docs_section(
            "peers",
            "## Side by side with Landscaper's Go deployers\n\n",
            &table,
        );
    }
}
