//! The helm deployer, side by side in one run.
//!
//! `cargo bench -p deployer-host --bench helm` (after `cargo xtask build-plugins`; `cargo xtask
//! bench` does both). `BENCH_WRITE_DOCS=1` updates `docs/benchmarks.md`.
//!
//! 1. Render time per public chart of the corpus: the engine natively, the engine as a
//!    `wasm32-wasip2` component under wasmtime (a fresh instance per render, as a plugin call
//!    gets; both engines load the chart from one `.tgz`, as the plugin does), and Go Helm 4 (`helm-python-sdk`, timed inside its
//!    process). Best of `BENCH_RUNS` (default 10).
//! 2. Install of a 30-object chart end to end (DeployItem created → `Succeeded`, release Secret
//!    written) on the embedded API server: the wasm helm plugin and the same plugin compiled
//!    natively. Median of `BENCH_INSTALLS` (default 5) fresh items.

#[path = "../helm/tests/common/mod.rs"]
mod helm_corpus;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deployer_host::config::HostConfig;
use deployer_host::controller::{self, Context, TargetClients};
use deployer_host::dev::{DevEnvironment, landscaper};
use deployer_host::landscaper::{DeployItem, Phase};
use embedded_apiserver::ApiServer;
use helm_engine::sort::SplitMode;
use helm_engine::{Chart, RenderOptions, render};
use kube::api::{Api, PostParams};
use plugin_runtime::{DeployerPlugin, NativePlugin, PluginRegistry};
use test_support::bench::{env_usize, write_docs_section};
use test_support::workspace;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::p2::bindings::sync::Command;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The engine's `template` example as a release wasm32-wasip2 component.
fn build_wasm_template() -> PathBuf {
    let target = workspace().join("target/helm-wasm-bench");
    let status = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args([
            "build",
            "--release",
            "-p",
            "helm-engine",
            "--target",
            "wasm32-wasip2",
            "--example",
            "template",
        ])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(workspace())
        .status()
        .expect("cargo");
    assert!(status.success(), "building the wasm template example");
    target.join("wasm32-wasip2/release/examples/template.wasm")
}

struct WasmRenderer {
    engine: Engine,
    linker: Linker<State>,
    component: Component,
}

impl WasmRenderer {
    fn new(wasm: &Path) -> Self {
        let engine = Engine::new(&Config::new()).expect("engine");
        let component = Component::from_file(&engine, wasm).expect("component");
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).expect("wasi");
        WasmRenderer {
            engine,
            linker,
            component,
        }
    }

    /// One render in a fresh store and instance of `input/chart.tgz` with `input/values.json`;
    /// returns the stdout length.
    fn render(&self, input: &Path) -> usize {
        let stdout = MemoryOutputPipe::new(64 << 20);
        let wasi = WasiCtxBuilder::new()
            .args(&["helm-template", "/in/chart.tgz", "-f", "/in/values.json"])
            .stdout(stdout.clone())
            .preopened_dir(input, "/in", FsPerms::ReadOnly)
            .expect("input dir")
            .build();
        let mut store = Store::new(
            &self.engine,
            State {
                wasi,
                table: ResourceTable::new(),
            },
        );
        let cmd = Command::instantiate(&mut store, &self.component, &self.linker).expect("inst");
        let ok = cmd.wasi_cli_run().call_run(&mut store).expect("run");
        assert!(ok.is_ok(), "wasm render failed");
        stdout.contents().len()
    }
}

fn best(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
    }
    best.as_secs_f64() * 1000.0
}

fn render_table(runs: usize) -> String {
    let wasm = WasmRenderer::new(&build_wasm_template());
    let helm = helm_corpus::oracle(runs);
    let mut table = String::from(
        "| chart | native (ms) | wasm (ms) | Go Helm (ms) | native / Helm | wasm / Helm |\n|---|---:|---:|---:|---:|---:|\n",
    );
    let (mut sn, mut sw, mut sh) = (0.0, 0.0, 0.0);
    for case in helm_corpus::CASES
        .iter()
        .filter(|c| helm_corpus::available(c))
    {
        // Both engines get the chart as the plugin does, as one `.tgz` (bytes over WIT for the
        // plugin, one file read here): the wasm column measures rendering, not WASI reads of
        // every file of a chart directory.
        let dir = helm_corpus::repo_root().join(case.chart);
        let tgz = package(&dir);
        let input = tempfile::tempdir().unwrap();
        std::fs::write(input.path().join("values.json"), case.values).unwrap();
        std::fs::write(input.path().join("chart.tgz"), &tgz).unwrap();
        let opts = RenderOptions {
            values_files: vec![case.values.to_string()],
            split_mode: SplitMode::Legacy,
            ..Default::default()
        };
        let native = best(runs, || {
            let chart = Chart::load_tgz(&tgz).expect("chart loads");
            let r = render(&chart, &opts).expect("renders");
            std::hint::black_box(r.to_template_stream(&[], false).expect("stream"));
        });
        let in_wasm = best(runs, || {
            std::hint::black_box(wasm.render(input.path()));
        });
        let go = helm
            .as_ref()
            .and_then(|h| h[case.id]["seconds"].as_f64())
            .map(|s| s * 1000.0);
        match go {
            Some(g) => {
                sn += native;
                sw += in_wasm;
                sh += g;
                table.push_str(&format!(
                    "| {} | {native:.2} | {in_wasm:.2} | {g:.2} | {:.2} | {:.2} |\n",
                    case.id,
                    native / g,
                    in_wasm / g
                ));
            }
            None => table.push_str(&format!(
                "| {} | {native:.2} | {in_wasm:.2} | n/a | - | - |\n",
                case.id
            )),
        }
        eprintln!("rendered {}", case.id);
    }
    if sh > 0.0 {
        table.push_str(&format!(
            "| **total** | {sn:.2} | {sw:.2} | {sh:.2} | {:.2} | {:.2} |\n",
            sn / sh,
            sw / sh
        ));
    }
    table
}

