//! The helm deployer (`landscaper.gardener.cloud/helm`, Landscaper contract section 7) as a
//! wasm-deployer plugin, on the project's own Helm engine (`helm-engine`).
//!
//! Two modes, as in Landscaper:
//! - `helmDeployment: true` (default): a real Helm release ([`actions`] on [`release`]
//!   storage): release Secrets exactly as Helm writes them, so real Helm can list, upgrade,
//!   roll back and uninstall what this plugin installed, and the other way round.
//! - `helmDeployment: false`: render, then apply through the manifest deployer's applier
//!   (`manifest-applier`): labels, CRDs first, `createNamespace` as a managed Namespace,
//!   deletion groups; no release Secret.
//!
//! Every invocation resumes from the persisted `providerStatus` (a `progress` marker with the
//! jobID and step, and the Helm action's own state), does what it can without waiting and
//! answers "not yet, call again after D" while hooks run, objects are not ready or exports are
//! not there. Steps: release (or apply) → readiness → exports → `Succeeded`.
//!
//! Modules: [`config`] (ProviderConfiguration, ProviderStatus), [`source`] (where the chart
//! comes from, through the host's `fetch` capability), [`release`] (Helm's release storage),
//! [`actions`] (install / upgrade / rollback / uninstall with hooks), `template` (template
//! mode).
//! Must not touch: status writes, the export Secret, finalizers — the host owns those.

pub mod actions;
mod cluster;
pub mod config;
pub mod release;
pub mod source;
mod template;

use std::time::Duration;

use config::{Config, Progress, ProviderStatus, ReleaseRef};
use manifest_applier::spec::{ManagedResource, ObjectReference};
use manifest_applier::{Options, exports, jsonpath::JsonPath, readiness, strategies, wait};
use sdk_guest::{
    Ctx, Deployer, DeployerError, Description, Invocation, Response, export_deployer, phase,
};
use serde_json::{Map, Value};

/// The DeployItem type.
pub const TYPE: &str = "landscaper.gardener.cloud/helm";
/// Label on every object template mode creates or updates (value: the DeployItem's name),
/// besides the applier's own.
pub const HELM_LABEL: &str = "helm.deployer.landscaper.gardener.cloud/deployitem";
/// The applier's ownership label (Landscaper's manifest applier sets it in template mode).
pub const OWNER_LABEL: &str = "manifest.deployer.landscaper.gardener.cloud/deployitem";

/// The shared applier, as the helm deployer.
pub const OPTIONS: Options = Options {
    owner_label: OWNER_LABEL,
    field_manager: "helm.deployer.landscaper.gardener.cloud",
    default_readiness_checkpoint: CP_DEFAULT_READINESS,
    custom_readiness_checkpoint: CP_CUSTOM_READINESS,
    config_operation: config::INIT_OPERATION,
};

/// Checkpoint names (contract 3.9).
pub const CP_START: &str = "helm deployer: start reconcile";
/// After decoding.
pub const CP_PROGRESSING: &str = "helm deployer: start progressing";
/// Before the release or the apply.
pub const CP_APPLY_FILES: &str = "helm deployer: start apply files";
/// Before readiness checks.
pub const CP_BEFORE_READINESS: &str = "helm deployer: before readiness check";
/// Before reading exports.
pub const CP_BEFORE_EXPORTS: &str = "helm deployer: before reading export values";
/// Default readiness checks.
pub const CP_DEFAULT_READINESS: &str = "helm deployer: default readiness checks";
/// Custom readiness checks.
pub const CP_CUSTOM_READINESS: &str = "helm deployer: custom readiness checks";
/// Start of delete.
pub const CP_START_DELETE: &str = "helm deployer: start delete";
/// After decoding, before deleting.
pub const CP_DELETING: &str = "helm deployer: start deleting";

/// Poll interval while waiting for readiness or exports.
const POLL: Duration = Duration::from_secs(1);
/// Delay before reporting a failure persisted with phase `Progressing`.
const PERSIST_FIRST: Duration = Duration::from_millis(50);
/// A retried failure with less progressing time left than this ends the job with
/// `ERR_TIMEOUT` and the failure itself: the host's next attempt (its requeue interval,
/// Landscaper's 5 s) would only meet the timeout at its start checkpoint.
const LAST_ATTEMPT: Duration = Duration::from_secs(5);
const STEP_RELEASE: &str = "release";
const STEP_APPLIED: &str = "applied";
const STEP_READY: &str = "ready";
const STEP_DONE: &str = "done";

