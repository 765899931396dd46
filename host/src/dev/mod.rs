//! `deployer-host dev`: the whole system on one machine, no cluster needed.
//!
//! Starts the embedded API server (in-process for the controller, HTTP on loopback for kubectl),
//! installs the Landscaper CRDs, creates namespace `default`, a Target `default` whose kubeconfig
//! points at the server itself and a Context `default`, loads the plugins, runs the controller
//! and — unless switched off — plays Landscaper's side of the job protocol ([`landscaper`]).

pub mod kubelet;
pub mod landscaper;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use embedded_apiserver::ApiServer;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::config::HostConfig;
use crate::controller::{self, Context};
use crate::landscaper::{KUBERNETES_CLUSTER_TARGET_TYPE, Target};
use crate::plugins;

/// The project's own CRDs (plugin delivery's `WasmPlugin`).
pub const OWN_CRDS: [&str; 1] = [crate::crds::WASM_PLUGIN_CRD];

/// Options of `deployer-host dev`.
#[derive(Clone, Debug)]
pub struct DevOptions {
    pub listen: SocketAddr,
    pub kubeconfig_out: PathBuf,
    pub data_dir: Option<PathBuf>,
    /// Play Landscaper's part (new jobIDs on create, spec change, deletion).
    pub simulate_landscaper: bool,
    /// YAML files or directories of YAML files whose objects are created once ready.
    pub apply: Vec<PathBuf>,
    /// Play kubelet and controllers for readiness (Pods Running, Deployments available, ...).
    pub simulate_workloads: bool,
    /// Faults the embedded API server injects (none by default).
    pub faults: embedded_apiserver::FaultConfig,
    /// Run the container deployer's pods ([`kubelet::ProcessKubelet`]) ...
    pub run_pods: bool,
    /// ... as local processes (default) or in real containers.
    pub pod_runtime: kubelet::PodRuntime,
    /// Authenticate and authorize with RBAC, serving HTTPS (kubectl sends tokens only over TLS)
    /// with a certificate generated at start; the kubeconfig written carries its CA and a
    /// random administrator token.
    pub rbac: bool,
}

/// A running dev environment (also used by tests, which skip the HTTP listener).
pub struct DevEnvironment {
    pub server: ApiServer,
    pub client: Client,
    /// Kubeconfig text of the `default` Target.
    pub target_kubeconfig: String,
}

impl DevEnvironment {
    /// Creates the API server with CRDs, namespace, Target and Context. `server_url` is what
    /// the `default` Target's kubeconfig points at.
    pub async fn bootstrap(server: ApiServer, server_url: &str) -> anyhow::Result<Self> {
        Self::bootstrap_with(server, ApiServer::kubeconfig_yaml(server_url)).await
    }

    /// [`DevEnvironment::bootstrap`] with the `default` Target's kubeconfig given whole (an
    /// HTTPS server's, with its CA and token).
    pub async fn bootstrap_with(
        server: ApiServer,
        target_kubeconfig: String,
    ) -> anyhow::Result<Self> {
        for crd in crate::crds::landscaper() {
            server
                .install_object(serde_json::to_value(crd)?)
                .context("installing Landscaper's CRDs")?;
        }
        for crd in OWN_CRDS {
            server
                .install_yaml_documents(crd)
                .context("installing the CRDs")?;
        }
        let client = server.client();
        ensure_default_objects(&client, &target_kubeconfig).await?;
        Ok(Self {
            server,
            client,
            target_kubeconfig,
        })
    }
}

/// Installs Landscaper's CRDs through the API of any cluster (the embedded server installs them
/// directly) and waits until each is established and served.
pub async fn install_landscaper_crds(client: &Client) -> anyhow::Result<()> {
    install_crds(client, crate::crds::landscaper()).await
}

/// Installs the project's own CRDs (`WasmPlugin`) like [`install_landscaper_crds`].
pub async fn install_own_crds(client: &Client) -> anyhow::Result<()> {
    let crds = OWN_CRDS
        .iter()
        .map(|text| serde_yaml::from_str(text).context("parsing a CRD"))
        .collect::<anyhow::Result<_>>()?;
    install_crds(client, crds).await
}

