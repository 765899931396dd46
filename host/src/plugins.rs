//! Plugin sources: where the host finds its deployers and hook plugins and how they are limited.
//!
//! A deployer is anything behind `plugin_runtime::DeployerPlugin`: a wasm component
//! (`WasmPlugin`, loaded here from `.wasm` files of a directory, `plugins.dir`, with limits from
//! the configuration) or native code compiled into the host ([`native_deployers`]; the
//! container deployer is the first). The contract code calls both the same way and cannot tell
//! them apart. Building the type → deployer map (and refusing two for one type) is the
//! runtime's `PluginRegistry`.

use std::sync::Arc;

use anyhow::Context as _;
use plugin_runtime::{DeployerPlugin, HookPlugin, PluginRegistry, PluginRuntime, RuntimeConfig};

use crate::config::{HostConfig, Limits};
use crate::container::ContainerDeployer;

pub use crate::plugin_sources::live::LivePlugins;

/// Builds the runtime configuration (cache directory, limits) from the host configuration.
pub fn runtime_config(config: &HostConfig) -> anyhow::Result<RuntimeConfig> {
    let base = config.plugins.limits.resolve(Limits::default())?;
    let mut runtime = RuntimeConfig {
        cache_dir: Some(
            config
                .plugins
                .cache_dir
                .clone()
                .unwrap_or_else(|| config.plugins_dir().join(".cache")),
        ),
        default_limits: to_runtime_limits(base),
        ..Default::default()
    };
    if let Some(slots) = config.plugins.instance_slots {
        runtime.instance_slots = slots;
    }
    for (name, l) in &config.plugins.per_plugin {
        runtime
            .plugin_limits
            .insert(name.clone(), to_runtime_limits(l.resolve(base)?));
    }
    // The helm deployer renders charts inside its instance: unless configured, it gets at least
    // 256 MiB and 60 s (large charts need both; docs/helm-deployer.md).
    if !config.plugins.per_plugin.contains_key(HELM_PLUGIN) {
        runtime.plugin_limits.insert(
            HELM_PLUGIN.to_string(),
            to_runtime_limits(Limits {
                deadline: base.deadline.max(std::time::Duration::from_secs(60)),
                memory_bytes: base.memory_bytes.max(256 << 20),
            }),
        );
    }
    Ok(runtime)
}

/// The helm deployer plugin's name.
pub const HELM_PLUGIN: &str = "helm";

fn to_runtime_limits(l: Limits) -> plugin_runtime::Limits {
    plugin_runtime::Limits {
        deadline: l.deadline,
        memory_bytes: l.memory_bytes as usize,
    }
}

/// The clusters a host talks to: the one holding DeployItems (Landscaper's) and the one it runs
/// in (where the container deployer starts pods). The same cluster unless fenced.
#[derive(Clone)]
pub struct Clusters {
    pub landscaper: kube::Client,
    pub host: kube::Client,
}

impl Clusters {
    /// One cluster for both.
    pub fn single(client: kube::Client) -> Self {
        Clusters {
            landscaper: client.clone(),
            host: client,
        }
    }
}

/// The deployers compiled into the host: the container deployer, unless `container.enabled`
/// is false.
pub fn native_deployers(
    config: &HostConfig,
    clusters: &Clusters,
) -> anyhow::Result<Vec<Arc<ContainerDeployer>>> {
    if !config.container.enabled() {
        return Ok(Vec::new());
    }
    let settings = config
        .container
        .settings(config.identity.as_deref().unwrap_or_default())?;
    Ok(vec![Arc::new(ContainerDeployer::new(
        settings,
        clusters.host.clone(),
        clusters.landscaper.clone(),
    ))])
}

/// Loads the host's native deployers and every plugin of the configured directory into a
/// registry; also returns the native container deployer (its garbage collector runs beside the
/// controller).
pub async fn load(
    config: &HostConfig,
    clusters: &Clusters,
) -> anyhow::Result<(Arc<PluginRegistry>, Option<Arc<ContainerDeployer>>)> {
    load_dirs(config, clusters, &[config.plugins_dir()]).await
}

