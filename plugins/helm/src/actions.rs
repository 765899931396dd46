//! Helm's install, upgrade, rollback and uninstall (Helm 3's `pkg/action`, as Landscaper
//! drives it), **resumable**: no call blocks for long. Every function does what it can and
//! answers [`Outcome::Pending`] ("not yet, call me again after D") while a hook Job runs or a
//! resource is not ready; the caller keeps the [`ActionState`] and calls again.
//!
//! # How the caller uses it
//!
//! ```text
//! let mut state: ActionState = <from providerStatus, or default for a new job>;
//! match install_or_upgrade(ctx, &request, &mut state) {
//!     Ok(Outcome::Done(release))      => state is idle again; release is `deployed`
//!     Ok(Outcome::Pending{retry_after, message}) => persist `state` (providerStatus), answer retry_after
//!     Err(e)                          => the action is over (state idle); report e
//! }
//! ```
//! * Persist `state` after **every** call (it is serde, camelCase) and pass it back unchanged
//!   on the next call of the same job. While it is not idle, calls resume that action,
//!   whatever the request says (its chart and values live in the pending release). When a
//!   new job starts while the state of the previous one is not idle, call [`abandon`] with
//!   it first (its pending record becomes `failed`); a fresh state alone would meet that
//!   record as "another operation (install/upgrade/rollback) is in progress" once (and then
//!   delete it, as Landscaper does).
//! * `Err` always leaves the state idle. Errors carry Landscaper's operation
//!   (`InstallHelmRelease`, `UpgradeHelmRelease`, `RollbackHelmRelease`, `DeleteHelmRelease`)
//!   and reason (`Install`, `Update`, `Rollback`, `Uninstall`). Chart, values and schema
//!   problems and a release living in another namespace are `ERR_CONFIGURATION_PROBLEM`
//!   (final); a failed release (objects that cannot be built or applied, ownership, hooks,
//!   atomic recovery) is retried, as Landscaper retries it until the progressing timeout
//!   (a failed revision per attempt, history capped); a wait that ran out of time is
//!   `ERR_TIMEOUT`. The conflict/hook failures Landscaper marks also get `ERR_FOR_INFO_ONLY`.
//! * Transient Kubernetes errors in the middle of an action (conflicts, unavailable API,
//!   kinds not served yet) are answered `Pending` with the error as message, until the
//!   action's deadline; permanent ones (`Invalid`, `BadRequest`, `Forbidden`, …) fail the
//!   release.
//!
//! # Durable state
//!
//! The release Secret is the durable state: an action renders **once**, stores manifest and
//! hooks in the pending release (`pending-install`, `pending-upgrade`, `pending-rollback`;
//! `uninstalling` for uninstall) and, on resume, reads that revision back — it never
//! re-renders mid-action (charts use `randAlphaNum`, `genCA`, …). [`ActionState`] only says
//! which revision, which stage (`hooks <event> #i`, `apply`, `wait`, `delete`, `waitDeleted`,
//! `finalize`), when the action started and its deadline. Every stage is idempotent, so a
//! call whose state was not persisted is simply repeated. A pending latest revision that is
//! not the one in the state belongs to someone else: "another operation
//! (install/upgrade/rollback) is in progress", and, as Landscaper does, that pending record
//! is deleted so that the next attempt is not blocked.
//!
//! # Semantics (Helm 3)
//!
//! * Install when there is no release, or only failed installs / an uninstalled release
//!   (revision last+1); otherwise upgrade (revision last+1). A release of that name stored in
//!   another namespace only is refused.
//! * Install: chart CRDs (`crds/`) are created if absent and never updated; `createNamespace`;
//!   the ownership check ("rendered manifests contain a resource that already exists. Unable
//!   to continue with install: …", skipped with `take_ownership`); `pre-install` hooks; apply;
//!   wait; `post-install` hooks; `deployed` "Install complete".
//! * Upgrade: the ownership check for objects new to the release; `pre-upgrade` hooks; apply;
//!   objects of the replaced release that are gone from the new manifest are deleted unless
//!   the live object says `helm.sh/resource-policy: keep`; wait; `post-upgrade` hooks; the
//!   replaced revision becomes `superseded`, the new one `deployed` "Upgrade complete";
//!   history is capped at `max_history` (Helm's `MaxHistory`, pruned before each new record,
//!   never the deployed revision). Empty values on upgrade reuse the previous release's
//!   values, as Helm does.
//! * Hooks run per event ordered by weight, then name; delete policies
//!   `before-hook-creation` (the default when none is given), `hook-succeeded` (after all
//!   hooks of the event succeeded, in reverse order), `hook-failed`. A Job hook is done when
//!   it completed (condition `Complete` or `status.succeeded ≥ 1`; condition `Failed` fails
//!   it), a Pod hook at phase `Succeeded` (`Failed` fails it), anything else once created.
//!   `last_run` is recorded in the release.
//! * `wait` (implied by `atomic`): every resource of the release must exist and be ready
//!   ([`manifest_applier::readiness::object_ready`]).
//! * Deadline: `timeout` (Helm's `--timeout`) counted from the action's start, else the
//!   item's remaining progressing time at the start (Landscaper's behaviour); past it, a wait
//!   fails the release ("timed out waiting for the condition: …").
//! * Failure: the release becomes `failed` with Helm's description (`Release "x" failed: …`
//!   for install, `Upgrade "x" failed: …` for upgrade). With `atomic`, an install is
//!   uninstalled ("release x failed, and has been uninstalled due to atomic being set: …")
//!   and an upgrade rolled back to the last `deployed`/`superseded` revision as a new
//!   revision "Rollback to N" ("release x failed, and has been rolled back due to atomic
//!   being set: …"); the recovery is itself resumable, with a fresh deadline of the same
//!   length.
//! * Uninstall: latest revision `uninstalling`; `pre-delete` hooks; the resources of its
//!   manifest are deleted in Helm's `UninstallOrder` except those whose manifest says
//!   `helm.sh/resource-policy: keep`; optionally wait until they are gone; `post-delete`
//!   hooks; every release Secret is deleted (`KeepHistory=false`). No release: done.
//! * Rollback: the target revision's manifest, hooks, chart and values as a new revision
//!   "Rollback to N" (`pre-rollback`/`post-rollback` hooks; objects not in the target are
//!   deleted); every other `deployed` revision becomes `superseded`.
//!
//! # Applying
//!
//! Resources are applied with **server-side apply** (field manager `helm`, conflicts
//! forced), as Helm 4 does. The release records no `apply_method` (as Helm 3 writes it), so a
//! real Helm 4 that upgrades it uses client-side apply and never meets a field-manager
//! conflict with us (`tests/helm_deployer.rs` does exactly that). Applying is idempotent (a repeated stage after a lost state changes nothing), it creates
//! or updates in one request, fields other controllers own (`spec.replicas` under an HPA,
//! `spec.clusterIP`, …) are left alone, and fields dropped from the chart are removed because
//! the manager no longer applies them — the effect of Helm 3's three-way merge without
//! needing the previous manifest. With `force` (Helm's `--force`) an existing object is
//! replaced (`PUT`) instead. Every object gets Helm's ownership metadata (label
//! `app.kubernetes.io/managed-by: Helm`, annotations `meta.helm.sh/release-name`,
//! `meta.helm.sh/release-namespace`), so real Helm accepts it as its own; namespaced objects
//! without a namespace get the release namespace (discovery says which kinds are namespaced).
//!
//! Owns: running Helm actions against the Target through [`Ctx`]. Must not touch: the
//! DeployItem, its providerStatus (the caller persists [`ActionState`]), chart loading.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use helm_engine::{Chart, RenderOptions, render};
use manifest_applier::readiness::object_ready;
use sdk_guest::{Ctx, DeployerError, ObjectRef, PatchType, codes};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::release::{self, HookExecution, Info, Release, Status, Storage, go_time};

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

/// Helm's ownership label.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGED_BY_HELM: &str = "Helm";
/// Helm's release-name annotation.
pub const RELEASE_NAME_ANNOTATION: &str = "meta.helm.sh/release-name";
/// Helm's release-namespace annotation.
pub const RELEASE_NAMESPACE_ANNOTATION: &str = "meta.helm.sh/release-namespace";
/// `helm.sh/resource-policy` (`keep` protects an object from deletion).
pub const RESOURCE_POLICY_ANNOTATION: &str = "helm.sh/resource-policy";
/// Field manager of server-side apply (Helm's).
pub const FIELD_MANAGER: &str = "helm";
/// Landscaper's `MaxHistory`.
pub const DEFAULT_MAX_HISTORY: usize = 10;
/// Helm's "another operation is in progress" (`errPending`).
pub const ERR_PENDING: &str = "another operation (install/upgrade/rollback) is in progress";

