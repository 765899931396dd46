//! `deployer-host run`: the controller against a real cluster — its clients, the WasmPlugin
//! CRD, the plugins, plugin delivery, metrics and the controller loop, started in that order.
//!
//! Owns: the flags and the start-up order. Must not touch: the controller
//! (`crate::controller`) or plugin loading (`crate::plugins`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

use crate::config::HostConfig;
use crate::controller::{self, Context, TargetClients};
use crate::{plugins, shutdown_signal};

// The command's help text is the doc comment of `Command::Run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Kubeconfig of the cluster that holds DeployItems, Targets and Contexts
    /// (default: in-cluster configuration).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the cluster the host runs in, when it differs from the one holding
    /// DeployItems (fenced environments). Default: in a pod given `--kubeconfig`, the pod's
    /// own cluster (in-cluster configuration); otherwise the same cluster as `--kubeconfig`.
    #[arg(long, env = "HOST_KUBECONFIG")]
    host_kubeconfig: Option<PathBuf>,
    /// Host configuration file (YAML).
    #[arg(long, env = "DEPLOYER_CONFIG")]
    config: Option<PathBuf>,
    /// Directory of plugin components (overrides the config).
    #[arg(long, env = "DEPLOYER_PLUGINS")]
    plugins: Option<PathBuf>,
    /// Serve Prometheus metrics and /healthz on this address.
    #[arg(long, env = "DEPLOYER_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
}

impl RunArgs {
    pub async fn run(self) -> anyhow::Result<()> {
        let mut config = load_config(self.config.as_ref(), self.plugins)?;
        let open_files = super::open_files::raise();
        tracing::info!(open_files = ?open_files, "open-files limit");
        // Under a low open-files limit, keep no more Target clients than sockets fit.
        if let Some(limit) = open_files
            && config.target_clusters.max_clients.is_none()
        {
            let fit = super::open_files::clients_within(limit);
            if fit < crate::capabilities::ClusterSettings::default().max_clients {
                tracing::info!(
                    max_clients = fit,
                    open_files = limit,
                    "targetClusters.maxClients lowered to fit the open-files limit"
                );
                config.target_clusters.max_clients = Some(fit);
            }
        }
        let client = client_from(self.kubeconfig.as_ref()).await?;
        let host_client = match (&self.host_kubeconfig, &self.kubeconfig) {
            (Some(path), _) => client_from(Some(path)).await?,
            // In a pod with a kubeconfig for the Landscaper cluster (the chart's
            // `deployer.landscaperClusterKubeconfig`): the host cluster is the pod's own.
            (None, Some(_)) if in_cluster() => kube::Client::try_from(kube::Config::incluster()?)?,
            (None, _) => client.clone(),
        };
        if let Ok(pod) = std::env::var("MY_POD_NAME") {
            tracing::info!(pod = %pod, "replica identity");
        }
        // WasmPlugins live in the host's cluster: so does their CRD.
        if config.crd_management.deploy_crd() {
            let outcome = crate::crds::ensure_wasm_plugin_crd(&host_client)
                .await
                .context(
                    "keeping the WasmPlugin CRD up to date (crdManagement.deployCrd: false \
                     leaves it to you)",
                )?;
            tracing::info!(?outcome, "WasmPlugin CRD");
        }
        let ctx = start_host(&config, client, host_client, self.metrics_listen).await?;
        if ctx.locker.is_some() {
            tracing::info!("locking enabled (more than one replica may run)");
        }
        controller::run(
            ctx,
            config.namespace.clone(),
            config.workers(),
            config.item_cache,
            shutdown_signal(),
        )
        .await;
        Ok(())
    }
}

/// Loads the plugins, builds the controller's context and starts what runs beside the
/// controller: the container deployer's garbage collector, plugin delivery, metrics.
async fn start_host(
    config: &HostConfig,
    client: kube::Client,
    host_client: kube::Client,
    metrics_listen: Option<SocketAddr>,
) -> anyhow::Result<Arc<Context>> {
    // Large plugins (Python, JavaScript: seconds to compile cold) do not hold up
    // start-up: after this window the host serves what has loaded, the rest joins
    // when ready (hook plugins the configuration names are always waited for).
    let (registry, container, pending) = plugins::load_within(
        config,
        &plugins::Clusters {
            landscaper: client.clone(),
            host: host_client.clone(),
        },
        std::time::Duration::from_secs(2),
    )
    .await?;
    if let Some(container) = &container
        && let Some(interval) = container.settings().gc_interval
    {
        tokio::spawn(
            container
                .garbage_collector()
                .run(interval, std::future::pending()),
        );
    }
    let ctx = Arc::new(Context::new(
        client,
        host_client,
        registry,
        config,
        TargetClients::new(config.target_clusters.settings()?),
    )?);
    // Plugin delivery runs as long as the process (dropping its handle detaches the task).
    let (catalog, _delivery) = plugins::start_delivery(
        config,
        ctx.host_client.clone(),
        ctx.plugins.clone(),
        ctx.hooks.clone(),
    )?;
    if let Some(pending) = pending {
        let loading = ctx.plugins.loading.clone();
        loading.store(pending.sources.len(), std::sync::atomic::Ordering::Relaxed);
        tokio::spawn(pending.arrive(catalog.clone(), loading));
    }
    if let Some(addr) = metrics_listen {
        tokio::spawn(crate::metrics::serve(addr, ctx.clone(), Some(catalog)));
    }
    Ok(ctx)
}

/// The host configuration of `path` (default: the defaults), with `--plugins` over its
/// plugin directory.
pub(super) fn load_config(
    path: Option<&PathBuf>,
    plugins: Option<PathBuf>,
) -> anyhow::Result<HostConfig> {
    let mut config = match path {
        Some(p) => HostConfig::from_file(p)?,
        None => HostConfig::default(),
    };
    if let Some(dir) = plugins {
        config.plugins.dir = Some(dir);
    }
    Ok(config)
}

/// Running in a Kubernetes pod (in-cluster configuration available).
fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        && std::path::Path::new("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
}

/// A client from a kubeconfig file, or the in-cluster / `KUBECONFIG` configuration.
async fn client_from(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}
