//! `deployer-host plugin test FILE [--item ITEM]`: the conformance suite every plugin should pass,
//! whatever language it is written in. It runs the plugin offline against an in-memory cluster
//! ([`MemoryCluster`]) and checks what the host relies on:
//!
//! - `describe` is valid (name, semver version, types with a `/`) and stable (a fresh instance
//!   says the same);
//! - a broken provider configuration fails with `ERR_CONFIGURATION_PROBLEM`, not a trap or a
//!   generic error;
//! - with `--item`: reconcile reaches a final phase (following `retryAfter` like the host),
//!   reconciling again is harmless, delete succeeds twice (idempotent) and leaves no object of
//!   its own behind;
//! - hook plugins answer every hook type they declare without an error;
//! - every call ends within the plugin's deadline, and no network access was attempted.
//!
//! Owns: the checks and the in-memory cluster. Must not touch: the runtime's limits (the plugin
//! runs exactly as the host would run it).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plugin_runtime::{
    DeployerError, DeployerPlugin, HookPlugin, HostServices, Invocation, KubeOp, WasmPlugin,
};
use serde_json::{Value, json};

pub use super::check::Check;

/// Kinds that are not namespaced (for `discover`); everything else is.
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "StorageClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PriorityClass",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

type Key = (String, String, String, String);

/// A Kubernetes API in memory: get/create/update/delete/list/merge-patch/discover, enough for a
/// plugin's own objects. Not a validating server: it stores what it is given.
#[derive(Default)]
pub struct MemoryCluster {
    /// HTTP grants (an http-api `--target`: its stand-in API, [`super::http_check`]).
    pub http: super::call::OfflineHttp,
    objects: Mutex<BTreeMap<Key, Value>>,
    calls: Mutex<Vec<String>>,
    slowest: Mutex<Duration>,
    /// How long each HTTP request took, from the plugin's send to the response headers.
    pub http_times: Mutex<Vec<Duration>>,
}