/// Delay before polling again while something is not ready.
pub const POLL: Duration = Duration::from_secs(5);
/// Delay before retrying after a transient Kubernetes error.
pub const RETRY: Duration = Duration::from_secs(10);

/// Helm's `UninstallOrder`.
pub const UNINSTALL_ORDER: &[&str] = &[
    "APIService",
    "Ingress",
    "IngressClass",
    "Service",
    "CronJob",
    "Job",
    "StatefulSet",
    "HorizontalPodAutoscaler",
    "Deployment",
    "ReplicaSet",
    "ReplicationController",
    "Pod",
    "DaemonSet",
    "RoleBindingList",
    "RoleBinding",
    "RoleList",
    "Role",
    "ClusterRoleBindingList",
    "ClusterRoleBinding",
    "ClusterRoleList",
    "ClusterRole",
    "CustomResourceDefinition",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "ConfigMap",
    "SecretList",
    "Secret",
    "ServiceAccount",
    "PodDisruptionBudget",
    "PodSecurityPolicy",
    "LimitRange",
    "ResourceQuota",
    "NetworkPolicy",
    "Namespace",
    "PriorityClass",
];

/// Flags of one Helm action (Landscaper's `helmDeploymentConfig.install|upgrade|uninstall`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    /// Uninstall (install) or roll back (upgrade) on failure; implies `wait`.
    pub atomic: bool,
    /// Wait until every resource is ready before the release is `deployed`.
    pub wait: bool,
    /// Replace (`PUT`) existing objects instead of server-side apply.
    pub force: bool,
    /// Adopt existing objects whatever their ownership metadata says.
    pub take_ownership: bool,
    /// Skip `values.schema.json`.
    pub skip_schema_validation: bool,
    /// Helm's `--timeout`; `None`: the item's remaining progressing time.
    pub timeout: Option<Duration>,
    /// `--create-namespace` (install only).
    pub create_namespace: bool,
    /// Helm's `MaxHistory` (revisions kept, Landscaper: 10); 0 keeps everything.
    pub max_history: usize,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            atomic: false,
            wait: false,
            force: false,
            take_ownership: false,
            skip_schema_validation: false,
            timeout: None,
            create_namespace: false,
            max_history: DEFAULT_MAX_HISTORY,
        }
    }
}

/// What to install or upgrade.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// Release name.
    pub release_name: &'a str,
    /// Release namespace (also where the release Secrets live).
    pub namespace: &'a str,
    /// The chart.
    pub chart: &'a Chart,
    /// User values (stored as the release's `config`); `null` or `{}` for none.
    pub values: &'a Value,
    /// Flags used when this turns out to be an install.
    pub install: Flags,
    /// Flags used when this turns out to be an upgrade.
    pub upgrade: Flags,
}

/// The answer of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// The action is complete.
    Done(T),
    /// Not yet: persist the [`ActionState`] and call again after `retry_after`.
    Pending {
        /// When to call again.
        retry_after: Duration,
        /// What is awaited.
        message: String,
    },
}

/// The Helm action in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// `helm install`
    Install,
    /// `helm upgrade`
    Upgrade,
    /// `helm rollback`
    Rollback,
    /// `helm uninstall`
    Uninstall,
}

impl Action {
    fn pre_event(self) -> &'static str {
        match self {
            Action::Install => "pre-install",
            Action::Upgrade => "pre-upgrade",
            Action::Rollback => "pre-rollback",
            Action::Uninstall => "pre-delete",
        }
    }

    fn post_event(self) -> &'static str {
        match self {
            Action::Install => "post-install",
            Action::Upgrade => "post-upgrade",
            Action::Rollback => "post-rollback",
            Action::Uninstall => "post-delete",
        }
    }

    fn pending_status(self) -> Status {
        match self {
            Action::Install => Status::PendingInstall,
            Action::Upgrade => Status::PendingUpgrade,
            Action::Rollback => Status::PendingRollback,
            Action::Uninstall => Status::Uninstalling,
        }
    }

    /// Landscaper's operation and reason of errors of this action.
    fn operation(self) -> (&'static str, &'static str) {
        match self {
            Action::Install => ("InstallHelmRelease", "Install"),
            Action::Upgrade => ("UpgradeHelmRelease", "Update"),
            Action::Rollback => ("RollbackHelmRelease", "Rollback"),
            Action::Uninstall => ("DeleteHelmRelease", "Uninstall"),
        }
    }
}

/// Where an action is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "camelCase")]
pub enum Stage {
    /// Running the hooks of `event`: `next` is the index (in execution order) of the hook
    /// being run; `running` once it was created.
    Hooks {
        /// `pre-install`, `post-upgrade`, …
        event: String,
        /// Index of the current hook.
        next: usize,
        /// The current hook was created and is awaited.
        #[serde(default)]
        running: bool,
    },
    /// Applying the release's resources (and deleting those of the replaced release).
    Apply,
    /// Waiting for readiness.
    Wait,
    /// Uninstall: deleting the resources.
    Delete,
    /// Uninstall: waiting until they are gone.
    WaitDeleted,
    /// Recording the outcome.
    Finalize,
}

/// What an atomic action recovers from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recovery {
    /// The action that failed (`install` → uninstall, `upgrade` → rollback).
    pub failed: Action,
    /// Its cause.
    pub cause: String,
    /// The failed revision.
    pub failed_revision: i64,
}

/// An action in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Running {
    /// Which action.
    pub action: Action,
    /// Release name.
    pub release: String,
    /// Release namespace.
    pub namespace: String,
    /// The revision this action drives (the pending one; uninstall: the latest).
    pub revision: i64,
    /// Upgrade/rollback: the revision being replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<i64>,
    /// Stage.
    pub stage: Stage,
    /// Start (Unix milliseconds).
    pub started_at: u64,
    /// Deadline (Unix milliseconds), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
    /// Wait for readiness (uninstall: for deletion).
    #[serde(default)]
    pub wait: bool,
    /// Atomic.
    #[serde(default)]
    pub atomic: bool,
    /// Replace instead of apply.
    #[serde(default)]
    pub force: bool,
    /// `MaxHistory` (for an atomic rollback's new revision).
    #[serde(default)]
    pub max_history: usize,
    /// Description of the final record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Set while an atomic action recovers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovering: Option<Recovery>,
}

/// The resumable state of the caller's Helm action; persist it after every call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionState {
    /// The action in flight; `None` when idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<Running>,
}

impl ActionState {
    /// No action in flight.
    pub fn is_idle(&self) -> bool {
        self.running.is_none()
    }
}

// ---------------------------------------------------------------------------------------------
// Errors

/// A failed action. The release is marked `failed` (or recovered by `atomic`) and the error is
/// **retried**, as Landscaper retries it (its install/upgrade errors carry no unrecoverable
/// code): a CRD or webhook not ready yet, a quota, an object of someone else, a hook that
/// failed — the next attempt (a new revision, history capped by `MaxHistory`) may succeed,
/// until the item's progressing timeout ends the job. A wait or hook that ran out of time
/// (`timed out waiting for the condition`) is `ERR_TIMEOUT`: the action's deadline is the
/// remaining progressing time (or the configured `timeout`). The conflict/hook failures
/// Landscaper marks get `ERR_FOR_INFO_ONLY`.
fn action_error(action: Action, message: String) -> DeployerError {
    let (op, reason) = action.operation();
    let mut e = DeployerError::retryable(reason, message).with_operation(op);
    if e.message.contains("timed out waiting for the condition") {
        e = e.with_code(codes::TIMEOUT);
    }
    const INFO_ONLY: [&str; 5] = [
        "rendered manifests contain a resource that already exists",
        "pre-upgrade hooks failed",
        "The order in patch list",
        "YAML parse error on",
        ERR_PENDING,
    ];
    if INFO_ONLY.iter().any(|p| e.message.contains(p)) {
        e = e.with_code(codes::FOR_INFO_ONLY);
    }
    e
}

fn config_error(action: Action, reason: &str, message: String) -> DeployerError {
    DeployerError::configuration(reason, message).with_operation(action.operation().0)
}

/// Kubernetes errors that will not heal by retrying the same request.
fn permanent(e: &DeployerError) -> bool {
    e.is_unrecoverable()
        || matches!(
            e.reason.as_str(),
            "Invalid"
                | "BadRequest"
                | "Forbidden"
                | "Unauthorized"
                | "MethodNotAllowed"
                | "UnsupportedMediaType"
                | "RequestEntityTooLarge"
                | "NotAcceptable"
                | "UnprocessableEntity"
        )
}

// ---------------------------------------------------------------------------------------------
// Manifests and objects

