//! `helm uninstall` (`KeepHistory=false`): starting it (also as an atomic install's recovery)
//! and its `delete` and `waitDeleted` stages, in Helm's `UninstallOrder` and sparing
//! `helm.sh/resource-policy: keep`. Owns: what uninstall deletes. Must not touch: hooks,
//! the final purge of the records (`finalize`).

use std::time::Duration;

use sdk_guest::{Ctx, DeployerError};

use super::driver::{Driver, Step, drive};
use super::objects::Obj;
use super::objects::keep_policy;
use super::resume::{Resume, resume};
use super::state::{
    Action, ActionState, Outcome, Recovery, Running, UNINSTALL_ORDER, first_stage, now, retry,
};
use crate::release::{Release, Status, Storage};

/// Starts uninstalling `name`; `false` if there is nothing to uninstall (a release already
/// `uninstalled` has its records purged).
pub(super) fn start_uninstall(
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

impl Driver<'_, '_> {
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

    pub(super) fn delete(&mut self) -> Result<Step, DeployerError> {
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

    pub(super) fn wait_deleted(&mut self) -> Result<Step, DeployerError> {
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
}
