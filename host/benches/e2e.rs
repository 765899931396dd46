//! End-to-end benchmark: the user's first performance questions, side by side in one run.
//!
//! `cargo bench -p deployer-host --bench e2e` (or `cargo xtask bench`, which builds the plugins
//! first). Options via environment: `BENCH_ITEMS` (default 3000), `BENCH_ROUNDS` (default 5),
//! `BENCH_RSS_ITEMS` (default 10000), `BENCH_EVENTS=1` (the host records its Kubernetes Events;
//! off by default), `BENCH_INVOCATION_ONLY=1` (only the invocation table), `BENCH_START_ONLY=1`
//! (only the plugins' cold and warm start), `BENCH_WARM_STARTS` (warm starts whose median is
//! the figure; default 7), `BENCH_REPLICAS=1` (only the replica rows: 1, 3 and 5 locking
//! replicas with and without Leases; `BENCH_ROUNDS` default 3), `BENCH_WRITE_DOCS=1` to update
//! `docs/benchmarks.md`.
//!
//! 1. N mock items, jobIDs bumped as Landscaper does; time until every job is `Succeeded`,
//!    with the wasm mock plugin and the native build of the same logic; ratio.
//! 2. API requests per job by verb (the API server's own counters), locking off and on, and
//!    writes once everything is settled.
//! 3. Resident memory of a `deployer-host run` process watching 1 and 10,000 items.
//! 4. Plugin start: cold (compile) vs warm (compiled-artifact cache).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use deployer_host::config::HostConfig;
use deployer_host::controller::{self, Context, TargetClients};
use deployer_host::dev::{DevEnvironment, landscaper};
use deployer_host::landscaper::{DeployItem, FINALIZER};
use deployer_host::locking::{LockConfig, Locker};
use deployer_host::membership::{Membership, MembershipConfig};
use embedded_apiserver::ApiServer;
use futures::StreamExt;
use kube::Client;
use kube::api::{Api, PostParams};
use plugin_runtime::{DeployerPlugin, NativePlugin, PluginRegistry, PluginRuntime, RuntimeConfig};

use test_support::bench::{KillOnDrop, env_usize, rss_kib, spawn_host, write_docs_section};
use test_support::workspace;

#[path = "e2e/replicas.rs"]
mod replicas;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Backend {
    Wasm,
    Native,
}

/// How replicas keep a job to one of them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Locking {
    /// One replica, no SyncObject.
    Off,
    /// Every replica races for every job's SyncObject (Landscaper's way).
    Locks,
    /// The live replicas split the items by their Leases; the SyncObject stays the safety net.
    Leases,
}

impl Locking {
    fn label(self) -> &'static str {
        match self {
            Locking::Off => "off",
            Locking::Locks => "on",
            Locking::Leases => "on + Leases",
        }
    }
}

struct JobsRun {
    backend: Backend,
    /// The continuous-reconcile hook runs at ShouldReconcile for every item.
    hooks: bool,
    replicas: usize,
    locking: Locking,
    items: usize,
    seconds: f64,
    /// Host requests per job by verb (Landscaper's own requests removed).
    per_job: BTreeMap<String, f64>,
    writes_per_job: f64,
    /// Host write requests per job the server did not commit (409s of lost lock races).
    refused_per_job: f64,
    /// The replicas' Lease requests during the jobs (not per job: a beat every 5 s each).
    lease_requests: u64,
    settled_writes: u64,
    /// CPU time of the whole benchmark process (API server, Landscaper and host) per job, in µs:
    /// steadier than wall time on a shared 2-core machine.
    cpu_us_per_job: f64,
    /// Reconciles and hook stages per job (all replicas).
    reconciles_per_job: f64,
    hook_stages_per_job: f64,
}

fn item(i: usize) -> DeployItem {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": format!("bench-{i}"), "namespace": "default", "finalizers": [FINALIZER],
                     "annotations": {"landscaper.gardener.cloud/deployer-type": "landscaper.gardener.cloud/mock",
                                     "landscaper.gardener.cloud/deployer-target-name": ".noTargetName"}},
        "spec": {"type": "landscaper.gardener.cloud/mock",
                 "config": {"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
                            "kind": "ProviderConfiguration", "phase": "Succeeded",
                            "providerStatus": {"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
                                               "kind": "ProviderStatus", "ok": true}}}
    }))
    .expect("item")
}

