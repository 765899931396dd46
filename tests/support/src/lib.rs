//! What the host's contract stories (`tests/*.rs`, the `[[test]]` targets of `host/Cargo.toml`)
//! and its benchmarks (`host/benches/`) share. The harness ([`Harness`]): an API server (embedded,
//! or a real kube-apiserver with `DEPLOYER_TEST_BACKEND=real`, see `backend`) with the Landscaper
//! CRDs, a `default` Target and Context, the host's controller with the plugins from
//! `target/plugins/` (built by `cargo xtask build-plugins`), and optionally the simulated
//! Landscaper that issues jobIDs. Everything runs in-process and stops when the harness drops.
//! Beside it, one module per partner a story meets: registries, chart repositories, OCM
//! components, real Helm, the real Landscaper (and its stage), host replicas, the manifest
//! stories' helpers, and the benchmarks' helpers.
//!
//! Owns: test harnesses, fixtures and partners. Must not touch: the stories themselves (they stay
//! in `tests/*.rs`, readable as given/when/then) or the host's code (it uses the host's public
//! API only, as an operator's tooling would).

mod backend;
pub mod bench;
pub mod chart_repo;
pub mod controller_manager;
pub mod deployments;
pub mod http_api;
pub mod manifest;
pub mod ocm;
pub mod paths;
pub mod podman;
mod real_apiserver;
pub mod real_helm;
pub mod real_landscaper;
pub mod registry;
pub mod replicas;
pub mod why;
pub use backend::{Backend, TestCluster, backend};
pub use paths::{plugins_dir, test_plugins_dir, workspace};
pub use real_apiserver::{RealApiServer, RealBinaries, client_for, ensure_default_service_account};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use plugin_runtime::{DeployerError, HookInput, HookPlugin, HookResult, HookSetup, HookType};

use deployer_host::config::{HostConfig, ItemCache};
use deployer_host::contract::CheckpointMode;
use deployer_host::controller::{self, Context, TargetClients};
use deployer_host::dev::landscaper;
use deployer_host::landscaper::DeployItem;
use embedded_apiserver::ApiServer;
use kube::Client;
use kube::api::{Api, PostParams};

/// What the host's DeployItem watch keeps when a story does not say: the default, or
/// `DEPLOYER_TEST_ITEM_CACHE=full` to run a suite against the full-object watch.
pub fn item_cache() -> ItemCache {
    match std::env::var("DEPLOYER_TEST_ITEM_CACHE").as_deref() {
        Ok("full") => ItemCache::Full,
        Ok("metadata") | Ok("") | Err(_) => ItemCache::Metadata,
        Ok(other) => panic!("DEPLOYER_TEST_ITEM_CACHE must be metadata or full, not {other:?}"),
    }
}

/// The status code of a plain HTTP GET of `path` on `addr` (`None`: nothing answers yet).
pub async fn http_status(addr: &str, path: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    answer.split_whitespace().nth(1)?.parse().ok()
}

/// A host configuration for stories with the container deployer: its pods in `host_ns`, quick
/// polls, a quick requeue.
pub fn container_host_config(host_ns: &str) -> HostConfig {
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        ..HostConfig::default()
    };
    config.container = serde_yaml::from_str(&format!(
        "namespace: {host_ns}\nhostImage: deployer-host:test\npollInterval: 200ms\nwaitPollInterval: 100ms\n"
    ))
    .unwrap();
    config
}

/// A mock DeployItem in `default` that succeeds (no providerStatus, no export).
pub fn mock_item(name: &str) -> String {
    format!(
        "apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {{name: {name}, namespace: default}}
spec:
  type: landscaper.gardener.cloud/mock
  config:
    apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    phase: Succeeded
"
    )
}

/// A DeployItem for the test-only `faulty` plugin, misbehaving as `action` says.
pub fn faulty_item(name: &str, action: &str) -> String {
    format!(
        "apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {{name: {name}, namespace: default}}
spec:
  type: test.wasm-deployer.dev/faulty
  config:
    apiVersion: faulty.test/v1
    kind: ProviderConfiguration
    action: {action}
"
    )
}

