//! The controller: watch → responsibility → contract → plugin → status.
//!
//! It owns the I/O of the deployer contract: a metadata-only watch of DeployItems
//! (kube-runtime `Controller`), the reads the responsibility check needs, the status and
//! finalizer writes, and the call into the plugin. Every decision is delegated to
//! [`crate::contract`]; plugin execution to `plugin-runtime`.

mod events;
mod exports;
mod finished;
mod item;
mod services;
mod workers;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::watcher;
use plugin_runtime::PluginRegistry;

use crate::config::HostConfig;
use crate::contract::CheckpointMode;
use crate::landscaper::{DeployItem, DeployerInformation};
use crate::targetselector::TargetSelector;

pub use events::{EventMode, Events};
pub use finished::FinishedCache;
pub use item::now;
pub use services::TargetClients;
pub use workers::WorkerCounter;

/// Everything a reconcile needs; shared by all workers.
pub struct Deployer {
    /// Client of the cluster that holds DeployItems, Targets and Contexts (the "LS cluster").
    pub client: Client,
    /// Client of the cluster the host itself runs in (the "host cluster": its pods, leases).
    /// The same as `client` unless the host runs in a fenced environment.
    pub host_client: Client,
    pub plugins: Arc<PluginRegistry>,
    /// Extension hooks, in execution order (empty: the plain contract flow).
    pub hooks: crate::hooks::HookSet,
    pub target_selectors: Vec<TargetSelector>,
    pub deployer: DeployerInformation,
    /// Poll interval of unfinished jobs (Landscaper: 5 s).
    pub requeue_interval: Duration,
    /// Test hook for the progressing timeout.
    pub checkpoint_mode: CheckpointMode,
    /// Kubernetes clients for the plugins' Targets.
    pub target_clients: TargetClients,
    /// Kubernetes Events on DeployItems.
    pub events: Events,
    /// SyncObject locking; `None` when only one replica can run.
    pub locker: Option<crate::locking::Locker>,
    /// Items known finished at a resourceVersion.
    pub finished: FinishedCache,
    /// Reconciles in flight.
    pub workers: WorkerCounter,
    /// Interval of the orphaned-SyncObject cleanup (only with locking); `None` = off.
    pub lock_cleanup_interval: Option<Duration>,
    pub stats: Stats,
}

impl Deployer {
    /// Builds the shared reconcile state from the host configuration.
    pub fn new(
        client: Client,
        host_client: Client,
        plugins: Arc<PluginRegistry>,
        config: &HostConfig,
        target_clients: TargetClients,
    ) -> anyhow::Result<Self> {
        let deployer = config.deployer_information();
        let events = Events::new(
            client.clone(),
            &deployer.name,
            &deployer.identity,
            config.events.unwrap_or_default(),
        );
        let locker = config.locking_enabled().then(|| {
            crate::locking::Locker::new(client.clone(), host_client.clone(), config.lock_config())
        });
        let workers = WorkerCounter::new("deployitems", config.workers());
        let hooks = crate::hooks::HookSet::from_config(
            config.hooks.as_deref().unwrap_or_default(),
            &plugins,
        )?;
        Ok(Self {
            hooks,
            events,
            locker,
            finished: FinishedCache::default(),
            workers,
            lock_cleanup_interval: config.cleanup_interval(),
            host_client,
            client,
            plugins,
            target_selectors: config.target_selectors.clone(),
            deployer,
            requeue_interval: config.requeue_interval()?,
            checkpoint_mode: CheckpointMode::Standard,
            target_clients,
            stats: Stats::default(),
        })
    }
}

/// Counters exposed for tests, benchmarks and logs.
#[derive(Default, Debug)]
pub struct Stats {
    pub reconciles: AtomicU64,
    pub jobs_finished: AtomicU64,
    pub plugin_calls: AtomicU64,
    /// Hook stages run (each may call several hook plugins).
    pub hook_stages: AtomicU64,
    /// Hook-forced re-applies of finished items.
    pub reapplies: AtomicU64,
}

impl Stats {
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.reconciles.load(Ordering::Relaxed),
            self.jobs_finished.load(Ordering::Relaxed),
            self.plugin_calls.load(Ordering::Relaxed),
        )
    }
}

/// Errors that abort one reconcile; the item is retried after a short delay.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("encoding: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Hook(String),
}

impl Error {
    fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(s)) if s.code == 409)
    }
}

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
    Controller::new(api, watcher::Config::default())
        .with_config(ControllerConfig::default().concurrency(workers as u16))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, deployer)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile error");
            }
        })
        .await;
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
    item::reconcile(&meta, &deployer).await
}

fn error_policy(
    meta: Arc<PartialObjectMeta<DeployItem>>,
    error: &Error,
    _: Arc<Deployer>,
) -> Action {
    let name = meta.metadata.name.as_deref().unwrap_or_default();
    let namespace = meta.metadata.namespace.as_deref().unwrap_or_default();
    if error.is_conflict() {
        // Someone else wrote the item: re-read and decide again, soon.
        tracing::debug!(item = %format!("{namespace}/{name}"), "conflict, re-reading");
        Action::requeue(Duration::from_millis(50))
    } else {
        tracing::warn!(item = %format!("{namespace}/{name}"), error = %error, "reconcile failed, retrying");
        Action::requeue(Duration::from_secs(1))
    }
}