async fn install_crds(
    client: &Client,
    crds_to_install: Vec<CustomResourceDefinition>,
) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for crd in crds_to_install {
        let name = crd.metadata.name.clone().unwrap_or_default();
        if crds.get_opt(&name).await?.is_none() {
            crds.create(&PostParams::default(), &crd)
                .await
                .with_context(|| format!("creating CRD {name}"))?;
        }
        names.push(name);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for name in names {
        loop {
            let established = crds.get(&name).await?.status.is_some_and(|s| {
                s.conditions
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established {
                break;
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "CRD {name} not established after 30s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// How often one set-up request is tried before dev mode gives up (with waits of 20 ms
/// doubling to 1 s: about 25 s). Enough to ride out fault rates far above those of
/// `docs/reliability.md`; a server that refuses for good (403, 422, …) fails at once.
pub const SETUP_ATTEMPTS: u32 = 30;

/// Creates the `default` Target (pointing at `kubeconfig`) and Context in namespace `default`
/// unless they exist. Each object is tried again on a transient answer (a busy server, an
/// injected fault: [`crate::apierrors::transient`]) — get, then create, so a create the server
/// applied before it timed out is found the next time.
pub async fn ensure_default_objects(client: &Client, kubeconfig: &str) -> anyhow::Result<()> {
    let target: Target = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "Target",
        "metadata": { "name": "default", "namespace": "default" },
        "spec": {
            "type": KUBERNETES_CLUSTER_TARGET_TYPE,
            "config": { "kubeconfig": kubeconfig }
        }
    }))?;
    ensure_object(&Api::namespaced(client.clone(), "default"), &target)
        .await
        .context("creating Target default/default")?;
    let context: crate::landscaper::Context = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "Context",
        "metadata": { "name": "default", "namespace": "default" }
    }))?;
    ensure_object(&Api::namespaced(client.clone(), "default"), &context)
        .await
        .context("creating Context default/default")?;
    Ok(())
}

/// Creates `obj` unless an object of its name exists, riding out transient errors.
async fn ensure_object<K>(api: &Api<K>, obj: &K) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    crate::apierrors::retry_transient(&name, SETUP_ATTEMPTS, || async {
        if api.get_opt(&name).await?.is_some() {
            return Ok(());
        }
        match api.create(&PostParams::default(), obj).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => Ok(()),
            Err(e) => Err(e.into()),
        }
    })
    .await
}

/// Creates the objects of a YAML file, or of every `.yaml`/`.yml` file of a directory (sorted).
pub fn apply_path(server: &ApiServer, path: &std::path::Path) -> anyhow::Result<()> {
    let mut files = Vec::new();
    if path.is_dir() {
        for entry in
            std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))?
        {
            let p = entry?.path();
            if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                files.push(p);
            }
        }
        files.sort();
    } else {
        files.push(path.to_path_buf());
    }
    for file in files {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        server
            .install_yaml_documents(&text)
            .with_context(|| format!("applying {}", file.display()))?;
        tracing::info!(file = %file.display(), "applied");
    }
    Ok(())
}

/// The hook dev mode turns on when the configuration names no hooks.
pub const DEV_HOOK: &str = "continuous-reconcile";

/// Dev mode shows continuous reconcile without any configuration: unless `hooks:` is set,
/// the `continuous-reconcile` hook runs for every DeployItem type (it does nothing for items
/// without `continuousReconcile` in their provider configuration).
pub fn with_dev_hooks(
    mut config: HostConfig,
    registry: &plugin_runtime::PluginRegistry,
) -> HostConfig {
    if config.hooks.is_none() && registry.hook(DEV_HOOK).is_some() {
        config.hooks = Some(vec![crate::config::HookRegistration {
            plugin: DEV_HOOK.to_string(),
            deploy_item_types: vec!["*".to_string()],
            hook_types: Vec::new(),
        }]);
    }
    config
}

/// Dev mode's first try works: unless the configuration gives `fetch.allow` (even empty), plugins
/// may download from anywhere (`*`) — a chart from a repository or an OCI registry installs
/// without a configuration file. `deployer-host run` keeps the default of nothing. Returns the
/// configuration and whether the dev default was taken.
pub fn with_dev_fetch(mut config: HostConfig) -> (HostConfig, bool) {
    let defaulted = config.fetch.allow.is_none();
    if defaulted {
        config.fetch.allow = Some(vec!["*".to_string()]);
    }
    (config, defaulted)
}

/// What dev mode says at start about downloads.
pub fn describe_fetch(config: &HostConfig, dev_default: bool) -> String {
    let allow = config.fetch.allow();
    if dev_default {
        "plugins may download from anywhere (fetch.allow: [\"*\"], dev mode's default; \
         `deployer-host run` allows nothing until fetch.allow lists it): set fetch.allow in \
         --config to restrict"
            .to_string()
    } else if allow.is_empty() {
        "plugins may download nothing (fetch.allow: [] in --config)".to_string()
    } else {
        format!(
            "plugins may download from {} (fetch.allow in --config)",
            allow.join(", ")
        )
    }
}