/// Sets `protocol: TCP` (the API server's own default) on every port of a Service and of the
/// containers of a Pod, a pod template or a CronJob's job template that omits it. Kubernetes
/// before 1.21 refuses server-side apply of such a port ("associative list with keys has an
/// element that omits key field \"protocol\"": `protocol` is part of the list key there but
/// is not defaulted), and charts rarely spell it out.
pub fn default_port_protocols(object: &mut Value) {
    fn ports(list: Option<&mut Value>) {
        for port in list.and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(p) = port.as_object_mut()
                && !p.contains_key("protocol")
            {
                p.insert("protocol".into(), "TCP".into());
            }
        }
    }
    fn pod_spec(spec: Option<&mut Value>) {
        let Some(spec) = spec else { return };
        for key in ["containers", "initContainers"] {
            for c in spec
                .get_mut(key)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                ports(c.get_mut("ports"));
            }
        }
    }
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    match kind.as_str() {
        "Service" => ports(object.pointer_mut("/spec/ports")),
        "Pod" => pod_spec(object.get_mut("spec")),
        "CronJob" => pod_spec(object.pointer_mut("/spec/jobTemplate/spec/template/spec")),
        _ => pod_spec(object.pointer_mut("/spec/template/spec")),
    }
}

/// The documents of a YAML stream as Kubernetes' `yaml.YAMLReader` (under client-go's
/// `resource.Builder`, which Helm's `KubeClient.Build` uses, and Landscaper's
/// `YAMLOrJSONDecoder`) cuts them: at every line that starts with `---` (followed by nothing
/// but blanks or a comment), each document keeping all of its lines with their line breaks.
/// So a block scalar that ends a document keeps its final newline, as Helm's install applies
/// it (`releaseutil.SplitManifests` only decides how the release manifest is laid out).
pub fn yaml_documents(stream: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut doc = String::new();
    for line in stream.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("---") {
            let rest = rest.trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                return Err(format!("invalid Yaml document separator: {rest}"));
            }
            if !doc.is_empty() {
                out.push(std::mem::take(&mut doc));
            }
            continue;
        }
        doc.push_str(line);
    }
    if !doc.is_empty() {
        out.push(doc);
    }
    Ok(out)
}

/// The objects of a manifest stream (documents as [`yaml_documents`] cuts them, empty and
/// comments-only documents skipped, `List`s expanded), as JSON.
pub fn parse_manifest(manifest: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for doc in yaml_documents(manifest)? {
        let parsed = helm_engine::yaml::parse(&doc).map_err(|e| e.0)?;
        if matches!(parsed, helm_engine::value::Value::Nil) {
            continue;
        }
        let v = helm_engine::json::to_serde(&parsed);
        if !v.is_object() {
            return Err(format!("a document is not an object: {v}"));
        }
        let kind = v["kind"].as_str().unwrap_or_default();
        match v.get("items").and_then(Value::as_array) {
            Some(items) if kind.ends_with("List") => out.extend(items.iter().cloned()),
            _ => out.push(v),
        }
    }
    Ok(out)
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// One object of a release, resolved against discovery.
#[derive(Debug, Clone)]
struct Obj {
    value: Value,
    r: ObjectRef,
}

impl Obj {
    /// Helm's identity: group, kind, namespace, name.
    fn key(&self) -> (String, String, String, String) {
        (
            group_of(&self.r.api_version).to_string(),
            self.r.kind.clone(),
            self.r.namespace.clone().unwrap_or_default(),
            self.r.name.clone(),
        )
    }

    /// `Kind "name" in namespace "ns"` (Helm's `resourceString`).
    fn describe(&self) -> String {
        format!(
            "{} {:?} in namespace {:?}",
            self.r.kind,
            self.r.name,
            self.r.namespace.as_deref().unwrap_or("")
        )
    }

    fn short(&self) -> String {
        match &self.r.namespace {
            Some(ns) => format!("{} {ns}/{}", self.r.kind, self.r.name),
            None => format!("{} {}", self.r.kind, self.r.name),
        }
    }
}

fn annotation<'v>(o: &'v Value, key: &str) -> Option<&'v str> {
    o.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn keep_policy(o: &Value) -> bool {
    annotation(o, RESOURCE_POLICY_ANNOTATION).is_some_and(|p| p.trim().eq_ignore_ascii_case("keep"))
}

fn set_string(o: &mut Value, section: &str, key: &str, value: &str) {
    let meta = &mut o["metadata"];
    if !meta[section].is_object() {
        meta[section] = json!({});
    }
    meta[section][key] = Value::String(value.into());
}

/// Helm's `checkOwnership`.
fn check_ownership(live: &Value, release: &str, namespace: &str) -> Result<(), String> {
    let label = live
        .pointer("/metadata/labels")
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .and_then(Value::as_str);
    let require = |actual: Option<&str>, key: &str, want: &str| match actual {
        None => Some(format!("missing key {key:?}: must be set to {want:?}")),
        Some(a) if a != want => Some(format!(
            "key {key:?} must equal {want:?}: current value is {a:?}"
        )),
        Some(_) => None,
    };
    let mut errs = Vec::new();
    if let Some(e) = require(label, MANAGED_BY_LABEL, MANAGED_BY_HELM) {
        errs.push(format!("label validation error: {e}"));
    }
    if let Some(e) = require(
        annotation(live, RELEASE_NAME_ANNOTATION),
        RELEASE_NAME_ANNOTATION,
        release,
    ) {
        errs.push(format!("annotation validation error: {e}"));
    }
    if let Some(e) = require(
        annotation(live, RELEASE_NAMESPACE_ANNOTATION),
        RELEASE_NAMESPACE_ANNOTATION,
        namespace,
    ) {
        errs.push(format!("annotation validation error: {e}"));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(format!("invalid ownership metadata; {}", errs.join("; ")))
    }
}

/// Discovery, cached for one call.
#[derive(Default)]
struct Discovery {
    namespaced: HashMap<(String, String), Option<bool>>,
}

/// Why a manifest could not be turned into objects.
enum BuildError {
    /// A Kubernetes call failed.
    Kube(DeployerError),
    /// The manifest is not valid or names a kind the cluster does not serve.
    Invalid(String),
}

impl From<DeployerError> for BuildError {
    fn from(e: DeployerError) -> Self {
        BuildError::Kube(e)
    }
}

impl Discovery {
    fn namespaced(
        &mut self,
        ctx: &Ctx,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<bool>, DeployerError> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(v) = self.namespaced.get(&key) {
            return Ok(*v);
        }
        let v = ctx.kube_discover(api_version, kind)?.map(|i| i.namespaced);
        self.namespaced.insert(key, v);
        Ok(v)
    }

