//! Reliability figures for `docs/reliability.md` (plain `main`, `harness = false`).
//!
//! `cargo bench -p deployer-host --bench reliability` (after `cargo xtask build-plugins`).
//! Options via environment: `BENCH_ITEMS` (default 1000), `SOAK_SECS` (default 120),
//! `SOAK_ITEMS` (default 200), `BENCH_SVG` (where to write the soak plot, default
//! `target/soak.svg`).
//!
//! 1. Plugin faults under load: N mock items alone, then the same N with four misbehaving
//!    items beside them (trap, infinite loop, memory bomb, sleep past the deadline) — mock
//!    jobs/s side by side, and how far past its deadline each misbehaving call ended.
//! 2. Soak: a `deployer-host run` process kept busy with jobs (fast requeue, events on) for
//!    `SOAK_SECS`; its RSS and open file descriptors sampled — they must stay flat.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use deployer_host::config::{HostConfig, LimitsConfig};
use deployer_host::controller::{self, Context, TargetClients};
use deployer_host::dev::{DevEnvironment, landscaper};
use deployer_host::landscaper::DeployItem;
use embedded_apiserver::ApiServer;
use futures::StreamExt;
use kube::api::{Api, ListParams, PostParams};
use plugin_runtime::{
    DeployerError, DeployerPlugin, HostServices, Invocation, KubeOp, Limits, PluginRuntime,
    RuntimeConfig,
};
use serde_json::json;

use test_support::bench::{env_usize, open_fds, rss_fds_svg, rss_kib};
use test_support::workspace;

fn mock(name: &str) -> DeployItem {
    serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/mock", "config": {
            "apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
            "kind": "ProviderConfiguration", "phase": "Succeeded", "export": {"n": name}}}
    }))
    .unwrap()
}

fn faulty(name: &str, action: &str) -> DeployItem {
    serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "test.wasm-deployer.dev/faulty", "config": {
            "apiVersion": "faulty.test/v1", "kind": "ProviderConfiguration", "action": action}}
    }))
    .unwrap()
}

const FAULTS: [&str; 4] = ["trap", "loop", "allocate", "sleep"];

