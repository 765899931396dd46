//! Stage 1, admit: is this item ours, and does it need work? Everything before the lock.
//!
//! In order: the replica split (an item another live replica takes is left to it); the `Start`
//! hook; the item memory (an unchanged settled item costs no read; the
//! object of an own write or a trusted watch copy stands in for a read: `ItemMemory`);
//! responsibility check 1 (the type, from annotations or the item); check 2 (the Target in the
//! item's namespace against the target selectors); the full item; the hooks
//! `DuringResponsibilityCheck`, `AfterResponsibilityCheck` and `ShouldReconcile`; and the job
//! decision "needs work" — all before any write, so replicas never lock an item that needs none.
//!
//! Owns: the reads responsibility needs. Must not touch: the item's status or its lock.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::controller::Action;
use plugin_runtime::DeployerPlugin;

use super::hooks::{Flow, HookView, action, run_stage};
use super::item::TargetRef;
use crate::apierrors::Lookup;
use crate::contract::job::reapplicable;
use crate::contract::responsibility::{self, ItemRoute};
use crate::contract::{JobStep, next_step};
use crate::controller::context::{Context, Error};
use crate::controller::watched::Watched;
use crate::hooks::{Accumulated, HookError, HookResult, HookType};
use crate::landscaper::DeployItem;
use crate::targetselector;

/// An item this deployer is responsible for and that needs work.
pub(super) struct Admitted {
    pub item: DeployItem,
    /// The type responsibility was decided on (annotation, else `spec.type`).
    pub deploy_item_type: String,
    pub plugin: Arc<dyn DeployerPlugin>,
    pub target: TargetRef,
    pub flow: Flow,
}

/// The outcome of the admit stage.
pub(super) enum Admission {
    /// Not ours, or nothing to do: return this Action without any write.
    Skip(Action),
    Admitted(Box<Admitted>),
}

use Admission::Skip;

/// Runs the admit stage for the item the watch delivered.
pub(super) async fn admit(watched: Watched<'_>, ctx: &Context) -> Result<Admission, Error> {
    let meta = watched.meta;
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let items: Api<DeployItem> = Api::namespaced(ctx.client.clone(), namespace);
    let annotated = responsibility::route_from_annotations(meta.annotations.as_ref());
    let annotated_type = annotated.as_ref().map(|r| r.deploy_item_type.as_str());
    let mut acc = Accumulated::default();

    // Another live replica's item (by the replicas' Leases): nothing to run, read or lock here
    // — unless this replica still holds its lock (a job begun before the replicas changed, or
    // a release that failed), which it finishes or releases itself. A change of the replicas
    // looks at every item again (`membership.changes()`).
    if !ctx.may_take(meta) {
        return Ok(Skip(Action::await_change()));
    }
    let uid = meta.uid.as_deref().unwrap_or_default();

    // Hooks: Start, the very first step (no item, no target).
    if ctx.hooks.has(annotated_type, HookType::Start) {
        ctx.stats.hook_stages.fetch_add(1, Ordering::Relaxed);
        acc.add(
            ctx.hooks
                .run(HookType::Start, annotated_type, None, None)
                .await?,
        );
        if acc.aborted() {
            return Ok(Skip(action(&acc, None)));
        }
    }

    // An unchanged item we saw finished: nothing to read, lock or write — unless a hook may
    // take or reopen it.
    // That includes an event of an earlier write of ours when our newest write finished it.
    if let Some(rv) = meta.resource_version.as_deref()
        && !ctx.hooks.may_reopen(annotated_type)
        && ctx.memory.settled(uid, rv)
    {
        return Ok(Skip(Action::await_change()));
    }

    // Responsibility, check 1: the type (from annotations when present).
    // An event of our own write needs no read: we hold that object (or a newer one of ours).
    // Nor does an event of a full-object watch (`itemCache: full`), which holds the item —
    // unless that copy may be behind (`ItemMemory::fresh_copy`).
    let prefetched = ctx.memory.fresh_copy(meta, watched.item);
    let (route, prefetched) = match (annotated, prefetched) {
        (Some(route), prefetched) => (route, prefetched),
        (None, Some(item)) => (responsibility::route_from_item(&item), Some(item)),
        (None, None) => {
            let name = meta.name.as_deref().unwrap_or_default();
            let Some(item) = items.get_opt(name).await? else {
                return Ok(Skip(Action::await_change()));
            };
            ctx.memory.read_from_server(&item);
            (responsibility::route_from_item(&item), Some(item))
        }
    };
    let Some(plugin) = ctx.plugins.for_type(&route.deploy_item_type) else {
        return Ok(Skip(Action::await_change()));
    };

    // Responsibility, check 2: the Target, read from the item's own namespace.
    let (target, responsible) = read_target(ctx, namespace, &route).await?;
    let item_type = Some(route.deploy_item_type.as_str());
    if !responsible
        && !ctx
            .hooks
            .has(item_type, HookType::DuringResponsibilityCheck)
    {
        return Ok(Skip(Action::await_change()));
    }

    // Only now the full item.
    let Some(item) = read_item(ctx, meta, &items, prefetched).await? else {
        return Ok(Skip(Action::await_change()));
    };
    let flow = match decision_hooks(ctx, &route, &item, &target, responsible, acc).await? {
        Work::Needed(flow) => flow,
        Work::None(action) => return Ok(Skip(action)),
    };
    Ok(Admission::Admitted(Box::new(Admitted {
        item,
        deploy_item_type: route.deploy_item_type,
        plugin,
        target,
        flow,
    })))
}