/// Like [`load`], but start-up waits for the plugin directory at most `window` (and for every
/// hook plugin the configuration names): the rest comes back as [`PendingPlugins`] for
/// [`PendingPlugins::arrive`].
pub async fn load_within(
    config: &HostConfig,
    clusters: &Clusters,
    window: std::time::Duration,
) -> anyhow::Result<(
    Arc<PluginRegistry>,
    Option<Arc<ContainerDeployer>>,
    Option<PendingPlugins>,
)> {
    load_dirs_within(config, clusters, &[config.plugins_dir()], Some(window)).await
}

/// Like [`load`], from several directories (tests add test-only plugins).
pub async fn load_dirs(
    config: &HostConfig,
    clusters: &Clusters,
    dirs: &[std::path::PathBuf],
) -> anyhow::Result<(Arc<PluginRegistry>, Option<Arc<ContainerDeployer>>)> {
    let (registry, container, _) = load_dirs_within(config, clusters, dirs, None).await?;
    Ok((registry, container))
}

async fn load_dirs_within(
    config: &HostConfig,
    clusters: &Clusters,
    dirs: &[std::path::PathBuf],
    window: Option<std::time::Duration>,
) -> anyhow::Result<(
    Arc<PluginRegistry>,
    Option<Arc<ContainerDeployer>>,
    Option<PendingPlugins>,
)> {
    let natives = native_deployers(config, clusters)?;
    let container = natives.first().cloned();
    let natives = natives
        .into_iter()
        .map(|d| d as Arc<dyn DeployerPlugin>)
        .collect();
    let (registry, pending) = load_all_within(config, dirs, natives, window).await?;
    Ok((registry, container, pending))
}

/// Plugins of the plugin directory still compiling when start-up stopped waiting (see
/// [`load_all_within`]); [`PendingPlugins::arrive`] hands them to plugin delivery's catalog,
/// which serves them beside the others.
pub struct PendingPlugins {
    /// The files still loading.
    pub sources: Vec<String>,
    loads: Vec<tokio::task::JoinHandle<(String, anyhow::Result<Arc<plugin_runtime::WasmPlugin>>)>>,
}

impl PendingPlugins {
    /// Waits for the remaining loads; every plugin that loads is added to `catalog` (and so
    /// served), one that does not is logged with why. `loading` counts down as they finish.
    pub async fn arrive(
        self,
        catalog: Arc<crate::plugin_sources::catalog::Catalog>,
        loading: Arc<std::sync::atomic::AtomicUsize>,
    ) {
        for load in self.loads {
            let (source, result) = match load.await {
                Ok(r) => r,
                Err(e) => ("?".into(), Err(anyhow::anyhow!("load task failed: {e}"))),
            };
            loading.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            match result {
                Ok(p) => match catalog.add_static(p.clone()).await {
                    Ok(()) => {
                        tracing::info!(plugin = %source, "plugin loaded after start-up; now serving its types")
                    }
                    Err(e) => tracing::error!(plugin = %source, error = %e, "plugin refused"),
                },
                Err(e) => {
                    tracing::error!(plugin = %source, error = %format!("{e:#}"), "plugin refused; the host serves the others")
                }
            }
        }
    }
}

/// Components above this size (the Python and JavaScript runtimes are 12-19 MB; Rust and C
/// plugins well under 1 MB) may finish loading after start-up.
const LARGE_PLUGIN_BYTES: u64 = 4 << 20;

