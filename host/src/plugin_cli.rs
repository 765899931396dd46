//! `deployer-host plugin run` and `plugin bench`: plugin calls offline, for plugin authors — the DeployItem (and
//! Target and Context) from YAML files, the response and every host call the plugin made
//! printed. Kubernetes calls are recorded and answered "no cluster offline"; nothing leaves the
//! process.
//!
//! Owns: building an [`Invocation`] from files and recording host calls. Must not touch: the
//! contract (no status is written; the host's phase rules do not run).

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use plugin_runtime::{DeployerError, HostServices, Invocation, KubeOp, ResolvedTarget};
use serde_json::{Value, json};

/// One call the plugin made to the host.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostCall {
    /// `checkpoint` or `kubernetes`.
    pub kind: String,
    /// The checkpoint's name or the Kubernetes operation.
    pub detail: String,
}

/// [`HostServices`] that records every call; Kubernetes is unavailable offline.
#[derive(Default)]
pub struct RecordingHost {
    pub calls: Mutex<Vec<HostCall>>,
}

#[async_trait::async_trait]
impl HostServices for RecordingHost {
    fn checkpoint(&self, name: &str) -> Result<(), DeployerError> {
        self.calls.lock().expect("calls").push(HostCall {
            kind: "checkpoint".into(),
            detail: name.into(),
        });
        Ok(())
    }

    async fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
        self.calls.lock().expect("calls").push(HostCall {
            kind: "kubernetes".into(),
            detail: format!("{op:?}"),
        });
        Err(DeployerError::internal(
            "KubernetesUnavailable",
            "`deployer-host plugin run` has no cluster: Kubernetes calls are recorded, not made",
        ))
    }
}

fn read_yaml(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The invocation a host would build from these objects.
pub fn invocation(
    item: &Path,
    target: Option<&Path>,
    context: Option<&Path>,
) -> anyhow::Result<Invocation> {
    let deploy_item = read_yaml(item)?;
    let target = match target {
        Some(p) => {
            let v = read_yaml(p)?;
            let content = v
                .pointer("/spec/config")
                .map(Value::to_string)
                .unwrap_or_else(|| "{}".into());
            Some(ResolvedTarget {
                target: serde_json::from_value(v)
                    .with_context(|| format!("{} is not a Target", p.display()))?,
                content,
            })
        }
        None => None,
    };
    let context = match context {
        Some(p) => Some(
            serde_json::from_value(read_yaml(p)?)
                .with_context(|| format!("{} is not a Context", p.display()))?,
        ),
        None => None,
    };
    Ok(Invocation {
        previous_provider_status: deploy_item.pointer("/status/providerStatus").cloned(),
        deploy_item,
        target,
        context,
    })
}

/// Runs one call of `plugin` (`reconcile` or `delete`) and returns the report printed by the CLI:
/// `{plugin, operation, ok, response | error, hostCalls}`.
pub async fn run(
    plugin: Arc<plugin_runtime::WasmPlugin>,
    op: &str,
    inv: Invocation,
) -> anyhow::Result<Value> {
    use plugin_runtime::DeployerPlugin;
    let host = Arc::new(RecordingHost::default());
    let result = match op {
        "reconcile" => plugin.reconcile(inv, host.clone()).await,
        "delete" => plugin.delete(inv, host.clone()).await,
        other => anyhow::bail!("--op must be reconcile or delete, not {other:?}"),
    };
    let calls = host.calls.lock().expect("calls").clone();
    let mut report = json!({
        "plugin": plugin.description().name,
        "operation": op,
        "ok": result.is_ok(),
        "hostCalls": calls,
    });
    match result {
        Ok(r) => report["response"] = serde_json::to_value(r)?,
        Err(e) => report["error"] = serde_json::to_value(e)?,
    }
    Ok(report)
}

/// `deployer-host plugin bench`: `calls` reconciles of `item`, each in a fresh instance as in
/// the host; calls/s and percentiles.
pub async fn bench(
    plugin: Arc<plugin_runtime::WasmPlugin>,
    item: &Path,
    calls: usize,
) -> anyhow::Result<String> {
    use plugin_runtime::DeployerPlugin;
    anyhow::ensure!(calls > 0, "--calls must be at least 1");
    let inv = invocation(item, None, None)?;
    let host: Arc<dyn HostServices> = Arc::new(RecordingHost::default());
    // Warm-up: the first calls page in code and memory images.
    for _ in 0..calls.min(50) {
        let _ = plugin.reconcile(inv.clone(), host.clone()).await;
    }
    let mut times = Vec::with_capacity(calls);
    let mut failed = 0usize;
    let started = std::time::Instant::now();
    for _ in 0..calls {
        let t = std::time::Instant::now();
        if plugin.reconcile(inv.clone(), host.clone()).await.is_err() {
            failed += 1;
        }
        times.push(t.elapsed());
    }
    let total = started.elapsed();
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    Ok(format!(
        "plugin {} — {calls} reconcile calls ({failed} returned an error)\n\
         calls/s: {:.0}\np50: {:?}\np99: {:?}\nmax: {:?}",
        plugin.description().name,
        calls as f64 / total.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        times[times.len() - 1],
    ))
}