/// The workload kinds whose objects a release's `managedResources` lists (contract 7.3).
const WORKLOAD_KINDS: [(&str, &str); 6] = [
    ("", "Pod"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("", "ReplicationController"),
];

/// The plugin.
pub struct HelmDeployer;

/// "Not yet, call again after `after`" (capped before the progressing timeout), or `timeout`
/// once no time is left (`manifest_applier::wait::not_yet`).
fn waiting(
    ctx: &Ctx,
    status: &ProviderStatus,
    reason: &str,
    message: String,
    after: Duration,
    timeout: DeployerError,
) -> Result<Response, DeployerError> {
    wait::not_yet(
        ctx,
        "HelmDeployer",
        status.to_json(),
        reason,
        message,
        after,
        timeout,
    )
}

/// A failed attempt of the release (or apply) step. Configuration problems and timeouts end
/// the job; anything else is retried by the host, as Landscaper retries its helm deployer's
/// errors until the progressing timeout:
/// - the first failure of a job still in `Init` is persisted first (phase `Progressing`,
///   the failure in `progress.failure`) and reported by the next call, so a retried error is
///   seen with `Progressing`, as Landscaper shows it;
/// - with less than [`LAST_ATTEMPT`] of the progressing time left, the failure ends the job
///   with `ERR_TIMEOUT`, its own message kept, instead of a bare timeout at the next attempt.
fn failed_attempt(
    ctx: &Ctx,
    inv: &Invocation,
    status: &mut ProviderStatus,
    job_id: &str,
    e: DeployerError,
) -> Result<Response, DeployerError> {
    if e.is_unrecoverable() {
        return Err(e);
    }
    if ctx.remaining().is_some_and(|left| left < LAST_ATTEMPT) {
        let message = format!(
            "{} (retried until the progressing timeout; no time left for another attempt)",
            e.message
        );
        return Err(DeployerError { message, ..e }.with_code(sdk_guest::codes::TIMEOUT));
    }
    if inv.current_phase() != phase::INIT {
        return Err(e);
    }
    let progress = status.progress.get_or_insert_with(Progress::default);
    if progress.job_id != job_id {
        *progress = Progress {
            job_id: job_id.into(),
            step: STEP_RELEASE.into(),
            ..Default::default()
        };
    }
    progress.failure = Some(e);
    Ok(Response {
        phase: Some(phase::PROGRESSING),
        provider_status: Some(status.to_json()),
        retry_after: Some(PERSIST_FIRST),
        ..Default::default()
    })
}

/// The failure [`failed_attempt`] persisted for this job and not reported yet (no error is
/// recorded on the item in this job: `status.firstError` is cleared at every pickup).
fn unreported_failure(
    inv: &Invocation,
    status: &ProviderStatus,
    job_id: &str,
) -> Option<DeployerError> {
    let reported = inv
        .deploy_item
        .pointer("/status/firstError")
        .is_some_and(|e| !e.is_null());
    status
        .progress
        .as_ref()
        .filter(|p| p.job_id == job_id && !reported)
        .and_then(|p| p.failure.clone())
}

/// The values a chart renders with, as Helm's `CoalesceValues` makes them: the item's
/// `values` over the chart's `values.yaml` and its subcharts' (Landscaper calls it without
/// `ProcessDependencies`, so a disabled subchart's values are there too).
fn render_values(chart: &helm_engine::Chart, user: &Value) -> Value {
    let Ok(wc) = helm_engine::deps::WChart::from_chart(chart) else {
        return Value::Object(Map::new());
    };
    let user = match helm_engine::json::from_serde(user) {
        helm_engine::value::Value::Map(m) => m,
        _ => Default::default(),
    };
    let coalesced = helm_engine::deps::coalesce_values(&wc, &user, false);
    helm_engine::json::to_serde(&helm_engine::value::Value::Map(coalesced))
}

/// `.Chart` as Go's `jsonpath` sees Helm's `*chart.Metadata`: every field, by its JSON name
/// (`.Chart.version`) and by its Go name (`.Chart.Version`); unset fields are zero values.
fn chart_root(md: &helm_engine::chart::Metadata) -> Value {
    const FIELDS: [(&str, &str); 17] = [
        ("name", "Name"),
        ("home", "Home"),
        ("sources", "Sources"),
        ("version", "Version"),
        ("description", "Description"),
        ("keywords", "Keywords"),
        ("maintainers", "Maintainers"),
        ("icon", "Icon"),
        ("apiVersion", "APIVersion"),
        ("condition", "Condition"),
        ("tags", "Tags"),
        ("appVersion", "AppVersion"),
        ("deprecated", "Deprecated"),
        ("annotations", "Annotations"),
        ("kubeVersion", "KubeVersion"),
        ("dependencies", "Dependencies"),
        ("type", "Type"),
    ];
    let set = release::metadata_json(md);
    let mut out = Map::new();
    for (json_name, go_name) in FIELDS {
        let zero = match json_name {
            "deprecated" => Value::Bool(false),
            "sources" | "keywords" | "maintainers" | "annotations" | "dependencies" => Value::Null,
            _ => Value::String(String::new()),
        };
        let v = set.get(json_name).cloned().unwrap_or(zero);
        out.insert(json_name.into(), v.clone());
        out.insert(go_name.into(), v);
    }
    Value::Object(out)
}

/// `.Capabilities` as Landscaper's value exports see it: Helm's `DefaultCapabilities`
/// (`ToRenderValues` without a cluster), here the engine's defaults, by Go and JSON names.
fn capabilities_root() -> Value {
    let kube =
        helm_engine::objects::KubeVersion::parse(helm_engine::render::DEFAULT_KUBE_VERSION).ok();
    let (version, major, minor) = kube
        .map(|k| (k.version, k.major, k.minor))
        .unwrap_or_default();
    let kube = serde_json::json!({
        "Version": version, "Major": major, "Minor": minor,
        "version": version, "major": major, "minor": minor,
    });
    let apis: Vec<&str> = helm_engine::objects::DEFAULT_API_VERSIONS.to_vec();
    serde_json::json!({
        "KubeVersion": kube, "kubeVersion": kube,
        "APIVersions": apis, "apiVersions": apis,
    })
}

/// Exports without `fromResource` read Helm's render root as Landscaper builds it for them
/// (`chartutil.ToRenderValues` with release options `{Name, Namespace, Revision: 0,
/// IsInstall: true}`): `.Values` (coalesced), `.Release.{Name, Namespace, IsInstall,
/// IsUpgrade, Revision, Service}`, `.Chart.*`, `.Capabilities.*`. A missing path is an error
/// (Landscaper: `ConstructExportFromValues`, retried).
fn value_exports(config: &Config, chart: &helm_engine::Chart) -> Result<Value, DeployerError> {
    let mut out = Value::Object(Map::new());
    let mut exports = config.value_exports().peekable();
    if exports.peek().is_none() {
        return Ok(out);
    }
    let root = serde_json::json!({
        "Values": render_values(chart, &config.values),
        "Release": {
            "Name": config.name, "Namespace": config.namespace,
            "IsUpgrade": false, "IsInstall": true, "Revision": 0, "Service": "Helm",
        },
        "Chart": chart_root(&chart.metadata),
        "Capabilities": capabilities_root(),
    });
    for e in exports {
        let err = |m: String| {
            DeployerError::retryable("ConstructExportFromValues", m).with_operation("Template")
        };
        let path = JsonPath::parse(&e.json_path).map_err(|why| {
            err(format!(
                "export {:?}: jsonPath {:?}: {why}",
                e.key, e.json_path
            ))
        })?;
        let found = path.eval(&root);
        let value = match found.as_slice() {
            [] => {
                return Err(err(format!(
                    "export {:?}: jsonPath {:?} not found in the release values",
                    e.key, e.json_path
                )));
            }
            [one] => (*one).clone(),
            many => Value::Array(many.iter().map(|v| (*v).clone()).collect()),
        };
        strategies::deep_merge(&mut out, &nest(&e.key, value));
    }
    Ok(out)
}

/// `a.b` → `{"a": {"b": value}}`.
fn nest(key: &str, value: Value) -> Value {
    key.rsplit('.').fold(value, |inner, part| {
        let mut m = Map::new();
        m.insert(part.to_string(), inner);
        Value::Object(m)
    })
}

/// The workload objects of a release manifest (contract 7.3: entries carry only `resource`).
fn workloads(manifest: &str, namespace: &str) -> Vec<ManagedResource> {
    let mut out = Vec::new();
    for doc in helm_engine::sort::split_manifests(manifest, Default::default()) {
        let Ok(v) = helm_engine::yaml::parse(&doc) else {
            continue;
        };
        let v = helm_engine::json::to_serde(&v);
        let items = match v.get("items").and_then(Value::as_array) {
            Some(items) if v["kind"].as_str().is_some_and(|k| k.ends_with("List")) => items.clone(),
            _ => vec![v],
        };
        for o in items {
            let s = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("");
            let api_version = s("/apiVersion");
            let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
            if !WORKLOAD_KINDS.contains(&(group, s("/kind"))) {
                continue;
            }
            let ns = match s("/metadata/namespace") {
                "" => namespace,
                ns => ns,
            };
            out.push(ManagedResource {
                resource: ObjectReference {
                    api_version: api_version.into(),
                    kind: s("/kind").into(),
                    name: s("/metadata/name").into(),
                    namespace: ns.into(),
                    uid: String::new(),
                },
                ..Default::default()
            });
        }
    }
    out
}

impl HelmDeployer {
    /// Release mode: one step of the Helm action. `Ok(Err(response))`: answer now.
    fn release_step(
        ctx: &Ctx,
        config: &Config,
        status: &mut ProviderStatus,
        job_id: &str,
    ) -> Result<Result<(), Response>, DeployerError> {
        ctx.checkpoint(CP_APPLY_FILES)?;
        let mut progress = match status.progress.clone() {
            Some(p) if p.job_id == job_id => p,
            previous => {
                // A new job while the previous one's action is still in flight (its job was
                // replaced): that action is abandoned (its pending record marked failed) so
                // this job's action is not blocked by it.
                let old: actions::ActionState = previous
                    .and_then(|p| serde_json::from_value(p.action).ok())
                    .unwrap_or_default();
                if !old.is_idle() {
                    let mut old = old;
                    actions::abandon(ctx, &mut old, "a new job started")?;
                }
                Progress {
                    job_id: job_id.into(),
                    step: STEP_RELEASE.into(),
                    ..Default::default()
                }
            }
        };
        let mut state: actions::ActionState =
            serde_json::from_value(progress.action.clone()).unwrap_or_default();
        let loaded = source::resolve(ctx, &config.chart)?;
        if progress.value_exports.is_none() {
            progress.value_exports = Some(value_exports(config, &loaded.chart)?);
        }
        let flags = |f: &config::ActionFlags| actions::Flags {
            atomic: f.atomic,
            wait: f.wait,
            force: f.force,
            take_ownership: f.take_ownership,
            skip_schema_validation: f.skip_schema_validation,
            timeout: f.timeout,
            create_namespace: config.create_namespace,
            max_history: 10,
        };
        let request = actions::Request {
            release_name: &config.name,
            namespace: &config.namespace,
            chart: &loaded.chart,
            values: &config.values,
            install: flags(&config.deployment.install),
            upgrade: flags(&config.deployment.upgrade),
        };
        let outcome = actions::install_or_upgrade(ctx, &request, &mut state);
        progress.action = serde_json::to_value(&state).unwrap_or_default();
        match outcome? {
            actions::Outcome::Pending {
                retry_after,
                message,
            } => {
                status.progress = Some(progress);
                let timeout = DeployerError::progressing_timeout(CP_APPLY_FILES);
                waiting(ctx, status, "HelmAction", message, retry_after, timeout).map(Err)
            }
            actions::Outcome::Done(release) => {
                status.managed_resources = workloads(&release.manifest, &config.namespace);
                status.release = Some(ReleaseRef {
                    name: release.name.clone(),
                    namespace: release.namespace.clone(),
                    revision: release.version,
                    chart: format!(
                        "{}-{}",
                        loaded.chart.metadata.name, loaded.chart.metadata.version
                    ),
                });
                progress.step = STEP_APPLIED.into();
                progress.action = Value::Null;
                status.progress = Some(progress);
                Ok(Ok(()))
            }
        }
    }
}

impl Deployer for HelmDeployer {
    fn describe() -> Description {
        Description {
            name: "helm".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            deploy_item_types: vec![TYPE.into()],
            hook_types: vec![],
        }
    }

    fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        ctx.checkpoint(CP_START)?;
        let raw = inv
            .provider_config_present()
            .map_err(|e| e.with_operation("Reconcile"))?;
        let config = config::parse(raw)?;
        let mut status = ProviderStatus::from_previous(inv.previous_provider_status.as_ref())?;
        ctx.checkpoint(CP_PROGRESSING)?;
        inv.require_kubernetes_target("helm deployer", "Reconcile")?;
        let (item_name, job_id) = inv.name_and_job();
        let mut step = status
            .progress
            .as_ref()
            .filter(|p| p.job_id == job_id)
            .map(|p| p.step.clone())
            .unwrap_or_default();

        if let Some(failure) = unreported_failure(&inv, &status, &job_id) {
            return Err(failure);
        }
        if let Some(p) = status.progress.as_mut() {
            p.failure = None;
        }
        if step.is_empty() || step == STEP_RELEASE {
            let attempt = if config.helm_deployment {
                Self::release_step(ctx, &config, &mut status, &job_id)
            } else {
                template::apply_step(ctx, &item_name, &job_id, &config, &mut status)
            };
            let answer = match attempt {
                Ok(answer) => answer,
                Err(e) => return failed_attempt(ctx, &inv, &mut status, &job_id, e),
            };
            if let Err(response) = answer {
                return Ok(response);
            }
            step = STEP_APPLIED.into();
        }

        if step == STEP_APPLIED {
            ctx.checkpoint(CP_BEFORE_READINESS)?;
            let round = readiness::check_all(
                ctx,
                &config.readiness,
                &status.managed_resources,
                &[],
                &OPTIONS,
            )?;
            if let Err(pending) = round {
                let timeout = readiness::timeout(pending.timeout());
                return waiting(
                    ctx,
                    &status,
                    "WaitingForReadiness",
                    pending.why,
                    POLL,
                    timeout,
                );
            }
            if let Some(p) = status.progress.as_mut() {
                p.step = STEP_READY.into();
            }
        }

        // Landscaper always writes the export Secret of a helm item (possibly `{}`).
        ctx.checkpoint(CP_BEFORE_EXPORTS)?;
        let mut values = status
            .progress
            .as_ref()
            .and_then(|p| p.value_exports.clone())
            .unwrap_or_else(|| Value::Object(Map::new()));
        let from_resources = config.as_spec(Vec::new()).exports;
        if !from_resources.is_empty() {
            match exports::read_all(ctx, &from_resources)? {
                Ok(found) => strategies::deep_merge(&mut values, &found),
                Err(pending) => {
                    let timeout = pending.timeout().with_operation("Export");
                    return waiting(
                        ctx,
                        &status,
                        "WaitingForExports",
                        pending.why,
                        POLL,
                        timeout,
                    );
                }
            }
        }
        if let Some(p) = status.progress.as_mut() {
            p.step = STEP_DONE.into();
            p.value_exports = None;
        }
        Ok(Response {
            phase: Some(phase::SUCCEEDED),
            provider_status: Some(status.to_json()),
            exports: Some(values),
            ..Default::default()
        })
    }

    fn delete(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        ctx.checkpoint(CP_START_DELETE)?;
        let previous = inv
            .previous_provider_status
            .as_ref()
            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()));
        // Never deployed: nothing to uninstall (contract 7.4).
        if previous.is_none() {
            return Ok(Response::default());
        }
        let mut status = ProviderStatus::from_previous(previous)?;
        let config = match inv.provider_config_raw() {
            Some(raw) => Some(config::parse(raw)?),
            None => None,
        };
        ctx.checkpoint(CP_DELETING)?;
        let helm_deployment = config.as_ref().is_none_or(|c| c.helm_deployment);
        if !helm_deployment {
            inv.require_kubernetes_target("helm deployer", "delete")?;
            let (item_name, _) = inv.name_and_job();
            return template::delete_step(ctx, &item_name, config.as_ref(), &mut status);
        }
        // The release this item installed (its status), else the configured one.
        let (name, namespace) = match (&status.release, &config) {
            (Some(r), _) => (r.name.clone(), r.namespace.clone()),
            (None, Some(c)) => (c.name.clone(), c.namespace.clone()),
            (None, None) => return Ok(Response::default()),
        };
        inv.require_kubernetes_target("helm deployer", "delete")?;
        let wait = config.as_ref().is_some_and(|c| c.deployment.uninstall.wait);
        // `uninstall.timeout` bounds the uninstall (its hooks and `wait`); without it, the
        // item's remaining progressing time does (Landscaper's timeout).
        let timeout = config.as_ref().and_then(|c| c.deployment.uninstall.timeout);
        let mut progress = status.progress.clone().unwrap_or_default();
        if progress.step != "delete" {
            progress = Progress {
                step: "delete".into(),
                ..Default::default()
            };
        }
        let mut state: actions::ActionState =
            serde_json::from_value(progress.action.clone()).unwrap_or_default();
        let outcome =
            actions::uninstall_with_timeout(ctx, &name, &namespace, wait, timeout, &mut state);
        progress.action = serde_json::to_value(&state).unwrap_or_default();
        let fail = |e: DeployerError| DeployerError {
            operation: "DeleteHelmRelease".into(),
            reason: "Uninstall".into(),
            message: format!("uninstalling release {namespace}/{name}: {}", e.message),
            ..e
        };
        match outcome.map_err(fail)? {
            actions::Outcome::Pending {
                retry_after,
                message,
            } => {
                status.progress = Some(progress);
                let timeout = fail(DeployerError::progressing_timeout(CP_DELETING));
                let mut r = waiting(ctx, &status, "Uninstalling", message, retry_after, timeout)?;
                r.phase = Some(phase::DELETING);
                Ok(r)
            }
            actions::Outcome::Done(_) => Ok(Response {
                provider_status: Some(
                    ProviderStatus {
                        managed_resources: Vec::new(),
                        release: None,
                        progress: None,
                    }
                    .to_json(),
                ),
                ..Default::default()
            }),
        }
    }
}