/// Every `*.wasm` of `dirs`, loading all at once: compiling is CPU work off the async threads,
/// and a large component (a Python or JavaScript plugin is 12-19 MB, seconds to compile cold)
/// must not make the small ones wait. One that does not load is logged with why and skipped,
/// so a bad plugin never keeps the host (and every good plugin) from starting.
///
/// With `window`, start-up waits for the large ones (over 4 MiB) only that long — and in any
/// case for every small one and every plugin named in the `hooks:` configuration, since a hook
/// that is not there yet would change what a reconcile does. What is still compiling then is
/// returned as [`PendingPlugins`]; its DeployItems wait until it arrives.
async fn load_dirs_tolerant(
    runtime: &Arc<PluginRuntime>,
    dirs: &[std::path::PathBuf],
    window: Option<std::time::Duration>,
    needed_hooks: &[String],
) -> anyhow::Result<(Vec<Arc<plugin_runtime::WasmPlugin>>, Option<PendingPlugins>)> {
    let mut files = Vec::new();
    for dir in dirs {
        let mut in_dir: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading plugin directory {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "wasm") && p.is_file())
            .collect();
        in_dir.sort();
        files.extend(in_dir);
    }
    let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    // Only large components may be left to finish after start-up: a Rust or C plugin compiles
    // in well under a second, and dev mode decides its default hooks from what has loaded.
    let large: Vec<bool> = files
        .iter()
        .map(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > LARGE_PLUGIN_BYTES))
        .collect();
    let mut loads: Vec<_> = files
        .into_iter()
        .map(|path| {
            let runtime = runtime.clone();
            let source = path.display().to_string();
            let handle = tokio::spawn(async move {
                let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                if size > LARGE_PLUGIN_BYTES {
                    tracing::info!(plugin = %source, bytes = size, "loading a large plugin (compiled once, then cached)");
                }
                let result = match std::fs::read(&path) {
                    Ok(bytes) => runtime.load_bytes(&source, &bytes).await,
                    Err(e) => Err(anyhow::Error::from(e)),
                };
                (source, result)
            });
            Some(handle)
        })
        .collect();
    let started = tokio::time::Instant::now();
    let mut results: Vec<Option<(String, anyhow::Result<Arc<plugin_runtime::WasmPlugin>>)>> =
        (0..loads.len()).map(|_| None).collect();
    loop {
        // Collect what has finished (in file order).
        for (i, slot) in loads.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|h| h.is_finished()) {
                let handle = slot.take().expect("checked");
                results[i] = Some(handle.await.unwrap_or_else(|e| {
                    ("?".into(), Err(anyhow::anyhow!("load task failed: {e}")))
                }));
            }
        }
        if loads.iter().all(Option::is_none) {
            break;
        }
        let hooks_ready = needed_hooks.iter().all(|name| {
            results.iter().flatten().any(|(_, r)| {
                r.as_ref()
                    .is_ok_and(|p| p.hook_setup().is_some_and(|h| &h.name == name))
            })
        });
        let small_done = loads
            .iter()
            .zip(&large)
            .all(|(l, large)| l.is_none() || *large);
        if window.is_some_and(|w| started.elapsed() >= w) && hooks_ready && small_done {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut loaded = Vec::new();
    for (source, result) in results.into_iter().flatten() {
        match result {
            Ok(p) => loaded.push(p),
            Err(e) => {
                tracing::error!(plugin = %source, error = %format!("{e:#}"), "plugin refused; the host serves the others")
            }
        }
    }
    let sources: Vec<String> = loads
        .iter()
        .zip(&names)
        .filter(|(l, _)| l.is_some())
        .map(|(_, n)| n.clone())
        .collect();
    let still: Vec<_> = loads.into_iter().flatten().collect();
    let pending = (!still.is_empty()).then_some(PendingPlugins {
        sources,
        loads: still,
    });
    Ok((loaded, pending))
}

/// One registry of `native` deployers and the plugins of `dirs`; a type claimed twice (by any
/// kind of deployer) is an error.
pub async fn load_all(
    config: &HostConfig,
    dirs: &[std::path::PathBuf],
    native: Vec<Arc<dyn DeployerPlugin>>,
) -> anyhow::Result<Arc<PluginRegistry>> {
    Ok(load_all_within(config, dirs, native, None).await?.0)
}

