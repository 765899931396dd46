//! The clusters bench's world: one embedded API server that is both the Landscaper cluster
//! (served over HTTP to the host) and every Target cluster (served over TLS, one bearer token
//! per kubeconfig, so each Target is a client of its own), the simulated Landscaper issuing
//! jobs, a `deployer-host run` process with its metrics, and a watch that notes when each
//! item's job finished.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deployer_host::landscaper::{DeployItem, Target};
use embedded_apiserver::{ApiServer, LoopbackServing, tls::ServingCert};
use futures::StreamExt;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use test_support::bench::{KillOnDrop, landscaper_server, open_fds, rss_kib};
use test_support::workspace;

pub const NS: &str = "default";

/// How the host reaches the Target clusters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Tls,
    Plain,
}

/// A point in the host's life: memory, descriptors and what its Target-client cache holds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub rss_kib: u64,
    pub fds: usize,
    pub clients: u64,
    pub connections: u64,
    /// What the plugin instance pool keeps resident in unused slots (part of `rss_kib`).
    pub pool_kib: u64,
    /// The part of `rss_kib` that is pages of mapped files (`RssFile`: the executable's code
    /// paged in as it was first run), not memory the process allocated.
    pub file_kib: u64,
    /// The allocator's own count of bytes in use and of free bytes it keeps (glibc hosts).
    pub heap_kib: u64,
    pub heap_free_kib: u64,
}

impl Sample {
    pub fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }

    pub fn file_mib(&self) -> f64 {
        self.file_kib as f64 / 1024.0
    }

    pub fn heap_mib(&self) -> f64 {
        self.heap_kib as f64 / 1024.0
    }

    pub fn heap_free_mib(&self) -> f64 {
        self.heap_free_kib as f64 / 1024.0
    }

    pub fn pool_mib(&self) -> f64 {
        self.pool_kib as f64 / 1024.0
    }
}

pub struct World {
    pub server: ApiServer,
    _landscaper_cluster: LoopbackServing,
    target_url: String,
    /// The same Target clusters over plain HTTP.
    plain_targets: LoopbackServing,
    ca_pem: String,
    pub items: Api<DeployItem>,
    pub targets: Api<Target>,
    host: KillOnDrop,
    metrics: String,
    /// Per item: when it was created (or given its latest spec), and when its job finished.
    pub created: Arc<Mutex<HashMap<String, Instant>>>,
    pub finished: Arc<Mutex<HashMap<String, (String, Instant)>>>,
    tokens: std::sync::atomic::AtomicU64,
    _tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl World {
    /// Starts the server, the simulated Landscaper and the host (`host_config` is its
    /// configuration file's text).
    pub async fn start(dir: &Path, host_config: &str) -> World {
        let server = landscaper_server();
        let landscaper_cluster = server.serve_on_loopback().await.unwrap();
        let kubeconfig = dir.join("landscaper-kubeconfig");
        std::fs::write(&kubeconfig, landscaper_cluster.kubeconfig()).unwrap();
        // The Target clusters: the same server over TLS, as real clusters are reached.
        let cert = ServingCert::generate(&["127.0.0.1".to_string()]).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target_url = format!("https://{}", listener.local_addr().unwrap());
        let ca_pem = cert.ca_pem().to_string();
        let tls_server = server.clone();
        let serve_tls = tokio::spawn(async move {
            let _ = tls_server
                .serve_tls(listener, &cert, std::future::pending())
                .await;
        });
        let plain_targets = server.serve_on_loopback().await.unwrap();
        let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(server.client()));
        let client = server.client();
        let items: Api<DeployItem> = Api::namespaced(client.clone(), NS);
        let finished = Arc::new(Mutex::new(HashMap::new()));
        let watch = tokio::spawn(note_finished(items.clone(), finished.clone()));
        let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.join("host-config.yaml");
        std::fs::write(&config, host_config).unwrap();
        // `BENCH_HOST_WRAPPER="heaptrack -o /tmp/x"`: the host runs under a profiler (its RSS
        // is then the wrapper's). `BENCH_HOST_BINARY`: another build of the host (the image's
        // static musl one: `target/x86_64-unknown-linux-musl/image/deployer-host`).
        let binary = std::env::var("BENCH_HOST_BINARY")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_deployer-host").to_string());
        let wrapper = std::env::var("BENCH_HOST_WRAPPER").unwrap_or_default();
        let mut words = wrapper.split_whitespace();
        let mut host = match words.next() {
            Some(program) => {
                let mut c = std::process::Command::new(program);
                c.args(words).arg(&binary);
                c
            }
            None => std::process::Command::new(&binary),
        };
        let host = host
            .args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .arg("--plugins")
            .arg(workspace().join("target/plugins"))
            .arg("--config")
            .arg(&config)
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("deployer-host run");
        let world = World {
            targets: Api::namespaced(client, NS),
            server,
            _landscaper_cluster: landscaper_cluster,
            target_url,
            plain_targets,
            ca_pem,
            items,
            host: KillOnDrop(host),
            metrics: format!("127.0.0.1:{metrics_port}"),
            created: Default::default(),
            finished,
            tokens: Default::default(),
            _tasks: vec![serve_tls, landscaper, watch],
        };
        world.wait_ready().await;
        world
    }