    /// Helm's `KubeClient.Build`: objects with their namespace defaulted; with `owner`, Helm's
    /// ownership metadata set. `lenient` skips objects of kinds the cluster does not serve.
    fn build(
        &mut self,
        ctx: &Ctx,
        manifest: &str,
        namespace: &str,
        owner: Option<(&str, &str)>,
        lenient: bool,
    ) -> Result<Vec<Obj>, BuildError> {
        let docs = parse_manifest(manifest).map_err(BuildError::Invalid)?;
        let mut out = Vec::new();
        for mut v in docs {
            let api_version = v["apiVersion"].as_str().unwrap_or_default().to_string();
            let kind = v["kind"].as_str().unwrap_or_default().to_string();
            let name = v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if api_version.is_empty() || kind.is_empty() {
                if lenient {
                    continue;
                }
                return Err(BuildError::Invalid(format!(
                    "error validating data: apiVersion and kind must be set (object {name:?})"
                )));
            }
            let Some(namespaced) = self.namespaced(ctx, &api_version, &kind)? else {
                if lenient {
                    ctx.warn(&format!(
                        "skipping {kind} {name}: the cluster does not serve {api_version}"
                    ));
                    continue;
                }
                let ns = v
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let version = api_version.rsplit('/').next().unwrap_or_default();
                return Err(BuildError::Invalid(format!(
                    "resource mapping not found for name: {name:?} namespace: {ns:?} from \"\": no matches for kind {kind:?} in version {:?}\nensure CRDs are installed first",
                    if group_of(&api_version).is_empty() {
                        version.to_string()
                    } else {
                        api_version.clone()
                    }
                )));
            };
            let ns = if namespaced {
                let ns = v
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .unwrap_or(namespace)
                    .to_string();
                v["metadata"]["namespace"] = Value::String(ns.clone());
                Some(ns)
            } else {
                if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("namespace");
                }
                None
            };
            if let Some((release, release_ns)) = owner {
                set_string(&mut v, "labels", MANAGED_BY_LABEL, MANAGED_BY_HELM);
                set_string(&mut v, "annotations", RELEASE_NAME_ANNOTATION, release);
                set_string(
                    &mut v,
                    "annotations",
                    RELEASE_NAMESPACE_ANNOTATION,
                    release_ns,
                );
            }
            out.push(Obj {
                r: ObjectRef {
                    api_version,
                    kind,
                    namespace: ns,
                    name,
                },
                value: v,
            });
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Starting actions

fn now(ctx: &Ctx) -> String {
    go_time(ctx.now_unix_millis())
}

fn is_empty_values(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

fn deadline(ctx: &Ctx, timeout: Option<Duration>) -> Option<u64> {
    let start = ctx.now_unix_millis();
    timeout
        .or_else(|| ctx.remaining())
        .map(|d| start.saturating_add(d.as_millis() as u64))
}

/// What to do with the action in the state.
enum Resume {
    /// It is ours and still pending: drive it.
    Drive,
    /// Nothing (left) to resume: start afresh.
    Fresh,
    /// Could not tell (a transient error): call again.
    Retry(String),
}

/// Is the action in `state` (if `kind_ok` accepts it) one on this release whose record is
/// still in its pending state? A stale one is dropped.
fn resume(
    ctx: &Ctx,
    state: &mut ActionState,
    name: &str,
    namespace: &str,
    kind_ok: impl Fn(&Running) -> bool,
) -> Result<Resume, DeployerError> {
    let Some(run) = &state.running else {
        return Ok(Resume::Fresh);
    };
    if !kind_ok(run) || run.release != name || run.namespace != namespace {
        state.running = None;
        return Ok(Resume::Fresh);
    }
    match Storage::new(namespace).get(ctx, name, run.revision) {
        Ok(Some(r)) if r.info.status == run.action.pending_status() => Ok(Resume::Drive),
        Ok(_) => {
            state.running = None;
            Ok(Resume::Fresh)
        }
        Err(e) if permanent(&e) => {
            let op = run.action.operation().0;
            state.running = None;
            Err(e.or_operation(op))
        }
        Err(e) => Ok(Resume::Retry(format!(
            "retrying after error: {}",
            e.message
        ))),
    }
}

fn retry<T>(message: String) -> Outcome<T> {
    Outcome::Pending {
        retry_after: RETRY,
        message,
    }
}

/// Landscaper's `unblockPendingHelmRelease`: deletes the newest `pending-install` /
/// `pending-upgrade` record.
fn unblock(ctx: &Ctx, storage: &Storage, history: &[Release]) {
    if let Some(rel) = history.iter().rev().find(|r| {
        matches!(
            r.info.status,
            Status::PendingInstall | Status::PendingUpgrade
        )
    }) {
        ctx.warn(&format!(
            "deleting pending release record {} so that the next attempt is not blocked",
            rel.secret_name()
        ));
        if let Err(e) = storage.delete(ctx, &rel.name, rel.version) {
            ctx.warn(&format!(
                "cannot delete {}: {}",
                rel.secret_name(),
                e.message
            ));
        }
    }
}

/// Installs the chart as release `req.release_name`, or upgrades the release; resumes the
/// action in `state` if there is one. See the module documentation.
pub fn install_or_upgrade(
    ctx: &Ctx,
    req: &Request,
    state: &mut ActionState,
) -> Result<Outcome<Box<Release>>, DeployerError> {
    let name = req.release_name;
    let ns = req.namespace;
    let ours = |run: &Running| match run.action {
        Action::Install | Action::Upgrade | Action::Rollback => true,
        Action::Uninstall => run.recovering.is_some(),
    };
    match resume(ctx, state, name, ns, ours)? {
        Resume::Drive => return drive(ctx, state).map(|o| done_release(o, name)),
        Resume::Retry(m) => return Ok(retry(m)),
        Resume::Fresh => {}
    }
    let storage = Storage::new(ns);
    let history = storage.history(ctx, name)?;
    if history.is_empty() {
        match storage.find_elsewhere(ctx, name) {
            Ok(Some(other)) => {
                return Err(config_error(
                    Action::Install,
                    "ReleaseInOtherNamespace",
                    format!(
                        "release {name:?} not found in namespace {ns:?}: a release of that name exists in namespace {other:?}"
                    ),
                ));
            }
            Ok(None) => {}
            Err(e) => ctx.debug(&format!(
                "cannot look for release {name} in other namespaces: {}",
                e.message
            )),
        }
    }
    let last = history.last();
    if let Some(last) = last
        && last.info.status.is_pending()
    {
        unblock(ctx, &storage, &history);
        return Err(action_error(Action::Upgrade, ERR_PENDING.into()));
    }
    let ever_deployed = history
        .iter()
        .any(|r| matches!(r.info.status, Status::Deployed | Status::Superseded));
    let install = match last {
        None => true,
        Some(l) => {
            matches!(l.info.status, Status::Uninstalled | Status::Uninstalling) || !ever_deployed
        }
    };
    let action = if install {
        Action::Install
    } else {
        Action::Upgrade
    };
    let flags = if install { &req.install } else { &req.upgrade };
    let current = if install {
        None
    } else {
        history
            .iter()
            .rev()
            .find(|r| r.info.status == Status::Deployed)
            .or(last)
    };
    let revision = last.map(|l| l.version).unwrap_or(0) + 1;

    // Values: an upgrade without values reuses the previous ones (Helm's reuseValues).
    let mut values = req.values.clone();
    if let Some(cur) = current
        && is_empty_values(&values)
        && !is_empty_values(&cur.config)
    {
        values = cur.config.clone();
    }
    // Against the Target cluster, as Helm's install/upgrade: `.Capabilities`, `lookup`.
    let cluster = crate::cluster::TargetCluster::read(ctx)
        .map_err(|e| e.or_operation(action.operation().0))?;
    let opts = cluster.options(RenderOptions {
        release_name: name.into(),
        namespace: ns.into(),
        values_files: if values.is_null() {
            Vec::new()
        } else {
            vec![values.to_string()]
        },
        include_crds: false,
        is_upgrade: !install,
        revision,
        skip_schema_validation: flags.skip_schema_validation,
        // Helm 3's document split, as Landscaper's helm deployer (Helm 3) renders: a chart
        // whose template ends in `\n---` keeps no trailing newline in its last value.
        split_mode: helm_engine::sort::SplitMode::Legacy,
        ..Default::default()
    });
    let rendered =
        render(req.chart, &opts).map_err(|e| config_error(action, "RenderChart", e.to_string()))?;

    let mut disc = Discovery::default();
    let mut crds_created = Vec::new();
    if install {
        crds_created = install_crds(ctx, &mut disc, &rendered.crds).map_err(|e| DeployerError {
            operation: action.operation().0.into(),
            ..e
        })?;
    }
    let manifest = rendered.manifest();
    let objects = match disc.build(ctx, &manifest, ns, Some((name, ns)), false) {
        Ok(o) => o,
        Err(BuildError::Kube(e)) => return Err(e.or_operation(action.operation().0)),
        Err(BuildError::Invalid(msg)) if !crds_created.is_empty() => {
            return Ok(Outcome::Pending {
                retry_after: POLL,
                message: format!(
                    "waiting for the chart's CRDs ({}) to be served: {msg}",
                    crds_created.join(", ")
                ),
            });
        }
        Err(BuildError::Invalid(msg)) => {
            return Err(action_error(
                action,
                format!("unable to build kubernetes objects from release manifest: {msg}"),
            ));
        }
    };

    // Ownership: every object of an install, the objects new to an upgrade.
    let known: BTreeSet<_> = match current {
        Some(cur) => match disc.build(ctx, &cur.manifest, ns, None, true) {
            Ok(objs) => objs.iter().map(Obj::key).collect(),
            Err(BuildError::Kube(e)) => return Err(e.or_operation(action.operation().0)),
            Err(BuildError::Invalid(_)) => BTreeSet::new(),
        },
        None => BTreeSet::new(),
    };
    for o in objects.iter().filter(|o| !known.contains(&o.key())) {
        let Some(live) = ctx
            .kube_get(&o.r)
            .map_err(|e| e.or_operation(action.operation().0))?
        else {
            continue;
        };
        if flags.take_ownership {
            continue;
        }
        if let Err(why) = check_ownership(&live, name, ns) {
            return Err(action_error(
                action,
                format!(
                    "rendered manifests contain a resource that already exists. Unable to continue with {}: {} exists and cannot be imported into the current release: {why}",
                    if install { "install" } else { "update" },
                    o.describe()
                ),
            ));
        }
    }

    if install && flags.create_namespace {
        create_namespace(ctx, ns).map_err(|e| e.or_operation(action.operation().0))?;
    }

    // The pending record.
    if flags.max_history > 0 {
        storage.prune(ctx, name, flags.max_history - 1)?;
    }
    if install
        && let Some(last) = last
        && last.info.status != Status::Failed
    {
        let mut last = last.clone();
        last.set_status(Status::Superseded, "superseded by new release");
        storage.update(ctx, &last)?;
    }
    let now_text = now(ctx);
    let rel = Release {
        name: name.into(),
        namespace: ns.into(),
        chart: release::chart_json(req.chart),
        config: values,
        manifest,
        hooks: rendered
            .hooks
            .iter()
            .map(release::Hook::from_rendered)
            .collect(),
        version: revision,
        info: Info {
            first_deployed: current
                .map(|c| c.info.first_deployed.clone())
                .unwrap_or_else(|| now_text.clone()),
            last_deployed: now_text,
            status: action.pending_status(),
            description: if install {
                "Initial install underway".into()
            } else {
                "Preparing upgrade".into()
            },
            notes: rendered.notes.clone(),
            ..Default::default()
        },
        // Written as Helm 3 writes releases (no apply method): Helm 4 then upgrades this
        // release with client-side apply, which cannot conflict with our field manager.
        apply_method: String::new(),
        labels: last.map(|l| l.labels.clone()).unwrap_or_default(),
        ..Default::default()
    };
    storage.create(ctx, &rel)?;
    state.running = Some(Running {
        action,
        release: name.into(),
        namespace: ns.into(),
        revision,
        previous: current.map(|c| c.version),
        stage: first_stage(action),
        started_at: ctx.now_unix_millis(),
        deadline: deadline(ctx, flags.timeout),
        wait: flags.wait || flags.atomic,
        atomic: flags.atomic,
        force: flags.force,
        max_history: flags.max_history,
        description: None,
        recovering: None,
    });
    drive(ctx, state).map(|o| done_release(o, name))
}

fn done_release(o: Outcome<Option<Box<Release>>>, name: &str) -> Outcome<Box<Release>> {
    match o {
        Outcome::Done(Some(rel)) => Outcome::Done(rel),
        Outcome::Done(None) => Outcome::Done(Box::new(Release {
            name: name.into(),
            ..Default::default()
        })),
        Outcome::Pending {
            retry_after,
            message,
        } => Outcome::Pending {
            retry_after,
            message,
        },
    }
}

/// Creates the chart's CRDs that do not exist yet (never updates them); returns the names of
/// those created.
fn install_crds(
    ctx: &Ctx,
    disc: &mut Discovery,
    crds: &[(String, String)],
) -> Result<Vec<String>, DeployerError> {
    let mut created = Vec::new();
    for (path, content) in crds {
        let objects = match disc.build(ctx, content, "", None, false) {
            Ok(o) => o,
            Err(BuildError::Kube(e)) => return Err(e),
            Err(BuildError::Invalid(msg)) => {
                return Err(DeployerError::configuration(
                    "InstallCRDs",
                    format!("failed to install CRD {path}: {msg}"),
                ));
            }
        };
        for o in objects {
            if ctx.kube_get(&o.r)?.is_some() {
                ctx.debug(&format!("CRD {} is already present. Skipping.", o.r.name));
                continue;
            }
            match ctx.kube_create(&o.value) {
                Ok(_) => created.push(o.r.name.clone()),
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => {
                    return Err(DeployerError {
                        message: format!("failed to install CRD {path}: {}", e.message),
                        ..e
                    });
                }
            }
        }
    }
    Ok(created)
}

fn create_namespace(ctx: &Ctx, ns: &str) -> Result<(), DeployerError> {
    let r = ObjectRef {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: ns.into(),
    };
    if ctx.kube_get(&r)?.is_some() {
        return Ok(());
    }
    let object = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": ns, "labels": {"name": ns}},
    });
    match ctx.kube_create(&object) {
        Ok(_) => Ok(()),
        Err(e) if e.reason == "AlreadyExists" => Ok(()),
        Err(e) => Err(e),
    }
}

fn first_stage(action: Action) -> Stage {
    Stage::Hooks {
        event: action.pre_event().into(),
        next: 0,
        running: false,
    }
}

fn after(action: Action, stage: &Stage) -> Stage {
    match stage {
        Stage::Hooks { event, .. } if event == action.pre_event() => {
            if action == Action::Uninstall {
                Stage::Delete
            } else {
                Stage::Apply
            }
        }
        Stage::Apply => Stage::Wait,
        Stage::Delete => Stage::WaitDeleted,
        Stage::Wait | Stage::WaitDeleted => Stage::Hooks {
            event: action.post_event().into(),
            next: 0,
            running: false,
        },
        Stage::Hooks { .. } | Stage::Finalize => Stage::Finalize,
    }
}

/// Starts a rollback of `name` to `to` (0: the previous revision) as a new revision.
#[allow(clippy::too_many_arguments)]
fn start_rollback(
    ctx: &Ctx,
    state: &mut ActionState,
    name: &str,
    ns: &str,
    to: i64,
    flags: &Flags,
    wait: bool,
    budget: Option<Duration>,
    recovering: Option<Recovery>,
) -> Result<(), DeployerError> {
    let storage = Storage::new(ns);
    let history = storage.history(ctx, name)?;
    let err = |m: String| action_error(Action::Rollback, m);
    let Some(last) = history.last() else {
        return Err(err(format!("release: not found: {name}")));
    };
    let to = if to == 0 { last.version - 1 } else { to };
    if to < 0 {
        return Err(err("invalid release revision".into()));
    }
    let Some(target) = history.iter().find(|r| r.version == to) else {
        return Err(err(format!("release has no {to} version")));
    };
    let mut info_extra = Map::new();
    info_extra.insert("rollback_revision".into(), json!(to));
    let rel = Release {
        name: name.into(),
        namespace: if last.namespace.is_empty() {
            ns.into()
        } else {
            last.namespace.clone()
        },
        chart: target.chart.clone(),
        config: target.config.clone(),
        info: Info {
            first_deployed: last.info.first_deployed.clone(),
            last_deployed: now(ctx),
            status: Status::PendingRollback,
            notes: target.info.notes.clone(),
            description: format!("Rollback to {to}"),
            extra: info_extra,
            ..Default::default()
        },
        version: last.version + 1,
        labels: target.labels.clone(),
        manifest: target.manifest.clone(),
        hooks: target.hooks.clone(),
        // Written as Helm 3 writes releases (no apply method): Helm 4 then upgrades this
        // release with client-side apply, which cannot conflict with our field manager.
        apply_method: String::new(),
        ..Default::default()
    };
    if flags.max_history > 0 {
        storage.prune(ctx, name, flags.max_history - 1)?;
    }
    storage.create(ctx, &rel)?;
    let start = ctx.now_unix_millis();
    state.running = Some(Running {
        action: Action::Rollback,
        release: name.into(),
        namespace: ns.into(),
        revision: rel.version,
        previous: Some(last.version),
        stage: first_stage(Action::Rollback),
        started_at: start,
        deadline: budget.map(|d| start.saturating_add(d.as_millis() as u64)),
        wait,
        atomic: false,
        force: flags.force,
        max_history: flags.max_history,
        description: None,
        recovering,
    });
    Ok(())
}

/// `helm rollback NAME TO` (0: the previous revision), resumable like the other actions.
/// Helm's rollback flags: `wait`, `force`, `timeout`, `max_history`.
pub fn rollback(
    ctx: &Ctx,
    name: &str,
    namespace: &str,
    to_revision: i64,
    flags: &Flags,
    state: &mut ActionState,
) -> Result<Outcome<Box<Release>>, DeployerError> {
    match resume(ctx, state, name, namespace, |r| {
        r.action == Action::Rollback
    })? {
        Resume::Drive => return drive(ctx, state).map(|o| done_release(o, name)),
        Resume::Retry(m) => return Ok(retry(m)),
        Resume::Fresh => {}
    }
    let budget = flags.timeout.or_else(|| ctx.remaining());
    start_rollback(
        ctx,
        state,
        name,
        namespace,
        to_revision,
        flags,
        flags.wait,
        budget,
        None,
    )?;
    drive(ctx, state).map(|o| done_release(o, name))
}

/// Starts uninstalling `name`; `false` if there is nothing to uninstall (a release already
/// `uninstalled` has its records purged).
fn start_uninstall(
    ctx: &Ctx,
    state: &mut ActionState,
    name: &str,
    ns: &str,
    wait: bool,
    budget: Option<Duration>,
    recovering: Option<Recovery>,
) -> Result<bool, DeployerError> {
    let storage = Storage::new(ns);
    let history = storage.history(ctx, name)?;
    let Some(last) = history.last() else {
        return Ok(false);
    };
    if last.info.status == Status::Uninstalled {
        for r in &history {
            storage.delete(ctx, name, r.version)?;
        }
        return Ok(false);
    }
    let mut rel = last.clone();
    rel.info.status = Status::Uninstalling;
    rel.info.deleted = now(ctx);
    rel.info.description = "Deletion in progress (or silently failed)".into();
    storage.update(ctx, &rel)?;
    let start = ctx.now_unix_millis();
    state.running = Some(Running {
        action: Action::Uninstall,
        release: name.into(),
        namespace: ns.into(),
        revision: rel.version,
        previous: None,
        stage: first_stage(Action::Uninstall),
        started_at: start,
        deadline: budget.map(|d| start.saturating_add(d.as_millis() as u64)),
        wait,
        atomic: false,
        force: false,
        max_history: 0,
        description: None,
        recovering,
    });
    Ok(true)
}

/// `helm uninstall NAME` (`KeepHistory=false`): `Done(None)` if there is no release,
/// `Done(Some(release))` (status `uninstalled`, its records deleted) when it is gone.
/// `wait` waits until the deleted resources are gone, until the item's remaining
/// progressing time at the start (Landscaper's timeout).
pub fn uninstall(
    ctx: &Ctx,
    name: &str,
    namespace: &str,
    wait: bool,
    state: &mut ActionState,
) -> Result<Outcome<Option<Box<Release>>>, DeployerError> {
    uninstall_with_timeout(ctx, name, namespace, wait, None, state)
}

/// [`uninstall`] with Helm's `--timeout` (`None`: the remaining progressing time).
pub fn uninstall_with_timeout(
    ctx: &Ctx,
    name: &str,
    namespace: &str,
    wait: bool,
    timeout: Option<Duration>,
    state: &mut ActionState,
) -> Result<Outcome<Option<Box<Release>>>, DeployerError> {
    let plain_uninstall = |r: &Running| r.action == Action::Uninstall && r.recovering.is_none();
    match resume(ctx, state, name, namespace, plain_uninstall)? {
        Resume::Drive => return drive(ctx, state),
        Resume::Retry(m) => return Ok(retry(m)),
        Resume::Fresh => {}
    }
    let budget = timeout.or_else(|| ctx.remaining());
    if !start_uninstall(ctx, state, name, namespace, wait, budget, None)
        .map_err(|e| e.or_operation(Action::Uninstall.operation().0))?
    {
        return Ok(Outcome::Done(None));
    }
    drive(ctx, state)
}

/// Gives up the action in `state` (e.g. a new job started with other values while the
/// previous job's action was still waiting): an install, upgrade or rollback record still
/// pending becomes `failed` ("… failed: abandoned: …"), so that the next
/// [`install_or_upgrade`] starts afresh instead of meeting "another operation is in
/// progress"; an uninstall's record stays `uninstalling` (the next uninstall starts over).
/// The state is idle afterwards.
pub fn abandon(ctx: &Ctx, state: &mut ActionState, why: &str) -> Result<(), DeployerError> {
    let Some(run) = state.running.clone() else {
        return Ok(());
    };
    let storage = Storage::new(&run.namespace);
    if run.action != Action::Uninstall
        && let Some(mut rel) = storage.get(ctx, &run.release, run.revision)?
        && rel.info.status == run.action.pending_status()
    {
        let name = &run.release;
        let desc = match run.action {
            Action::Upgrade => format!("Upgrade {name:?} failed: abandoned: {why}"),
            Action::Rollback => format!("Rollback {name:?} failed: abandoned: {why}"),
            _ => format!("Release {name:?} failed: abandoned: {why}"),
        };
        rel.set_status(Status::Failed, desc);
        storage.update(ctx, &rel)?;
    }
    state.running = None;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Driving an action

enum Step {
    Next,
    Pending(String),
    Fail(String),
}

struct Driver<'c, 'a> {
    ctx: &'c Ctx<'a>,
    storage: Storage,
    run: Running,
    rel: Release,
    dirty: bool,
    disc: Discovery,
}

/// Drives the action in `state` as far as it goes.
fn drive(
    ctx: &Ctx,
    state: &mut ActionState,
) -> Result<Outcome<Option<Box<Release>>>, DeployerError> {
    let Some(run) = state.running.clone() else {
        return Err(DeployerError::internal(
            "NoAction",
            "no Helm action in flight",
        ));
    };
    let storage = Storage::new(&run.namespace);
    let rel = match storage.get(ctx, &run.release, run.revision) {
        Ok(Some(r)) => r,
        Ok(None) => {
            state.running = None;
            return Err(action_error(
                run.action,
                format!(
                    "release record {} disappeared during the {:?} action",
                    release::secret_name(&run.release, run.revision),
                    run.action
                ),
            ));
        }
        Err(e) if permanent(&e) => {
            state.running = None;
            return Err(e.or_operation(run.action.operation().0));
        }
        Err(e) => return Ok(retry(format!("retrying after error: {}", e.message))),
    };
    let mut d = Driver {
        ctx,
        storage,
        run,
        rel,
        dirty: false,
        disc: Discovery::default(),
    };
    loop {
        let stage = d.run.stage.clone();
        let step = match &stage {
            Stage::Hooks { .. } => d.hooks(),
            Stage::Apply => d.apply(),
            Stage::Wait if d.run.wait => d.wait_ready(),
            Stage::Delete => d.delete(),
            Stage::WaitDeleted if d.run.wait => d.wait_deleted(),
            Stage::Wait | Stage::WaitDeleted => Ok(Step::Next),
            Stage::Finalize => match d.finalize() {
                Ok(result) => {
                    state.running = None;
                    return result;
                }
                Err(e) => Err(e),
            },
        };
        let step = match step {
            Ok(s) => s,
            Err(e) if permanent(&e) => Step::Fail(e.message),
            Err(e) => {
                if d.timed_out() {
                    Step::Fail(format!(
                        "timed out waiting for the condition: {}",
                        e.message
                    ))
                } else {
                    d.flush();
                    state.running = Some(d.run);
                    return Ok(Outcome::Pending {
                        retry_after: RETRY,
                        message: format!("retrying after error: {}", e.message),
                    });
                }
            }
        };
        match step {
            Step::Next => d.run.stage = after(d.run.action, &d.run.stage),
            Step::Pending(msg) if !d.timed_out() => {
                d.flush();
                state.running = Some(d.run);
                return Ok(Outcome::Pending {
                    retry_after: POLL,
                    message: msg,
                });
            }
            Step::Pending(msg) => {
                return d.fail(state, format!("timed out waiting for the condition: {msg}"));
            }
            Step::Fail(cause) => return d.fail(state, cause),
        }
    }
}

fn has_policy(h: &release::Hook, policy: &str) -> bool {
    h.delete_policies.iter().any(|p| p == policy)
}

/// Hook indices of `event` in execution order (weight, then name; stable).
fn hook_order(rel: &Release, event: &str) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..rel.hooks.len())
        .filter(|i| rel.hooks[*i].events.iter().any(|e| e == event))
        .collect();
    idx.sort_by(|a, b| {
        let (x, y) = (&rel.hooks[*a], &rel.hooks[*b]);
        x.weight.cmp(&y.weight).then_with(|| x.name.cmp(&y.name))
    });
    idx
}

