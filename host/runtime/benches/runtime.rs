//! Plugin runtime benchmark (plain `main`, `harness = false`).
//!
//! Reproduce (after `cargo xtask build-plugins`):
//!     cargo bench -p plugin-runtime --bench runtime
//! Env: N_CALLS (default 5000), N_LOADS (default 10), WASM_DEPLOYER_TARGET_DIR (to find
//! `plugins/mock.wasm` elsewhere).
//!
//! Measures: Cranelift compile vs cache deserialize of the mock component (through
//! `PluginRuntime::load_bytes`, so hashing/HMAC/linking/describe are in "total load"), and
//! p50/p99 of one reconcile of the mock — wasm (fresh Store + instantiate + call + JSON
//! conversions) vs native (`NativePlugin`, i.e. spawn_blocking) vs a direct native call.

use plugin_runtime::{
    DeployerPlugin, Invocation, NativePlugin, NoopHost, PluginRuntime, RuntimeConfig,
};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn mock_path() -> PathBuf {
    if let Ok(dir) = std::env::var("WASM_DEPLOYER_TARGET_DIR") {
        return PathBuf::from(dir).join("plugins/mock.wasm");
    }
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .map(|d| d.join("plugins/mock.wasm"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("plugins/mock.wasm not found: run `cargo xtask build-plugins`"))
}

fn env_n(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Summary {
    p50: Duration,
    p99: Duration,
    mean: Duration,
    min: Duration,
}

fn summarize(mut v: Vec<Duration>) -> Summary {
    v.sort_unstable();
    let pick = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    Summary {
        p50: pick(0.50),
        p99: pick(0.99),
        mean: v.iter().sum::<Duration>() / v.len() as u32,
        min: v[0],
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn item() -> Invocation {
    Invocation::for_item(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": "bench", "namespace": "default", "generation": 1},
        "spec": {"type": "landscaper.gardener.cloud/mock", "config": {
            "apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
            "kind": "ProviderConfiguration",
            "providerStatus": {"apiVersion": "mock/v1", "kind": "ProviderStatus", "ready": true},
            "export": {"url": "https://example.invalid", "replicas": 3}
        }},
        "status": {"phase": "Init"}
    }))
}

async fn run() {
    let n_calls = env_n("N_CALLS", 5000);
    let n_loads = env_n("N_LOADS", 10);
    let path = mock_path();
    let bytes = std::fs::read(&path).unwrap();
    println!("component: {} ({} bytes)", path.display(), bytes.len());
    print_loads(&bytes, n_loads).await;
    print_invocations(&bytes, n_calls).await;
}

/// `n_loads` loads of the component with an empty cache (compile) and with a warm one
/// (deserialize), each into a fresh runtime: (prepare, total load) of each.
async fn load_times(bytes: &[u8], n_loads: usize) -> [Summary; 4] {
    let mut compile = Vec::new();
    let mut compile_total = Vec::new();
    for _ in 0..n_loads {
        let rt = PluginRuntime::new(RuntimeConfig::default()).unwrap();
        rt.load_bytes("mock.wasm", bytes).await.unwrap();
        let l = rt.stats().loads[0].clone();
        compile.push(l.prepare_time);
        compile_total.push(l.total_time);
    }
    let cache = tempfile::tempdir().unwrap();
    let cached = || RuntimeConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Default::default()
    };
    PluginRuntime::new(cached())
        .unwrap()
        .load_bytes("mock.wasm", bytes)
        .await
        .unwrap();
    let mut deser = Vec::new();
    let mut deser_total = Vec::new();
    for _ in 0..n_loads {
        let rt = PluginRuntime::new(cached()).unwrap();
        rt.load_bytes("mock.wasm", bytes).await.unwrap();
        let s = rt.stats();
        assert_eq!(s.cache_hits, 1);
        deser.push(s.loads[0].prepare_time);
        deser_total.push(s.loads[0].total_time);
    }
    [
        summarize(compile),
        summarize(compile_total),
        summarize(deser),
        summarize(deser_total),
    ]
}

/// The load table: compile vs deserialize.
async fn print_loads(bytes: &[u8], n_loads: usize) {
    let [c, ct, d, dt] = load_times(bytes, n_loads).await;
    println!("\n## load (median of {n_loads})");
    println!("| step | cold: compile | warm: cache hit |");
    println!("|---|---|---|");
    println!(
        "| prepare (Component::new vs Component::deserialize) | {:.2} ms | {:.3} ms |",
        ms(c.p50),
        ms(d.p50)
    );
    println!(
        "| total load_bytes (sha256, cache read + HMAC, prepare, link, describe) | {:.2} ms | {:.3} ms |",
        ms(ct.p50),
        ms(dt.p50)
    );
}

/// `n_calls` reconciles of `inv` by `plugin` after a warm-up of a tenth as many.
async fn reconcile_times(
    plugin: &Arc<dyn DeployerPlugin>,
    inv: &Invocation,
    host: &Arc<NoopHost>,
    n_calls: usize,
) -> Summary {
    for _ in 0..(n_calls / 10).max(10) {
        plugin.reconcile(inv.clone(), host.clone()).await.unwrap();
    }
    let mut v = Vec::with_capacity(n_calls);
    for _ in 0..n_calls {
        let i = inv.clone();
        let t = Instant::now();
        let r = plugin.reconcile(i, host.clone()).await;
        v.push(t.elapsed());
        std::hint::black_box(r).unwrap();
    }
    summarize(v)
}

/// `n_calls` fresh Stores + instantiations of the wasm plugin, no call.
async fn instantiate_times(plugin: &plugin_runtime::WasmPlugin, n_calls: usize) -> Summary {
    let mut v = Vec::with_capacity(n_calls);
    for _ in 0..n_calls {
        let t = Instant::now();
        plugin.instantiate_only().await.unwrap();
        v.push(t.elapsed());
    }
    summarize(v)
}

/// `n_calls` direct calls of the mock's `reconcile`, in this thread.
fn direct_times(inv: &Invocation, n_calls: usize) -> Summary {
    let null = sdk_guest::NullHost;
    let mut v = Vec::with_capacity(n_calls);
    for _ in 0..n_calls {
        let i = inv.clone();
        let t = Instant::now();
        let r = <mock::Mock as sdk_guest::Deployer>::reconcile(&sdk_guest::Ctx::native(&null), i);
        v.push(t.elapsed());
        std::hint::black_box(r).unwrap();
    }
    summarize(v)
}

/// The invocation table: one reconcile, wasm vs native vs a direct call.
async fn print_invocations(bytes: &[u8], n_calls: usize) {
    let rt = PluginRuntime::new(RuntimeConfig::default()).unwrap();
    let wasm_plugin = rt.load_bytes("mock.wasm", bytes).await.unwrap();
    let wasm: Arc<dyn DeployerPlugin> = wasm_plugin.clone();
    let native: Arc<dyn DeployerPlugin> = Arc::new(NativePlugin::<mock::Mock>::new());
    let host = Arc::new(NoopHost);
    let inv = item();
    // sanity: both agree
    assert_eq!(
        wasm.reconcile(inv.clone(), host.clone()).await,
        native.reconcile(inv.clone(), host.clone()).await
    );

    // Profiling aid (docs/benchmarks.md, "Profiling"): only the wasm reconcile loop, so
    // `perf record` sees nothing else.
    if std::env::var_os("PROFILE_WASM_RECONCILE").is_some() {
        for _ in 0..n_calls {
            std::hint::black_box(wasm.reconcile(inv.clone(), host.clone()).await).unwrap();
        }
        return;
    }

    let w = reconcile_times(&wasm, &inv, &host, n_calls).await;
    let n = reconcile_times(&native, &inv, &host, n_calls).await;
    let inst = instantiate_times(&wasm_plugin, n_calls).await;
    let direct = direct_times(&inv, n_calls);

    println!("\n## mock reconcile ({n_calls} calls after warm-up)");
    println!("| path | p50 | p99 | mean | min |");
    println!("|---|---|---|---|---|");
    for (name, s) in [
        (
            "wasm: fresh Store + instantiate + reconcile (WasmPlugin)",
            &w,
        ),
        ("wasm: of which fresh Store + instantiate only", &inst),
        ("native: NativePlugin (spawn_blocking)", &n),
        ("native: direct Mock::reconcile call", &direct),
    ] {
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.1} µs | {:.1} µs |",
            us(s.p50),
            us(s.p99),
            us(s.mean),
            us(s.min)
        );
    }
    println!(
        "\nratio wasm/native (p50): {:.1}x vs NativePlugin, {:.1}x vs direct call",
        us(w.p50) / us(n.p50),
        us(w.p50) / us(direct.p50)
    );
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}