/// Reads the Target the item names and checks it against the target selectors.
/// Returns the Target and whether this deployer is responsible by it.
async fn read_target(
    ctx: &Context,
    namespace: &str,
    route: &ItemRoute,
) -> Result<(TargetRef, bool), Error> {
    let Some(target_name) = &route.target_name else {
        return Ok((TargetRef::default(), true));
    };
    Ok(
        match ctx.lookups.targets.get(namespace, target_name).await? {
            // A cluster that does not serve Targets has none: the job fails with NoTargetFound.
            Lookup::Missing | Lookup::KindNotServed => (
                TargetRef {
                    object: None,
                    missing: true,
                },
                true,
            ),
            Lookup::Found(t) => {
                let responsible = targetselector::matches_any(&ctx.target_selectors, &t)?;
                (
                    TargetRef {
                        object: Some(t),
                        missing: false,
                    },
                    responsible,
                )
            }
        },
    )
}

/// The full item (the one read for check 1 if there was one). `None`: it is gone.
async fn read_item(
    ctx: &Context,
    meta: &ObjectMeta,
    items: &Api<DeployItem>,
    prefetched: Option<DeployItem>,
) -> Result<Option<DeployItem>, Error> {
    let item = match prefetched {
        Some(item) => item,
        None => {
            let name = meta.name.as_deref().unwrap_or_default();
            match items.get_opt(name).await? {
                Some(item) => {
                    ctx.memory.read_from_server(&item);
                    item
                }
                None => {
                    // Gone: as its Delete event would, it leaves every memory.
                    ctx.memory.forget(meta);
                    return Ok(None);
                }
            }
        }
    };
    if item.metadata.uid != meta.uid {
        return Err(Error::ItemReplaced {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        });
    }
    Ok(Some(item))
}

/// Whether an item needs work, after the hooks had their say.
enum Work {
    Needed(Flow),
    /// Not ours after all, or nothing to do.
    None(Action),
}

/// The hooks around the responsibility and "needs work" decisions, then that decision.
/// A hook error ends the hook stages; it is recorded on the item if there is a job to record
/// it in, and aborts the reconcile otherwise.
async fn decision_hooks(
    ctx: &Context,
    route: &ItemRoute,
    item: &DeployItem,
    target: &TargetRef,
    mut responsible: bool,
    mut acc: Accumulated,
) -> Result<Work, Error> {
    let view = HookView::new(item, target.object.as_ref());
    let mut stages = Stages {
        ctx,
        item_type: &route.deploy_item_type,
        view: &view,
        error: None,
    };
    if let Some(r) = stages.run(HookType::DuringResponsibilityCheck).await {
        // A result overrides the target responsibility check.
        if let Some(r) = r {
            responsible = !r.abort_reconcile;
        }
        acc.add(r);
        acc.clear_abort();
    }
    if !responsible {
        return match stages.error {
            Some(e) => Err(e.into()),
            None => Ok(Work::None(action(&acc, None))),
        };
    }
    if let Some(r) = stages.run(HookType::AfterResponsibilityCheck).await {
        acc.add(r);
        if acc.aborted() {
            return Ok(Work::None(action(&acc, None)));
        }
    }
    let needs_work = next_step(item, target.missing) != JobStep::Finished;
    let mut forced = false;
    if let Some(r) = stages.run(HookType::ShouldReconcile).await {
        // Can force a reconcile; cannot stop one the default logic requires.
        forced = !needs_work && r.is_some_and(|r| !r.abort_reconcile) && reapplicable(item);
        acc.add(r);
        acc.clear_abort();
    }
    let hook_error = stages.error;
    if !needs_work && !forced {
        if let Some(e) = hook_error {
            ctx.events
                .warning(item, "ExtensionHookFailed", e.to_string());
            return Err(e.into());
        }
        // Nothing to do: remember it, so its next unchanged event is free.
        ctx.memory.settle(item);
        return Ok(Work::None(action(&acc, None)));
    }
    Ok(Work::Needed(Flow {
        forced,
        hook_error,
        acc,
    }))
}

/// The hook stages before the lock, on one version of the item; the first error ends them.
struct Stages<'a> {
    ctx: &'a Context,
    item_type: &'a str,
    view: &'a HookView<'a>,
    error: Option<HookError>,
}

impl Stages<'_> {
    /// Runs the stage if hooks are registered for it and no earlier stage failed. `None`: it
    /// did not run (or failed, kept in `error`); `Some(result)`: its aggregate.
    async fn run(&mut self, hook_type: HookType) -> Option<Option<HookResult>> {
        if self.error.is_some() || !self.ctx.hooks.has(Some(self.item_type), hook_type) {
            return None;
        }
        match run_stage(self.ctx, hook_type, self.item_type, self.view).await {
            Ok(r) => Some(r),
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}