export_deployer!(HelmDeployer);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_workload_kinds_of_a_release_are_managed_resources() {
        let manifest = "---\n# Source: c/templates/a.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n---\n# Source: c/templates/b.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: other\n";
        let w = workloads(manifest, "apps");
        let got: Vec<_> = w
            .iter()
            .map(|m| {
                format!(
                    "{} {}/{}",
                    m.resource.kind, m.resource.namespace, m.resource.name
                )
            })
            .collect();
        assert_eq!(got, ["Deployment apps/web", "Pod other/p"]);
        assert!(w.iter().all(|m| m.resource.uid.is_empty()));
    }

    #[test]
    fn uninstall_timeout_bounds_the_uninstall() {
        use actions::fake::FakeCluster;
        let cluster = FakeCluster::new();
        let ctx = Ctx::native(&cluster);
        cluster.set_remaining(Some(Duration::from_secs(600)));
        // A release with a pre-delete Job hook that never completes (no controller runs it).
        let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: cleanup\n  annotations:\n    helm.sh/hook: pre-delete\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n";
        let chart = helm_engine::Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: c\nversion: 1.0.0\n".to_vec(),
            ),
            ("templates/job.yaml".into(), job.as_bytes().to_vec()),
        ])
        .unwrap();
        let mut state = actions::ActionState::default();
        let request = actions::Request {
            release_name: "web",
            namespace: "apps",
            chart: &chart,
            values: &json!({}),
            install: actions::Flags::default(),
            upgrade: actions::Flags::default(),
        };
        actions::install_or_upgrade(&ctx, &request, &mut state).unwrap();
        let invocation = |timeout: &str| {
            let mut inv = Invocation::for_item(json!({
                "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"type": TYPE, "config": {
                    "apiVersion": config::API_VERSION, "kind": "ProviderConfiguration",
                    "name": "web", "namespace": "apps", "chart": {"archive": {"raw": "x"}},
                    "helmDeploymentConfig": {"uninstall": {"timeout": timeout}},
                }},
            }));
            inv.target = Some(
                serde_json::from_value(json!({"target": {
                    "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
                    "metadata": {"name": "t", "namespace": "default"},
                    "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster"}},
                    "content": ""}))
                .unwrap(),
            );
            inv
        };
        let mut previous = json!({
            "apiVersion": config::API_VERSION, "kind": "ProviderStatus",
            "release": {"name": "web", "namespace": "apps", "revision": 1, "chart": "c-1.0.0"},
        });
        // The hook runs: the uninstall waits for it.
        let mut inv = invocation("30s");
        inv.previous_provider_status = Some(previous.clone());
        let r = HelmDeployer::delete(&ctx, inv).unwrap();
        assert!(r.retry_after.is_some(), "{r:?}");
        previous = r.provider_status.unwrap();
        // Past `uninstall.timeout` (not the item's ten minutes): the uninstall fails.
        cluster.advance(Duration::from_secs(31));
        let mut inv = invocation("30s");
        inv.previous_provider_status = Some(previous);
        let e = HelmDeployer::delete(&ctx, inv).unwrap_err();
        assert!(
            e.message.contains("timed out waiting for the condition")
                && e.message.contains("cleanup"),
            "{}",
            e.message
        );
        assert!(e.has_code(sdk_guest::codes::TIMEOUT), "{e:?}");
        assert_eq!(e.operation, "DeleteHelmRelease");
    }

    #[test]
    fn value_exports_read_the_merged_values() {
        let chart = helm_engine::Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: c\nversion: 1.2.3\n".to_vec(),
            ),
            (
                "values.yaml".into(),
                b"image:\n  repository: nginx\n  tag: '1.0'\nreplicas: 1\n".to_vec(),
            ),
        ])
        .unwrap();
        let config = config::parse(&json!({
            "apiVersion": config::API_VERSION, "kind": "ProviderConfiguration",
            "name": "web", "namespace": "apps", "chart": {"archive": {"raw": "x"}},
            "values": {"image": {"tag": "2.0"}},
            "exports": {"exports": [
                {"key": "image.tag", "jsonPath": ".Values.image.tag"},
                {"key": "repo", "jsonPath": ".Values.image.repository"},
                {"key": "chart", "jsonPath": ".Chart.Version"},
                {"key": "chartName", "jsonPath": ".Chart.name"},
                {"key": "appVersion", "jsonPath": ".Chart.AppVersion"},
                {"key": "release.ns", "jsonPath": ".Release.Namespace"},
                {"key": "release.install", "jsonPath": ".Release.IsInstall"},
                {"key": "release.revision", "jsonPath": ".Release.Revision"},
                {"key": "release.service", "jsonPath": ".Release.Service"},
                {"key": "kube", "jsonPath": ".Capabilities.KubeVersion.Major"},
            ]},
        }))
        .unwrap();
        let out = value_exports(&config, &chart).unwrap();
        assert_eq!(
            out,
            json!({"image": {"tag": "2.0"}, "repo": "nginx", "chart": "1.2.3",
                   "chartName": "c", "appVersion": "",
                   "release": {"ns": "apps", "install": true, "revision": 0, "service": "Helm"},
                   "kube": "1"})
        );
        let whole = config::parse(&json!({
            "apiVersion": config::API_VERSION, "kind": "ProviderConfiguration",
            "name": "web", "namespace": "apps", "chart": {"archive": {"raw": "x"}},
            "exports": {"exports": [{"key": "apis", "jsonPath": ".Capabilities.APIVersions"}]},
        }))
        .unwrap();
        let apis = value_exports(&whole, &chart).unwrap();
        assert!(
            apis["apis"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("apps/v1"))),
            "{apis}"
        );
        let missing = config::parse(&json!({
            "apiVersion": config::API_VERSION, "kind": "ProviderConfiguration",
            "name": "web", "namespace": "apps", "chart": {"archive": {"raw": "x"}},
            "exports": {"exports": [{"key": "x", "jsonPath": ".Values.nope"}]},
        }))
        .unwrap();
        let e = value_exports(&missing, &chart).unwrap_err();
        assert!(e.message.contains(".Values.nope"), "{}", e.message);
    }
}
