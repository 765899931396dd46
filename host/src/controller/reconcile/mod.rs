//! One reconcile of one DeployItem, as stages that run in this order and hand each other plain
//! values:
//!
//! ```text
//!  admit ───────► lock ──────► decide ──────► invoke ──────► commit
//!  admit.rs       (here)       decide.rs      invoke.rs      commit.rs
//!  Start hook,    SyncObject   the job step   Target,        the step's result
//!  item memory,   (several     (contract),    Context,       → status (the one
//!  type,          replicas     pickup write,  finalizer,     write path), export,
//!  Target and     only), then  Before* hooks  plugin call    events, End hook
//!  selectors,     re-read
//!  During/After/
//!  ShouldReconcile
//! ```
//!
//! An item that is not ours leaves `admit` before any write. A 409 on any write aborts the
//! reconcile (the item is re-read and decided again); other API errors back off per item.
//! Hook points are in `hooks`; the hook-forced re-apply of finished items in `reapply`.

use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use tracing::Instrument;

mod admit;
mod commit;
mod decide;
mod hooks;
mod invoke;
mod item;
mod plugin_view;
mod reapply;

use super::context::{Context, Error};
use super::watched::Watched;
use crate::landscaper::DeployItem;
use crate::locking::{Lock, LockOutcome};
use admit::{Admission, Admitted};
use item::ItemCtx;

/// Reconciles the item the watch delivered.
pub async fn reconcile(watched: Watched<'_>, ctx: &Arc<Context>) -> Result<Action, Error> {
    let Admitted {
        mut item,
        deploy_item_type,
        plugin,
        target,
        flow,
    } = match admit::admit(watched, ctx).await? {
        Admission::Skip(action) => return Ok(action),
        Admission::Admitted(admitted) => *admitted,
    };
    let namespace = item.metadata.namespace.clone().unwrap_or_default();
    let name = item.metadata.name.clone().unwrap_or_default();
    let items: Api<DeployItem> = Api::namespaced(ctx.client.clone(), &namespace);
    let lock = match lock(ctx, &items, &mut item).await? {
        Locked::Elsewhere(action) => return Ok(action),
        Locked::Here(lock) => lock,
    };
    let being_deleted = item.is_being_deleted();
    let status = item.status();
    let span = tracing::info_span!(
        "reconcile",
        item = %format!("{namespace}/{name}"),
        job = %status.job_id,
        phase = %status.phase,
        plugin = %plugin.description().name
    );
    let item_ctx = ItemCtx {
        ctx: ctx.clone(),
        items,
        plugin,
        deploy_item_type,
        namespace,
        name,
        retry_hint: Default::default(),
    };
    let result = async {
        match item_ctx.decide(item, &target, flow).await? {
            decide::Decided::Done(action) => Ok(action),
            decide::Decided::Run(run) => {
                let (step, mut item) = *run;
                let outcome = item_ctx.invoke(&mut item, &target, &step).await?;
                item_ctx.commit(item, &target, step, outcome).await
            }
        }
    }
    .instrument(span)
    .await;
    if let (Some(locker), Some(lock)) = (&ctx.locker, lock) {
        // An item being deleted may be gone once its job ends (the finalizer removed, or the
        // removal answered with an error after it applied): then its lock goes with it.
        locker.unlock(lock, being_deleted).await;
    }
    result
}

/// The outcome of the lock stage.
enum Locked {
    /// Locked by this replica (`None`: no locking configured).
    Here(Option<Lock>),
    /// Another replica holds the lock: try again later.
    Elsewhere(Action),
}

/// Takes the item's SyncObject (only when several replicas may run), then re-reads the item:
/// another replica may have finished the job between our read and our lock.
async fn lock(
    ctx: &Context,
    items: &Api<DeployItem>,
    item: &mut DeployItem,
) -> Result<Locked, Error> {
    let Some(locker) = &ctx.locker else {
        return Ok(Locked::Here(None));
    };
    let namespace = item.metadata.namespace.as_deref().unwrap_or_default();
    let name = item.metadata.name.as_deref().unwrap_or_default();
    let uid = item.metadata.uid.as_deref().unwrap_or_default();
    let lock = match locker.lock(namespace, name, uid).await? {
        LockOutcome::NotLocked => {
            tracing::debug!(item = %format!("{namespace}/{name}"), "locked by another replica");
            return Ok(Locked::Elsewhere(Action::requeue(
                locker.config().retry_after,
            )));
        }
        LockOutcome::Locked(lock) => lock,
    };
    match items.get_opt(name).await {
        Ok(Some(fresh)) if fresh.metadata.uid == item.metadata.uid => {
            *item = fresh;
            Ok(Locked::Here(Some(lock)))
        }
        // Gone, or deleted and created again: its lock goes with it.
        other => {
            locker.unlock(lock, true).await;
            other?;
            Ok(Locked::Elsewhere(Action::await_change()))
        }
    }
}
