//! A small Prometheus text endpoint (`--metrics-listen`): worker threads in use, reconciles,
//! jobs by type and phase with their durations, plugin calls with their durations and failures,
//! items by phase, locks, the watch, Target-cluster clients and connections, plugins' HTTP, the
//! process (`process_*`), plus `/healthz`, `/livez` (the process
//! answers) and `/readyz` (the DeployItem watch has synced).

pub mod family;
mod process;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::controller::Context;
use crate::plugin_sources::catalog::Catalog;

/// Renders the metrics in Prometheus' text format.
pub fn render(ctx: &Context) -> String {
    let mut out = String::new();
    for (name, kind, help, value) in unlabelled(ctx) {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        ));
    }
    let clusters = ctx.target_clients.stats();
    out.push_str(
        "# HELP wasm_deployer_target_clients_released_total Target-cluster clients released, by why: its Target was deleted or rotated its kubeconfig, idle, or least recently used beyond maxClients.\n# TYPE wasm_deployer_target_clients_released_total counter\n",
    );
    for (why, n) in [
        ("target", clusters.released_target),
        ("idle", clusters.released_idle),
        ("capacity", clusters.released_capacity),
    ] {
        out.push_str(&format!(
            "wasm_deployer_target_clients_released_total{{reason=\"{why}\"}} {n}\n"
        ));
    }
    if let Some(heap) = crate::allocator::heap() {
        out.push_str(
            "# HELP wasm_deployer_heap_bytes The allocator's own count: bytes in use, and free bytes its arenas keep (glibc builds only).\n# TYPE wasm_deployer_heap_bytes gauge\n",
        );
        out.push_str(&format!(
            "wasm_deployer_heap_bytes{{state=\"in_use\"}} {}\nwasm_deployer_heap_bytes{{state=\"free\"}} {}\n",
            heap.in_use, heap.free
        ));
    }
    render_families(ctx, &mut out);
    out
}

