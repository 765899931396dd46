//! Plugins by language, side by side in one run: the same echo deployer (`plugins/<lang>/echo`,
//! `plugins/rust-echo`) in Rust, C, Go, JavaScript and Python — component size, cold compile
//! (Cranelift, no cache), load from the compiled-code cache, a fresh instance (`describe` in a
//! new store), and one reconcile (fresh instance + get + update of a ConfigMap on an in-memory
//! cluster, as the host calls it).
//!
//! `cargo xtask build-plugins && cargo xtask build-polyglot && cargo bench -p deployer-host --bench languages`
//! (`cargo xtask bench` runs it too; `BENCH_WRITE_DOCS=1` rewrites the section of
//! docs/benchmarks.md). A language whose build is missing is left out of the table.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deployer_host::cli::plugin::conformance::MemoryCluster;
use plugin_runtime::{DeployerPlugin, Invocation, PluginRuntime, RuntimeConfig};
use serde_json::json;
use test_support::bench::{env_usize, write_docs_section};
use test_support::workspace;

fn runtime(cache: Option<&std::path::Path>) -> Arc<PluginRuntime> {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: cache.map(|c| c.to_path_buf()),
        ..Default::default()
    })
    .unwrap()
}

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times[((times.len() as f64 * p) as usize).min(times.len() - 1)]
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{:.0} µs", ms * 1e3)
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = workspace().join("target/polyglot-plugins");
    let mut rows = Vec::new();
    for lang in ["rust", "c", "go", "js", "python"] {
        let file = dir.join(lang).join(format!("{lang}-echo.wasm"));
        let Ok(bytes) = std::fs::read(&file) else {
            eprintln!("{lang}: {} missing, left out", file.display());
            continue;
        };
        eprintln!("{lang}: {} bytes", bytes.len());
        let source = file.display().to_string();
        rt.block_on(async {
            // Cold compile: a runtime without a cache.
            let t = Instant::now();
            runtime(None).load_bytes(&source, &bytes).await.unwrap();
            let cold = t.elapsed();
            // Cached: the first load writes the cache, the next runtimes read it.
            let cache = tempfile::tempdir().unwrap();
            runtime(Some(cache.path()))
                .load_bytes(&source, &bytes)
                .await
                .unwrap();
            let mut cached: Vec<Duration> = Vec::new();
            for _ in 0..5 {
                let t = Instant::now();
                runtime(Some(cache.path()))
                    .load_bytes(&source, &bytes)
                    .await
                    .unwrap();
                cached.push(t.elapsed());
            }
            let plugin = runtime(Some(cache.path()))
                .load_bytes(&source, &bytes)
                .await
                .unwrap();
            // Go, JavaScript and Python start a language runtime in every instance: fewer calls.
            let calls = if matches!(lang, "rust" | "c") {
                env_usize("LANG_BENCH_CALLS", 2000)
            } else {
                env_usize("LANG_BENCH_CALLS", 2000) / 5
            };
            // A fresh instance: `describe` in a new store.
            let mut fresh = Vec::with_capacity(calls);
            for _ in 0..calls {
                let t = Instant::now();
                plugin.describe_again().await.unwrap();
                fresh.push(t.elapsed());
            }
            // One reconcile as the host makes it: fresh instance, get + update on the cluster.
            let cluster = Arc::new(MemoryCluster::default());
            let inv = Invocation {
                deploy_item: json!({
                    "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
                    "metadata": {"name": "bench", "namespace": "default"},
                    "spec": {"type": format!("examples.wasm-deployer.dev/echo-{lang}"),
                             "target": {"name": "t", "namespace": "default"},
                             "config": {"apiVersion": "examples.wasm-deployer.dev/v1",
                                        "kind": "ProviderConfiguration", "message": "hello"}},
                    "status": {"jobID": "1"}
                }),
                target: None,
                context: None,
                previous_provider_status: None,
            };
            plugin
                .reconcile(inv.clone(), cluster.clone())
                .await
                .unwrap();
            let mut reconcile = Vec::with_capacity(calls);
            for _ in 0..calls {
                let t = Instant::now();
                plugin
                    .reconcile(inv.clone(), cluster.clone())
                    .await
                    .unwrap();
                reconcile.push(t.elapsed());
            }
            rows.push(format!(
                "| {lang} | {:.1} | {} | {} | {} | {} | {} | {} |",
                bytes.len() as f64 / 1e6,
                ms(cold),
                ms(percentile(&mut cached, 0.5)),
                ms(percentile(&mut fresh, 0.5)),
                ms(percentile(&mut reconcile, 0.5)),
                ms(percentile(&mut reconcile, 0.99)),
                calls,
            ));
        });
    }
    let table = format!(
        "| language | size (MB) | cold compile | cached load p50 | fresh instance p50 | reconcile p50 | reconcile p99 | calls |\n\
         |---|---|---|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    println!("{table}");
    if std::env::var("BENCH_WRITE_DOCS").is_ok() {
        write_docs_section("languages", "## Plugins by language\n\n", &table);
    }
}