fn key_of(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Key {
    (
        api_version.into(),
        kind.into(),
        namespace.unwrap_or_default().into(),
        name.into(),
    )
}

fn key_of_object(o: &Value) -> Result<Key, DeployerError> {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or_default();
    if s("/apiVersion").is_empty() || s("/kind").is_empty() || s("/metadata/name").is_empty() {
        return Err(DeployerError::configuration(
            "Invalid",
            "the object needs apiVersion, kind and metadata.name",
        ));
    }
    Ok(key_of(
        s("/apiVersion"),
        s("/kind"),
        Some(s("/metadata/namespace")),
        s("/metadata/name"),
    ))
}

fn api_error(reason: &str, message: String) -> DeployerError {
    DeployerError {
        operation: "kubernetes".into(),
        reason: reason.into(),
        message,
        ..Default::default()
    }
}

impl MemoryCluster {
    /// The objects stored now.
    pub fn objects(&self) -> Vec<Value> {
        self.objects
            .lock()
            .expect("objects")
            .values()
            .cloned()
            .collect()
    }

    /// The objects without `metadata.resourceVersion` (an update that writes the same content
    /// changes nothing else).
    fn contents(&self) -> Vec<Value> {
        let mut objects = self.objects();
        for o in &mut objects {
            if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
        }
        objects
    }

    fn apply(&self, op: &KubeOp) -> Result<Option<String>, DeployerError> {
        let mut objects = self.objects.lock().expect("objects");
        let parse = |json: &str| {
            serde_json::from_str::<Value>(json).map_err(|e| {
                DeployerError::configuration("InvalidObject", format!("not JSON: {e}"))
            })
        };
        match op {
            KubeOp::Get(r) => Ok(objects
                .get(&key_of(
                    &r.api_version,
                    &r.kind,
                    r.namespace.as_deref(),
                    &r.name,
                ))
                .map(Value::to_string)),
            KubeOp::Create { object_json } => {
                let mut o = parse(object_json)?;
                let k = key_of_object(&o)?;
                if objects.contains_key(&k) {
                    return Err(api_error(
                        "AlreadyExists",
                        format!("{} {:?} already exists", k.1, k.3),
                    ));
                }
                o["metadata"]["resourceVersion"] = json!("1");
                objects.insert(k, o.clone());
                Ok(Some(o.to_string()))
            }
            KubeOp::Update { object_json } => {
                let mut o = parse(object_json)?;
                let k = key_of_object(&o)?;
                let Some(old) = objects.get(&k) else {
                    return Err(api_error(
                        "NotFound",
                        format!("{} {:?} not found", k.1, k.3),
                    ));
                };
                let version = old["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                o["metadata"]["resourceVersion"] = json!((version + 1).to_string());
                objects.insert(k, o.clone());
                Ok(Some(o.to_string()))
            }
            KubeOp::Delete(r) => Ok(objects
                .remove(&key_of(
                    &r.api_version,
                    &r.kind,
                    r.namespace.as_deref(),
                    &r.name,
                ))
                .map(|_| "{}".to_string())),
            KubeOp::List {
                api_version,
                kind,
                namespace,
                ..
            } => {
                let items: Vec<&Value> = objects
                    .iter()
                    .filter(|((a, k, ns, _), _)| {
                        a == api_version && k == kind && namespace.as_ref().is_none_or(|n| n == ns)
                    })
                    .map(|(_, v)| v)
                    .collect();
                Ok(Some(json!({"apiVersion": api_version, "kind": format!("{kind}List"), "items": items}).to_string()))
            }
            KubeOp::Patch {
                target, patch_json, ..
            } => {
                let k = key_of(
                    &target.api_version,
                    &target.kind,
                    target.namespace.as_deref(),
                    &target.name,
                );
                let patch = parse(patch_json)?;
                let mut o = objects.get(&k).cloned().unwrap_or_else(|| {
                    json!({"apiVersion": target.api_version, "kind": target.kind,
                           "metadata": {"name": target.name, "namespace": target.namespace}})
                });
                json_patch::merge(&mut o, &patch);
                objects.insert(k, o.clone());
                Ok(Some(o.to_string()))
            }
            KubeOp::ServerVersion => Ok(Some(
                json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-memory"}).to_string(),
            )),
            KubeOp::ApiVersions => {
                // Every group version and kind of the objects held, plus the core group.
                let mut set = std::collections::BTreeSet::from(["v1".to_string()]);
                for o in objects.values() {
                    let av = o["apiVersion"].as_str().unwrap_or_default().to_string();
                    set.insert(format!("{av}/{}", o["kind"].as_str().unwrap_or_default()));
                    set.insert(av);
                }
                Ok(Some(json!(set).to_string()))
            }
            KubeOp::Discover { api_version, kind } => {
                let plural = format!("{}s", kind.to_lowercase());
                Ok(Some(
                    json!({"apiVersion": api_version, "kind": kind, "plural": plural,
                           "namespaced": !CLUSTER_SCOPED.contains(&kind.as_str())})
                    .to_string(),
                ))
            }
        }
    }
}

#[async_trait::async_trait]
impl HostServices for MemoryCluster {
    fn checkpoint(&self, _name: &str) -> Result<(), DeployerError> {
        Ok(())
    }

    async fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("{} {:?}", op.verb(), op));
        self.apply(&op)
    }

    async fn http_grant(&self, url: &str) -> Result<plugin_runtime::HttpGrant, DeployerError> {
        self.http.grant(url)
    }

    fn http_observed(&self, o: &plugin_runtime::HttpObservation<'_>) {
        self.http_times.lock().expect("http times").push(o.duration);
    }
}