    pub fn pid(&self) -> u32 {
        self.host.0.id()
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.get("/readyz").await.starts_with("HTTP/1.0 200")
            && !self.get("/readyz").await.starts_with("HTTP/1.1 200")
        {
            assert!(Instant::now() < deadline, "the host never became ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One plain HTTP GET of the host's metrics endpoint; the whole answer.
    async fn get(&self, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(mut s) = tokio::net::TcpStream::connect(&self.metrics).await else {
            return String::new();
        };
        let _ = s
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .await;
        let mut out = String::new();
        let _ = s.read_to_string(&mut out).await;
        out
    }

    /// A metric's value (0 when absent).
    /// The host's metric `name`, summed over its label sets (0 when it has none yet).
    pub async fn metric(&self, name: &str) -> u64 {
        let text = self.get("/metrics").await;
        text.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(name)?;
                let value = match rest.strip_prefix('{') {
                    Some(labelled) => labelled.split_once("} ")?.1,
                    None => rest.strip_prefix(' ')?,
                };
                value.trim().parse::<u64>().ok()
            })
            .sum()
    }

    pub async fn sample(&self) -> Sample {
        Sample {
            rss_kib: rss_kib(self.pid()),
            file_kib: test_support::bench::status_kib(self.pid(), "RssFile"),
            fds: open_fds(self.pid()),
            clients: self.metric("wasm_deployer_target_clients").await,
            connections: self.metric("wasm_deployer_target_connections").await,
            pool_kib: self
                .metric("wasm_deployer_plugin_pool_idle_resident_bytes")
                .await
                / 1024,
            heap_kib: self
                .metric(r#"wasm_deployer_heap_bytes{state="in_use"}"#)
                .await
                / 1024,
            heap_free_kib: self
                .metric(r#"wasm_deployer_heap_bytes{state="free"}"#)
                .await
                / 1024,
        }
    }

    /// A kubeconfig for the Target clusters with a token of its own (a new cluster identity, or
    /// a rotated credential).
    pub fn fresh_kubeconfig(&self) -> String {
        self.fresh_kubeconfig_over(Scheme::Tls)
    }

    /// [`World::fresh_kubeconfig`] over TLS or plain HTTP.
    pub fn fresh_kubeconfig_over(&self, scheme: Scheme) -> String {
        let n = self
            .tokens
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = format!("bench-token-{n}");
        self.server
            .add_token(&token, "bench-admin", &["system:masters"]);
        match scheme {
            Scheme::Tls => {
                ApiServer::kubeconfig_yaml_tls(&self.target_url, Some(&self.ca_pem), &token)
            }
            Scheme::Plain => ApiServer::kubeconfig_yaml_tls(&self.plain_targets.url, None, &token),
        }
    }

    /// A kubeconfig for a cluster at `url` (a refusing or hanging one).
    pub fn kubeconfig_at(&self, url: &str) -> String {
        ApiServer::kubeconfig_yaml_tls(url, Some(&self.ca_pem), "bench-dead")
    }

    /// The Targets `refusing` (a loopback port nobody listens on) and `hanging` (a listener that
    /// is never served: the kernel accepts, nobody answers); keep the returned listener while
    /// they are used.
    pub async fn put_dead_targets(&self, refusing: &str, hanging: &str) -> std::net::TcpListener {
        let refusing_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        self.put_target(
            refusing,
            &self.kubeconfig_at(&format!("https://127.0.0.1:{refusing_port}")),
        )
        .await;
        self.put_target(
            hanging,
            &self.kubeconfig_at(&format!("https://{}", listener.local_addr().unwrap())),
        )
        .await;
        listener
    }

    /// Creates or replaces the Target `name` with `kubeconfig`.
    pub async fn put_target(&self, name: &str, kubeconfig: &str) {
        let target: Target = serde_json::from_value(json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                     "config": {"kubeconfig": kubeconfig}}
        }))
        .unwrap();
        match self.targets.get_opt(name).await.unwrap() {
            None => {
                self.targets
                    .create(&PostParams::default(), &target)
                    .await
                    .unwrap();
            }
            Some(old) => {
                let mut target = target;
                target.metadata.resource_version = old.metadata.resource_version;
                self.targets
                    .replace(name, &PostParams::default(), &target)
                    .await
                    .unwrap();
            }
        }
    }

