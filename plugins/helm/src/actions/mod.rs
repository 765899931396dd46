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
//! Owns: running Helm actions against the Target through [`Ctx`]: the action state, the
//! errors, the stage order and the [`Driver`] that walks the stages. One file per action or
//! stage: `install` (install or upgrade: render once, ownership, the pending record),
//! `rollback`, `uninstall` (starting it; its delete and wait-deleted stages), `resume`
//! (resuming, unblocking or abandoning the action in the state), `hooks`, `apply` (apply
//! and readiness wait), `finalize` (recording success), `fail` (recording failure and the
//! atomic recovery), `objects` (manifests to Kubernetes objects). Must not touch: the
//! DeployItem, its providerStatus (the caller persists [`ActionState`]), chart loading.

use std::time::Duration;

use helm_engine::Chart;
use sdk_guest::{Ctx, DeployerError, codes};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::release::{self, Release, Status, Storage, go_time};

mod apply;
mod fail;
mod finalize;
mod hooks;
mod install;
mod objects;
mod resume;
mod rollback;
mod uninstall;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

pub use install::install_or_upgrade;
pub use objects::{default_port_protocols, parse_manifest, yaml_documents};
pub use resume::abandon;
pub use rollback::rollback;
pub use uninstall::{uninstall, uninstall_with_timeout};

use objects::{BuildError, Discovery, Obj};

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
// Shared helpers of starting and driving actions

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

fn retry<T>(message: String) -> Outcome<T> {
    Outcome::Pending {
        retry_after: RETRY,
        message,
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

// ---------------------------------------------------------------------------------------------
// Driving an action

/// What driving an action answers: `Done(None)` when an uninstall found no release.
type Driven = Result<Outcome<Option<Box<Release>>>, DeployerError>;

/// What a stage answers.
enum Step {
    Next,
    Pending(String),
    Fail(String),
}

/// One action being driven: its state, its release record (`dirty`: changed in memory, not
/// written yet) and discovery cached for this call.
struct Driver<'c, 'a> {
    ctx: &'c Ctx<'a>,
    storage: Storage,
    run: Running,
    rel: Release,
    dirty: bool,
    disc: Discovery,
}

/// Drives the action in `state` as far as it goes.
fn drive(ctx: &Ctx, state: &mut ActionState) -> Driven {
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

    fn set_status(&mut self, rel: &mut Release, status: Status) -> Result<(), DeployerError> {
        if rel.info.status != status {
            rel.info.status = status;
            self.storage.update(self.ctx, rel)?;
        }
        Ok(())
    }
}