/// (name, type, help, value) of each unlabelled metric.
fn unlabelled(ctx: &Context) -> [(&'static str, &'static str, &'static str, u64); 16] {
    let s = &ctx.stats;
    let clusters = ctx.target_clients.stats();
    let locks = |f: fn(&crate::locking::Locker) -> u64| ctx.locker.as_ref().map_or(0, f);
    [
        (
            "wasm_deployer_worker_threads_in_use",
            "gauge",
            "Reconciles running right now.",
            ctx.workers.in_use(),
        ),
        (
            "wasm_deployer_worker_threads_max",
            "gauge",
            "Configured concurrent reconciles.",
            ctx.workers.max(),
        ),
        (
            "wasm_deployer_reconciles_total",
            "counter",
            "Reconciles started.",
            s.reconciles.load(Ordering::Relaxed),
        ),
        (
            "wasm_deployer_plugin_calls_total",
            "counter",
            "Plugin invocations.",
            s.plugin_calls.load(Ordering::Relaxed),
        ),
        (
            "wasm_deployer_hook_stages_total",
            "counter",
            "Extension hook stages run (each calls the hooks configured for it).",
            s.hook_stages.load(Ordering::Relaxed),
        ),
        (
            "wasm_deployer_reapplies_total",
            "counter",
            "Re-applies of finished items forced by a ShouldReconcile hook (continuous reconcile).",
            s.reapplies.load(Ordering::Relaxed),
        ),
        (
            "wasm_deployer_watch_restarts_total",
            "counter",
            "Errors of the DeployItem watch (each ends the watch, which starts again).",
            s.watch_restarts.load(Ordering::Relaxed),
        ),
        (
            "wasm_deployer_lock_conflicts_total",
            "counter",
            "SyncObject locks this replica did not get because another controller holds the item.",
            locks(crate::locking::Locker::conflicts),
        ),
        (
            "wasm_deployer_unlock_failures_total",
            "counter",
            "SyncObject locks this replica could not release after retries (each a warning naming the lock).",
            locks(crate::locking::Locker::unlock_failures),
        ),
        (
            "wasm_deployer_replicas",
            "gauge",
            "Live replicas this replica sees by their Leases, itself included (0: the split by Leases is off).",
            ctx.membership
                .as_ref()
                .map_or(0, |m| m.members().len() as u64),
        ),
        (
            "wasm_deployer_plugins_loading",
            "gauge",
            "Plugins of the plugin directory still compiling after start-up (their types are not served yet).",
            ctx.plugins.loading.load(Ordering::Relaxed) as u64,
        ),
        (
            "wasm_deployer_plugin_pool_idle_resident_bytes",
            "gauge",
            "Memory the plugin instance pool keeps resident in slots no plugin instance uses now (zeroed for the next instance rather than given back).",
            plugin_runtime::pool_idle_resident_bytes(),
        ),
        (
            "wasm_deployer_target_clients",
            "gauge",
            "Target-cluster clients held (one per distinct kubeconfig in use; targetClusters.maxClients bounds it).",
            clusters.clients as u64,
        ),
        (
            "wasm_deployer_target_connections",
            "gauge",
            "Open connections to Target clusters.",
            clusters.connections as u64,
        ),
        (
            "wasm_deployer_target_clusters_unreachable",
            "gauge",
            "Target-cluster API servers that could not be reached at the last attempt (their calls fail fast until the next).",
            clusters.unreachable as u64,
        ),
        (
            "wasm_deployer_target_clients_built_total",
            "counter",
            "Target-cluster clients built.",
            clusters.built,
        ),
    ]
}

/// The labelled families (jobs, plugin calls, items by phase, plugins' HTTP) and the process.
fn render_families(ctx: &Context, out: &mut String) {
    let s = &ctx.stats;
    s.jobs.render(out);
    s.job_durations.render(out);
    s.plugin_call_durations.render(out);
    s.plugin_call_failures.render(out);
    family::render_gauges(
        out,
        "wasm_deployer_items",
        "DeployItems of this host's types by phase, as this replica last read or wrote them since it started.",
        ["type", "phase"],
        ctx.memory.phases(),
    );
    out.push_str(&ctx.http.stats.render());
    process::render(out);
}

/// Plugin delivery's metrics: `plugin_load_total{result}` and `plugin_info{name,version,digest}`
/// of every dynamic plugin serving now.
pub async fn render_delivery(catalog: &Catalog) -> String {
    let m = &catalog.metrics;
    let mut out = String::from(
        "# HELP wasm_deployer_plugin_load_total Plugin loads by plugin delivery, by result.\n# TYPE wasm_deployer_plugin_load_total counter\n",
    );
    for (result, n) in [
        ("loaded", &m.loaded),
        ("unchanged", &m.unchanged),
        ("refused", &m.refused),
    ] {
        out.push_str(&format!(
            "wasm_deployer_plugin_load_total{{result=\"{result}\"}} {}\n",
            n.load(Ordering::Relaxed)
        ));
    }
    out.push_str("# HELP wasm_deployer_plugin_info Dynamic plugins serving now.\n# TYPE wasm_deployer_plugin_info gauge\n");
    for (name, version, digest) in catalog.serving().await {
        out.push_str(&format!(
            "wasm_deployer_plugin_info{{name=\"{name}\",version=\"{version}\",digest=\"{digest}\"}} 1\n"
        ));
    }
    out
}

/// Serves `/metrics`, `/healthz`, `/livez` and `/readyz` on `addr` until the task is dropped.
pub async fn serve(
    addr: SocketAddr,
    ctx: Arc<Context>,
    catalog: Option<Arc<Catalog>>,
) -> anyhow::Result<()> {
    type S = (Arc<Context>, Option<Arc<Catalog>>);
    let app = Router::new()
        .route(
            "/metrics",
            get(|State((d, c)): State<S>| async move {
                let mut out = render(&d);
                if let Some(c) = c {
                    out.push_str(&render_delivery(&c).await);
                }
                out
            }),
        )
        // Liveness: the process answers. Readiness: the DeployItem watch has synced.
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State((d, _)): State<S>| async move {
                if d.stats.watch_synced.load(Ordering::Relaxed) {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "watch not synced yet")
                }
            }),
        )
        .with_state((ctx, catalog));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "metrics endpoint");
    axum::serve(listener, app).await?;
    Ok(())
}
