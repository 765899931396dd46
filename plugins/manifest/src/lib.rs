//! The manifest deployer (`landscaper.gardener.cloud/kubernetes-manifest`, Landscaper contract
//! section 6) as a wasm-deployer plugin.
//!
//! Owns: the step machine of one job. Every invocation resumes from the persisted
//! `providerStatus` (`managedResources` plus a `progress` marker with the jobID and the
//! step), does what it can without waiting, and answers "not yet, call again after D" while
//! objects are not ready or exports are not there; the host re-invokes within the
//! progressing timeout. Steps: apply (+ orphan clean-up) → readiness → exports →
//! `patchAfterDeployment` → `Succeeded`. Delete: policy filter, before-delete
//! annotations/patches, deletion groups in order → empty `managedResources`.
//! Modules: [`config`] (the ProviderConfiguration envelope, v1alpha1 conversion, status and
//! resume marker). Applying, readiness, exports, deletion groups, JSONPath and secondary
//! Targets are the shared library `manifest-applier` (`sdk-guest/applier`), which the helm
//! deployer's template mode uses too; [`OPTIONS`] makes it this deployer's.
//! Must not touch: status writes, the export Secret, finalizers — the host owns those.

pub mod config;

use config::{Config, ManagedResource, ObjectReference, Progress, ProviderStatus};
use manifest_applier::deletion::Uninstall;
use manifest_applier::{Options, applier, deletion, exports, readiness, strategies, wait};
use sdk_guest::{
    Ctx, Deployer, DeployerError, Description, Invocation, Response, export_deployer, phase,
};
use std::time::Duration;

/// The DeployItem type.
pub const TYPE: &str = "landscaper.gardener.cloud/kubernetes-manifest";
/// Ownership label on every object the deployer creates or updates (contract 2.3).
pub const OWNER_LABEL: &str = "manifest.deployer.landscaper.gardener.cloud/deployitem";
/// Field manager of server-side apply (`updateStrategy: patch`).
pub const FIELD_MANAGER: &str = "manifest.deployer.landscaper.gardener.cloud";

/// The shared applier, as the manifest deployer.
pub const OPTIONS: Options = Options {
    owner_label: OWNER_LABEL,
    field_manager: FIELD_MANAGER,
    default_readiness_checkpoint: CP_DEFAULT_READINESS,
    custom_readiness_checkpoint: CP_CUSTOM_READINESS,
    config_operation: config::INIT_OPERATION,
};

/// Checkpoint names (contract 3.9).
pub const CP_START: &str = "manifest deployer: start reconcile";
/// Before readiness checks.
pub const CP_BEFORE_READINESS: &str = "manifest deployer: before readiness check";
/// Before reading exports.
pub const CP_BEFORE_EXPORTS: &str = "manifest deployer: before reading export values";
/// Default readiness checks.
pub const CP_DEFAULT_READINESS: &str = "manifest deployer: default readiness checks";
/// Custom readiness checks.
pub const CP_CUSTOM_READINESS: &str = "manifest deployer: custom readiness checks";
/// Start of delete.
pub const CP_START_DELETE: &str = "manifest deployer: start delete";
/// The checkpoints of Landscaper's shared deployer library (the applier's).
pub use manifest_applier::checkpoints::{
    APPLY as CP_APPLY, CLEANUP as CP_CLEANUP, DELETE as CP_DELETE,
    DURING_READINESS as CP_DURING_READINESS, PROCESS as CP_PROCESS,
    PROCESS_MANAGED as CP_PROCESS_MANAGED,
};

/// Poll interval while waiting for readiness, exports or deletions.
const POLL: Duration = Duration::from_secs(1);
/// Retry delay after persisting a partial status before reporting an error.
const PERSIST_FIRST: Duration = Duration::from_millis(50);

const STEP_APPLY: &str = "apply";
const STEP_APPLIED: &str = "applied";
const STEP_READY: &str = "ready";
const STEP_DONE: &str = "done";

/// The plugin.
pub struct ManifestDeployer;

/// "Not yet, call again after D" (D = the poll interval, capped before the progressing
/// timeout), or the wait's `timeout` once no time is left (`manifest_applier::wait::not_yet`).
fn waiting(
    ctx: &Ctx,
    status: &ProviderStatus,
    reason: &str,
    message: String,
    timeout: DeployerError,
) -> Result<Response, DeployerError> {
    wait::not_yet(
        ctx,
        "ManifestDeployer",
        status.to_json(),
        reason,
        message,
        POLL,
        timeout,
    )
}