/// Polls `pred` every 25 ms until it holds; panics naming `what` after `timeout`.
pub async fn until(what: &str, timeout: Duration, pred: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !pred() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub struct Harness {
    /// The embedded API server (`None` on the real backend: see [`skip_on_real!`]).
    pub server: Option<ApiServer>,
    /// The real API server (`None` on the embedded backend); stops when the harness drops.
    pub real: Option<RealApiServer>,
    pub client: Client,
    pub deployer: Arc<Context>,
    /// Kubeconfig text of the `default` Target (registered for `client`).
    pub target_kubeconfig: String,
    /// The deployer's Target clients: register more clusters (kubeconfig → client) here.
    pub target_clients: TargetClients,
    /// Hook calls, in order (only with `Options::record_hooks`).
    pub hook_calls: Arc<Mutex<Vec<HookCall>>>,
    /// The native container deployer (unless `container.enabled: false`).
    pub container: Option<Arc<deployer_host::container::ContainerDeployer>>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The controller's namespace, worker count and item cache (for [`Harness::start_controller`]).
    controller_scope: (Option<String>, usize, ItemCache),
    controller_running: bool,
}

pub struct Options {
    pub config: HostConfig,
    /// Run the simulated Landscaper (new jobIDs on create / spec change / deletion).
    pub landscaper: bool,
    /// Run the controller (off: the test drives writes itself and checks nothing happens).
    pub controller: bool,
    /// Also load the test-only plugins from `target/test-plugins/` (e.g. `faulty`).
    pub test_plugins: bool,
    /// The progressing-timeout test hook.
    pub checkpoint_mode: CheckpointMode,
    /// Record every hook call (at the host's side of the hook plugins) in `Harness::hook_calls`.
    pub record_hooks: bool,
    /// Native deployers registered beside the wasm plugins.
    pub native_deployers: Vec<Arc<dyn plugin_runtime::DeployerPlugin>>,
    /// The host's `itemCache`, whatever `DEPLOYER_TEST_ITEM_CACHE` says (`None`: that
    /// variable's, default `metadata`).
    pub item_cache: Option<ItemCache>,
}

/// One hook call as the host made it, and what the plugin answered.
#[derive(Clone, Debug)]
pub struct HookCall {
    pub hook_type: HookType,
    /// `metadata.name` of the item (none for `Start`).
    pub item: Option<String>,
    /// The item as the hook saw it.
    pub item_json: Option<serde_json::Value>,
    /// The Target object the hook saw.
    pub target: Option<serde_json::Value>,
    pub answer: Result<Option<HookResult>, DeployerError>,
}

/// Wraps a hook plugin and records its calls.
struct RecordingHook {
    inner: Arc<dyn HookPlugin>,
    calls: Arc<Mutex<Vec<HookCall>>>,
}

#[async_trait::async_trait]
impl HookPlugin for RecordingHook {
    fn setup(&self) -> &HookSetup {
        self.inner.setup()
    }
    fn origin(&self) -> String {
        self.inner.origin()
    }
    async fn run_hook(&self, input: HookInput) -> Result<Option<HookResult>, DeployerError> {
        let hook_type = input.hook_type;
        let item = input
            .deploy_item
            .as_ref()
            .and_then(|i| i["metadata"]["name"].as_str().map(String::from));
        let target = input.target.clone();
        let item_json = input.deploy_item.clone();
        let answer = self.inner.run_hook(input).await;
        self.calls.lock().unwrap().push(HookCall {
            hook_type,
            item,
            item_json,
            target,
            answer: answer.clone(),
        });
        answer
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            config: HostConfig {
                requeue_interval: Some("200ms".into()),
                ..HostConfig::default()
            },
            landscaper: true,
            controller: true,
            test_plugins: false,
            checkpoint_mode: CheckpointMode::Standard,
            record_hooks: false,
            native_deployers: Vec::new(),
            item_cache: None,
        }
    }
}

impl Options {
    /// The defaults, with the host's Events at pickup and at the end of every job
    /// (`events: all`; the default publishes only errors).
    pub fn with_all_events() -> Self {
        let mut options = Self::default();
        options.config.events = Some(deployer_host::config::EventMode::All);
        options
    }
}

