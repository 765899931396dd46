//! Side by side with Landscaper's Go deployers: the same DeployItems on the same API server,
//! served by one of Landscaper's Go deployers (`../shared/tools/real-landscaper deployer KIND`,
//! binaries from `$REAL_LANDSCAPER_BIN`, built outside this repository; SKIP without them; client
//! rate limits lifted) and by our host (`deployer-host run`), at the same worker count
//! where the peer has one (the Go mock deployer has one worker, fixed).
//!
//! `cargo bench -p deployer-host --bench peers` (or `cargo xtask bench`). Environment:
//! - `BENCH_PEERS_ITEMS` (default `1000,10000`): the item counts of the mock and manifest rows;
//!   `BENCH_PEERS_REAL_ITEMS` (default `1000`) those on the real kube-apiserver;
//! - `BENCH_PEERS_WORKERS` (default `1,5,16`), `BENCH_PEERS_KINDS` (default
//!   `mock,manifest,helm`), `BENCH_ROUNDS` (default 2; a pair alternates which runs first);
//! - `BENCH_PEERS_BACKENDS` (default `embedded,real`; `real` is the real kube-apiserver 1.20 of
//!   `../shared/tools/real-apiserver`, skipped with a note when it is not built);
//! - `BENCH_PEERS_HELM_ITEMS` (default 40): installs of the 30-object chart per helm row;
//! - `BENCH_WRITE_DOCS=1`: the tables into `docs/benchmarks.md` (section `peers`, or
//!   `BENCH_PEERS_DOCS_MARKER`);
//! - `BENCH_PEERS_SKIP_MEMORY=1`: no memory-of-every-kind run;
//! - `BENCH_PEERS_ITEM_CACHE` (default `metadata,full`): our host's rows, by its `itemCache:`
//!   (the DeployItem watch by metadata, or holding every item as the Go deployers do);
//! - diagnostics: `BENCH_PEERS_REQUESTS=1` (requests per job by resource and verb),
//!   `BENCH_PEERS_HOST_LOG=<file>` and `BENCH_PEERS_HOST_RUST_LOG` (the host's log),
//!   `BENCH_PEERS_HOST_EVENTS=all|errors|none` (the host's `events:`).
//!
//! Per row, a fresh API server holds the items with no job. One item is triggered as the
//! deployer process starts (start-up to its first finished job), then the others at once, as
//! Landscaper triggers them: a status write of `jobID`, `jobIDGenerationTime` and
//! `transitionTimes.triggerTime`. Measured for that burst: jobs/s until the last finished, the
//! deployer process' CPU per job (user + system, /proc), API requests per job (the embedded
//! server's counters, or the real one's `apiserver_request_total`, minus the bench's own), and
//! the process' peak RSS (VmHWM). Every job must end `Succeeded`. The embedded API server runs
//! in this process, so it is in no deployer's CPU figure.
//!
//! Last, memory: one host serving mock, manifest and helm items at once beside the three Go
//! deployer processes an operator runs for the same items.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use deployer_host::landscaper::DeployItem;
use embedded_apiserver::ApiServer;
use futures::StreamExt;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use test_support::bench::{KillOnDrop, env_usize, write_docs_section};
use test_support::workspace;

#[path = "peers/tables.rs"]
mod tables;
use tables::{memory_lines, pair_rows, table_head};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Mock,
    Manifest,
    Helm,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Mock => "mock",
            Kind::Manifest => "manifest",
            Kind::Helm => "helm",
        }
    }

    fn item_type(self) -> &'static str {
        match self {
            Kind::Mock => "landscaper.gardener.cloud/mock",
            Kind::Manifest => "landscaper.gardener.cloud/kubernetes-manifest",
            Kind::Helm => "landscaper.gardener.cloud/helm",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Embedded,
    Real,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Embedded => "embedded",
            Backend::Real => "kube-apiserver 1.20",
        }
    }
}

/// Which side of a comparison serves a row: Landscaper's Go deployer, or our host (in one of
/// its item-cache settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Go,
    /// Our host, its DeployItem watch by metadata (the default).
    Ours,
    /// Our host with `itemCache: full` (every item held, as controller-runtime's cache does).
    OursFull,
}

