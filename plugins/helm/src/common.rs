//! What release mode (`lib.rs`) and template mode (`template.rs`) share: the deployer's names
//! (type, labels, applier options, checkpoints), its timings and step names, waiting and
//! failed-attempt answers, the values and exports a chart sees.
//!
//! Owns: these constants and helpers. Must not touch: either mode's flow (both stand on this).

use std::time::Duration;

use crate::config::{Config, Progress, ProviderStatus};
use manifest_applier::spec::{ManagedResource, ObjectReference};
use manifest_applier::{Options, jsonpath::JsonPath, strategies, wait};
use sdk_guest::{Ctx, DeployerError, Invocation, Response, phase};
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
    config_operation: crate::config::INIT_OPERATION,
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
pub(crate) const POLL: Duration = Duration::from_secs(1);
/// Delay before reporting a failure persisted with phase `Progressing`.
pub(crate) const PERSIST_FIRST: Duration = Duration::from_millis(50);
/// A retried failure with less progressing time left than this ends the job with
/// `ERR_TIMEOUT` and the failure itself: the host's next attempt (its requeue interval,
/// Landscaper's 5 s) would only meet the timeout at its start checkpoint.
pub(crate) const LAST_ATTEMPT: Duration = Duration::from_secs(5);
pub(crate) const STEP_RELEASE: &str = "release";
pub(crate) const STEP_APPLIED: &str = "applied";
pub(crate) const STEP_READY: &str = "ready";
pub(crate) const STEP_DONE: &str = "done";

/// The workload kinds whose objects a release's `managedResources` lists (contract 7.3).
pub(crate) const WORKLOAD_KINDS: [(&str, &str); 6] = [
    ("", "Pod"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("", "ReplicationController"),
];

/// "Not yet, call again after `after`" (capped before the progressing timeout), or `timeout`
/// once no time is left (`manifest_applier::wait::not_yet`).
pub(crate) fn waiting(
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
pub(crate) fn failed_attempt(
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
pub(crate) fn unreported_failure(
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
pub(crate) fn render_values(chart: &helm_engine::Chart, user: &Value) -> Value {
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
pub(crate) fn chart_root(md: &helm_engine::chart::Metadata) -> Value {
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
    let set = crate::release::metadata_json(md);
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
pub(crate) fn capabilities_root() -> Value {
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
pub(crate) fn value_exports(
    config: &Config,
    chart: &helm_engine::Chart,
) -> Result<Value, DeployerError> {
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
pub(crate) fn nest(key: &str, value: Value) -> Value {
    key.rsplit('.').fold(value, |inner, part| {
        let mut m = Map::new();
        m.insert(part.to_string(), inner);
        Value::Object(m)
    })
}

/// The workload objects of a release manifest (contract 7.3: entries carry only `resource`).
pub(crate) fn workloads(manifest: &str, namespace: &str) -> Vec<ManagedResource> {
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