impl Harness {
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(mut options: Options) -> Self {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
        let env = TestCluster::start(backend()).await;
        if options.config.plugins.dir.is_none() {
            options.config.plugins.dir = Some(plugins_dir());
        }
        options.config.item_cache = options.item_cache.unwrap_or_else(item_cache);
        if options.config.plugins.cache_dir.is_none() {
            // Shared by all tests: compile each plugin once, then load from the cache.
            options.config.plugins.cache_dir = Some(plugins_dir().join("../plugin-cache"));
        }
        let mut dirs = vec![options.config.plugins_dir()];
        if options.test_plugins {
            dirs.push(test_plugins_dir());
        }
        let mut natives = std::mem::take(&mut options.native_deployers);
        let container = deployer_host::plugins::native_deployers(
            &options.config,
            &deployer_host::plugins::Clusters::single(env.client.clone()),
        )
        .expect("container deployer settings")
        .into_iter()
        .next();
        if let Some(c) = &container {
            natives.push(c.clone());
        }
        let mut registry = deployer_host::plugins::load_all(&options.config, &dirs, natives)
            .await
            .expect("loading plugins");
        let hook_calls = Arc::new(Mutex::new(Vec::new()));
        if options.record_hooks {
            let hooks = registry
                .hooks()
                .map(|h| {
                    Arc::new(RecordingHook {
                        inner: h.clone(),
                        calls: hook_calls.clone(),
                    }) as Arc<dyn HookPlugin>
                })
                .collect();
            registry = Arc::new(
                plugin_runtime::PluginRegistry::with_hooks(
                    registry.plugins().cloned().collect(),
                    hooks,
                )
                .expect("registry"),
            );
        }
        let target_clients = TargetClients::new(
            options
                .config
                .target_clusters
                .settings()
                .expect("targetClusters settings"),
        );
        if env.embedded.is_some() {
            // The Target's kubeconfig names no reachable URL: serve it in-process. (On a real
            // server the host builds its client from the Target, as in production.)
            target_clients.register(&env.target_kubeconfig, env.client.clone());
        }
        let mut deployer = Context::new(
            env.client.clone(),
            env.client.clone(),
            registry,
            &options.config,
            target_clients.clone(),
        )
        .expect("deployer");
        deployer.checkpoint_mode = options.checkpoint_mode.clone();
        let deployer = Arc::new(deployer);
        let (stop, _) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        if options.landscaper {
            tasks.push(tokio::spawn(landscaper::run(env.client.clone())));
        }
        let mut harness = Self {
            server: env.embedded,
            real: env.real,
            client: env.client,
            deployer,
            target_kubeconfig: env.target_kubeconfig,
            target_clients,
            hook_calls,
            container,
            stop,
            tasks,
            controller_scope: (
                options.config.namespace.clone(),
                options.config.workers(),
                options.config.item_cache,
            ),
            controller_running: false,
        };
        if options.controller {
            harness.start_controller();
        }
        harness
    }

    /// Starts the host's controller: a harness started with `controller: false` starts it later
    /// (the host "comes up"). Panics if it runs already (two controllers would race).
    pub fn start_controller(&mut self) {
        assert!(!self.controller_running, "the controller runs already");
        self.controller_running = true;
        let mut rx = self.stop.subscribe();
        let (namespace, workers, item_cache) = self.controller_scope.clone();
        self.tasks.push(tokio::spawn(controller::run(
            self.deployer.clone(),
            namespace,
            workers,
            item_cache,
            async move {
                let _ = rx.wait_for(|s| *s).await;
            },
        )));
    }

    pub fn items(&self, namespace: &str) -> Api<DeployItem> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Creates a DeployItem from YAML (namespace `default` unless the YAML says otherwise).
    pub async fn create_item(&self, yaml: &str) -> DeployItem {
        let item: DeployItem = serde_yaml::from_str(yaml).expect("DeployItem YAML");
        let ns = item
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        self.items(&ns)
            .create(&PostParams::default(), &item)
            .await
            .expect("create DeployItem")
    }