/// Like [`load_all`], waiting for the plugin directory at most `window` (see
/// [`load_dirs_tolerant`]); the plugins still loading come back as [`PendingPlugins`].
pub async fn load_all_within(
    config: &HostConfig,
    dirs: &[std::path::PathBuf],
    native: Vec<Arc<dyn DeployerPlugin>>,
    window: Option<std::time::Duration>,
) -> anyhow::Result<(Arc<PluginRegistry>, Option<PendingPlugins>)> {
    let runtime = PluginRuntime::new(runtime_config(config)?)?;
    let needed_hooks: Vec<String> = config
        .hooks
        .iter()
        .flatten()
        .map(|h| h.plugin.clone())
        .collect();
    let (loaded, pending) = load_dirs_tolerant(&runtime, dirs, window, &needed_hooks).await?;
    let mut plugins: Vec<Arc<dyn DeployerPlugin>> = native;
    let mut hooks: Vec<Arc<dyn HookPlugin>> = Vec::new();
    for p in loaded {
        if p.hook_setup().is_some() {
            hooks.push(p.clone() as Arc<dyn HookPlugin>);
        }
        if p.exports_deployer() {
            plugins.push(p as Arc<dyn DeployerPlugin>);
        }
    }
    if plugins.is_empty() && pending.is_none() {
        tracing::warn!(dirs = ?dirs, "no plugins found; run `cargo xtask build-plugins`");
    }
    for p in &plugins {
        let d = p.description();
        tracing::info!(plugin = %d.name, version = %d.version, types = ?d.deploy_item_types, "loaded plugin");
    }
    for h in &hooks {
        let s = h.setup();
        tracing::info!(plugin = %s.name, version = %s.version, hook_types = ?s.hook_types, "loaded hook plugin");
    }
    if let Some(p) = &pending {
        tracing::info!(
            loading = ?p.sources,
            "plugins still compiling: the host serves the others now, and their types once they are ready"
        );
    }
    Ok((
        Arc::new(PluginRegistry::with_hooks(plugins, hooks)?),
        pending,
    ))
}

/// Starts plugin delivery (`plugin_sources`): the plugins of `plugins.sources` and of
/// `WasmPlugin` objects, swapped into `live` as they come and go. Returns the catalog (status,
/// metrics) and the task.
pub fn start_delivery(
    config: &HostConfig,
    client: kube::Client,
    live: Arc<LivePlugins>,
    hooks: Arc<crate::hooks::LiveHooks>,
) -> anyhow::Result<(
    Arc<crate::plugin_sources::catalog::Catalog>,
    tokio::task::JoinHandle<()>,
)> {
    use crate::plugin_sources::catalog::{Catalog, CatalogSettings};
    use crate::plugin_sources::declarations::Declarations;
    let runtime = PluginRuntime::new(runtime_config(config)?)?;
    let namespace = config
        .plugins
        .namespace
        .clone()
        .or_else(|| std::env::var("MY_POD_NAMESPACE").ok())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    let poll_interval = match config
        .plugins
        .poll_interval
        .as_deref()
        .map(crate::landscaper::parse_go_duration)
    {
        Some(Ok(crate::landscaper::GoDuration::Finite(d))) if !d.is_zero() => d,
        _ => std::time::Duration::from_secs(60),
    };
    let catalog = Arc::new(Catalog::new(
        runtime,
        client.clone(),
        CatalogSettings {
            namespace: namespace.clone(),
            base_limits: config.plugins.limits.resolve(Limits::default())?,
            host_verification: config.plugins.verification.clone(),
            base_registrations: config.hooks.clone().unwrap_or_default(),
            ca_certs: config.fetch.ca_certificates()?,
        },
        live,
        hooks,
    ));
    let declarations = Declarations {
        client,
        namespace,
        static_specs: config.plugins.sources.clone(),
        watch_objects: config.plugins.watch_objects.unwrap_or(true),
        config_map_selector: config.plugins.config_map_selector.clone(),
        poll_interval,
    };
    let task = tokio::spawn(declarations.run(catalog.clone(), std::future::pending()));
    Ok((catalog, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_slots_default_to_the_runtimes_pool_and_zero_allocates_on_demand() {
        let default: HostConfig = serde_yaml::from_str("{}").unwrap();
        assert_eq!(
            runtime_config(&default).unwrap().instance_slots,
            RuntimeConfig::default().instance_slots
        );
        let on_demand: HostConfig = serde_yaml::from_str("plugins: {instanceSlots: 0}").unwrap();
        assert_eq!(runtime_config(&on_demand).unwrap().instance_slots, 0);
    }
}