/// Seconds until `n` mock jobs finished, with or without the misbehaving items beside them.
async fn mock_jobs_seconds(n: usize, with_faults: bool) -> f64 {
    let server = ApiServer::new(Default::default()).unwrap();
    let env = DevEnvironment::bootstrap(server.clone(), "http://127.0.0.1:1")
        .await
        .unwrap();
    let mut config = HostConfig {
        requeue_interval: Some("5s".into()),
        ..HostConfig::default()
    };
    config.plugins.cache_dir = Some(workspace().join("target/plugin-cache"));
    config.plugins.per_plugin.insert(
        "faulty".into(),
        LimitsConfig {
            deadline: Some("1s".into()),
            memory_mib: Some(32),
        },
    );
    let dirs = [
        workspace().join("target/plugins"),
        workspace().join("target/test-plugins"),
    ];
    let registry = deployer_host::plugins::load_all(&config, &dirs, Vec::new())
        .await
        .unwrap();
    let mut deployer = Context::new(
        env.client.clone(),
        env.client.clone(),
        registry,
        &config,
        TargetClients::default(),
    )
    .unwrap();
    deployer.events = controller::Events::disabled();
    let deployer = Arc::new(deployer);
    let task = tokio::spawn(controller::run(
        deployer.clone(),
        None,
        config.workers(),
        config.item_cache,
        std::future::pending(),
    ));
    let api: Api<DeployItem> = Api::namespaced(env.client.clone(), "default");
    let mut items: Vec<DeployItem> = (0..n).map(|i| mock(&format!("m-{i}"))).collect();
    if with_faults {
        // First, so they are in flight while the mock jobs run.
        for (i, action) in FAULTS.iter().enumerate() {
            items.insert(i, faulty(&format!("f-{action}"), action));
        }
    }
    let started = Instant::now();
    futures::stream::iter(items)
        .for_each_concurrent(16, |item| {
            let api = api.clone();
            async move {
                let created = api.create(&PostParams::default(), &item).await.unwrap();
                let name = created.metadata.name.clone().unwrap();
                api.replace_status(
                    &name,
                    &PostParams::default(),
                    &landscaper::with_new_job(&created),
                )
                .await
                .unwrap();
            }
        })
        .await;
    let mocks_done = |items: &[DeployItem]| {
        items
            .iter()
            .filter(|i| i.spec.type_ == "landscaper.gardener.cloud/mock")
            .filter(|i| {
                let s = i.status();
                !s.job_id.is_empty() && s.job_id == s.job_id_finished
            })
            .count()
    };
    loop {
        let list = api.list(&ListParams::default()).await.unwrap().items;
        if mocks_done(&list) == n {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "mock jobs stuck"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    if with_faults {
        // Every misbehaving item failed on its own.
        for action in FAULTS {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let s = api.get(&format!("f-{action}")).await.unwrap().status();
                if s.job_id == s.job_id_finished && !s.job_id.is_empty() {
                    assert_eq!(s.phase.to_string(), "Failed", "{action}");
                    break;
                }
                assert!(Instant::now() < deadline, "{action} never failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    task.abort();
    let _ = deployer.stats.jobs_finished.load(Ordering::Relaxed);
    seconds
}

/// A host whose Kubernetes calls never answer.
struct HangingHost;

#[async_trait::async_trait]
impl HostServices for HangingHost {
    fn checkpoint(&self, _name: &str) -> Result<(), DeployerError> {
        Ok(())
    }
    async fn kube(&self, _op: KubeOp) -> Result<Option<String>, DeployerError> {
        std::future::pending().await
    }
}

/// How long past a 200 ms deadline each kind of misbehaving call ends, while mock calls run
/// beside it: (action, p50 ms, max ms).
async fn overruns() -> Vec<(&'static str, f64, f64)> {
    let deadline = Duration::from_millis(200);
    let rt = PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(workspace().join("target/plugin-cache")),
        plugin_limits: [(
            "faulty".to_string(),
            Limits {
                deadline,
                memory_bytes: 32 << 20,
            },
        )]
        .into(),
        ..Default::default()
    })
    .unwrap();
    let faulty_plugin = rt
        .load_bytes(
            "faulty.wasm",
            &std::fs::read(workspace().join("target/test-plugins/faulty.wasm")).unwrap(),
        )
        .await
        .unwrap();
    let mock_plugin = rt
        .load_bytes(
            "mock.wasm",
            &std::fs::read(workspace().join("target/plugins/mock.wasm")).unwrap(),
        )
        .await
        .unwrap();
    let load = tokio::spawn(async move {
        loop {
            let inv = Invocation::for_item(serde_json::to_value(mock("load")).unwrap());
            let _ = mock_plugin
                .reconcile(inv, Arc::new(plugin_runtime::NoopHost))
                .await;
        }
    });
    let mut out = Vec::new();
    for (action, host) in [
        (
            "loop",
            Arc::new(plugin_runtime::NoopHost) as Arc<dyn HostServices>,
        ),
        ("sleep", Arc::new(plugin_runtime::NoopHost)),
        ("kube (hung host call)", Arc::new(HangingHost)),
    ] {
        let wire_action = action.split(' ').next().unwrap();
        let mut over = Vec::new();
        for _ in 0..10 {
            let inv = Invocation::for_item(serde_json::to_value(faulty("f", wire_action)).unwrap());
            let t = Instant::now();
            let r = faulty_plugin.reconcile(inv, host.clone()).await;
            assert!(r.is_err(), "{action} must fail");
            over.push(t.elapsed().saturating_sub(deadline).as_secs_f64() * 1e3);
        }
        over.sort_by(f64::total_cmp);
        out.push((action, over[over.len() / 2], over[over.len() - 1]));
    }
    load.abort();
    out
}

/// One soak sample: (seconds, jobs finished, RSS MiB, open fds).
type Sample = (f64, usize, f64, usize);

/// Samples of a busy `deployer-host run`.
async fn soak(secs: u64, n: usize, dir: &Path) -> Vec<Sample> {
    let server = ApiServer::new(Default::default()).unwrap();
    let serving = server.serve_on_loopback().await.unwrap();
    let url = serving.url.clone();
    let env = DevEnvironment::bootstrap(server.clone(), &url)
        .await
        .unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, ApiServer::kubeconfig_yaml(&url)).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "requeueInterval: 100ms\nplugins: {{dir: {:?}, cacheDir: {:?}}}\n",
            workspace().join("target/plugins"),
            workspace().join("target/plugin-cache"),
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
        .args(["run", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let api: Api<DeployItem> = Api::namespaced(env.client.clone(), "default");
    for i in 0..n {
        api.create(&PostParams::default(), &mock(&format!("s-{i}")))
            .await
            .unwrap();
    }
    // Landscaper, impatient: a new job on every finished item, over and over.
    let jobs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let bumper = tokio::spawn({
        let (api, jobs) = (api.clone(), jobs.clone());
        async move {
            loop {
                let list = api.list(&ListParams::default()).await.unwrap().items;
                for item in list {
                    let s = item.status();
                    if s.job_id == s.job_id_finished {
                        if !s.job_id.is_empty() {
                            jobs.fetch_add(1, Ordering::Relaxed);
                        }
                        let name = item.metadata.name.clone().unwrap();
                        let _ = api
                            .replace_status(
                                &name,
                                &PostParams::default(),
                                &landscaper::with_new_job(&item),
                            )
                            .await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    let started = Instant::now();
    let mut samples = Vec::new();
    let every = Duration::from_secs((secs / 24).max(1));
    while started.elapsed() < Duration::from_secs(secs) {
        samples.push((
            started.elapsed().as_secs_f64(),
            jobs.load(Ordering::Relaxed),
            rss_kib(pid) as f64 / 1024.0,
            open_fds(pid),
        ));
        tokio::time::sleep(every).await;
    }
    bumper.abort();
    let _ = child.kill();
    let _ = child.wait();
    samples
}

async fn run() {
    let n = env_usize("BENCH_ITEMS", 1000);
    let started = jiff::Timestamp::now();
    // Warm the plugin cache so neither run pays a compile.
    mock_jobs_seconds(10, true).await;
    let alone = mock_jobs_seconds(n, false).await;
    let beside = mock_jobs_seconds(n, true).await;
    println!("## Plugin faults under load ({n} mock jobs, same run, {started})\n");
    println!("| run | seconds | mock jobs/s |");
    println!("|---|---|---|");
    println!(
        "| mock items alone | {alone:.2} | {:.0} |",
        n as f64 / alone
    );
    println!(
        "| beside trap, loop, memory bomb, sleep items | {beside:.2} | {:.0} |",
        n as f64 / beside
    );
    println!(
        "\nratio with faults / alone (jobs/s): {:.2}\n",
        alone / beside
    );

    println!("| misbehaving call (200 ms deadline, mock calls beside) | past deadline p50 | max |");
    println!("|---|---|---|");
    for (action, p50, max) in overruns().await {
        println!("| {action} | {p50:.1} ms | {max:.1} ms |");
    }

    let secs = env_usize("SOAK_SECS", 120) as u64;
    let items = env_usize("SOAK_ITEMS", 200);
    let dir = tempfile::tempdir().unwrap();
    let samples = soak(secs, items, dir.path()).await;
    println!(
        "\n## Soak: `deployer-host run`, {items} items, new jobs as fast as they finish, {secs} s\n"
    );
    println!("| t (s) | jobs finished | RSS (MiB) | open fds |");
    println!("|---|---|---|---|");
    for s in &samples {
        println!("| {:.0} | {} | {:.1} | {} |", s.0, s.1, s.2, s.3);
    }
    let out = std::env::var("BENCH_SVG")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace().join("target/soak.svg"));
    let points: Vec<(f64, f64, f64)> = samples.iter().map(|s| (s.0, s.2, s.3 as f64)).collect();
    let jobs = samples.last().map(|s| s.1).unwrap_or(0);
    std::fs::write(&out, rss_fds_svg(&points, &format!("{jobs} jobs"))).unwrap();
    println!("\nplot: {}", out.display());
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}