enum HookState {
    Done,
    Waiting(String),
    Failed(String),
}

impl Driver<'_, '_> {
    fn timed_out(&self) -> bool {
        self.run
            .deadline
            .is_some_and(|d| self.ctx.now_unix_millis() >= d)
    }

    /// Writes in-memory changes of the record (hook runs) before answering "pending".
    fn flush(&mut self) {
        if self.dirty {
            match self.storage.update(self.ctx, &self.rel) {
                Ok(()) => self.dirty = false,
                Err(e) => self.ctx.warn(&format!(
                    "cannot record release {}: {}",
                    self.rel.secret_name(),
                    e.message
                )),
            }
        }
    }

    fn record(&mut self) -> Result<(), DeployerError> {
        self.storage.update(self.ctx, &self.rel)?;
        self.dirty = false;
        Ok(())
    }

    fn objects(
        &mut self,
        manifest: &str,
        owned: bool,
        lenient: bool,
    ) -> Result<Result<Vec<Obj>, String>, DeployerError> {
        let owner = owned.then_some((self.rel.name.as_str(), self.rel.namespace.as_str()));
        let ns = if self.rel.namespace.is_empty() {
            self.run.namespace.clone()
        } else {
            self.rel.namespace.clone()
        };
        match self.disc.build(self.ctx, manifest, &ns, owner, lenient) {
            Ok(o) => Ok(Ok(o)),
            Err(BuildError::Kube(e)) => Err(e),
            Err(BuildError::Invalid(m)) => Ok(Err(m)),
        }
    }