/// Runs the suite on a loaded plugin; `item` is a DeployItem the plugin should reconcile.
pub async fn run(
    plugin: Arc<WasmPlugin>,
    item: Option<&Path>,
    http: HttpTarget<'_>,
) -> anyhow::Result<Vec<Check>> {
    let network_before =
        plugin_runtime::DENIED_NETWORK_ATTEMPTS.load(std::sync::atomic::Ordering::Relaxed);
    let mut cluster = MemoryCluster::default();
    let mut checks = Vec::new();
    let stand_in = match (item, http.target) {
        (Some(item), Some(target)) => {
            Some(stand_in_api(item, target, http.secrets, &mut cluster).await?)
        }
        _ => None,
    };
    let cluster = Arc::new(cluster);

    checks.push(describe_valid(&plugin));
    checks.push(match plugin.describe_again().await {
        Ok((d, h)) if &d == plugin.description() && h.as_ref() == plugin.hook_setup() => {
            Check::pass(
                "describe-stable",
                "a fresh instance describes itself the same way",
            )
        }
        Ok((d, h)) => Check::fail(
            "describe-stable",
            format!(
                "first {:?} / {:?}, then {d:?} / {h:?}",
                plugin.description(),
                plugin.hook_setup()
            ),
        ),
        Err(e) => Check::fail("describe-stable", format!("{e:#}")),
    });

    if plugin.exports_deployer() {
        for ty in plugin.description().deploy_item_types.clone() {
            checks.push(bad_config(&plugin, &cluster, &ty, json!("not an object"), "string").await);
            checks.push(
                bad_config(
                    &plugin,
                    &cluster,
                    &ty,
                    json!({"apiVersion": 7, "kind": ["x"]}),
                    "wrong types",
                )
                .await,
            );
        }
        match item {
            Some(path) => {
                let target = match &stand_in {
                    Some((_, target, _)) => (target.clone(), "--target".into()),
                    None => (memory_target(), "memory".into()),
                };
                let inv = super::call::invocation_with(path, Some(target), None)?;
                checks.extend(lifecycle_with_api(&plugin, &cluster, inv, stand_in.as_ref()).await);
            }
            None => checks.push(Check::new(
                "reconcile-and-delete",
                "skip",
                "give --item ITEM.yaml (a DeployItem the plugin should reconcile) to check reconcile, re-reconcile and idempotent delete",
            )),
        }
    }
    if let Some(setup) = plugin.hook_setup().cloned() {
        checks.extend(hook_checks(&plugin, &cluster, item, setup).await?);
    }

    let slowest = *cluster.slowest.lock().expect("slowest");
    let deadline = plugin.limits().deadline;
    checks.push(if slowest < deadline {
        Check::pass(
            "deadline",
            format!("slowest call {slowest:?}, deadline {deadline:?}"),
        )
    } else {
        Check::fail(
            "deadline",
            format!("a call took {slowest:?}, deadline {deadline:?}"),
        )
    });
    let attempts = plugin_runtime::DENIED_NETWORK_ATTEMPTS
        .load(std::sync::atomic::Ordering::Relaxed)
        - network_before;
    let (imports, _) = plugin.interfaces();
    let ambient: Vec<&String> = imports
        .iter()
        .filter(|i| i.starts_with("wasi:sockets") || i.starts_with("wasi:filesystem"))
        .collect();
    checks.push(if attempts > 0 {
        Check::fail("no-ambient-io", format!("{attempts} network connection(s) attempted (and denied)"))
    } else if ambient.is_empty() {
        Check::pass("no-ambient-io", "no network attempted; imports neither sockets nor filesystem")
    } else {
        Check::pass(
            "no-ambient-io",
            format!("no network attempted; imports {} interface(s) of wasi:sockets/filesystem that the host links but grants nothing (usual for Python and JavaScript runtimes)", ambient.len()),
        )
    });
    Ok(checks)
}

fn note_time(cluster: &MemoryCluster, started: Instant) {
    let mut slowest = cluster.slowest.lock().expect("slowest");
    *slowest = (*slowest).max(started.elapsed());
}

fn describe_valid(plugin: &WasmPlugin) -> Check {
    let d = plugin.description();
    let semver = |v: &str| {
        let core = v.split(['-', '+']).next().unwrap_or_default();
        let parts: Vec<&str> = core.split('.').collect();
        parts.len() == 3
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    };
    let mut problems = Vec::new();
    if d.name.trim().is_empty() || d.name.contains(char::is_whitespace) {
        problems.push(format!("name {:?} is empty or has spaces", d.name));
    }
    if !semver(&d.version) {
        problems.push(format!(
            "version {:?} is not semver (MAJOR.MINOR.PATCH)",
            d.version
        ));
    }
    if plugin.exports_deployer() {
        if d.deploy_item_types.is_empty() {
            problems.push("a deployer that declares no DeployItem types".into());
        }
        for t in &d.deploy_item_types {
            if !t.contains('/') || t.contains(char::is_whitespace) {
                problems.push(format!("type {t:?} is not of the form domain/name"));
            }
        }
    }
    if problems.is_empty() {
        Check::pass(
            "describe-valid",
            format!("{} {} {:?}", d.name, d.version, d.deploy_item_types),
        )
    } else {
        Check::fail("describe-valid", problems.join("; "))
    }
}