async fn registry(backend: Backend, cache: &Path) -> Arc<PluginRegistry> {
    match backend {
        Backend::Native => Arc::new(
            PluginRegistry::new(vec![
                Arc::new(NativePlugin::<mock::Mock>::new()) as Arc<dyn DeployerPlugin>
            ])
            .expect("registry"),
        ),
        Backend::Wasm => {
            let mut config = HostConfig::default();
            config.plugins.dir = Some(workspace().join("target/plugins"));
            config.plugins.cache_dir = Some(cache.to_path_buf());
            deployer_host::plugins::load_all(&config, &[config.plugins_dir()], Vec::new())
                .await
                .expect("plugins")
        }
    }
}

/// One row of a round: `n` mock items on a fresh embedded server, `replicas` hosts (with
/// `locking`, with the ShouldReconcile hook if `hooks`) on `backend`'s plugins; Landscaper
/// triggers every item at once. Time, CPU and API requests of the jobs, and the writes once
/// everything is settled.
async fn run_jobs(
    backend: Backend,
    hooks: bool,
    replicas: usize,
    locking: Locking,
    n: usize,
    cache: &Path,
) -> JobsRun {
    let server = ApiServer::new(Default::default()).expect("server");
    let env = DevEnvironment::bootstrap(server.clone(), "http://127.0.0.1:1")
        .await
        .expect("bootstrap");
    let items: Api<DeployItem> = Api::namespaced(env.client.clone(), "default");
    for i in 0..n {
        items
            .create(&PostParams::default(), &item(i))
            .await
            .expect("create");
    }
    let registry = registry(backend, cache).await;
    let config = host_config(hooks);
    let (deployers, tasks) = start_replicas(&env.client, &registry, &config, replicas, locking);
    replicas::wait_views_agree(&deployers, replicas).await;
    settle(&server).await;
    let counter = |f: fn(&controller::Stats) -> &std::sync::atomic::AtomicU64| -> u64 {
        deployers
            .iter()
            .map(|d| f(&d.stats).load(Ordering::Relaxed))
            .sum()
    };
    let reconciles_before = counter(|s| &s.reconciles);
    let hook_stages_before = counter(|s| &s.hook_stages);

    perf_control("enable");
    let started = Instant::now();
    let cpu_started = process_cpu_seconds();
    let landscaper_attempts = trigger_every_item(&env.client, n).await;
    wait_all_finished(&deployers, n, started).await;
    let seconds = started.elapsed().as_secs_f64();
    perf_control("disable");
    let cpu_us_per_job = (process_cpu_seconds() - cpu_started) * 1e6 / n as f64;
    let stats = server.stats();
    let reconciles_per_job = (counter(|s| &s.reconciles) - reconciles_before) as f64 / n as f64;
    let hook_stages_per_job = (counter(|s| &s.hook_stages) - hook_stages_before) as f64 / n as f64;
    if std::env::var_os("BENCH_PROFILE_ROW").is_some() {
        eprintln!(
            "{:?}\nreconciles/job {reconciles_per_job:.2}, hook stages/job {hook_stages_per_job:.2}, landscaper gets {landscaper_attempts}",
            stats.requests
        );
    }
    // The Leases' beats are the replicas' (a few per run), not the jobs'.
    let leases = stats
        .requests
        .get("leases.coordination.k8s.io")
        .cloned()
        .unwrap_or_default();
    let lease_requests: u64 = leases.values().sum();
    let mut by_verb = stats.by_verb.clone();
    for (verb, count) in &leases {
        if let Some(all) = by_verb.get_mut(verb) {
            *all = all.saturating_sub(*count);
        }
    }
    let per_job = host_requests_per_job(&by_verb, landscaper_attempts, n);
    let writes_per_job: f64 = ["create", "update", "patch", "delete"]
        .iter()
        .map(|v| per_job.get(*v).copied().unwrap_or(0.0))
        .sum();
    // Committed: every change but Landscaper's n triggers and the Leases' writes.
    let lease_writes: u64 = ["create", "update", "delete"]
        .iter()
        .map(|v| leases.get(*v).copied().unwrap_or(0))
        .sum();
    let committed = stats.writes.saturating_sub(n as u64 + lease_writes);
    let refused_per_job = (writes_per_job - committed as f64 / n as f64).max(0.0);
    let settled_writes = writes_when_settled(&server).await;
    for t in tasks {
        t.abort();
    }
    JobsRun {
        backend,
        hooks,
        replicas,
        locking,
        items: n,
        seconds,
        per_job,
        writes_per_job,
        refused_per_job,
        lease_requests,
        settled_writes,
        reconciles_per_job,
        hook_stages_per_job,
        cpu_us_per_job,
    }
}

