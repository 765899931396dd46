//! The controller's `Context` (as kube-rs/controller-rs names it): the state every reconcile
//! shares — clients, plugins, hooks, configuration-derived settings, the per-item memory and
//! counters — and the error type that aborts a reconcile.
//!
//! Naming: in the controller, `Context` is this shared state and `ctx` a reference to it;
//! Landscaper's Context resource (`landscaper_model::Context`) is imported as
//! `LandscaperContext` wherever the controller names it (`lookups`, `reconcile::invoke`).
//!
//! Owns: construction from the host configuration. Must not touch: the reconcile flow
//! (`reconcile`), the controller loop (`super::run`).

use crate::metrics::family::{Counters, Histograms};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::Client;
use plugin_runtime::PluginRegistry;

use super::events::Events;
use super::memory::ItemMemory;
use super::workers::WorkerCounter;
use crate::capabilities::TargetClients;
use crate::config::HostConfig;
use crate::contract::CheckpointMode;
use crate::hooks::HookError;
use crate::landscaper::DeployerInformation;
use crate::targetselector::{SelectorError, TargetSelector};

/// Everything a reconcile needs; shared by all workers (`Arc<Context>`).
pub struct Context {
    /// Client of the cluster that holds DeployItems, Targets and Contexts (the "LS cluster").
    pub client: Client,
    /// Client of the cluster the host itself runs in (the "host cluster": its pods, leases).
    /// The same as `client` unless the host runs in a fenced environment.
    pub host_client: Client,
    /// The deployers serving now (swapped by plugin delivery).
    pub plugins: Arc<crate::plugins::LivePlugins>,
    /// Extension hooks, in execution order (empty: the plain contract flow); swapped with the
    /// plugins by plugin delivery.
    pub hooks: Arc<crate::hooks::LiveHooks>,
    pub target_selectors: Vec<TargetSelector>,
    /// This deployer as it signs its jobs (`status.deployer`: name, version, identity).
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
    /// Which live replica takes which item (Leases); `None`: every replica tries every lock.
    pub membership: Option<Arc<crate::membership::Membership>>,
    /// What the host remembers per item: settled versions, own writes, failures in a row.
    pub memory: ItemMemory,
    /// Reconciles in flight.
    pub workers: WorkerCounter,
    /// Interval of the orphaned-SyncObject cleanup (only with locking); `None` = off.
    pub lock_cleanup_interval: Option<Duration>,
    /// Targets and Contexts, from watches while the controller runs.
    pub lookups: Arc<super::lookups::Lookups>,
    /// Downloads for plugins (WIT `fetch`): allowlist, limits, cache.
    pub fetcher: Arc<crate::capabilities::Fetcher>,
    /// Outgoing HTTP for plugins (WIT 1.5): `http.allow`, limits, metrics.
    pub http: Arc<crate::capabilities::HttpService>,
    pub stats: Stats,
}

impl Context {
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
            hooks: Arc::new(crate::hooks::LiveHooks::new(hooks)),
            events,
            locker,
            membership: config
                .membership_config()
                .map(|m| Arc::new(crate::membership::Membership::new(host_client.clone(), m))),
            memory: ItemMemory::default(),
            workers,
            lock_cleanup_interval: config.cleanup_interval(),
            lookups: {
                let lookups = super::lookups::Lookups::new(client.clone());
                // A deleted Target's cluster client goes with it (unless another Target uses it).
                let clients = target_clients.clone();
                lookups.targets.on_delete(move |target| {
                    clients.forget_target(
                        target.metadata.namespace.as_deref().unwrap_or_default(),
                        target.metadata.name.as_deref().unwrap_or_default(),
                    )
                });
                Arc::new(lookups)
            },
            host_client,
            client,
            plugins: Arc::new(crate::plugins::LivePlugins::new(plugins)),
            target_selectors: config.target_selectors.clone(),
            deployer,
            requeue_interval: config.requeue_interval()?,
            checkpoint_mode: CheckpointMode::Standard,
            target_clients,
            fetcher: Arc::new(crate::capabilities::Fetcher::new(config.fetch.clone())?),
            http: Arc::new(crate::capabilities::HttpService::new(&config.http)?),
            stats: Stats::default(),
        })
    }
}