/// Every hook type the plugin declares answers without an error.
async fn hook_checks(
    plugin: &Arc<WasmPlugin>,
    cluster: &Arc<MemoryCluster>,
    item: Option<&Path>,
    setup: plugin_runtime::HookSetup,
) -> anyhow::Result<Vec<Check>> {
    let mut checks = Vec::new();
    let deploy_item = match item {
        Some(path) => super::call::read_yaml(path)?,
        None => {
            json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
                       "metadata": {"name": "conformance", "namespace": "default"},
                       "spec": {"type": "conformance.test/any"}})
        }
    };
    for hook_type in setup.hook_types {
        let input = plugin_runtime::HookInput {
            hook_type,
            deploy_item: (hook_type != plugin_runtime::HookType::Start)
                .then(|| deploy_item.clone()),
            target: None,
        };
        let started = Instant::now();
        let answer = plugin.run_hook(input).await;
        note_time(cluster, started);
        checks.push(match answer {
            Ok(r) => Check::pass(
                &format!("hook-{}", hook_type.as_str()),
                format!("answered {r:?}"),
            ),
            Err(e) => Check::fail(
                &format!("hook-{}", hook_type.as_str()),
                format!("{}: {}", e.reason, e.message),
            ),
        });
    }
    Ok(checks)
}

/// The lifecycle checks, then — with a stand-in API — what the API received.
async fn lifecycle_with_api(
    plugin: &Arc<WasmPlugin>,
    cluster: &Arc<MemoryCluster>,
    inv: Invocation,
    stand_in: Option<&(super::http_check::StandIn, Value, String)>,
) -> Vec<Check> {
    let config = inv
        .deploy_item
        .pointer("/spec/config")
        .cloned()
        .unwrap_or_default();
    let mut checks = lifecycle(plugin, cluster, inv).await;
    if let Some((api, _, base_path)) = stand_in {
        let auth = cluster.http.authorization();
        checks.extend(super::http_check::checks(
            &api.received(),
            base_path,
            &config,
            auth,
        ));
    }
    checks
}

/// `plugin test --target T.yaml [--secret S.yaml]`: the item's Target, if it is an http-api one.
#[derive(Clone, Copy, Default)]
pub struct HttpTarget<'a> {
    pub target: Option<&'a Path>,
    pub secrets: &'a [std::path::PathBuf],
}

/// The stand-in API for an http-api `target`, the Target rebased onto it, and its path; the
/// grant (with `secrets`, else a stand-in Secret) goes into `cluster`.
async fn stand_in_api(
    item: &Path,
    target: &Path,
    secrets: &[std::path::PathBuf],
    cluster: &mut MemoryCluster,
) -> anyhow::Result<(super::http_check::StandIn, Value, String)> {
    let mut target = super::call::read_yaml(target)?;
    let url = target
        .pointer("/spec/config/url")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            anyhow::anyhow!("--target: a wasm-deployer.dev/http-api Target with spec.config.url")
        })?
        .to_string();
    let api = super::http_check::StandIn::start().await?;
    let rebased = api.rebase(&url);
    let base_path = rebased
        .splitn(4, '/')
        .nth(3)
        .map_or_else(|| "/".to_string(), |p| format!("/{p}"));
    target["spec"]["config"]["url"] = json!(rebased);
    let mut given: Vec<Value> = secrets
        .iter()
        .map(|p| super::call::read_yaml(p))
        .collect::<anyhow::Result<_>>()?;
    if given.is_empty()
        && let Some(secret) = super::http_check::stand_in_secret(&target)
    {
        given.push(secret);
    }
    let inv = super::call::invocation_with(item, Some((target.clone(), "--target".into())), None)?;
    cluster.http = super::call::OfflineHttp::with_secrets(&inv, given, &[])?;
    Ok((api, target, base_path))
}

fn memory_target() -> Value {
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "Target",
        "metadata": {"name": "conformance", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                 "config": {"kubeconfig": "in-memory cluster of `plugin test`"}}
    })
}

fn test_item(ty: &str, config: Value) -> Value {
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": "conformance", "namespace": "default", "generation": 1},
        "spec": {"type": ty, "target": {"name": "conformance", "namespace": "default"}, "config": config},
        "status": {"jobID": "job-1", "jobIDFinished": ""}
    })
}

async fn bad_config(
    plugin: &Arc<WasmPlugin>,
    cluster: &Arc<MemoryCluster>,
    ty: &str,
    config: Value,
    what: &str,
) -> Check {
    let name = format!("bad-config ({ty}, {what})");
    let inv = Invocation {
        deploy_item: test_item(ty, config),
        target: None,
        context: None,
        previous_provider_status: None,
    };
    let started = Instant::now();
    let result = plugin.reconcile(inv, cluster.clone()).await;
    note_time(cluster, started);
    match result {
        Err(e)
            if e.codes
                .iter()
                .any(|c| c == crate::landscaper::codes::CONFIGURATION_PROBLEM) =>
        {
            Check::pass(&name, format!("ERR_CONFIGURATION_PROBLEM: {}", e.message))
        }
        Err(e) => Check::fail(
            &name,
            format!(
                "expected ERR_CONFIGURATION_PROBLEM, got codes {:?} ({}: {})",
                e.codes, e.reason, e.message
            ),
        ),
        Ok(r) => Check::fail(&name, format!("accepted a broken configuration: {r:?}")),
    }
}