fn sorted_set(v: &[ManagedResource]) -> Vec<String> {
    let mut k: Vec<String> = v.iter().map(|m| m.resource.sort_key()).collect();
    k.sort();
    k
}

impl ManifestDeployer {
    /// The apply step. `Ok(Ok(applied))`: the objects it wrote (now the managed list);
    /// `Ok(Err(response))`: answer now (waiting, or persisting first).
    fn apply_step(
        ctx: &Ctx,
        item_name: &str,
        job_id: &str,
        config: &Config,
        status: &mut ProviderStatus,
        previous_raw: Option<&serde_json::Value>,
    ) -> Result<Result<Vec<ManagedResource>, Response>, DeployerError> {
        let old = status.managed_resources.clone();
        let outcome = applier::apply(ctx, item_name, config, &OPTIONS, &old)?;
        if let Some(err) = outcome.error {
            // Keep everything that may exist: applied now + previously managed.
            let mut managed = outcome.applied;
            managed.extend(applier::not_in(&old, &managed).into_iter().cloned());
            let unrecorded = previous_raw.is_none() || sorted_set(&managed) != sorted_set(&old);
            status.managed_resources = managed;
            status.progress = Some(Progress {
                job_id: job_id.into(),
                step: STEP_APPLY.into(),
                pending_patches: Vec::new(),
            });
            if unrecorded {
                // Persist what exists before reporting the error (the error repeats on the
                // next call, which then finds everything recorded).
                return Ok(Err(Response {
                    phase: Some(phase::PROGRESSING),
                    provider_status: Some(status.to_json()),
                    retry_after: Some(PERSIST_FIRST),
                    ..Default::default()
                }));
            }
            return Err(err);
        }
        // Orphans: previously managed, not applied now, and ours to delete.
        let orphans: Vec<ManagedResource> = applier::not_in(&old, &outcome.applied)
            .into_iter()
            .cloned()
            .collect();
        let mut remaining = Vec::new();
        if !orphans.is_empty() {
            ctx.checkpoint(CP_CLEANUP)?;
            let to_delete = deletion::prepare(ctx, item_name, &orphans, &OPTIONS).map_err(|e| {
                DeployerError {
                    message: format!("cleanup of orphaned resources: {}", e.message),
                    ..e
                }
                .with_operation("ApplyObjects")
            })?;
            remaining =
                deletion::delete_in_groups(ctx, to_delete, &config.deletion_groups_during_update)
                    .map_err(|e| {
                    DeployerError {
                        reason: "cleanupOrphanedResourcesInGroups".into(),
                        ..e
                    }
                    .with_operation("ApplyObjects")
                })?;
        }
        let applied = outcome.applied;
        let mut managed = applied.clone();
        let waiting_for_orphans = !remaining.is_empty();
        managed.extend(remaining);
        status.managed_resources = managed;
        if waiting_for_orphans {
            status.progress = Some(Progress {
                job_id: job_id.into(),
                step: STEP_APPLY.into(),
                pending_patches: Vec::new(),
            });
            let timeout = DeployerError {
                reason: "cleanupOrphanedResourcesInGroups".into(),
                ..deletion::group_timeout()
            }
            .with_operation("ApplyObjects");
            return waiting(
                ctx,
                status,
                "DeletingOrphans",
                "waiting for removed resources to be deleted".into(),
                timeout,
            )
            .map(Err);
        }
        status.progress = Some(Progress {
            job_id: job_id.into(),
            step: STEP_APPLIED.into(),
            pending_patches: outcome.patches,
        });
        Ok(Ok(applied))
    }

    fn patch_after_deployment(ctx: &Ctx, status: &ProviderStatus) -> Result<(), DeployerError> {
        let Some(progress) = &status.progress else {
            return Ok(());
        };
        for p in &progress.pending_patches {
            let err = |m: String| {
                DeployerError::retryable("PatchAfterDeployment", m)
                    .with_operation("ReconcileManifests")
            };
            // The cause's unrecoverable codes (a call cut at the deadline) are kept.
            let with_codes = |m: String, cause: DeployerError| DeployerError {
                codes: cause.codes,
                ..err(m)
            };
            let r = p.resource.to_ref();
            let what = format!("{} {}", p.resource.kind, p.resource.display());
            let mut live = ctx
                .kube_get(&r)
                .map_err(|e| with_codes(format!("{what}: {}", e.message), e))?
                .ok_or_else(|| err(format!("{what} does not exist")))?;
            strategies::deep_merge(&mut live, &p.patch);
            ctx.kube_update(&live).map_err(|e| {
                with_codes(
                    format!("patching {what} after deployment: {}", e.message),
                    e,
                )
            })?;
        }
        Ok(())
    }
}

