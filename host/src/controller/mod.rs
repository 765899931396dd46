//! The controller: the watch, and one reconcile per DeployItem event.
//!
//! Data flows one way, stage by stage (`reconcile`):
//! watch (here) → admit (responsibility, early hooks) → lock → decide (contract) → invoke
//! (plugin) → commit (status). Every decision is delegated to [`crate::contract`]; plugin
//! execution to `plugin-runtime`; the host's side of each plugin capability to
//! [`crate::capabilities`].
//!
//! Owns: the DeployItem watch (kube-runtime `Controller`; metadata only by default, full objects
//! with `itemCache: full`), the start-up sweep that settles the finished items in the per-item
//! memory (`sweep`), the watch-fed Target and Context reads (`lookups`), the error policy
//! (per-item exponential backoff, kept in `memory`) and the orphaned-SyncObject cleaner task.
//! Must not touch: contract rules (in `crate::contract`) or plugin internals.

mod context;
mod events;
mod exports;
mod lookups;
mod memory;
mod reconcile;
mod sweep;
mod watched;
mod workers;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};

use crate::config::ItemCache;
use crate::landscaper::DeployItem;
use memory::item_key;
use watched::{ItemMeta, WatchedItem};

pub use crate::capabilities::TargetClients;
pub use context::{Context, Error, Stats};
pub use events::Events;
pub use lookups::{Cached, Lookups};
pub use memory::ItemMemory;
pub use sweep::{Swept, prime_finished};
pub use workers::WorkerCounter;

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    workers: usize,
    item_cache: ItemCache,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    tracing::info!(
        identity = %ctx.deployer.identity,
        types = ?ctx.plugins.deploy_item_types(),
        workers,
        ?item_cache,
        "starting deployer controller"
    );
    let cleaner = match (&ctx.locker, ctx.lock_cleanup_interval) {
        (Some(locker), Some(interval)) => {
            // Replicas start at different times; a random first delay spreads their passes.
            let jitter =
                Duration::from_millis(u64::from(uuid::Uuid::new_v4().as_u128() as u16) % 60_000);
            Some(tokio::spawn(crate::locking::cleaner::run(
                ctx.client.clone(),
                locker.config().prefix.clone(),
                namespace.clone(),
                jitter,
                interval,
            )))
        }
        _ => None,
    };
    // Targets and Contexts from watches: no GET of either per job once they are listed.
    let _lookups = ctx.lookups.watch(namespace.as_deref());
    // A restarted container keeps its pod name but holds no lock: give back what its previous
    // run held, or an item another replica now takes would wait on this pod.
    if let Some(locker) = &ctx.locker
        && let Err(e) = locker.release_left_over(namespace.as_deref()).await
    {
        tracing::warn!(error = %crate::apierrors::render_error(&e), "could not release the locks of this pod's previous run; items another replica takes wait for them until this pod is gone");
    }
    // Replicas split the items before the first one is looked at (a view that cannot be read
    // leaves every item to the locks, as without Leases).
    let membership = match &ctx.membership {
        Some(membership) => Some(AbortOnDrop(membership.clone().start().await)),
        None => None,
    };
    match item_cache {
        ItemCache::Metadata => {
            // One paginated list instead of a GET per idle item on the watch's first events.
            // Beside the watch, not before it: a page (500 items) is read faster than workers
            // reconcile 500 items, so the sweep overtakes the first events at once and delays
            // no job. (A full-object watch needs no sweep: its first list holds every status.)
            let sweep = tokio::spawn({
                let ctx = ctx.clone();
                let namespace = namespace.clone();
                async move {
                    let swept =
                        prime_finished(&ctx.client, namespace.as_deref(), &ctx.memory).await;
                    if let Err(e) = swept {
                        tracing::warn!(error = %crate::apierrors::render_error(&e), "start-up sweep failed; idle items are read one by one");
                    }
                }
            });
            drive::<ItemMeta>(&ctx, &namespace, workers, shutdown).await;
            sweep.abort();
        }
        ItemCache::Full => drive::<DeployItem>(&ctx, &namespace, workers, shutdown).await,
    }
    ctx.stats.watch_synced.store(false, Ordering::Relaxed);
    if let Some(cleaner) = cleaner {
        cleaner.abort();
    }
    // A replica that stops gives its share back at once; one that dies leaves its Lease to
    // expire (the renewal task goes with the controller's future either way).
    if let (Some(task), Some(membership)) = (membership, &ctx.membership) {
        drop(task);
        membership.leave().await;
    }
}

