//! A small Prometheus text endpoint (`--metrics-listen`): worker threads in use, reconciles,
//! finished jobs and plugin calls of this replica, plus `/healthz`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::routing::get;

use crate::controller::Deployer;

/// Renders the metrics in Prometheus' text format.
pub fn render(deployer: &Deployer) -> String {
    let s = &deployer.stats;
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        ));
    };
    metric(
        "wasm_deployer_worker_threads_in_use",
        "gauge",
        "Reconciles running right now.",
        deployer.workers.in_use(),
    );
    metric(
        "wasm_deployer_worker_threads_max",
        "gauge",
        "Configured concurrent reconciles.",
        deployer.workers.max(),
    );
    metric(
        "wasm_deployer_reconciles_total",
        "counter",
        "Reconciles started.",
        s.reconciles.load(Ordering::Relaxed),
    );
    metric(
        "wasm_deployer_jobs_finished_total",
        "counter",
        "Jobs finished (final phase and jobIDFinished written, or item deleted).",
        s.jobs_finished.load(Ordering::Relaxed),
    );
    metric(
        "wasm_deployer_plugin_calls_total",
        "counter",
        "Plugin invocations.",
        s.plugin_calls.load(Ordering::Relaxed),
    );
    metric(
        "wasm_deployer_hook_stages_total",
        "counter",
        "Extension hook stages run (each calls the hooks configured for it).",
        s.hook_stages.load(Ordering::Relaxed),
    );
    metric(
        "wasm_deployer_reapplies_total",
        "counter",
        "Re-applies of finished items forced by a ShouldReconcile hook (continuous reconcile).",
        s.reapplies.load(Ordering::Relaxed),
    );
    out
}

/// Serves `/metrics` and `/healthz` on `addr` until the task is dropped.
pub async fn serve(addr: SocketAddr, deployer: Arc<Deployer>) -> anyhow::Result<()> {
    let app = Router::new()
        .route(
            "/metrics",
            get(|State(d): State<Arc<Deployer>>| async move { render(&d) }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .with_state(deployer);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "metrics endpoint");
    axum::serve(listener, app).await?;
    Ok(())
}