impl Deployer for ManifestDeployer {
    fn describe() -> Description {
        Description {
            name: "manifest".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            deploy_item_types: vec![TYPE.into()],
            hook_types: vec![],
        }
    }

    fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        ctx.checkpoint(CP_START)?;
        let raw = inv
            .provider_config_present()
            .map_err(|e| e.with_operation("reconcile"))?;
        let config = config::parse(raw)?;
        let previous_raw = inv.previous_provider_status.as_ref();
        let mut status = ProviderStatus::from_previous(previous_raw)?;
        inv.require_kubernetes_target("manifest deployer", "reconcile")?;
        let (item_name, job_id) = inv.name_and_job();
        let step = status
            .progress
            .as_ref()
            .filter(|p| p.job_id == job_id)
            .map(|p| p.step.clone())
            .unwrap_or_default();

        // What this invocation wrote: the readiness check below need not read those of them
        // that are ready once they exist (a later invocation reads everything again).
        let mut written = Vec::new();
        if step.is_empty() || step == STEP_APPLY {
            match Self::apply_step(ctx, &item_name, &job_id, &config, &mut status, previous_raw)? {
                Ok(applied) => written = applied,
                Err(answer) => return Ok(answer),
            }
        }
        let mut step = status
            .progress
            .as_ref()
            .map(|p| p.step.clone())
            .unwrap_or_default();

        if step == STEP_APPLIED {
            ctx.checkpoint(CP_BEFORE_READINESS)?;
            let round = readiness::check_all(
                ctx,
                &config.readiness,
                &status.managed_resources,
                &written,
                &OPTIONS,
            )?;
            if let Err(pending) = round {
                let timeout = readiness::timeout(pending.timeout());
                return waiting(ctx, &status, "WaitingForReadiness", pending.why, timeout);
            }
            if let Some(p) = status.progress.as_mut() {
                p.step = STEP_READY.into();
            }
            step = STEP_READY.into();
        }

        let mut exports = None;
        if step == STEP_READY {
            if !config.exports.is_empty() {
                ctx.checkpoint(CP_BEFORE_EXPORTS)?;
                match exports::read_all(ctx, &config.exports)? {
                    Ok(values) => exports = Some(values),
                    Err(pending) => {
                        let timeout = pending.timeout().with_operation("Export");
                        return waiting(ctx, &status, "WaitingForExports", pending.why, timeout);
                    }
                }
            }
            Self::patch_after_deployment(ctx, &status)?;
            if let Some(p) = status.progress.as_mut() {
                p.step = STEP_DONE.into();
                p.pending_patches.clear();
            }
        }
        Ok(Response {
            phase: Some(phase::SUCCEEDED),
            provider_status: Some(status.to_json()),
            exports,
            ..Default::default()
        })
    }

    fn delete(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        let mut status = ProviderStatus::from_previous(inv.previous_provider_status.as_ref())?;
        if status.managed_resources.is_empty() {
            // Nothing to delete: no target access, no timeout check (contract 6.6 step 2).
            return Ok(Response::default());
        }
        ctx.checkpoint(CP_START_DELETE)?;
        let groups = match inv.provider_config_raw() {
            Some(raw) => config::parse(raw)?.deletion_groups,
            None => Vec::new(),
        };
        inv.require_kubernetes_target("manifest deployer", "delete")?;
        let (item_name, _) = inv.name_and_job();
        status.progress = None;
        match deletion::uninstall(
            ctx,
            &item_name,
            &status.managed_resources,
            &groups,
            &OPTIONS,
        )? {
            Uninstall::Done => {
                status.managed_resources = Vec::new();
                Ok(Response {
                    provider_status: Some(status.to_json()),
                    ..Default::default()
                })
            }
            Uninstall::Waiting {
                remaining,
                message,
                timeout,
            } => {
                status.managed_resources = remaining;
                let mut r = waiting(ctx, &status, "WaitingForDeletion", message, timeout)?;
                r.phase = Some(phase::DELETING);
                Ok(r)
            }
        }
    }
}

/// The reference of a managed object (re-exported for tests).
pub fn reference_of(obj: &serde_json::Value) -> ObjectReference {
    ObjectReference::of(obj)
}

export_deployer!(ManifestDeployer);