/// The hosts' configuration: a slow requeue; with `hooks`, the continuous-reconcile hook at
/// every decision.
fn host_config(hooks: bool) -> HostConfig {
    HostConfig {
        requeue_interval: Some("5s".into()),
        // The items have no `continuousReconcile`: this measures what running a hook at
        // ShouldReconcile costs (a wasm call per decision, no finished-item cache).
        hooks: hooks.then(|| {
            vec![deployer_host::config::HookRegistration {
                plugin: "continuous-reconcile".into(),
                deploy_item_types: vec!["*".into()],
                hook_types: Vec::new(),
            }]
        }),
        ..HostConfig::default()
    }
}

/// `replicas` controllers in this process (as pods `bench-<r>` when `locking`), running until
/// their tasks are aborted.
fn start_replicas(
    client: &Client,
    registry: &Arc<PluginRegistry>,
    config: &HostConfig,
    replicas: usize,
    locking: Locking,
) -> (Vec<Arc<Context>>, Vec<tokio::task::JoinHandle<()>>) {
    let mut deployers = Vec::new();
    let mut tasks = Vec::new();
    for r in 0..replicas {
        let client = client.clone();
        let mut deployer = Context::new(
            client.clone(),
            client.clone(),
            registry.clone(),
            config,
            TargetClients::default(),
        )
        .expect("deployer");
        // Kubernetes Events cost two API writes per job; `BENCH_EVENTS=1` keeps them on.
        if std::env::var_os("BENCH_EVENTS").is_none() {
            deployer.events = controller::Events::disabled();
        }
        if locking == Locking::Leases {
            deployer.membership = Some(Arc::new(Membership::new(
                client.clone(),
                MembershipConfig {
                    prefix: "wasm-deployer".into(),
                    pod_name: format!("bench-{r}"),
                    namespace: "default".into(),
                    lease_duration: deployer_host::membership::DEFAULT_LEASE_DURATION,
                },
            )));
        }
        if locking != Locking::Off {
            deployer.locker = Some(Locker::new(
                client.clone(),
                client,
                LockConfig {
                    prefix: "wasm-deployer".into(),
                    pod_name: format!("bench-{r}"),
                    pod_namespace: "default".into(),
                    retry_after: Duration::from_secs(1),
                    pod_cache_timeout: Duration::from_secs(60),
                },
            ));
        }
        let deployer = Arc::new(deployer);
        deployers.push(deployer.clone());
        tasks.push(tokio::spawn(controller::run(
            deployer,
            None,
            config.workers(),
            config.item_cache,
            std::future::pending(),
        )));
    }
    (deployers, tasks)
}

/// Lets the watches list the (idle) items and the first reconcile of each settle, then zeroes
/// the server's counters: with 3,000 items (and a hook at every decision) that takes longer
/// than any fixed pause, and its reads would otherwise count as the jobs'.
async fn settle(server: &ApiServer) {
    let mut last = u64::MAX;
    let settle_deadline = Instant::now() + Duration::from_secs(120);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = server.stats().total_requests;
        if now == last || Instant::now() > settle_deadline {
            break;
        }
        last = now;
    }
    server.reset_stats();
}