/// A bearer token nobody can guess (the administrator's of `--rbac`).
pub fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Runs dev mode until Ctrl-C / SIGTERM.
pub async fn run(options: DevOptions, config: HostConfig) -> anyhow::Result<()> {
    let api = Listening::bind(&options).await?;
    let env = DevEnvironment::bootstrap_with(
        api.server.clone(),
        ApiServer::kubeconfig_yaml_tls(&api.url, api.ca_pem(), api.server.admin_token()),
    )
    .await?;
    let host = DevHost::start(config, &env).await?;
    embedded_apiserver::write_kubeconfig(
        &options.kubeconfig_out,
        &api.url,
        api.ca_pem(),
        api.server.admin_token(),
    )?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let Listening {
        server,
        listener,
        cert,
        url,
    } = api;
    let serve = tokio::spawn({
        let server = server.clone();
        let stopped = stopped();
        async move {
            match cert {
                Some(cert) => server.serve_tls(listener, &cert, stopped).await,
                None => server.serve(listener, stopped).await,
            }
        }
    });
    let controller_task = tokio::spawn(controller::run(
        host.ctx,
        host.config.namespace.clone(),
        host.config.workers(),
        host.config.item_cache,
        stopped(),
    ));
    let helpers = spawn_helpers(&options, &env, host.container)?;

    for path in &options.apply {
        apply_path(&server, path)?;
    }
    println!("ready {url}");
    tracing::info!(
        url = %url,
        kubeconfig = %options.kubeconfig_out.display(),
        "dev mode ready: kubectl --kubeconfig {} get deployitems",
        options.kubeconfig_out.display()
    );
    crate::shutdown_signal().await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    for helper in helpers {
        helper.abort();
    }
    host.delivery.abort();
    let _ = controller_task.await;
    serve.await??;
    server.flush().await?;
    Ok(())
}

/// The embedded API server, bound but not serving yet (it serves once the host is set up).
struct Listening {
    server: ApiServer,
    listener: tokio::net::TcpListener,
    /// With `--rbac`: HTTPS with a certificate made at start.
    cert: Option<embedded_apiserver::tls::ServingCert>,
    url: String,
}

impl Listening {
    async fn bind(options: &DevOptions) -> anyhow::Result<Self> {
        let server = ApiServer::new(embedded_apiserver::Options {
            data_dir: options.data_dir.clone(),
            simulate_workloads: options.simulate_workloads,
            faults: options.faults.clone(),
            rbac: options.rbac,
            tls: options.rbac,
            admin_token: options.rbac.then(random_token),
            // As a cluster's namespace controller: a deleted namespace stays Terminating a moment
            // (Landscaper's own test framework deletes a spec's namespace twice and relies on it).
            namespace_finalize_delay: Some(std::time::Duration::from_secs(1)),
            ..Default::default()
        })?;
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .with_context(|| format!("binding {}", options.listen))?;
        let cert = options
            .rbac
            .then(|| {
                embedded_apiserver::tls::ServingCert::generate(&[options.listen.ip().to_string()])
            })
            .transpose()?;
        let scheme = if cert.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", listener.local_addr()?);
        // Before anything runs: Service default/kubernetes says where the API is.
        server.publish_kubernetes_service(listener.local_addr()?)?;
        Ok(Self {
            server,
            listener,
            cert,
            url,
        })
    }

    fn ca_pem(&self) -> Option<&str> {
        self.cert
            .as_ref()
            .map(embedded_apiserver::tls::ServingCert::ca_pem)
    }
}

/// The host's side of dev mode: plugins, the controller's context and plugin delivery.
struct DevHost {
    ctx: Arc<Context>,
    /// The configuration with dev mode's hooks and fetch defaults.
    config: HostConfig,
    container: Option<Arc<crate::container::ContainerDeployer>>,
    delivery: tokio::task::JoinHandle<()>,
}