/// Calls `reconcile` or `delete` until the plugin stops asking to be called again (as the host
/// does with `retryAfter`), feeding each providerStatus back; at most 20 steps.
/// `inv` carries the providerStatus forward, as the item's status would.
async fn until_final(
    plugin: &Arc<WasmPlugin>,
    cluster: &Arc<MemoryCluster>,
    inv: &mut Invocation,
    delete: bool,
) -> Result<plugin_runtime::Response, DeployerError> {
    for _ in 0..20 {
        let started = Instant::now();
        let r = if delete {
            plugin.delete(inv.clone(), cluster.clone()).await
        } else {
            plugin.reconcile(inv.clone(), cluster.clone()).await
        };
        note_time(cluster, started);
        let r = r?;
        if let Some(ps) = &r.provider_status {
            inv.deploy_item["status"]["providerStatus"] = ps.clone();
            inv.previous_provider_status = Some(ps.clone());
        }
        if r.retry_after.is_none() {
            return Ok(r);
        }
    }
    Err(DeployerError::internal(
        "NoFinalPhase",
        "still asking to be called again after 20 steps",
    ))
}

async fn lifecycle(
    plugin: &Arc<WasmPlugin>,
    cluster: &Arc<MemoryCluster>,
    mut inv: Invocation,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let phase = |r: &plugin_runtime::Response| {
        r.phase
            .as_ref()
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    };
    match until_final(plugin, cluster, &mut inv, false).await {
        Ok(r) if phase(&r) == "Succeeded" || r.phase.is_none() => checks.push(Check::pass(
            "reconcile",
            format!(
                "phase {:?}, {} object(s) in the cluster",
                r.phase,
                cluster.objects().len()
            ),
        )),
        Ok(r) => checks.push(Check::fail(
            "reconcile",
            format!("ended in phase {:?}", r.phase),
        )),
        Err(e) => {
            checks.push(Check::fail(
                "reconcile",
                format!("{:?} {}: {}", e.codes, e.reason, e.message),
            ));
            return checks;
        }
    }
    let created = cluster.contents();
    checks.push(match until_final(plugin, cluster, &mut inv, false).await {
        Ok(_) if cluster.contents() == created => Check::pass(
            "reconcile-again",
            "a second reconcile succeeds and changes nothing",
        ),
        Ok(_) => Check::new(
            "reconcile-again",
            "warn",
            "a second reconcile changed the objects",
        ),
        Err(e) => Check::fail(
            "reconcile-again",
            format!("{:?} {}: {}", e.codes, e.reason, e.message),
        ),
    });
    for (n, name) in ["delete", "delete-again"].into_iter().enumerate() {
        checks.push(match until_final(plugin, cluster, &mut inv, true).await {
            Ok(_) => Check::pass(
                name,
                if n == 0 {
                    "delete succeeds"
                } else {
                    "deleting again succeeds (idempotent)"
                },
            ),
            Err(e) => Check::fail(name, format!("{:?} {}: {}", e.codes, e.reason, e.message)),
        });
    }
    let left = cluster.objects();
    checks.push(if left.is_empty() {
        Check::pass("cleanup", "delete left no object behind")
    } else {
        Check::new(
            "cleanup",
            "warn",
            format!(
                "{} object(s) left after delete: {}",
                left.len(),
                left.iter()
                    .map(|o| format!(
                        "{} {}",
                        o["kind"].as_str().unwrap_or("?"),
                        o["metadata"]["name"].as_str().unwrap_or("?")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    });
    checks
}

/// The suite's report as text: one line per check, then a summary.
pub fn render(plugin: &str, checks: &[Check]) -> String {
    let mut out = format!("conformance of plugin {plugin}\n");
    for c in checks {
        out.push_str(&format!(
            "{:5} {} — {}\n",
            c.outcome.to_uppercase(),
            c.name,
            c.detail
        ));
    }
    let failed = checks.iter().filter(|c| c.outcome == "fail").count();
    out.push_str(&format!("{} checks, {failed} failed\n", checks.len()));
    out
}