    fn hook_object(&mut self, i: usize) -> Result<Result<Obj, String>, DeployerError> {
        let manifest = self.rel.hooks[i].manifest.clone();
        Ok(match self.objects(&manifest, false, false)? {
            Ok(mut objs) if !objs.is_empty() => Ok(objs.remove(0)),
            Ok(_) => Err("the hook has no object".into()),
            Err(m) => Err(m),
        })
    }

    fn delete_hook(&mut self, i: usize) -> Result<(), DeployerError> {
        if self.rel.hooks[i].kind == "CustomResourceDefinition" {
            return Ok(());
        }
        if let Ok(o) = self.hook_object(i)? {
            self.ctx.kube_delete(&o.r)?;
        }
        Ok(())
    }

    fn hook_state(&mut self, i: usize) -> Result<HookState, DeployerError> {
        let kind = self.rel.hooks[i].kind.clone();
        if kind != "Job" && kind != "Pod" {
            return Ok(HookState::Done);
        }
        let o = match self.hook_object(i)? {
            Ok(o) => o,
            Err(m) => return Ok(HookState::Failed(m)),
        };
        let Some(live) = self.ctx.kube_get(&o.r)? else {
            return Ok(HookState::Done);
        };
        let name = &o.r.name;
        if kind == "Job" {
            let conditions = live
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for c in &conditions {
                if c["status"] != "True" {
                    continue;
                }
                if c["type"] == "Complete" {
                    return Ok(HookState::Done);
                }
                if c["type"] == "Failed" {
                    return Ok(HookState::Failed(format!(
                        "job {name} failed: {}",
                        c["reason"].as_str().unwrap_or_default()
                    )));
                }
            }
            if live
                .pointer("/status/succeeded")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                >= 1
            {
                return Ok(HookState::Done);
            }
            return Ok(HookState::Waiting(format!(
                "waiting for hook {} to complete",
                o.short()
            )));
        }
        match live.pointer("/status/phase").and_then(Value::as_str) {
            Some("Succeeded") => Ok(HookState::Done),
            Some("Failed") => Ok(HookState::Failed(format!("pod {name} failed"))),
            _ => Ok(HookState::Waiting(format!(
                "waiting for hook {} to succeed",
                o.short()
            ))),
        }
    }

