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
//! errors, the stage order (`state`) and the driver that walks the stages (`driver`). One
//! file per action or stage: `install` (install or upgrade: render once, ownership, the pending record),
//! `rollback`, `uninstall` (starting it; its delete and wait-deleted stages), `resume`
//! (resuming, unblocking or abandoning the action in the state), `hooks`, `apply` (apply
//! and readiness wait), `finalize` (recording success), `fail` (recording failure and the
//! atomic recovery), `objects` (manifests to Kubernetes objects). Must not touch: the
//! DeployItem, its providerStatus (the caller persists [`ActionState`]), chart loading.

mod apply;
mod driver;
mod fail;
mod finalize;
mod hooks;
mod install;
mod objects;
mod resume;
mod rollback;
mod state;
mod uninstall;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

pub use install::install_or_upgrade;
pub use objects::{default_port_protocols, parse_manifest, yaml_documents};
pub use resume::abandon;
pub use rollback::rollback;
pub use state::{
    Action, ActionState, DEFAULT_MAX_HISTORY, ERR_PENDING, FIELD_MANAGER, Flags, MANAGED_BY_HELM,
    MANAGED_BY_LABEL, Outcome, POLL, RELEASE_NAME_ANNOTATION, RELEASE_NAMESPACE_ANNOTATION,
    RESOURCE_POLICY_ANNOTATION, RETRY, Recovery, Request, Running, Stage, UNINSTALL_ORDER,
};
pub use uninstall::{uninstall, uninstall_with_timeout};
