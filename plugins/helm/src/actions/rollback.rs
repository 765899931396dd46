//! `helm rollback`: a new revision "Rollback to N" with the target revision's manifest, hooks,
//! chart and values (also as an atomic upgrade's recovery). Owns: starting a rollback. Must
//! not touch: its stages (the driver's).

use std::time::Duration;

use sdk_guest::{Ctx, DeployerError};
use serde_json::{Map, json};

use super::driver::{done_release, drive};
use super::resume::{Resume, resume};
use super::state::{
    Action, ActionState, Flags, Outcome, Recovery, Running, action_error, first_stage, now, retry,
};
use crate::release::{Info, Release, Status, Storage};

/// Starts a rollback of `name` to `to` (0: the previous revision) as a new revision.
#[allow(clippy::too_many_arguments)]
pub(super) fn start_rollback(
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