/// Landscaper: a new jobID on every item, as fast as it can write. Returns its attempts (a get
/// and an update each; a 409 means another attempt), to subtract its requests exactly.
async fn trigger_every_item(client: &Client, n: usize) -> u64 {
    let landscaper_attempts = std::sync::atomic::AtomicU64::new(0);
    futures::stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let api: Api<DeployItem> = Api::namespaced(client.clone(), "default");
            let attempts = &landscaper_attempts;
            async move {
                loop {
                    attempts.fetch_add(1, Ordering::Relaxed);
                    let current = api.get(&format!("bench-{i}")).await.expect("get");
                    let updated = landscaper::with_new_job(&current);
                    match api
                        .replace_status(&format!("bench-{i}"), &PostParams::default(), &updated)
                        .await
                    {
                        Ok(_) => break,
                        Err(kube::Error::Api(e)) if e.code == 409 => continue,
                        Err(e) => panic!("trigger: {e}"),
                    }
                }
            }
        })
        .await;
    landscaper_attempts.load(Ordering::Relaxed)
}

/// Waits until the replicas together finished `n` jobs (at most 300 s after `started`).
async fn wait_all_finished(deployers: &[Arc<Context>], n: usize, started: Instant) {
    loop {
        let finished: u64 = deployers
            .iter()
            .map(|d| d.stats.jobs_finished.load(Ordering::Relaxed))
            .sum();
        if finished as usize >= n {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "only {finished} of {n} jobs finished"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The hosts' requests per job by verb: the server's counts less Landscaper's share (one get
/// and one update per attempt).
fn host_requests_per_job(
    by_verb: &BTreeMap<String, u64>,
    landscaper_attempts: u64,
    n: usize,
) -> BTreeMap<String, f64> {
    let (landscaper_gets, landscaper_updates) = (landscaper_attempts, landscaper_attempts);
    let mut per_job = BTreeMap::new();
    for (verb, count) in by_verb {
        let own = match verb.as_str() {
            "get" => landscaper_gets,
            "update" => landscaper_updates,
            _ => 0,
        };
        let host = count.saturating_sub(own);
        if host > 0 {
            per_job.insert(verb.clone(), host as f64 / n as f64);
        }
    }
    per_job
}

/// Settled: nothing to do, so nothing may be written. `writes` counts committed changes since
/// the server started: the difference over 6 s, after a second's pause.
async fn writes_when_settled(server: &ApiServer) -> u64 {
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let before = server.stats().writes;
    tokio::time::sleep(Duration::from_secs(6)).await;
    server.stats().writes - before
}

/// Profiling aid: with `BENCH_PERF_CTL=<fifo>` (perf record's `--control fifo:<fifo> -D -1`),
/// perf samples only while jobs run, not the set-up, plugin compile or settle phases.
fn perf_control(command: &str) {
    use std::io::Write;
    if let Some(path) = std::env::var_os("BENCH_PERF_CTL") {
        let mut fifo = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("perf control fifo");
        writeln!(fifo, "{command}").expect("perf control");
    }
}

/// User + system CPU time of this process so far (from /proc, in clock ticks of 10 ms).
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may contain spaces) start at field 3.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the command name.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// RSS of a `deployer-host run` process watching `n` items served by a separate
/// `deployer-host apiserver` process.
async fn host_rss(n: usize, dir: &Path) -> u64 {
    use std::io::{BufRead, BufReader};
    let bin = env!("CARGO_BIN_EXE_deployer-host");
    let kubeconfig = dir.join(format!("kubeconfig-{n}"));
    let mut api = Command::new(bin)
        .args(["apiserver", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("apiserver");
    let mut line = String::new();
    BufReader::new(api.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _api = KillOnDrop(api);
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let client = Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap();
    // CRDs and objects, through HTTP like any client.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    for crd in deployer_host::crds::landscaper() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let items: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let items = items.clone();
            async move {
                items
                    .create(&PostParams::default(), &item(i))
                    .await
                    .unwrap();
            }
        })
        .await;
    let host = spawn_host(env!("CARGO_BIN_EXE_deployer-host").as_ref(), &kubeconfig);
    let pid = host.0.id();
    // Let it list, watch and settle.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut max = 0;
    for _ in 0..5 {
        max = max.max(rss_kib(pid));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    max
}

/// Plugin load time from an empty cache (compile) and from the warm cache (deserialize).
async fn start_times(dir: &Path) -> StartTimes {
    let dirs = [
        workspace().join("target/plugins"),
        workspace().join("target/test-plugins"),
    ];
    let cache = dir.join("start-cache");
    let load = |cache: PathBuf| {
        let dirs = dirs.clone();
        async move {
            let runtime = PluginRuntime::new(RuntimeConfig {
                cache_dir: Some(cache),
                ..Default::default()
            })
            .unwrap();
            let t = Instant::now();
            let mut count = 0;
            for d in &dirs {
                count += runtime.load_dir(d).await.unwrap().len();
            }
            (count, t.elapsed().as_secs_f64())
        }
    };
    let (plugins, cold) = load(cache.clone()).await;
    // One warm start is a few tens of ms, as long as the machine's slow phases: the median of
    // several (each a fresh runtime over the same cache) is the figure, with its range.
    let mut warm = Vec::new();
    for _ in 0..env_usize("BENCH_WARM_STARTS", 7).max(1) {
        warm.push(load(cache.clone()).await.1);
    }
    warm.sort_by(f64::total_cmp);
    StartTimes {
        plugins,
        cold,
        warm_median: warm[warm.len() / 2],
        warm_range: (warm[0], warm[warm.len() - 1]),
        warm_starts: warm.len(),
    }
}

/// The plugins' cold start (one) and warm starts (several).
struct StartTimes {
    plugins: usize,
    cold: f64,
    warm_median: f64,
    warm_range: (f64, f64),
    warm_starts: usize,
}

impl StartTimes {
    /// The two rows of the process table.
    fn rows(&self) -> String {
        let StartTimes {
            plugins,
            cold,
            warm_median,
            warm_range: (low, high),
            warm_starts,
        } = self;
        format!(
            "| cold start, {plugins} plugins (compile) | {:.0} ms |\n\
             | warm start, {plugins} plugins (compiled cache; median of {warm_starts}, range) | {:.0} ms ({:.0}–{:.0}) |\n",
            cold * 1000.0,
            warm_median * 1000.0,
            low * 1000.0,
            high * 1000.0
        )
    }
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:").map(|m| m.trim().to_string()))
        .unwrap_or_default();
    format!("{cpus} CPUs ({model}), {mem} RAM")
}

/// The rows of a round: (backend, hook, replicas, locking).
const CONFIGS: [(Backend, bool, usize, Locking); 5] = [
    (Backend::Wasm, false, 1, Locking::Off),
    (Backend::Native, false, 1, Locking::Off),
    (Backend::Wasm, false, 1, Locking::Locks),
    (Backend::Wasm, false, 3, Locking::Locks),
    (Backend::Wasm, true, 1, Locking::Off),
];

/// The order rows run in within a round, alternating each round (forward, backward) so that
/// neither row of a compared pair (wasm beside native, wasm beside the hook row) always runs
/// first: the process's heap and caches after one row are the next row's start.
const ORDER: [usize; 5] = [1, 0, 4, 2, 3];

/// Rounds: every configuration once per round, so slow phases of the machine hit all rows
/// alike. Each configuration's runs, in round order.
async fn run_rounds(rounds: usize, n: usize, cache: &Path) -> Vec<Vec<JobsRun>> {
    let mut by_config: Vec<Vec<JobsRun>> = CONFIGS.iter().map(|_| Vec::new()).collect();
    for round in 1..=rounds {
        let mut this_round = ORDER;
        if round % 2 == 0 {
            this_round.reverse();
        }
        for k in this_round {
            let (backend, hooks, replicas, locking) = CONFIGS[k];
            let run = run_jobs(backend, hooks, replicas, locking, n, cache).await;
            eprintln!(
                "round {round}: {backend:?} hooks={hooks} replicas={replicas} locking={locking:?}: {:.2}s",
                run.seconds
            );
            by_config[k].push(run);
        }
    }
    by_config
}

/// Per round, the two compared pairs' ratios: (wasm/native, with/without hook), by jobs/s and
/// by CPU per job.
struct RoundRatios {
    jobs_per_s: Vec<(f64, f64)>,
    cpu: Vec<(f64, f64)>,
}

impl RoundRatios {
    fn of(by_config: &[Vec<JobsRun>], rounds: usize) -> Self {
        let jobs_per_s = |r: &JobsRun| r.items as f64 / r.seconds;
        RoundRatios {
            jobs_per_s: (0..rounds)
                .map(|i| {
                    (
                        jobs_per_s(&by_config[0][i]) / jobs_per_s(&by_config[1][i]),
                        jobs_per_s(&by_config[4][i]) / jobs_per_s(&by_config[0][i]),
                    )
                })
                .collect(),
            cpu: (0..rounds)
                .map(|i| {
                    (
                        by_config[1][i].cpu_us_per_job / by_config[0][i].cpu_us_per_job,
                        by_config[0][i].cpu_us_per_job / by_config[4][i].cpu_us_per_job,
                    )
                })
                .collect(),
        }
    }

    /// Paired: each round's wasm and native rows ran back to back, so the median of the
    /// rounds' ratios is the headline (the machine's slow and fast phases hit both rows of a
    /// pair alike); the medians of each row are in the table above. Then each round's.
    fn lines(&self) -> String {
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let mut out = String::new();
        let ratio = median(self.jobs_per_s.iter().map(|r| r.0).collect());
        let hook_ratio = median(self.jobs_per_s.iter().map(|r| r.1).collect());
        out.push_str(&format!("wasm/native jobs-per-second ratio (1 replica, no locking; median of the rounds' ratios): **{ratio:.2}**\n\n"));
        out.push_str(&format!("with/without a ShouldReconcile hook jobs-per-second ratio (wasm, 1 replica; median of the rounds' ratios): **{hook_ratio:.2}**\n\n"));
        // The same two ratios from CPU time per job (jobs per CPU-second).
        let cpu_ratio = median(self.cpu.iter().map(|r| r.0).collect());
        let cpu_hook_ratio = median(self.cpu.iter().map(|r| r.1).collect());
        out.push_str(&format!(
            "by CPU time per job (median of the rounds' ratios): wasm/native **{cpu_ratio:.2}**, with/without hook **{cpu_hook_ratio:.2}**\n\n"
        ));
        let spread = |ratios: &[(f64, f64)], pick: fn(&(f64, f64)) -> f64| {
            ratios
                .iter()
                .map(|r| format!("{:.2}", pick(r)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "per round (jobs/s): wasm/native {}; with/without hook {}\n\n",
            spread(&self.jobs_per_s, |r| r.0),
            spread(&self.jobs_per_s, |r| r.1)
        ));
        out.push_str(&format!(
            "per round (CPU per job): wasm/native {}; with/without hook {}\n\n",
            spread(&self.cpu, |r| r.0),
            spread(&self.cpu, |r| r.1)
        ));
        out
    }
}

/// Each configuration's median round (by time).
fn median_runs(by_config: Vec<Vec<JobsRun>>) -> Vec<JobsRun> {
    by_config
        .into_iter()
        .map(|mut v| {
            v.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
            v.swap_remove(v.len() / 2)
        })
        .collect()
}

/// The jobs table: one row per configuration's median run.
fn jobs_table(runs: &[JobsRun]) -> String {
    let mut table = String::from(
        "| backend | hook | replicas | locking | jobs | seconds | jobs/s | CPU per job | reconciles/job | hook stages/job | host requests per job (by verb) | writes/job | writes when settled |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let verbs = r
            .per_job
            .iter()
            .map(|(v, c)| format!("{v} {c:.2}"))
            .collect::<Vec<_>>()
            .join(", ");
        table.push_str(&format!(
            "| {:?} | {} | {} | {} | {} | {:.2} | {:.0} | {:.0} µs | {:.2} | {:.2} | {} | {:.2} | {} |\n",
            r.backend,
            if r.hooks { "continuous-reconcile" } else { "-" },
            r.replicas,
            r.locking.label(),
            r.items,
            r.seconds,
            r.items as f64 / r.seconds,
            r.cpu_us_per_job,
            r.reconciles_per_job,
            r.hook_stages_per_job,
            verbs,
            r.writes_per_job,
            r.settled_writes
        ));
    }
    table
}

/// Memory and plugin start: the host's RSS watching 1 and `rss_n` items, and the plugins'
/// cold and warm start.
async fn process_table(rss_n: usize, dir: &Path) -> String {
    let rss_1 = host_rss(1, dir).await;
    let rss_n_kib = host_rss(rss_n, dir).await;
    let starts = start_times(dir).await;
    let mut table = String::from("| measure | value |\n|---|---|\n");
    table.push_str(&format!(
        "| host RSS, 1 watched item | {:.1} MiB |\n",
        rss_1 as f64 / 1024.0
    ));
    table.push_str(&format!(
        "| host RSS, {rss_n} watched items | {:.1} MiB |\n",
        rss_n_kib as f64 / 1024.0
    ));
    table.push_str(&starts.rows());
    table
}

/// Profiling aid: `BENCH_PROFILE_ROW=0` runs only that row (0 wasm, 1 native, 4 hook), once,
/// and nothing else, so `perf record` sees one configuration.
async fn profile_row(k: usize, n: usize, cache: &Path) {
    let (backend, hooks, replicas, locking) = CONFIGS[k];
    let run = run_jobs(backend, hooks, replicas, locking, n, cache).await;
    eprintln!(
        "{backend:?} hooks={hooks}: {:.2}s, {:.0} µs CPU per job",
        run.seconds, run.cpu_us_per_job
    );
}

fn main() {
    let rt = test_support::bench::runtime();
    rt.block_on(async {
        assert!(
            workspace().join("target/plugins/mock.wasm").exists(),
            "run `cargo xtask build-plugins` first (or `cargo xtask bench`)"
        );
        let n = env_usize("BENCH_ITEMS", 3000);
        let rss_n = env_usize("BENCH_RSS_ITEMS", 10_000);
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let rounds = env_usize("BENCH_ROUNDS", 5).max(1);
        if let Some(k) = std::env::var("BENCH_PROFILE_ROW")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            return profile_row(k, n, &cache).await;
        }
        if std::env::var_os("BENCH_REPLICAS").is_some() {
            let table =
                replicas::replica_rounds(env_usize("BENCH_ROUNDS", 3).max(1), n, &cache).await;
            let text = format!("Machine: {}\n\n{table}", machine());
            println!("{text}");
            if std::env::var_os("BENCH_WRITE_DOCS").is_some() {
                write_docs_section("replicas", "", &text);
            }
            return;
        }
        // `BENCH_START_ONLY=1`: only the plugins' start, e.g. to compare two trees quickly.
        if std::env::var_os("BENCH_START_ONLY").is_some() {
            let starts = start_times(dir.path()).await;
            println!("| measure | value |\n|---|---|\n{}", starts.rows());
            return;
        }
        // First, on a quiet process: one plugin invocation, wasm and native.
        let invocation = invocation_costs().await;
        if std::env::var_os("BENCH_INVOCATION_ONLY").is_some() {
            println!("{invocation}");
            return;
        }
        let by_config = run_rounds(rounds, n, &cache).await;
        let ratios = RoundRatios::of(&by_config, rounds);
        let runs = median_runs(by_config);
        let processes = process_table(rss_n, dir.path()).await;

        let mut table = String::new();
        table.push_str(&format!("Machine: {}\n\n", machine()));
        table.push_str(&format!(
            "Median of {rounds} rounds, {n} jobs per row and round.\n\n"
        ));
        table.push_str(&jobs_table(&runs));
        table.push_str(&ratios.lines());
        table.push_str(&invocation);
        table.push_str(&processes);
        println!("{table}");

        if std::env::var("BENCH_WRITE_DOCS").is_ok() {
            write_docs_section("e2e", "", &table);
        }
    });
}

/// p50 / p99 of `n` timed calls of `f` (after `n / 10` untimed ones).
async fn percentiles<F: AsyncFnMut()>(n: usize, mut f: F) -> (f64, f64) {
    for _ in 0..(n / 10).max(10) {
        f().await;
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    v.sort_by(f64::total_cmp);
    let pick = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (pick(0.50), pick(0.99))
}

/// One plugin invocation, as the controller makes it: a fresh Store, instantiation and the
/// call, for a small mock item and for the continuous-reconcile hook at ShouldReconcile;
/// the native build of the mock beside it. A markdown table.
async fn invocation_costs() -> String {
    use plugin_runtime::{HookInput, HookPlugin, HookType, Invocation, NoopHost};
    let n = env_usize("BENCH_CALLS", 5000);
    let runtime = PluginRuntime::new(RuntimeConfig::default()).expect("runtime");
    let load = |name: &str| {
        let bytes = std::fs::read(workspace().join("target/plugins").join(name)).expect(name);
        let runtime = runtime.clone();
        let name = name.to_string();
        async move { runtime.load_bytes(&name, &bytes).await.expect("load") }
    };
    let mock = load("mock.wasm").await;
    let hook = match std::env::var_os("PROFILE_HOOK_WASM") {
        // Profiling aid: a hook component built elsewhere (e.g. unstripped, for perf's names).
        Some(path) => {
            let bytes = std::fs::read(&path).expect("PROFILE_HOOK_WASM");
            runtime.load_bytes("hook", &bytes).await.expect("load")
        }
        None => load("continuous-reconcile.wasm").await,
    };
    let host: Arc<dyn plugin_runtime::HostServices> = Arc::new(NoopHost);
    let mut di = serde_json::to_value(item(0)).expect("item");
    di["status"] = serde_json::json!({"phase": "Init", "jobID": "j1"});
    let inv = Invocation::for_item(di.clone());
    let native = NativePlugin::<mock::Mock>::new();
    assert_eq!(
        mock.reconcile(inv.clone(), host.clone()).await,
        native.reconcile(inv.clone(), host.clone()).await,
        "wasm and native mock agree"
    );
    let wasm_call = percentiles(n, async || {
        mock.reconcile(inv.clone(), host.clone())
            .await
            .expect("reconcile");
    })
    .await;
    let instantiate = percentiles(n, async || {
        mock.instantiate_only().await.expect("instantiate")
    })
    .await;
    let native_call = percentiles(n, async || {
        native
            .reconcile(inv.clone(), host.clone())
            .await
            .expect("reconcile");
    })
    .await;
    // The hook sees the item as the controller passes it after a job: a finished status.
    di["status"] = serde_json::json!({
        "phase": "Succeeded", "jobID": "5b0c7f7e-3c9d-4c1e-9a52-7d1f0f4f2b11",
        "jobIDFinished": "5b0c7f7e-3c9d-4c1e-9a52-7d1f0f4f2b11", "observedGeneration": 1,
        "lastReconcileTime": "2026-11-26T00:00:00Z",
        "deployer": {"name": "wasm-deployer", "version": "0.1.0", "identity": "wasm-deployer-1764115200"},
        "providerStatus": {"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
                           "kind": "ProviderStatus", "ok": true},
        "transitionTimes": {"initTime": "2026-11-26T00:00:00Z", "waitingTime": "2026-11-26T00:00:00Z",
                            "finishedTime": "2026-11-26T00:00:00Z"}
    });
    let input = HookInput {
        hook_type: HookType::ShouldReconcile,
        deploy_item: Some(di),
        target: None,
    };
    // As the controller calls it: the item encoded once, as JSON text.
    let item_text = input.deploy_item.as_ref().expect("item").to_string();
    let encoded = plugin_runtime::EncodedHookInput {
        hook_type: HookType::ShouldReconcile,
        deploy_item: Some(&item_text),
        target: None,
    };
    // Profiling aid: `PROFILE_HOOK_CALLS=1` runs only the hook loop (`BENCH_CALLS` times).
    if std::env::var_os("PROFILE_HOOK_CALLS").is_some() {
        perf_control("enable");
        for _ in 0..n {
            std::hint::black_box(hook.run_hook_encoded(encoded).await.expect("hook"));
        }
        std::process::exit(0);
    }
    let hook_call = percentiles(n, async || {
        hook.run_hook_encoded(encoded).await.expect("hook");
    })
    .await;
    let hook_call_value = percentiles(n, async || {
        hook.run_hook(input.clone()).await.expect("hook");
    })
    .await;
    let mut t =
        format!("| one invocation ({n} calls, after warm-up) | p50 | p99 |\n|---|---|---|\n");
    for (what, (p50, p99)) in [
        (
            "wasm mock reconcile: fresh Store + instantiate + call",
            wasm_call,
        ),
        ("of which fresh Store + instantiate", instantiate),
        (
            "native mock reconcile (NativePlugin, on a blocking thread)",
            native_call,
        ),
        (
            "wasm continuous-reconcile hook at ShouldReconcile (item as JSON text, as the controller calls it)",
            hook_call,
        ),
        (
            "the same hook given the item as a `serde_json::Value` (`run_hook`)",
            hook_call_value,
        ),
    ] {
        t.push_str(&format!("| {what} | {p50:.1} µs | {p99:.1} µs |\n"));
    }
    t.push('\n');
    t
}