/// Aborts the task when the future that spawned it ends or is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn items_api<K: WatchedItem>(ctx: &Context, namespace: &Option<String>) -> Api<K> {
    match namespace.as_deref() {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    }
}

/// A Controller over every item of `api`. Its store keeps no managedFields: both item types skip
/// them when they are read. A deleted item leaves the host's per-item memory with it.
fn controller_for<K: WatchedItem>(api: Api<K>, ctx: &Arc<Context>) -> Controller<K> {
    let writer = reflector::store::Writer::<K>::default();
    let reader = writer.as_reader();
    let split = ctx.clone();
    let ctx = ctx.clone();
    let items = watcher(api, watcher::Config::default())
        .inspect(move |event| match event {
            Ok(watcher::Event::Delete(item)) => ctx.memory.forget(item.meta()),
            Ok(_) => {}
            Err(_) => {
                ctx.stats.watch_restarts.fetch_add(1, Ordering::Relaxed);
            }
        })
        .reflect(writer)
        .applied_objects()
        // Another live replica's item is not even scheduled (the store above keeps it, for when
        // the replicas change); admit checks again for requeues and bulk reconciles.
        .filter(move |item| {
            std::future::ready(item.as_ref().map_or(true, |i| split.may_take(i.meta())))
        });
    // `for_stream` is behind kube-runtime's `unstable-runtime-stream-control` (Cargo.toml).
    kube_runtime::Controller::for_stream(items, reader)
}

/// Runs a controller over the items as `K` until shutdown, and reports ready once its store has
/// listed every item.
async fn drive<K: WatchedItem>(
    ctx: &Arc<Context>,
    namespace: &Option<String>,
    workers: usize,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let controller = controller_for(items_api::<K>(ctx, namespace), ctx);
    let plugin_changes = ctx.plugins.changes();
    // Replicas joining or leaving move items between replicas: every item is looked at again.
    let membership_changes: futures::stream::BoxStream<'static, ()> = match &ctx.membership {
        Some(membership) => membership.changes().boxed(),
        None => futures::stream::pending().boxed(),
    };
    // Ready (`/readyz`) once every item has been listed: from then on nothing is missed.
    let store = controller.store();
    let synced = tokio::spawn({
        let ctx = ctx.clone();
        async move {
            // Asked again on a timer: kube-runtime's readiness wakes only its latest waiter,
            // and the controller itself waits on the same store.
            loop {
                match tokio::time::timeout(Duration::from_millis(250), store.wait_until_ready())
                    .await
                {
                    Ok(Ok(())) => break,
                    Ok(Err(_)) => return,
                    Err(_) => continue,
                }
            }
            ctx.stats.watch_synced.store(true, Ordering::Relaxed);
            tracing::info!("watch synced: ready");
        }
    });
    controller
        .with_config(ControllerConfig::default().concurrency(workers as u16))
        // A new or removed deployer changes which items are ours: look at every item again.
        .reconcile_all_on(plugin_changes)
        .reconcile_all_on(membership_changes)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %crate::apierrors::render_error(&e), "reconcile error");
            }
        })
        .await;
    synced.abort();
}

async fn reconcile<K: WatchedItem>(watched: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.stats.reconciles.fetch_add(1, Ordering::Relaxed);
    let _worker = ctx.workers.enter();
    let action = reconcile::reconcile(watched.watched(), &ctx).await?;
    ctx.memory.succeeded(watched.meta());
    Ok(action)
}

fn error_policy<K: WatchedItem>(watched: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    let item = item_key(watched.meta());
    if error.is_conflict() {
        // Someone else wrote the item: re-read and decide again, soon (a cached item too).
        ctx.memory.conflicted(watched.meta());
        tracing::debug!(%item, "conflict, re-reading");
        Action::requeue(Duration::from_millis(50))
    } else {
        let after = ctx.memory.failed(watched.meta());
        tracing::warn!(%item, error = %crate::apierrors::render_error(error), retry_in = ?after, "reconcile failed, backing off");
        Action::requeue(after)
    }
}