    /// Creates (or gives a new spec to) the manifest item `name` on Target `target`: one
    /// ConfigMap whose data says `revision`.
    pub async fn put_item(&self, name: &str, target: &str, revision: u64) {
        let item: DeployItem = serde_json::from_value(json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"type": "landscaper.gardener.cloud/kubernetes-manifest",
                     "target": {"name": target, "namespace": NS},
                     "config": {"apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha2",
                                "kind": "ProviderConfiguration", "updateStrategy": "update",
                                "manifests": [{"policy": "manage", "manifest": {
                                    "apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": name, "namespace": NS},
                                    "data": {"revision": revision.to_string()}}}]}}
        }))
        .unwrap();
        self.created
            .lock()
            .unwrap()
            .insert(name.to_string(), Instant::now());
        match self.items.get_opt(name).await.unwrap() {
            None => {
                self.items
                    .create(&PostParams::default(), &item)
                    .await
                    .unwrap();
            }
            Some(old) => {
                let mut item = item;
                item.metadata.resource_version = old.metadata.resource_version;
                item.status = old.status;
                self.items
                    .replace(name, &PostParams::default(), &item)
                    .await
                    .unwrap();
            }
        }
    }

    /// Waits until every item of `names` has finished a job other than the one it had before
    /// (`before`: name → jobIDFinished), within `limit`; returns how many did.
    pub async fn wait_jobs(
        &self,
        names: &[String],
        before: &HashMap<String, String>,
        limit: Duration,
    ) -> usize {
        let deadline = Instant::now() + limit;
        loop {
            let done = {
                let finished = self.finished.lock().unwrap();
                names
                    .iter()
                    .filter(|n| {
                        finished
                            .get(*n)
                            .is_some_and(|(job, _)| before.get(*n) != Some(job))
                    })
                    .count()
            };
            if done == names.len() || Instant::now() > deadline {
                return done;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// name → the job that finished last (for [`World::wait_jobs`]).
    pub fn finished_jobs(&self) -> HashMap<String, String> {
        self.finished
            .lock()
            .unwrap()
            .iter()
            .map(|(n, (job, _))| (n.clone(), job.clone()))
            .collect()
    }

    /// Seconds from each item's latest spec to its finished job.
    pub fn latencies(&self, names: &[String]) -> Vec<f64> {
        let created = self.created.lock().unwrap();
        let finished = self.finished.lock().unwrap();
        names
            .iter()
            .filter_map(|n| {
                let (_, at) = finished.get(n)?;
                Some(at.saturating_duration_since(*created.get(n)?).as_secs_f64())
            })
            .collect()
    }

    /// Deletes the items (waiting until they are gone) and then their Targets.
    pub async fn delete_all(&self, items: &[String], targets: &[String]) {
        let dp = DeleteParams::default();
        futures::stream::iter(items)
            .for_each_concurrent(32, |n| {
                let dp = dp.clone();
                async move {
                    let _ = self.items.delete(n, &dp).await;
                }
            })
            .await;
        let deadline = Instant::now() + Duration::from_secs(600);
        for n in items {
            while self.items.get_opt(n).await.unwrap().is_some() {
                assert!(Instant::now() < deadline, "item {n} was never deleted");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            self.finished.lock().unwrap().remove(n);
            self.created.lock().unwrap().remove(n);
        }
        futures::stream::iter(targets)
            .for_each_concurrent(32, |n| {
                let dp = dp.clone();
                async move {
                    let _ = self.targets.delete(n, &dp).await;
                }
            })
            .await;
    }

    /// Waits until the host holds at most `clients` Target clients (within `limit`).
    pub async fn wait_clients_at_most(&self, clients: u64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.metric("wasm_deployer_target_clients").await > clients {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        true
    }
}

/// Notes `(jobIDFinished, when)` for every item whose job is finished, as the watch sees it.
async fn note_finished(
    items: Api<DeployItem>,
    finished: Arc<Mutex<HashMap<String, (String, Instant)>>>,
) {
    let mut events = std::pin::pin!(watcher(items, watcher::Config::default()));
    while let Some(event) = events.next().await {
        let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = event else {
            continue;
        };
        let s = o.status.clone().unwrap_or_default();
        if !s.job_id.is_empty() && s.job_id == s.job_id_finished {
            let name = o.metadata.name.clone().unwrap_or_default();
            let mut f = finished.lock().unwrap();
            if f.get(&name)
                .is_none_or(|(job, _)| *job != s.job_id_finished)
            {
                f.insert(name, (s.job_id_finished.clone(), Instant::now()));
            }
        }
    }
}

/// The `q`-quantile of `values` (nearest rank).
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}
