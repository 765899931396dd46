//! `deployer-host plugin run` and `plugin bench`: plugin calls for plugin authors — the
//! DeployItem (and Target and Context) from YAML files, the response and every host call the
//! plugin made printed. Kubernetes calls go nowhere (recorded and refused, the default), to a
//! real API server through the host's own capability code (`--kubeconfig`, kept with
//! `--record FILE`), or are answered from such a recording (`--replay FILE`), offline.
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
    /// `checkpoint`, `kubernetes` or `http`.
    pub kind: String,
    /// The checkpoint's name, the Kubernetes operation, or the HTTP request and its answer
    /// (`PUT http://127.0.0.1:8080/v1/a -> 200`, `GET https://x/ -> denied`).
    pub detail: String,
}

/// One Kubernetes call and its answer, as `--record` writes them and `--replay` reads them.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Exchange {
    pub op: KubeOp,
    pub result: Result<Option<String>, DeployerError>,
}

/// Where a plugin's Kubernetes calls go during `plugin run`.
#[derive(Default)]
pub enum Cluster {
    /// Nowhere: calls are recorded and refused (no cluster offline).
    #[default]
    Offline,
    /// A real API server, with the host's own capability code (`--kubeconfig`); every exchange
    /// is kept for `--record`.
    Live(Box<crate::capabilities::ItemServices>),
    /// Answers from a recording (`--replay`), in order; a call that differs from the recorded
    /// one is refused with both shown.
    Replay(Mutex<std::collections::VecDeque<Exchange>>),
}

/// [`HostServices`] that records every call and sends Kubernetes calls to the [`Cluster`].
#[derive(Default)]
pub struct RecordingHost {
    pub calls: Mutex<Vec<HostCall>>,
    pub cluster: Cluster,
    /// Every Kubernetes exchange, in order (what `--record` writes).
    pub exchanges: Mutex<Vec<Exchange>>,
    /// The first call that departed from the recording (`--replay`), if any.
    pub divergence: Mutex<Option<String>>,
    /// What HTTP requests are sent (WIT 1.5): under the `http-api` Target's url (with its auth
    /// Secret from `--secret`) and the `--http-allow` prefixes; nothing else.
    pub http: OfflineHttp,
}

/// The HTTP grants of `plugin run`: the Target's, and `--http-allow` prefixes.
#[derive(Default)]
pub struct OfflineHttp {
    pub target: Option<(crate::capabilities::http::Base, plugin_runtime::HttpGrant)>,
    pub allow: Vec<crate::capabilities::http::Base>,
}

impl OfflineHttp {
    /// The grants for `inv`'s Target (an `http-api` Target; its auth Secret among `secrets`)
    /// and the `allow` prefixes.
    pub fn new(
        inv: &Invocation,
        secrets: &[std::path::PathBuf],
        allow: &[String],
    ) -> anyhow::Result<Self> {
        let secrets = secrets
            .iter()
            .map(|p| read_yaml(p))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Self::with_secrets(inv, secrets, allow)
    }