impl DevHost {
    async fn start(config: HostConfig, env: &DevEnvironment) -> anyhow::Result<Self> {
        // As `run`: large plugins join after start-up instead of holding it up.
        let (registry, container, pending) = plugins::load_within(
            &config,
            &plugins::Clusters::single(env.client.clone()),
            std::time::Duration::from_secs(2),
        )
        .await?;
        let config = with_dev_hooks(config, &registry);
        let (config, dev_fetch) = with_dev_fetch(config);
        tracing::info!("dev mode: {}", describe_fetch(&config, dev_fetch));
        let target_clients = controller::TargetClients::new(config.target_clusters.settings()?);
        target_clients.register(&env.target_kubeconfig, env.client.clone());
        let ctx = Arc::new(Context::new(
            env.client.clone(),
            env.client.clone(),
            registry,
            &config,
            target_clients,
        )?);

        let (catalog, delivery) = plugins::start_delivery(
            &config,
            env.client.clone(),
            ctx.plugins.clone(),
            ctx.hooks.clone(),
        )?;
        if let Some(pending) = pending {
            let loading = ctx.plugins.loading.clone();
            loading.store(pending.sources.len(), std::sync::atomic::Ordering::Relaxed);
            tokio::spawn(pending.arrive(catalog, loading));
        }
        Ok(Self {
            ctx,
            config,
            container,
            delivery,
        })
    }
}

/// What plays the rest of a cluster beside the controller: the dev kubelet (`--run-pods`),
/// the container deployer's garbage collector and the simulated Landscaper. Aborted at shutdown.
fn spawn_helpers(
    options: &DevOptions,
    env: &DevEnvironment,
    container: Option<Arc<crate::container::ContainerDeployer>>,
) -> anyhow::Result<Vec<tokio::task::AbortHandle>> {
    let mut helpers = Vec::new();
    if let (Some(c), true) = (&container, options.run_pods) {
        let kubelet = kubelet::ProcessKubelet {
            client: env.client.clone(),
            namespace: c.settings().namespace.clone(),
            kubeconfig: std::path::absolute(&options.kubeconfig_out)?,
            binary: std::env::current_exe()?,
            work_dir: std::env::temp_dir().join("deployer-host-pods"),
            mint_tokens: false,
        };
        let runtime = options.pod_runtime;
        let run = kubelet.run_with(runtime, std::future::pending());
        helpers.push(tokio::spawn(run).abort_handle());
    }
    if let Some(c) = container {
        let gc = c.garbage_collector();
        let interval = c.settings().gc_interval;
        let collector = tokio::spawn(async move {
            if let Some(interval) = interval {
                gc.run(interval, std::future::pending()).await
            }
        });
        helpers.push(collector.abort_handle());
    }
    if options.simulate_landscaper {
        helpers.push(tokio::spawn(landscaper::run(env.client.clone())).abort_handle());
    }
    Ok(helpers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHART_REPO: &str = "http://127.0.0.1:8879/charts/nginx-1.0.0.tgz";
    const OCI_CHART: &str = "127.0.0.1:5000/charts/nginx:1.0.0";

    fn config(yaml: &str) -> HostConfig {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn without_a_fetch_config_dev_allows_downloads_and_run_does_not() {
        // `run` takes the configuration as it is: nothing may be downloaded.
        let run = HostConfig::default();
        assert!(!run.fetch.allows(CHART_REPO));
        assert!(!run.fetch.allows(OCI_CHART));
        // `dev` allows every download and says so.
        let (dev, defaulted) = with_dev_fetch(HostConfig::default());
        assert!(defaulted);
        assert!(dev.fetch.allows(CHART_REPO));
        assert!(dev.fetch.allows(OCI_CHART));
        assert!(
            dev.fetch
                .allows("https://charts.example.com/stable/index.yaml")
        );
        assert!(describe_fetch(&dev, defaulted).contains("from anywhere"));
        // A configuration without a fetch section is the same.
        let (dev, defaulted) = with_dev_fetch(config("workers: 2\n"));
        assert!(defaulted && dev.fetch.allows(CHART_REPO));
    }

    #[test]
    fn a_fetch_allow_list_given_is_kept_in_dev_even_when_empty() {
        let (dev, defaulted) = with_dev_fetch(config("fetch: {allow: [charts.example.com]}\n"));
        assert!(!defaulted);
        assert!(!dev.fetch.allows(CHART_REPO));
        assert!(dev.fetch.allows("https://charts.example.com/x.tgz"));
        assert_eq!(
            describe_fetch(&dev, defaulted),
            "plugins may download from charts.example.com (fetch.allow in --config)"
        );
        let (dev, defaulted) = with_dev_fetch(config("fetch: {allow: []}\n"));
        assert!(!defaulted && !dev.fetch.allows(CHART_REPO));
        // Other fetch settings without `allow`: the dev default still applies.
        let (dev, defaulted) = with_dev_fetch(config("fetch: {maxMib: 8}\n"));
        assert!(defaulted && dev.fetch.allows(OCI_CHART));
    }
}
