//! Picking up the action in the caller's state: resume it while its record is still pending,
//! drop it when stale, unblock a pending record of someone else, or abandon it for a new job.
//! Owns: deciding whether a call starts afresh. Must not touch: starting or driving actions.

use sdk_guest::{Ctx, DeployerError};

use super::state::{Action, ActionState, Running, permanent};
use crate::release::{Release, Status, Storage};

/// What to do with the action in the state.
pub(super) enum Resume {
    /// It is ours and still pending: drive it.
    Drive,
    /// Nothing (left) to resume: start afresh.
    Fresh,
    /// Could not tell (a transient error): call again.
    Retry(String),
}

/// Is the action in `state` (if `kind_ok` accepts it) one on this release whose record is
/// still in its pending state? A stale one is dropped.
pub(super) fn resume(
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

/// Landscaper's `unblockPendingHelmRelease`: deletes the newest `pending-install` /
/// `pending-upgrade` record.
pub(super) fn unblock(ctx: &Ctx, storage: &Storage, history: &[Release]) {
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

/// Gives up the action in `state` (e.g. a new job started with other values while the
/// previous job's action was still waiting): an install, upgrade or rollback record still
/// pending becomes `failed` ("… failed: abandoned: …"), so that the next
/// [`install_or_upgrade`](super::install_or_upgrade) starts afresh instead of meeting "another operation is in
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