    fn hook_failed(&mut self, event: &str, order: &[usize], next: usize, msg: String) -> Step {
        let i = order[next];
        self.rel.hooks[i].last_run.completed_at = now(self.ctx);
        self.rel.hooks[i].last_run.phase = "Failed".into();
        self.dirty = true;
        if has_policy(&self.rel.hooks[i], "hook-failed")
            && let Err(e) = self.delete_hook(i)
        {
            self.ctx.warn(&format!(
                "error deleting the hook resource on hook failure: {}",
                e.message
            ));
        }
        for &j in &order[..next] {
            if has_policy(&self.rel.hooks[j], "hook-succeeded")
                && let Err(e) = self.delete_hook(j)
            {
                self.ctx.warn(&format!(
                    "cannot delete hook {}: {}",
                    self.rel.hooks[j].name, e.message
                ));
            }
        }
        let cause = match (self.run.action, event) {
            (Action::Install, e) => format!("failed {e}: {msg}"),
            (Action::Upgrade, e) => format!("{e} hooks failed: {msg}"),
            _ => msg,
        };
        Step::Fail(cause)
    }

    /// Runs the hooks of the current `Hooks` stage as far as possible.
    fn hooks(&mut self) -> Result<Step, DeployerError> {
        let Stage::Hooks {
            event,
            mut next,
            mut running,
        } = self.run.stage.clone()
        else {
            return Ok(Step::Next);
        };
        let order = hook_order(&self.rel, &event);
        loop {
            self.run.stage = Stage::Hooks {
                event: event.clone(),
                next,
                running,
            };
            if next >= order.len() {
                for &i in order.iter().rev() {
                    if has_policy(&self.rel.hooks[i], "hook-succeeded") {
                        self.delete_hook(i)?;
                    }
                }
                return Ok(Step::Next);
            }
            let i = order[next];
            if !running {
                if self.rel.hooks[i].delete_policies.is_empty() {
                    self.rel.hooks[i].delete_policies = vec!["before-hook-creation".into()];
                    self.dirty = true;
                }
                let o = match self.hook_object(i)? {
                    Ok(o) => o,
                    Err(m) => {
                        let path = self.rel.hooks[i].path.clone();
                        return Ok(self.hook_failed(
                            &event,
                            &order,
                            next,
                            format!(
                                "unable to build kubernetes object for {event} hook {path}: {m}"
                            ),
                        ));
                    }
                };
                if has_policy(&self.rel.hooks[i], "before-hook-creation")
                    && self.rel.hooks[i].kind != "CustomResourceDefinition"
                    && self.ctx.kube_delete(&o.r)?
                    && self.ctx.kube_get(&o.r)?.is_some()
                {
                    return Ok(Step::Pending(format!(
                        "waiting for the previous hook {} to be deleted",
                        o.short()
                    )));
                }
                self.rel.hooks[i].last_run = HookExecution {
                    started_at: now(self.ctx),
                    completed_at: String::new(),
                    phase: "Running".into(),
                };
                self.record()?;
                self.rel.hooks[i].last_run.phase = "Unknown".into();
                self.dirty = true;
                if let Err(e) = self.ctx.kube_create(&o.value) {
                    if !permanent(&e) && e.reason != "AlreadyExists" {
                        return Err(e);
                    }
                    let path = self.rel.hooks[i].path.clone();
                    return Ok(self.hook_failed(
                        &event,
                        &order,
                        next,
                        format!("warning: Hook {event} {path} failed: {}", e.message),
                    ));
                }
                running = true;
                self.run.stage = Stage::Hooks {
                    event: event.clone(),
                    next,
                    running,
                };
            }
            match self.hook_state(i)? {
                HookState::Done => {
                    self.rel.hooks[i].last_run.completed_at = now(self.ctx);
                    self.rel.hooks[i].last_run.phase = "Succeeded".into();
                    self.dirty = true;
                    next += 1;
                    running = false;
                }
                HookState::Failed(msg) => return Ok(self.hook_failed(&event, &order, next, msg)),
                HookState::Waiting(msg) => {
                    if self.timed_out() {
                        return Ok(self.hook_failed(
                            &event,
                            &order,
                            next,
                            format!("timed out waiting for the condition: {msg}"),
                        ));
                    }
                    return Ok(Step::Pending(msg));
                }
            }
        }
    }

    fn apply_object(&self, o: &Obj) -> Result<(), DeployerError> {
        let wrap = |verb: &str, e: DeployerError| DeployerError {
            message: format!("failed to {verb} {}: {}", o.describe(), e.message),
            ..e
        };
        if self.run.force {
            match self.ctx.kube_get(&o.r).map_err(|e| wrap("get", e))? {
                Some(live) => {
                    let mut v = o.value.clone();
                    if let Some(rv) = live.pointer("/metadata/resourceVersion") {
                        v["metadata"]["resourceVersion"] = rv.clone();
                    }
                    self.ctx.kube_update(&v).map_err(|e| wrap("replace", e))?;
                }
                None => {
                    self.ctx
                        .kube_create(&o.value)
                        .map_err(|e| wrap("create", e))?;
                }
            }
            return Ok(());
        }
        let mut body = o.value.clone();
        default_port_protocols(&mut body);
        self.ctx
            .kube_patch(&o.r, &body, PatchType::Apply, Some(FIELD_MANAGER), true)
            .map_err(|e| wrap("apply", e))?;
        Ok(())
    }

    /// Applies the release's objects; deletes those of the replaced release it no longer has.
    fn apply(&mut self) -> Result<Step, DeployerError> {
        let manifest = self.rel.manifest.clone();
        let objects = match self.objects(&manifest, true, false)? {
            Ok(o) => o,
            Err(m) => {
                return Ok(Step::Fail(format!(
                    "unable to build kubernetes objects from new release manifest: {m}"
                )));
            }
        };
        for o in &objects {
            self.apply_object(o)?;
        }
        let Some(previous) = self.run.previous else {
            return Ok(Step::Next);
        };
        let Some(prev) = self.storage.get(self.ctx, &self.run.release, previous)? else {
            return Ok(Step::Next);
        };
        let old = match self.objects(&prev.manifest, false, true)? {
            Ok(o) => o,
            Err(m) => {
                self.ctx.warn(&format!(
                    "cannot read the manifest of revision {previous}, nothing is deleted: {m}"
                ));
                return Ok(Step::Next);
            }
        };
        let keys: BTreeSet<_> = objects.iter().map(Obj::key).collect();
        for o in old.iter().filter(|o| !keys.contains(&o.key())) {
            let Some(live) = self.ctx.kube_get(&o.r)? else {
                continue;
            };
            if keep_policy(&live) {
                self.ctx.info(&format!(
                    "skipping delete of {} due to annotation [{RESOURCE_POLICY_ANNOTATION}=keep]",
                    o.short()
                ));
                continue;
            }
            self.ctx.kube_delete(&o.r)?;
        }
        Ok(Step::Next)
    }

    fn wait_ready(&mut self) -> Result<Step, DeployerError> {
        let manifest = self.rel.manifest.clone();
        let objects = match self.objects(&manifest, false, false)? {
            Ok(o) => o,
            Err(m) => return Ok(Step::Fail(m)),
        };
        for o in &objects {
            match self.ctx.kube_get(&o.r)? {
                None => return Ok(Step::Pending(format!("{} does not exist", o.short()))),
                Some(live) => {
                    if let Err(why) = object_ready(&live) {
                        return Ok(Step::Pending(format!("{} is not ready: {why}", o.short())));
                    }
                }
            }
        }
        Ok(Step::Next)
    }