/// `helm package` of a chart directory: a gzip tar with one top directory named after the
/// chart.
fn package(dir: &Path) -> Vec<u8> {
    use std::io::Write as _;
    let name = Chart::load_dir(dir)
        .expect("chart loads")
        .name()
        .to_string();
    let mut tar = tar::Builder::new(Vec::new());
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let file = p.file_name().unwrap().to_string_lossy().to_string();
            let rel = if rel.is_empty() {
                file
            } else {
                format!("{rel}/{file}")
            };
            if p.is_dir() {
                stack.push((p, rel));
                continue;
            }
            let data = std::fs::read(&p).unwrap();
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            tar.append_data(&mut h, format!("{name}/{rel}"), data.as_slice())
                .unwrap();
        }
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar.into_inner().unwrap()).unwrap();
    gz.finish().unwrap()
}

fn helm_item(i: usize, raw: &str) -> DeployItem {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": format!("thirty-{i}"), "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/helm",
                 "target": {"name": "default", "namespace": "default"},
                 "config": {"apiVersion": "helm.deployer.landscaper.gardener.cloud/v1alpha1",
                            "kind": "ProviderConfiguration", "name": format!("thirty-{i}"),
                            "namespace": format!("thirty-{i}"), "createNamespace": true,
                            "chart": {"archive": {"raw": raw}}}}
    }))
    .expect("item")
}

/// Median seconds from create to `Succeeded` over `n` fresh items, with `registry`.
async fn installs(registry: Arc<PluginRegistry>, n: usize, raw: &str) -> f64 {
    let server = ApiServer::new(embedded_apiserver::Options {
        simulate_workloads: true,
        ..Default::default()
    })
    .expect("server");
    let env = DevEnvironment::bootstrap(server.clone(), "http://127.0.0.1:1")
        .await
        .expect("bootstrap");
    let config = HostConfig {
        requeue_interval: Some("100ms".into()),
        ..HostConfig::default()
    };
    let clients = TargetClients::default();
    clients.register(&env.target_kubeconfig, env.client.clone());
    let mut deployer = Context::new(
        env.client.clone(),
        env.client.clone(),
        registry,
        &config,
        clients,
    )
    .expect("deployer");
    deployer.events = controller::Events::disabled();
    let deployer = Arc::new(deployer);
    let task = tokio::spawn(controller::run(
        deployer,
        None,
        config.workers(),
        config.item_cache,
        std::future::pending(),
    ));
    let sim = tokio::spawn(landscaper::run(env.client.clone()));
    let api: Api<DeployItem> = Api::namespaced(env.client.clone(), "default");
    let mut times = Vec::new();
    for i in 0..n {
        let started = Instant::now();
        api.create(&PostParams::default(), &helm_item(i, raw))
            .await
            .expect("create");
        loop {
            let item = api.get(&format!("thirty-{i}")).await.expect("get");
            let s = item.status();
            if !s.job_id.is_empty() && s.job_id == s.job_id_finished {
                assert_eq!(s.phase, Phase::Succeeded, "{:?}", s.last_error);
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "install timed out"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        times.push(started.elapsed().as_secs_f64());
    }
    task.abort();
    sim.abort();
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}

async fn install_table(n: usize) -> String {
    let raw = test_support::bench::thirty_object_chart();
    let cache = tempfile::tempdir().unwrap();
    let mut config = HostConfig::default();
    config.plugins.dir = Some(workspace().join("target/plugins"));
    config.plugins.cache_dir = Some(cache.path().to_path_buf());
    let wasm = deployer_host::plugins::load_all(&config, &[config.plugins_dir()], Vec::new())
        .await
        .expect("plugins");
    let native = Arc::new(
        PluginRegistry::new(vec![
            Arc::new(NativePlugin::<helm::HelmDeployer>::new()) as Arc<dyn DeployerPlugin>
        ])
        .expect("registry"),
    );
    let w = installs(wasm, n, &raw).await;
    let nat = installs(native, n, &raw).await;
    format!(
        "| plugin | install of 30 objects, create → Succeeded (median of {n}) |\n|---|---:|\n| wasm | {:.0} ms |\n| native | {:.0} ms |\n| wasm / native | {:.2} |\n",
        w * 1000.0,
        nat * 1000.0,
        w / nat
    )
}

#[tokio::main]
async fn main() {
    let runs = env_usize("BENCH_RUNS", 10);
    let render = tokio::task::spawn_blocking(move || render_table(runs))
        .await
        .unwrap();
    println!("{render}");
    let install = install_table(env_usize("BENCH_INSTALLS", 5)).await;
    println!("{install}");
    if std::env::var("BENCH_WRITE_DOCS").as_deref() == Ok("1") {
        write_docs_section(
            "helm-deployer",
            "## Helm deployer\n\n",
            &format!(
                "Command: `cargo bench -p deployer-host --bench helm` (best of {runs} renders; release builds).\n\n{render}\n{install}"
            ),
        );
    }
}