impl Side {
    fn row_name(self) -> &'static str {
        match self {
            Side::Go => "Landscaper (Go)",
            Side::Ours => "wasm-deployer",
            Side::OursFull => "wasm-deployer, `itemCache: full`",
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Measured {
    jobs_per_s: f64,
    cpu_ms_per_job: f64,
    requests_per_job: f64,
    /// CPU of the API server per job: the real one's kube-apiserver and etcd; for the embedded
    /// one, this bench process (the server, and the bench's own triggers and watch).
    server_cpu_ms_per_job: f64,
    peak_rss_kib: u64,
    first_job_s: f64,
}

/// The item `name` of `kind`; `chart` is the helm items' inline archive.
fn item(name: &str, kind: Kind, chart: &str) -> serde_json::Value {
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
                "metadata": {"name": format!("{name}-{k}"), "namespace": "default"},
                "data": {"key": format!("value-{k}")},
            }})).collect::<Vec<_>>(),
        }),
        // Every release in `default`: the Go helm deployer and ours both write Helm's release
        // Secrets there, and readiness of the 10 Deployments is checked by both.
        Kind::Helm => json!({
            "apiVersion": "helm.deployer.landscaper.gardener.cloud/v1alpha1",
            "kind": "ProviderConfiguration", "name": name, "namespace": "default",
            "chart": {"archive": {"raw": chart}},
        }),
    };
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": kind.item_type(), "target": {"name": "default", "namespace": "default"},
                 "config": config},
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

/// One API server for one row, stopped when dropped.
struct Cluster {
    backend: Backend,
    client: Client,
    kubeconfig: PathBuf,
    /// The embedded server (its request counter), served on loopback while this is held.
    embedded: Option<(ApiServer, embedded_apiserver::LoopbackServing)>,
    _real: Option<test_support::RealApiServer>,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// A fresh API server with Landscaper's CRDs, the `default` Target pointing at itself and
    /// `Context/default` (the Go deployers need it).
    async fn start(backend: Backend) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (client, kubeconfig_text, embedded, real) = match backend {
            Backend::Embedded => {
                // Workloads are simulated so that the helm chart's Deployments become ready.
                let server = ApiServer::new(embedded_apiserver::Options {
                    simulate_workloads: true,
                    ..Default::default()
                })
                .expect("server");
                for crd in deployer_host::crds::landscaper() {
                    server
                        .install_object(serde_json::to_value(crd).unwrap())
                        .expect("CRD");
                }
                let serving = server.serve_on_loopback().await.unwrap();
                (
                    server.client(),
                    serving.kubeconfig(),
                    Some((server, serving)),
                    None,
                )
            }
            Backend::Real => {
                let real = test_support::RealApiServer::start("AlwaysAllow");
                let client = real.client().await;
                deployer_host::dev::install_landscaper_crds(&client)
                    .await
                    .expect("Landscaper CRDs");
                (client, real.kubeconfig.clone(), None, Some(real))
            }
        };
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, &kubeconfig_text).unwrap();
        let cluster = Cluster {
            backend,
            client,
            kubeconfig,
            embedded,
            _real: real,
            dir,
        };
        cluster
            .create_all(vec![
                json!({
                    "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
                    "metadata": {"name": "default", "namespace": "default"},
                    "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                             "config": {"kubeconfig": kubeconfig_text}},
                }),
                json!({
                    "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
                    "metadata": {"name": "default", "namespace": "default"},
                }),
            ])
            .await;
        cluster
    }

    /// Creates objects of the `landscaper.gardener.cloud/v1alpha1` group in `default`: directly
    /// in the embedded server's store, through the API on a real one.
    async fn create_all(&self, objects: Vec<serde_json::Value>) {
        if let Some((server, _)) = &self.embedded {
            for o in objects {
                server.install_object(o).expect("object");
            }
            return;
        }
        futures::stream::iter(objects)
            .for_each_concurrent(32, |o| async move {
                let kind = o["kind"].as_str().unwrap().to_string();
                let resource = kube::discovery::ApiResource {
                    group: "landscaper.gardener.cloud".into(),
                    version: "v1alpha1".into(),
                    api_version: "landscaper.gardener.cloud/v1alpha1".into(),
                    plural: format!("{}s", kind.to_lowercase()),
                    kind,
                };
                let api: Api<kube::api::DynamicObject> =
                    Api::namespaced_with(self.client.clone(), "default", &resource);
                let object: kube::api::DynamicObject = serde_json::from_value(o).unwrap();
                api.create(&PostParams::default(), &object)
                    .await
                    .expect("create");
            })
            .await;
    }

    /// Requests served so far: the embedded server's counter, or the real server's
    /// `apiserver_request_total` (long-running requests count when they end; the scrape itself
    /// is not in its own figure).
    async fn requests(&self) -> u64 {
        if let Some((server, _)) = &self.embedded {
            return server.stats().total_requests;
        }
        let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
        let text = self.client.request_text(request).await.expect("/metrics");
        text.lines()
            .filter(|l| l.starts_with("apiserver_request_total{"))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum::<f64>() as u64
    }
}