    /// Polls until `pred` holds for the item, or panics with the last state after `timeout`.
    pub async fn wait_for(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
        pred: impl Fn(&DeployItem) -> bool,
    ) -> DeployItem {
        let api = self.items(namespace);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let current = api.get_opt(name).await.expect("get DeployItem");
            if let Some(item) = &current
                && pred(item)
            {
                return item.clone();
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "timed out waiting for {namespace}/{name}; last state:\n{}",
                    serde_yaml::to_string(&current).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits until the item's current job is finished (`jobID == jobIDFinished`, non-empty).
    pub async fn wait_finished(&self, namespace: &str, name: &str) -> DeployItem {
        self.wait_for(namespace, name, Duration::from_secs(20), |i| {
            let s = i.status();
            !s.job_id.is_empty() && s.job_id == s.job_id_finished
        })
        .await
    }

    pub async fn wait_gone(&self, namespace: &str, name: &str, timeout: Duration) {
        let api = self.items(namespace);
        let deadline = tokio::time::Instant::now() + timeout;
        while api.get_opt(name).await.expect("get").is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{namespace}/{name} still exists"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Harness {
    /// The hook calls made so far for the item `name` (and `Start` calls, which have none).
    pub fn hook_calls_for(&self, name: &str) -> Vec<HookCall> {
        self.hook_calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.item.as_deref() == Some(name))
            .cloned()
            .collect()
    }

    /// The hook types called for `name`, in call order.
    pub fn hook_types_for(&self, name: &str) -> Vec<HookType> {
        self.hook_calls_for(name)
            .iter()
            .map(|c| c.hook_type)
            .collect()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// How long the stories' replicas' Leases count without a renewal (the product's default is
/// 15 s): a replica whose task is aborted is taken over this much later.
pub const STORY_LEASE: Duration = Duration::from_secs(2);

/// One host replica with SyncObject locking, as pod `pod` of `pod_namespace`: `ls` for
/// Landscaper's objects, `host` for the Pods its dead-owner check reads and its Lease. With
/// `leases` (the stories use [`STORY_LEASE`]) the replicas split the items by Leases of that
/// duration, as the host does by default; `None`: locks alone (every replica races for every
/// job's lock, as Landscaper's own deployers do). Runs its controller until the returned task is
/// aborted, which leaves its Lease to expire as a killed replica's does. (The locking and
/// least-privilege stories.)
pub fn start_locking_replica(
    ls: Client,
    host: Client,
    registry: Arc<plugin_runtime::PluginRegistry>,
    config: &HostConfig,
    pod: &'static str,
    pod_namespace: &'static str,
    leases: Option<Duration>,
) -> (Arc<Context>, tokio::task::JoinHandle<()>) {
    let mut deployer = Context::new(
        ls.clone(),
        host.clone(),
        registry,
        config,
        TargetClients::default(),
    )
    .expect("deployer");
    deployer.deployer.identity = pod.to_string();
    deployer.membership = leases.map(|lease_duration| {
        Arc::new(deployer_host::membership::Membership::new(
            host.clone(),
            deployer_host::membership::MembershipConfig {
                prefix: "wasm-deployer".into(),
                pod_name: pod.into(),
                namespace: pod_namespace.into(),
                lease_duration,
            },
        ))
    });
    deployer.locker = Some(deployer_host::locking::Locker::new(
        ls,
        host,
        deployer_host::locking::LockConfig {
            prefix: "wasm-deployer".into(),
            pod_name: pod.into(),
            pod_namespace: pod_namespace.into(),
            retry_after: Duration::from_millis(200),
            pod_cache_timeout: Duration::from_millis(300),
        },
    ));
    let deployer = Arc::new(deployer);
    let task = tokio::spawn(controller::run(
        deployer.clone(),
        None,
        4,
        item_cache(),
        std::future::pending(),
    ));
    (deployer, task)
}

/// A list as `kubectl get` asks for it (`as=Table`, the server's printer columns), read with
/// `client` from `path`: the column names, and name -> column -> cell (text).
pub async fn get_table(
    client: &Client,
    path: &str,
) -> (
    Vec<String>,
    std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
) {
    use serde_json::Value;
    let request = http::Request::get(path)
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(request).await.unwrap();
    let columns: Vec<String> = table["columnDefinitions"]
        .as_array()
        .unwrap_or_else(|| panic!("not a Table: {table}"))
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    let rows = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let cells: std::collections::BTreeMap<String, String> = columns
                .iter()
                .zip(row["cells"].as_array().unwrap())
                .map(|(c, v)| {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    (c.clone(), text)
                })
                .collect();
            (cells["Name"].clone(), cells)
        })
        .collect();
    (columns, rows)
}

/// A 64-bit little-endian ELF header for `machine` (`0x3e` x86_64, `0xb7` aarch64) with one
/// program header: a program interpreter (`PT_INTERP`, a dynamically linked binary) or not.
/// What the image build reads of a binary, without building one.
pub fn elf_header(machine: u16, interpreter: bool) -> Vec<u8> {
    let mut b = vec![0u8; 64 + 56];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[0x12..0x14].copy_from_slice(&machine.to_le_bytes());
    b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
    b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
    b[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
    let p_type: u32 = if interpreter { 3 } else { 1 };
    b[64..68].copy_from_slice(&p_type.to_le_bytes());
    b
}