    /// The objects uninstall deletes: the manifest in `UninstallOrder`, without `keep`.
    fn uninstall_objects(&mut self) -> Result<Vec<Obj>, DeployerError> {
        let manifest = self.rel.manifest.clone();
        let mut objects = match self.objects(&manifest, false, true)? {
            Ok(o) => o,
            Err(m) => {
                self.ctx.warn(&format!(
                    "corrupted release record, resources must be deleted manually: {m}"
                ));
                Vec::new()
            }
        };
        let rank = |k: &str| UNINSTALL_ORDER.iter().position(|x| *x == k);
        objects.sort_by(|a, b| match (rank(&a.r.kind), rank(&b.r.kind)) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.r.kind.cmp(&b.r.kind),
        });
        Ok(objects
            .into_iter()
            .filter(|o| !keep_policy(&o.value))
            .collect())
    }

    fn delete(&mut self) -> Result<Step, DeployerError> {
        if self.dirty {
            self.record()?;
        }
        for o in self.uninstall_objects()? {
            self.ctx.kube_delete(&o.r).map_err(|e| DeployerError {
                message: format!("failed to delete {}: {}", o.describe(), e.message),
                ..e
            })?;
        }
        Ok(Step::Next)
    }

    fn wait_deleted(&mut self) -> Result<Step, DeployerError> {
        for o in self.uninstall_objects()? {
            if self.ctx.kube_get(&o.r)?.is_some() {
                return Ok(Step::Pending(format!(
                    "waiting for {} to be deleted",
                    o.short()
                )));
            }
        }
        Ok(Step::Next)
    }

    fn set_status(&mut self, rel: &mut Release, status: Status) -> Result<(), DeployerError> {
        if rel.info.status != status {
            rel.info.status = status;
            self.storage.update(self.ctx, rel)?;
        }
        Ok(())
    }

    /// Records the outcome; `Err` of the outer result: a Kubernetes error (retried).
    #[allow(clippy::type_complexity)]
    fn finalize(
        &mut self,
    ) -> Result<Result<Outcome<Option<Box<Release>>>, DeployerError>, DeployerError> {
        let name = self.run.release.clone();
        match self.run.action {
            Action::Install | Action::Upgrade => {
                if let Some(prev) = self.run.previous
                    && let Some(mut p) = self.storage.get(self.ctx, &name, prev)?
                {
                    self.set_status(&mut p, Status::Superseded)?;
                }
                let desc = self.run.description.clone().unwrap_or_else(|| {
                    if self.run.action == Action::Install {
                        "Install complete".into()
                    } else {
                        "Upgrade complete".into()
                    }
                });
                self.rel.set_status(Status::Deployed, desc);
                self.record()?;
                Ok(Ok(Outcome::Done(Some(Box::new(self.rel.clone())))))
            }
            Action::Rollback => {
                for mut r in self.storage.history(self.ctx, &name)? {
                    if r.version != self.rel.version && r.info.status == Status::Deployed {
                        self.set_status(&mut r, Status::Superseded)?;
                    }
                }
                self.rel.info.status = Status::Deployed;
                self.record()?;
                if let Some(rec) = &self.run.recovering {
                    return Ok(Err(action_error(
                        rec.failed,
                        format!(
                            "release {name} failed, and has been rolled back due to atomic being set: {}",
                            rec.cause
                        ),
                    )));
                }
                Ok(Ok(Outcome::Done(Some(Box::new(self.rel.clone())))))
            }
            Action::Uninstall => {
                self.rel
                    .set_status(Status::Uninstalled, "Uninstallation complete");
                // Purge the other revisions first: while this one exists, a repeated call
                // resumes here.
                for r in self.storage.history(self.ctx, &name)? {
                    if r.version != self.rel.version {
                        self.storage.delete(self.ctx, &name, r.version)?;
                    }
                }
                self.storage.delete(self.ctx, &name, self.rel.version)?;
                if let Some(rec) = &self.run.recovering {
                    return Ok(Err(action_error(
                        rec.failed,
                        format!(
                            "release {name} failed, and has been uninstalled due to atomic being set: {}",
                            rec.cause
                        ),
                    )));
                }
                Ok(Ok(Outcome::Done(Some(Box::new(self.rel.clone())))))
            }
        }
    }

    /// The release failed with `cause`: record it, recover if atomic, report.
    fn fail(
        mut self,
        state: &mut ActionState,
        cause: String,
    ) -> Result<Outcome<Option<Box<Release>>>, DeployerError> {
        let name = self.run.release.clone();
        let ns = self.run.namespace.clone();
        state.running = None;
        match self.run.action {
            Action::Install | Action::Upgrade => {
                let desc = if self.run.action == Action::Install {
                    format!("Release {name:?} failed: {cause}")
                } else {
                    format!("Upgrade {name:?} failed: {cause}")
                };
                self.rel.set_status(Status::Failed, desc);
                if let Err(e) = self.record() {
                    self.ctx.warn(&format!(
                        "cannot record the failed release {name}: {}",
                        e.message
                    ));
                }
                if !self.run.atomic {
                    return Err(action_error(self.run.action, cause));
                }
                let budget = self
                    .run
                    .deadline
                    .map(|d| Duration::from_millis(d.saturating_sub(self.run.started_at)));
                let recovery = Recovery {
                    failed: self.run.action,
                    cause: cause.clone(),
                    failed_revision: self.rel.version,
                };
                if self.run.action == Action::Install {
                    self.ctx
                        .info("Install failed and atomic is set, uninstalling release");
                    match start_uninstall(
                        self.ctx,
                        state,
                        &name,
                        &ns,
                        false,
                        budget,
                        Some(recovery),
                    ) {
                        Ok(true) => drive(self.ctx, state),
                        Ok(false) => Err(action_error(
                            Action::Install,
                            format!(
                                "release {name} failed, and has been uninstalled due to atomic being set: {cause}"
                            ),
                        )),
                        Err(e) => Err(action_error(
                            Action::Install,
                            format!(
                                "an error occurred while uninstalling the release. original install error: {cause}: {}",
                                e.message
                            ),
                        )),
                    }
                } else {
                    self.ctx.info(
                        "Upgrade failed and atomic is set, rolling back to last successful release",
                    );
                    let history = match self.storage.history(self.ctx, &name) {
                        Ok(h) => h,
                        Err(e) => {
                            return Err(action_error(
                                Action::Upgrade,
                                format!(
                                    "an error occurred while finding last successful release. original upgrade error: {cause}: {}",
                                    e.message
                                ),
                            ));
                        }
                    };
                    let Some(target) = history
                        .iter()
                        .rev()
                        .find(|r| matches!(r.info.status, Status::Superseded | Status::Deployed))
                    else {
                        return Err(action_error(
                            Action::Upgrade,
                            format!(
                                "unable to find a previously successful release when attempting to rollback. original upgrade error: {cause}"
                            ),
                        ));
                    };
                    let flags = Flags {
                        force: self.run.force,
                        max_history: self.run.max_history,
                        ..Flags::default()
                    };
                    match start_rollback(
                        self.ctx,
                        state,
                        &name,
                        &ns,
                        target.version,
                        &flags,
                        true,
                        budget,
                        Some(recovery),
                    ) {
                        Ok(()) => drive(self.ctx, state),
                        Err(e) => Err(action_error(
                            Action::Upgrade,
                            format!(
                                "an error occurred while rolling back the release. original upgrade error: {cause}: {}",
                                e.message
                            ),
                        )),
                    }
                }
            }
            Action::Rollback => {
                self.rel
                    .set_status(Status::Failed, format!("Rollback {name:?} failed: {cause}"));
                if let Err(e) = self.record() {
                    self.ctx.warn(&format!(
                        "cannot record the failed rollback {name}: {}",
                        e.message
                    ));
                }
                Err(match &self.run.recovering {
                    Some(rec) => action_error(
                        rec.failed,
                        format!(
                            "an error occurred while rolling back the release. original upgrade error: {}: {cause}",
                            rec.cause
                        ),
                    ),
                    None => action_error(Action::Rollback, cause),
                })
            }
            Action::Uninstall => {
                // As Helm: the record stays `uninstalling`; the next uninstall starts over.
                self.flush();
                Err(match &self.run.recovering {
                    Some(rec) => action_error(
                        rec.failed,
                        format!(
                            "an error occurred while uninstalling the release. original install error: {}: {cause}",
                            rec.cause
                        ),
                    ),
                    None => action_error(Action::Uninstall, cause),
                })
            }
        }
    }
}