impl Context {
    /// Whether this replica may take the item: the split by Leases names it (or is off), or
    /// this replica holds its lock.
    pub fn may_take(&self, meta: &kube::api::ObjectMeta) -> bool {
        let Some(membership) = &self.membership else {
            return true;
        };
        let uid = meta.uid.as_deref().unwrap_or_default();
        membership.owns(uid) || self.locker.as_ref().is_some_and(|l| l.holds(uid))
    }
}

/// Counters exposed for tests, benchmarks, logs and `/metrics` (`crate::metrics`).
#[derive(Debug)]
pub struct Stats {
    pub reconciles: AtomicU64,
    pub jobs_finished: AtomicU64,
    pub plugin_calls: AtomicU64,
    /// Hook stages run (each may call several hook plugins).
    pub hook_stages: AtomicU64,
    /// Hook-forced re-applies of finished items.
    pub reapplies: AtomicU64,
    /// The controller's watch has listed every DeployItem once (`/readyz`).
    pub watch_synced: std::sync::atomic::AtomicBool,
    /// Errors of the DeployItem watch: each ends the watch, which starts again.
    pub watch_restarts: AtomicU64,
    /// Finished jobs by DeployItem type and final phase (`Deleted`: the item went).
    pub jobs: Counters<2>,
    /// From `transitionTimes.initTime` to the write that finished the job, by type.
    pub job_durations: Histograms<1>,
    /// Plugin invocations by type and operation (reconcile, delete), failed or not.
    pub plugin_call_durations: Histograms<2>,
    /// Plugin invocations that returned an error, by type, operation and the error's reason.
    pub plugin_call_failures: Counters<3>,
}

/// Upper bounds of the job-duration histogram, in seconds (a job may run for its timeout).
const JOB_SECONDS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1200.0,
];
/// Upper bounds of the plugin-invocation histogram, in seconds.
const PLUGIN_CALL_SECONDS: [f64; 11] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
];

impl Default for Stats {
    fn default() -> Self {
        Self {
            reconciles: AtomicU64::new(0),
            jobs_finished: AtomicU64::new(0),
            plugin_calls: AtomicU64::new(0),
            hook_stages: AtomicU64::new(0),
            reapplies: AtomicU64::new(0),
            watch_synced: Default::default(),
            watch_restarts: AtomicU64::new(0),
            jobs: Counters::new(
                "wasm_deployer_jobs_finished_total",
                "Jobs finished (final phase and jobIDFinished written), by DeployItem type and phase; phase Deleted: the item was deleted.",
                ["type", "phase"],
            ),
            job_durations: Histograms::new(
                "wasm_deployer_job_duration_seconds",
                "From a job's transitionTimes.initTime to the write that finished it, by DeployItem type.",
                ["type"],
                &JOB_SECONDS,
            ),
            plugin_call_durations: Histograms::new(
                "wasm_deployer_plugin_call_duration_seconds",
                "Plugin invocations (the call into the plugin, host capabilities included), by DeployItem type and operation.",
                ["type", "operation"],
                &PLUGIN_CALL_SECONDS,
            ),
            plugin_call_failures: Counters::new(
                "wasm_deployer_plugin_call_failures_total",
                "Plugin invocations that returned an error, by DeployItem type, operation and reason (PluginTrapped, PluginDeadlineExceeded, PluginMemoryLimitExceeded, or the plugin's own).",
                ["type", "operation", "reason"],
            ),
        }
    }
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

/// Errors that abort one reconcile; the item is retried after its backoff. Errors of a job
/// (a plugin failure, a missing Context) are not these: they are recorded on the item.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("encoding: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Selector(#[from] SelectorError),
    #[error("item {namespace}/{name} was replaced while reconciling (different UID)")]
    ItemReplaced { namespace: String, name: String },
    #[error("{0}")]
    Hook(#[from] HookError),
}

impl Error {
    /// Someone else wrote the item first (HTTP 409): re-read and decide again.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(s)) if s.code == 409)
    }

    /// The object is gone (404) or was replaced (409 on a UID precondition): after the
    /// finalizer is removed, both mean the deletion went through.
    pub fn is_gone(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(s)) if s.code == 404 || s.code == 409)
    }
}