    /// As [`OfflineHttp::new`], with the Secrets as values.
    pub fn with_secrets(
        inv: &Invocation,
        secrets: Vec<Value>,
        allow: &[String],
    ) -> anyhow::Result<Self> {
        let secrets = secrets
            .into_iter()
            .map(|v| serde_json::from_value(v).context("not a Secret"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let target = match &inv.target {
            Some(t) => crate::capabilities::http::offline_grant(t, &secrets)
                .map_err(|e| anyhow::anyhow!("{}", e.message))?,
            None => None,
        };
        let allow = allow
            .iter()
            .map(|p| {
                crate::capabilities::http::Base::parse(p)
                    .map_err(|e| anyhow::anyhow!("--http-allow {p:?}: {e}"))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self { target, allow })
    }

    /// The grant for `url`, or the host's refusal.
    pub fn grant(&self, url: &str) -> Result<plugin_runtime::HttpGrant, DeployerError> {
        if let Some((base, grant)) = &self.target
            && base.covers(url)
        {
            return Ok(grant.clone());
        }
        if self.allow.iter().any(|b| b.covers(url)) {
            return Ok(plugin_runtime::HttpGrant::default());
        }
        let granted: Vec<String> = (self.target.iter().map(|(b, _)| format!("the Target ({b})")))
            .chain(self.allow.iter().map(|b| format!("--http-allow {b}")))
            .collect();
        Err(DeployerError::configuration(
            "HttpNotAllowed",
            format!(
                "HTTP request to {url} is not allowed: it is under none of [{}] (the --target's url if it is a wasm-deployer.dev/http-api Target, and --http-allow prefixes)",
                granted.join(", ")
            ),
        )
        .with_operation("http"))
    }

    /// The `Authorization` the host adds under the Target's url, if any.
    pub fn authorization(&self) -> Option<&str> {
        self.target.as_ref()?.1.authorization.as_deref()
    }
}

impl RecordingHost {
    pub fn new(cluster: Cluster) -> Self {
        Self {
            cluster,
            ..Default::default()
        }
    }
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
        let result = match &self.cluster {
            Cluster::Offline => Err(DeployerError::internal(
                "KubernetesUnavailable",
                "`deployer-host plugin run` has no cluster: Kubernetes calls are recorded, not \
                 made (give --kubeconfig, or --replay a recording)",
            )),
            Cluster::Live(services) => services.kube(op.clone()).await,
            Cluster::Replay(recorded) => {
                let next = recorded.lock().expect("replay").pop_front();
                let departed = match next {
                    Some(e) if e.op == op => return self.exchanged(op, e.result),
                    Some(e) => DeployerError::internal(
                        "ReplayMismatch",
                        format!(
                            "the plugin called {op:?} where the recording has {:?}",
                            e.op
                        ),
                    ),
                    None => DeployerError::internal(
                        "ReplayExhausted",
                        format!("the plugin called {op:?} after the recording ended"),
                    ),
                };
                self.divergence
                    .lock()
                    .expect("divergence")
                    .get_or_insert_with(|| departed.message.clone());
                Err(departed)
            }
        };
        self.exchanged(op, result)
    }

    async fn http_grant(&self, url: &str) -> Result<plugin_runtime::HttpGrant, DeployerError> {
        self.http.grant(url)
    }

    fn http_observed(&self, o: &plugin_runtime::HttpObservation<'_>) {
        let answer = o
            .status
            .map_or_else(|| o.outcome.to_string(), |s| s.to_string());
        self.calls.lock().expect("calls").push(HostCall {
            kind: "http".into(),
            detail: format!("{} {} -> {answer} ({:?})", o.method, o.host, o.duration),
        });
    }
}

impl RecordingHost {
    fn exchanged(
        &self,
        op: KubeOp,
        result: Result<Option<String>, DeployerError>,
    ) -> Result<Option<String>, DeployerError> {
        self.exchanges.lock().expect("exchanges").push(Exchange {
            op,
            result: result.clone(),
        });
        result
    }
}

/// A Target for `--kubeconfig FILE` when no `--target` is given: a `kubernetes-cluster` Target
/// whose `spec.config.kubeconfig` is the file's content.
pub fn target_for_kubeconfig(kubeconfig: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    Ok(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "Target",
        "metadata": {"name": "plugin-run", "namespace": "default"},
        "spec": {
            "type": "landscaper.gardener.cloud/kubernetes-cluster",
            "config": {"kubeconfig": text},
        }
    }))
}

/// The Target a `--replay` run shows the plugin when no `--target` is given: the one a
/// `--kubeconfig` run made, without the kubeconfig (no call leaves the process).
pub fn replay_target() -> Value {
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "Target",
        "metadata": {"name": "plugin-run", "namespace": "default"},
        "spec": {
            "type": "landscaper.gardener.cloud/kubernetes-cluster",
            "config": {"kubeconfig": "replayed: no cluster is contacted"},
        }
    })
}

/// The live cluster for `plugin run --kubeconfig`: the host's own Kubernetes capability, scoped
/// to the invocation's Target, without a progressing timeout.
pub fn live_cluster(inv: &Invocation) -> anyhow::Result<Cluster> {
    let target = inv
        .target
        .clone()
        .context("--kubeconfig needs a Target (give --target, or let --kubeconfig make one)")?;
    Ok(Cluster::Live(Box::new(
        crate::capabilities::ItemServices::new(
            crate::contract::ProgressingTimeout::unlimited(),
            Some(target),
            crate::capabilities::TargetClients::default(),
        ),
    )))
}