impl Cluster {
    /// CPU (ms) the API server has used so far.
    fn server_cpu_ms(&self) -> f64 {
        match &self._real {
            Some(real) => ["apiserver.pid", "etcd.pid"]
                .iter()
                .filter_map(|f| std::fs::read_to_string(real.dir().join(f)).ok())
                .filter_map(|pid| pid.trim().parse().ok())
                .map(cpu_ms)
                .sum(),
            None => cpu_ms(std::process::id()),
        }
    }
}

/// A deployer process of the row; stopped when dropped.
struct Process {
    pid: u32,
    _child: Option<KillOnDrop>,
}

impl Drop for Process {
    fn drop(&mut self) {
        if self._child.is_some() {
            return; // KillOnDrop stops it
        }
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
        for _ in 0..50 {
            if !Path::new(&format!("/proc/{}", self.pid)).exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill")
            .args(["-9", &self.pid.to_string()])
            .status();
    }
}

/// Starts a deployer against `kubeconfig`: Landscaper's Go deployer of `kind`, or our host
/// (which serves every kind) as `host` says.
fn start_deployer(
    side: Side,
    kind: Kind,
    workers: usize,
    kubeconfig: &Path,
    dir: &Path,
    host: &HostSettings,
) -> Process {
    match side {
        Side::Ours | Side::OursFull => {
            let config = dir.join("host.yaml");
            let events = host
                .events
                .as_ref()
                .map(|e| format!("events: {e}\n"))
                .unwrap_or_default();
            let item_cache = if side == Side::OursFull {
                "itemCache: full\n"
            } else {
                ""
            };
            std::fs::write(&config, format!("workers: {workers}\n{events}{item_cache}")).unwrap();
            let mut command = Command::new(env!("CARGO_BIN_EXE_deployer-host"));
            command
                .args(["run", "--kubeconfig"])
                .arg(kubeconfig)
                .arg("--config")
                .arg(&config)
                .arg("--plugins")
                .arg(workspace().join("target/plugins"))
                .env("RUST_LOG", "error")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            if let Some(log) = &host.log {
                command
                    .env("RUST_LOG", &host.rust_log)
                    .stderr(std::fs::File::create(log).expect("host log"));
            }
            let child = command.spawn().expect("deployer-host run");
            Process {
                pid: child.id(),
                _child: Some(KillOnDrop(child)),
            }
        }
        Side::Go => {
            let dir = dir.join(kind.name());
            let out = Command::new(real_landscaper())
                .arg("deployer")
                .arg(kind.name())
                .arg(&dir)
                .arg(kubeconfig)
                .arg(workers.to_string())
                .output()
                .expect("real-landscaper deployer");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let pid = std::fs::read_to_string(dir.join("deployer.pid"))
                .expect("deployer.pid")
                .trim()
                .parse()
                .unwrap();
            Process { pid, _child: None }
        }
    }
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

/// Names of items whose job finished, as a watch sees them; panics on a job that finished in
/// any phase but `Succeeded` (a failing deployer must not look fast).
struct Finished {
    rx: tokio::sync::mpsc::UnboundedReceiver<String>,
    watch: tokio::task::JoinHandle<()>,
}

impl Finished {
    async fn watch(items: &Api<DeployItem>) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
        let watch = tokio::spawn({
            let items = items.clone();
            async move {
                let mut listed = Some(listed_tx);
                let mut seen: HashMap<String, String> = HashMap::new();
                let mut events = std::pin::pin!(watcher(items, watcher::Config::default()));
                while let Some(event) = events.next().await {
                    let o = match event {
                        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                        Ok(watcher::Event::InitDone) => {
                            if let Some(l) = listed.take() {
                                let _ = l.send(());
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    let s = o.status.clone().unwrap_or_default();
                    let name = o.metadata.name.clone().unwrap_or_default();
                    if s.job_id.is_empty() || s.job_id != s.job_id_finished {
                        continue;
                    }
                    // Once per job, however often the finished object is written again.
                    if seen.get(&name) == Some(&s.job_id) {
                        continue;
                    }
                    let phase = s.phase.as_str();
                    assert_eq!(
                        phase, "Succeeded",
                        "{name}: job finished {phase}: {:?}",
                        s.last_error
                    );
                    seen.insert(name.clone(), s.job_id.clone());
                    let _ = tx.send(name);
                }
            }
        });
        listed_rx.await.expect("watch listed");
        Finished { rx, watch }
    }

    /// Waits until every name in `names` finished once.
    async fn all(&mut self, names: impl IntoIterator<Item = String>, what: &str) {
        let mut waiting: std::collections::HashSet<String> = names.into_iter().collect();
        let total = waiting.len();
        while !waiting.is_empty() {
            let name = tokio::time::timeout(Duration::from_secs(900), self.rx.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "{what}: only {} of {total} jobs finished",
                        total - waiting.len()
                    )
                })
                .unwrap_or_else(|| panic!("{what}: the watch ended (a job failed?)"));
            waiting.remove(&name);
        }
    }
}

impl Drop for Finished {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// One row: `n` items of `kind` served by `side` with `workers` on a fresh `backend`.
async fn measure(
    settings: &Settings,
    backend: Backend,
    kind: Kind,
    side: Side,
    workers: usize,
    n: usize,
) -> Measured {
    let cluster = Cluster::start(backend).await;
    let chart = test_support::bench::thirty_object_chart();
    let names: Vec<String> = (0..n).map(|i| format!("peer-{i}")).collect();
    cluster
        .create_all(names.iter().map(|name| item(name, kind, &chart)).collect())
        .await;
    let items: Api<DeployItem> = Api::namespaced(cluster.client.clone(), "default");
    let mut finished = Finished::watch(&items).await;
    let what = format!("{kind:?} {side:?} w={workers} on {backend:?}");

    // Start-up: the first item's job is issued as the process starts.
    trigger(&items, &names[0]).await;
    let started = Instant::now();
    let process = start_deployer(
        side,
        kind,
        workers,
        &cluster.kubeconfig,
        cluster.dir.path(),
        &settings.host,
    );
    finished.all([names[0].clone()], &what).await;
    let first_job_s = started.elapsed().as_secs_f64();

    // The burst: the other n-1 jobs at once.
    let cpu_before = cpu_ms(process.pid);
    let server_cpu_before = cluster.server_cpu_ms();
    let requests_before = cluster.requests().await;
    let stats_before = cluster.embedded.as_ref().map(|(s, _)| s.stats());
    let burst = Instant::now();
    futures::stream::iter(&names[1..])
        .for_each_concurrent(32, |name| {
            let items = items.clone();
            async move { trigger(&items, name).await }
        })
        .await;
    finished.all(names[1..].iter().cloned(), &what).await;
    let elapsed = burst.elapsed().as_secs_f64();
    let cpu = cpu_ms(process.pid) - cpu_before;
    let server_cpu = cluster.server_cpu_ms() - server_cpu_before;
    // The bench's own requests: one trigger per job, and on a real server one scrape (its
    // watch is one long request, already open).
    let own = (n as u64 - 1) + u64::from(cluster.backend == Backend::Real);
    let requests = cluster
        .requests()
        .await
        .saturating_sub(requests_before + own);
    let peak = peak_rss_kib(process.pid);
    drop(process);
    let jobs = (n - 1) as f64;
    // Which requests a job costs, by resource and verb (embedded).
    if let (Some(before), Some((server, _)), true) =
        (stats_before, &cluster.embedded, settings.requests)
    {
        let after = server.stats();
        for (resource, verbs) in &after.requests {
            for (verb, count) in verbs {
                let delta = count - before.count(verb, resource);
                if delta > 0 {
                    eprintln!(
                        "  {what}: {resource} {verb}: {:.2}/job",
                        delta as f64 / jobs
                    );
                }
            }
        }
    }
    Measured {
        jobs_per_s: jobs / elapsed,
        cpu_ms_per_job: cpu / jobs,
        requests_per_job: requests as f64 / jobs,
        server_cpu_ms_per_job: server_cpu / jobs,
        peak_rss_kib: peak,
        first_job_s,
    }
}

/// Peak RSS (KiB) of one host serving every kind, and of each Go deployer process serving its
/// kind, for the same items (mock and manifest `n` each, helm `helm_n`) triggered at once.
async fn memory_of_all_kinds(
    n: usize,
    helm_n: usize,
    workers: usize,
    ours: &[Side],
    host: &HostSettings,
) -> (Vec<(Side, u64)>, Vec<(Kind, u64)>) {
    let kinds = [(Kind::Mock, n), (Kind::Manifest, n), (Kind::Helm, helm_n)];
    let run = async |side: Side| -> Vec<(Kind, u64)> {
        let cluster = Cluster::start(Backend::Embedded).await;
        let chart = test_support::bench::thirty_object_chart();
        let mut names = Vec::new();
        let mut objects = Vec::new();
        for (kind, count) in kinds {
            for i in 0..count {
                let name = format!("{}-{i}", kind.name());
                objects.push(item(&name, kind, &chart));
                names.push(name);
            }
        }
        cluster.create_all(objects).await;
        let items: Api<DeployItem> = Api::namespaced(cluster.client.clone(), "default");
        let mut finished = Finished::watch(&items).await;
        let processes: Vec<(Kind, Process)> = match side {
            Side::Ours | Side::OursFull => vec![(
                Kind::Mock,
                start_deployer(
                    side,
                    Kind::Mock,
                    workers,
                    &cluster.kubeconfig,
                    cluster.dir.path(),
                    host,
                ),
            )],
            Side::Go => kinds
                .iter()
                .map(|(kind, _)| {
                    // (the Go mock deployer has one worker whatever it is given)
                    let p = start_deployer(
                        side,
                        *kind,
                        workers,
                        &cluster.kubeconfig,
                        cluster.dir.path(),
                        host,
                    );
                    (*kind, p)
                })
                .collect(),
        };
        futures::stream::iter(&names)
            .for_each_concurrent(32, |name| {
                let items = items.clone();
                async move { trigger(&items, name).await }
            })
            .await;
        finished.all(names, &format!("every kind, {side:?}")).await;
        processes
            .iter()
            .map(|(kind, p)| (*kind, peak_rss_kib(p.pid)))
            .collect()
    };
    let mut hosts = Vec::new();
    for &side in ours {
        hosts.push((side, run(side).await[0].1));
    }
    let go = run(Side::Go).await;
    (hosts, go)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

fn list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// How our host runs in the rows (diagnostics; the module doc lists the variables).
struct HostSettings {
    /// `BENCH_PEERS_HOST_EVENTS=all|errors|none`: the host's `events:` (default: its own).
    events: Option<String>,
    /// `BENCH_PEERS_HOST_LOG=<file>`: the host's log into that file, at
    /// `BENCH_PEERS_HOST_RUST_LOG` (default `info`).
    log: Option<PathBuf>,
    rust_log: String,
}

/// What a run measures, read once from the environment (the module doc lists the variables).
struct Settings {
    /// `BENCH_PEERS_ITEMS`: the item counts of the mock and manifest rows.
    sizes: Vec<usize>,
    /// `BENCH_PEERS_REAL_ITEMS`: those on the real kube-apiserver.
    real_sizes: Vec<usize>,
    /// `BENCH_ROUNDS`.
    rounds: usize,
    /// `BENCH_PEERS_HELM_ITEMS`: installs of the 30-object chart per helm row.
    helm_items: usize,
    /// `BENCH_PEERS_WORKERS`.
    workers: Vec<usize>,
    /// `BENCH_PEERS_KINDS`.
    kinds: Vec<Kind>,
    /// `BENCH_PEERS_ITEM_CACHE`: our host's rows, by its `itemCache:`.
    ours: Vec<Side>,
    /// `BENCH_PEERS_BACKENDS`, less the real one when it is not built.
    backends: Vec<Backend>,
    /// Not `BENCH_PEERS_SKIP_MEMORY`: the memory-of-every-kind run.
    memory: bool,
    /// `BENCH_PEERS_REQUESTS`: requests per job by resource and verb.
    requests: bool,
    /// `BENCH_WRITE_DOCS`: the section of `docs/benchmarks.md` to write the tables into
    /// (`BENCH_PEERS_DOCS_MARKER`, default `peers`).
    docs_marker: Option<String>,
    host: HostSettings,
}

impl Settings {
    fn from_env() -> Self {
        let counts = |name, default| -> Vec<usize> {
            list(name, default)
                .iter()
                .filter_map(|s| s.parse().ok())
                .map(|n: usize| n.max(2))
                .collect()
        };
        Settings {
            sizes: counts("BENCH_PEERS_ITEMS", "1000,10000"),
            // 1.20 on etcd serves tens of jobs/s on this machine: 10,000 items would take an hour.
            real_sizes: counts("BENCH_PEERS_REAL_ITEMS", "1000"),
            rounds: env_usize("BENCH_ROUNDS", 2).max(1),
            helm_items: env_usize("BENCH_PEERS_HELM_ITEMS", 40).max(2),
            workers: list("BENCH_PEERS_WORKERS", "1,5,16")
                .iter()
                .filter_map(|w| w.parse().ok())
                .collect(),
            kinds: list("BENCH_PEERS_KINDS", "mock,manifest,helm")
                .iter()
                .filter_map(|k| match k.as_str() {
                    "mock" => Some(Kind::Mock),
                    "manifest" => Some(Kind::Manifest),
                    "helm" => Some(Kind::Helm),
                    _ => None,
                })
                .collect(),
            ours: list("BENCH_PEERS_ITEM_CACHE", "metadata,full")
                .iter()
                .map(|c| match c.as_str() {
                    "metadata" => Side::Ours,
                    "full" => Side::OursFull,
                    other => panic!("BENCH_PEERS_ITEM_CACHE: metadata or full, not {other:?}"),
                })
                .collect(),
            backends: backends_from_env(),
            memory: std::env::var("BENCH_PEERS_SKIP_MEMORY").is_err(),
            requests: std::env::var("BENCH_PEERS_REQUESTS").is_ok(),
            docs_marker: std::env::var("BENCH_WRITE_DOCS")
                .is_ok()
                .then(|| std::env::var("BENCH_PEERS_DOCS_MARKER").unwrap_or("peers".into())),
            host: HostSettings {
                events: std::env::var("BENCH_PEERS_HOST_EVENTS").ok(),
                log: std::env::var("BENCH_PEERS_HOST_LOG")
                    .ok()
                    .map(PathBuf::from),
                rust_log: std::env::var("BENCH_PEERS_HOST_RUST_LOG").unwrap_or("info".into()),
            },
        }
    }

    /// The item count of the memory run (and of its sentence): the first of `sizes`.
    fn memory_items(&self) -> usize {
        self.sizes.first().copied().unwrap_or(1000)
    }

    /// Every compared pair, with no rounds yet. Helm rows: fewer items (each an install of 30
    /// objects), on the embedded server only (1.20 runs no workloads, so the chart's
    /// Deployments would never be ready).
    fn pairs(&self) -> Vec<Pair> {
        let mut pairs = Vec::new();
        for &backend in &self.backends {
            for &kind in &self.kinds {
                let sizes = match (kind, backend) {
                    (Kind::Helm, Backend::Real) => continue,
                    (Kind::Helm, Backend::Embedded) => vec![self.helm_items],
                    (_, Backend::Real) => self.real_sizes.clone(),
                    (_, Backend::Embedded) => self.sizes.clone(),
                };
                for &items in &sizes {
                    for &workers in &self.workers {
                        pairs.push(Pair {
                            backend,
                            kind,
                            items,
                            workers,
                            go: Vec::new(),
                            ours: self.ours.iter().map(|&v| (v, Vec::new())).collect(),
                        });
                    }
                }
            }
        }
        pairs
    }
}

/// `BENCH_PEERS_BACKENDS` (default `embedded,real`); the real kube-apiserver only when it is
/// built, else a note.
fn backends_from_env() -> Vec<Backend> {
    let real_built = real_apiserver_built();
    let mut backends = Vec::new();
    for b in list("BENCH_PEERS_BACKENDS", "embedded,real") {
        match b.as_str() {
            "embedded" => backends.push(Backend::Embedded),
            "real" if real_built => backends.push(Backend::Real),
            "real" => eprintln!(
                "SKIP the kube-apiserver 1.20 rows: build it with `../shared/tools/real-apiserver/real-apiserver build`"
            ),
            other => panic!("BENCH_PEERS_BACKENDS: unknown backend {other:?}"),
        }
    }
    backends
}

/// A compared pair and its rounds.
struct Pair {
    backend: Backend,
    kind: Kind,
    items: usize,
    workers: usize,
    go: Vec<Measured>,
    /// Each of our variants' rounds, in the order of `BENCH_PEERS_ITEM_CACHE`.
    ours: Vec<(Side, Vec<Measured>)>,
}

impl Pair {
    /// The Go mock deployer has one worker, fixed: its row compares with ours at 1 worker, and
    /// ours runs the other counts alone.
    fn go_has_row(&self) -> bool {
        self.kind != Kind::Mock || self.workers == 1
    }

    fn record(&mut self, side: Side, m: Measured) {
        match side {
            Side::Go => self.go.push(m),
            ours => {
                let (_, rounds) = self.ours.iter_mut().find(|(d, _)| *d == ours).unwrap();
                rounds.push(m);
            }
        }
    }
}

/// The plugins are built and Landscaper's Go deployers (the peers, built outside this
/// repository and found in $REAL_LANDSCAPER_BIN) are there: without them there is nothing to
/// compare with (a SKIP line says so).
fn peers_available() -> bool {
    assert!(
        workspace().join("target/plugins/mock.wasm").exists(),
        "run `cargo xtask build-plugins` first (or `cargo xtask bench`)"
    );
    for binary in ["mock-deployer", "manifest-deployer", "helm-deployer"] {
        let found = Command::new(real_landscaper())
            .args(["path", binary])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            eprintln!(
                "SKIP peers: Landscaper's Go {binary} is not in $REAL_LANDSCAPER_BIN (docs/real-landscaper.md says what the binaries are)"
            );
            return false;
        }
    }
    true
}

/// Every pair, every round: Go first, then ours; reversed every other round.
async fn run_rounds(settings: &Settings, pairs: &mut [Pair]) {
    // One unmeasured start first: a plugin rebuilt since the last run is compiled into the
    // host's cache then, not in the first measured row (4 s and ~100 MiB more, once).
    measure(settings, Backend::Embedded, Kind::Mock, Side::Ours, 1, 2).await;
    for round in 0..settings.rounds {
        for pair in pairs.iter_mut() {
            let mut order = vec![Side::Go];
            order.extend(&settings.ours);
            if round % 2 == 1 {
                order.reverse();
            }
            for side in order {
                if side == Side::Go && !pair.go_has_row() {
                    continue;
                }
                let m = measure(
                    settings,
                    pair.backend,
                    pair.kind,
                    side,
                    pair.workers,
                    pair.items,
                )
                .await;
                eprintln!(
                    "round {round} {} {} n={} w={} {side:?}: {:.0} jobs/s, {:.2} ms CPU/job, {:.1} req/job, API server {:.2} ms CPU/job, peak RSS {:.1} MiB, first job {:.2} s",
                    pair.backend.name(),
                    pair.kind.name(),
                    pair.items,
                    pair.workers,
                    m.jobs_per_s,
                    m.cpu_ms_per_job,
                    m.requests_per_job,
                    m.server_cpu_ms_per_job,
                    m.peak_rss_kib as f64 / 1024.0,
                    m.first_job_s
                );
                pair.record(side, m);
            }
        }
    }
}

fn main() {
    let rt = test_support::bench::runtime();
    if !peers_available() {
        return;
    }
    let settings = Settings::from_env();
    let mut pairs = settings.pairs();
    let memory = rt.block_on(async {
        run_rounds(&settings, &mut pairs).await;
        if !settings.memory {
            return None;
        }
        let n = settings.memory_items();
        Some(memory_of_all_kinds(n, settings.helm_items, 5, &settings.ours, &settings.host).await)
    });

    let mut table = table_head(settings.rounds);
    for pair in &pairs {
        table.push_str(&pair_rows(pair));
    }
    if let Some((hosts, go)) = memory {
        table.push_str(&memory_lines(&settings, &hosts, &go));
    }
    println!("{table}");
    if let Some(marker) = &settings.docs_marker {
        write_docs_section(
            marker,
            "## Side by side with Landscaper's Go deployers\n\n",
            &table,
        );
    }
}

/// Whether `../shared/tools/real-apiserver` has built its binaries (it caches them in
/// `~/.cache/real-apiserver`, or `REAL_APISERVER_CACHE`).
fn real_apiserver_built() -> bool {
    let cache = std::env::var("REAL_APISERVER_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/real-apiserver")
        });
    cache.join("kube-apiserver").exists()
}
