//! The controller: the watch, and one reconcile per DeployItem event.
//!
//! Data flows one way, stage by stage (`reconcile`):
//! watch (here) → admit (responsibility, early hooks) → lock → decide (contract) → invoke
//! (plugin) → commit (status). Every decision is delegated to [`crate::contract`]; plugin
//! execution to `plugin-runtime`; the host's side of each plugin capability to
//! [`crate::capabilities`].
//!
//! Owns: the metadata-only watch (kube-runtime `Controller`), the start-up sweep that primes
//! the finished-item cache (`sweep`), the watch-fed Target and Context reads (`lookups`), the
//! error policy (per-item exponential backoff) and the
//! orphaned-SyncObject cleaner task.
//! Must not touch: contract rules (in `crate::contract`) or plugin internals.

mod backoff;
mod deployer;
mod events;
mod exports;
mod finished;
mod lookups;
mod reconcile;
mod sweep;
mod workers;
mod written;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::watcher;

use crate::landscaper::DeployItem;

pub use crate::capabilities::TargetClients;
pub use backoff::Backoff;
pub use deployer::{Deployer, Error, Stats};
pub use events::Events;
pub use finished::FinishedCache;
pub use lookups::{Cached, Lookups};
pub use sweep::{Swept, prime_finished};
pub use workers::WorkerCounter;
pub use written::WrittenItems;

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    deployer: Arc<Deployer>,
    namespace: Option<String>,
    workers: usize,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<PartialObjectMeta<DeployItem>> = match namespace.as_deref() {
        Some(ns) => Api::namespaced(deployer.client.clone(), ns),
        None => Api::all(deployer.client.clone()),
    };
    tracing::info!(
        identity = %deployer.deployer.identity,
        types = ?deployer.plugins.deploy_item_types(),
        workers,
        "starting deployer controller"
    );
    let cleaner = match (&deployer.locker, deployer.lock_cleanup_interval) {
        (Some(locker), Some(interval)) => {
            // Replicas start at different times; a random first delay spreads their passes.
            let jitter =
                Duration::from_millis(u64::from(uuid::Uuid::new_v4().as_u128() as u16) % 60_000);
            Some(tokio::spawn(crate::locking::cleaner::run(
                deployer.client.clone(),
                locker.config().prefix.clone(),
                namespace.clone(),
                jitter,
                interval,
            )))
        }
        _ => None,
    };
    // One paginated list instead of a GET per idle item on the watch's first events. Beside
    // the watch, not before it: a page (500 items) is read faster than workers reconcile 500
    // items, so the sweep overtakes the first events at once and delays no job.
    let sweep = tokio::spawn({
        let deployer = deployer.clone();
        let namespace = namespace.clone();
        async move {
            let swept =
                prime_finished(&deployer.client, namespace.as_deref(), &deployer.finished).await;
            if let Err(e) = swept {
                tracing::warn!(error = %crate::apierrors::render_error(&e), "start-up sweep failed; idle items are read one by one");
            }
        }
    });
    // Targets and Contexts from watches: no GET of either per job once they are listed.
    let _lookups = deployer.lookups.watch(namespace.as_deref());
    let plugin_changes = deployer.plugins.changes();
    let controller = Controller::new(api, watcher::Config::default());
    // Ready (`/readyz`) once every item has been listed: from then on nothing is missed.
    let store = controller.store();
    let synced = tokio::spawn({
        let deployer = deployer.clone();
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
            deployer.stats.watch_synced.store(true, Ordering::Relaxed);
            tracing::info!("watch synced: ready");
        }
    });
    controller
        .with_config(ControllerConfig::default().concurrency(workers as u16))
        // A new or removed deployer changes which items are ours: look at every item again.
        .reconcile_all_on(plugin_changes)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, deployer.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %crate::apierrors::render_error(&e), "reconcile error");
            }
        })
        .await;
    synced.abort();
    sweep.abort();
    deployer.stats.watch_synced.store(false, Ordering::Relaxed);
    if let Some(cleaner) = cleaner {
        cleaner.abort();
    }
}

async fn reconcile(
    meta: Arc<PartialObjectMeta<DeployItem>>,
    deployer: Arc<Deployer>,
) -> Result<Action, Error> {
    deployer.stats.reconciles.fetch_add(1, Ordering::Relaxed);
    let _worker = deployer.workers.enter();
    let action = reconcile::reconcile(&meta, &deployer).await?;
    deployer.backoff.succeeded(&item_key(&meta));
    Ok(action)
}

fn item_key(meta: &PartialObjectMeta<DeployItem>) -> String {
    format!(
        "{}/{}",
        meta.metadata.namespace.as_deref().unwrap_or_default(),
        meta.metadata.name.as_deref().unwrap_or_default()
    )
}

fn error_policy(
    meta: Arc<PartialObjectMeta<DeployItem>>,
    error: &Error,
    deployer: Arc<Deployer>,
) -> Action {
    let item = item_key(&meta);
    if error.is_conflict() {
        // Someone else wrote the item: re-read and decide again, soon.
        tracing::debug!(%item, "conflict, re-reading");
        Action::requeue(Duration::from_millis(50))
    } else {
        let after = deployer.backoff.failed(&item);
        tracing::warn!(%item, error = %crate::apierrors::render_error(error), retry_in = ?after, "reconcile failed, backing off");
        Action::requeue(after)
    }
}