/// Reads a `--record` file for `--replay`.
pub fn read_recording(path: &Path) -> anyhow::Result<Cluster> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let exchanges: Vec<Exchange> = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a recording of `plugin run --record`",
            path.display()
        )
    })?;
    Ok(Cluster::Replay(Mutex::new(exchanges.into())))
}

/// A plugin loaded from a file as the CLI commands use it: a runtime of its own, no instance
/// pool (one short-lived process), the host's default limits.
pub async fn load_file(file: &Path) -> anyhow::Result<Arc<plugin_runtime::WasmPlugin>> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    load_bytes(&file.display().to_string(), &bytes).await
}

/// Like [`load_file`], for bytes from elsewhere (a registry).
pub async fn load_bytes(
    source: &str,
    bytes: &[u8],
) -> anyhow::Result<Arc<plugin_runtime::WasmPlugin>> {
    let runtime = plugin_runtime::PluginRuntime::new(plugin_runtime::RuntimeConfig {
        instance_slots: 0,
        ..Default::default()
    })?;
    runtime.load_bytes(source, bytes).await
}

pub fn read_yaml(path: &Path) -> anyhow::Result<Value> {
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
    let target = target.map(|p| read_yaml(p).map(|v| (v, p.display().to_string())));
    invocation_with(item, target.transpose()?, context)
}

/// Like [`invocation`], with the Target given as a value (and where it came from, for messages).
pub fn invocation_with(
    item: &Path,
    target: Option<(Value, String)>,
    context: Option<&Path>,
) -> anyhow::Result<Invocation> {
    let mut deploy_item = read_yaml(item)?;
    let target = match target {
        Some((v, p)) => {
            // An item file without `spec.target` runs on the Target given (as the host would
            // after resolving it).
            if deploy_item.pointer("/spec/target").is_none()
                && let Some(spec) = deploy_item.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.insert(
                    "target".into(),
                    json!({"name": v["metadata"]["name"], "namespace": v["metadata"]["namespace"]}),
                );
            }
            let content = v
                .pointer("/spec/config")
                .map(Value::to_string)
                .unwrap_or_else(|| "{}".into());
            Some(ResolvedTarget {
                target: serde_json::from_value(v)
                    .with_context(|| format!("{p} is not a Target"))?,
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
    run_with(plugin, op, inv, Arc::new(RecordingHost::default())).await
}

/// Like [`run`], with the host (and so the cluster) given; the host keeps the exchanges.
pub async fn run_with(
    plugin: Arc<plugin_runtime::WasmPlugin>,
    op: &str,
    inv: Invocation,
    host: Arc<RecordingHost>,
) -> anyhow::Result<Value> {
    use plugin_runtime::{DeployerPlugin, HookPlugin};
    // `--op <HookType>` (e.g. BeforeReconcile) runs a hook plugin's hook with the item and the
    // Target object, as the host's hook stage would.
    if let Some(hook_type) = plugin_runtime::HookType::parse(op) {
        let input = plugin_runtime::HookInput {
            hook_type,
            deploy_item: (hook_type != plugin_runtime::HookType::Start)
                .then(|| inv.deploy_item.clone()),
            target: inv
                .target
                .as_ref()
                .and_then(|t| serde_json::to_value(&t.target).ok()),
        };
        let answer = plugin.run_hook(input).await;
        let mut report = json!({
            "plugin": plugin.hook_setup().map(|h| h.name.clone()),
            "operation": op,
            "ok": answer.is_ok(),
        });
        match answer {
            Ok(r) => report["hookResult"] = serde_json::to_value(r)?,
            Err(e) => report["error"] = serde_json::to_value(e)?,
        }
        return Ok(report);
    }
    let result = match op {
        "reconcile" => plugin.reconcile(inv, host.clone()).await,
        "delete" => plugin.delete(inv, host.clone()).await,
        other => anyhow::bail!(
            "--op must be reconcile, delete or a hook type (BeforeReconcile, ShouldReconcile, ...), not {other:?}"
        ),
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
    // A plugin may treat a refused call as transient and still answer; the departure from the
    // recording is what the author needs to see (and the CLI exits 1 on it).
    if let Some(d) = host.divergence.lock().expect("divergence").clone() {
        report["replayDiverged"] = json!(d);
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
