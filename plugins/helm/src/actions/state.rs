//! The vocabulary of a Helm action: its flags and request, the persisted [`ActionState`]
//! (which action, which stage, deadline), the outcome of a call, the stage order, and how a
//! failure becomes Landscaper's error. Owns: those types and constants. Must not touch: the
//! cluster, release records (everything here is pure).

use std::time::Duration;

use helm_engine::Chart;
use sdk_guest::{Ctx, DeployerError, codes};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::release::{Status, go_time};

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
    pub(super) fn pre_event(self) -> &'static str {
        match self {
            Action::Install => "pre-install",
            Action::Upgrade => "pre-upgrade",
            Action::Rollback => "pre-rollback",
            Action::Uninstall => "pre-delete",
        }
    }

    pub(super) fn post_event(self) -> &'static str {
        match self {
            Action::Install => "post-install",
            Action::Upgrade => "post-upgrade",
            Action::Rollback => "post-rollback",
            Action::Uninstall => "post-delete",
        }
    }

    pub(super) fn pending_status(self) -> Status {
        match self {
            Action::Install => Status::PendingInstall,
            Action::Upgrade => Status::PendingUpgrade,
            Action::Rollback => Status::PendingRollback,
            Action::Uninstall => Status::Uninstalling,
        }
    }

    /// Landscaper's operation and reason of errors of this action.
    pub(super) fn operation(self) -> (&'static str, &'static str) {
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
pub(super) fn action_error(action: Action, message: String) -> DeployerError {
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

pub(super) fn config_error(action: Action, reason: &str, message: String) -> DeployerError {
    DeployerError::configuration(reason, message).with_operation(action.operation().0)
}

/// Kubernetes errors that will not heal by retrying the same request.
pub(super) fn permanent(e: &DeployerError) -> bool {
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

pub(super) fn now(ctx: &Ctx) -> String {
    go_time(ctx.now_unix_millis())
}

pub(super) fn is_empty_values(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

pub(super) fn deadline(ctx: &Ctx, timeout: Option<Duration>) -> Option<u64> {
    let start = ctx.now_unix_millis();
    timeout
        .or_else(|| ctx.remaining())
        .map(|d| start.saturating_add(d.as_millis() as u64))
}

pub(super) fn retry<T>(message: String) -> Outcome<T> {
    Outcome::Pending {
        retry_after: RETRY,
        message,
    }
}

pub(super) fn first_stage(action: Action) -> Stage {
    Stage::Hooks {
        event: action.pre_event().into(),
        next: 0,
        running: false,
    }
}

pub(super) fn after(action: Action, stage: &Stage) -> Stage {
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
