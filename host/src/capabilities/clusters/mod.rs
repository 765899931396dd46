//! Kubernetes clients per Target cluster, shared by every invocation, and bounded by what is live.
//!
//! One Landscaper may deploy into thousands of clusters whose kubeconfigs rotate and some of
//! which are down at any moment; the host runs like that for months. So a client (with its
//! connections and discovery) is kept only while a live Target uses it (`cache`: released when
//! the Target is deleted or its kubeconfig rotates, when idle, and least recently used beyond a
//! maximum), its idle connections close (`connect`), and an unreachable endpoint fails calls at
//! once instead of holding workers (`health`).
//!
//! Owns: the clients (tests and dev mode register in-process ones, which are never released),
//! their discovery (`cluster`) and their endpoints' reachability. Must not touch: which cluster
//! an invocation may use — [`super::ItemServices`] decides that.

mod cache;
mod cluster;
mod config;
mod connect;
mod health;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use plugin_runtime::DeployerError;
use sha2::{Digest, Sha256};

use super::errors::error;
use crate::landscaper::codes;
use crate::shrink::ShrinkWhenSparse;
use cache::Cache;
pub use cache::Release;
pub(super) use cluster::Cluster;
pub use config::{ClusterSettings, TargetClustersConfig};
pub(super) use connect::unreachable_cause;
use health::Health;

/// The identity of a kubeconfig (SHA-256 of its parsed form): two texts of one kubeconfig, YAML
/// or JSON, share a client; any other difference (a rotated token) is another client.
type Key = [u8; 32];

/// A Target that uses a client, as `namespace/name`.
pub type TargetId = Arc<str>;

/// Kubeconfig texts seen before, at most this many, with their keys (parsing the YAML on every
/// Kubernetes call of a plugin was a tenth of the host's CPU for a manifest job).
const KNOWN_TEXTS: usize = 1024;

/// What the cache holds and has done, for metrics, benchmarks and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetClientStats {
    /// Clients held (registered in-process ones included).
    pub clients: usize,
    /// Open connections to Target clusters.
    pub connections: usize,
    /// Endpoints whose last attempt failed (also while they are probed again).
    pub unreachable: usize,
    /// Clients built since start.
    pub built: u64,
    /// Clients released since start: a Target deleted or rotated, idle, beyond the maximum.
    pub released_target: u64,
    pub released_idle: u64,
    pub released_capacity: u64,
}

/// Kubernetes clients per Target kubeconfig, shared by all invocations (cheap to clone).
#[derive(Clone)]
pub struct TargetClients {
    inner: Arc<Inner>,
}

struct Inner {
    settings: ClusterSettings,
    keys: Mutex<HashMap<String, Key>>,
    cache: Mutex<Cache<Key, TargetId, Arc<Cluster>>>,
    /// Reachability per endpoint, shared by the clients naming it; gone with the last of them.
    endpoints: Mutex<HashMap<Key, Weak<Health>>>,
    open: Arc<AtomicUsize>,
    built: AtomicU64,
    released: [AtomicU64; 3],
    sweeping: std::sync::atomic::AtomicBool,
}

impl Default for TargetClients {
    fn default() -> Self {
        Self::new(ClusterSettings::default())
    }
}

/// The identity of a kubeconfig: its parsed form when it is YAML or JSON, so one cluster
/// written as YAML text (inline config) or as JSON (a `secretRef` without `key`) shares one
/// client and one discovery cache.
fn cluster_key(kubeconfig: &str) -> String {
    serde_yaml::from_str::<serde_json::Value>(kubeconfig)
        .ok()
        .filter(serde_json::Value::is_object)
        .map(|v| v.to_string())
        .unwrap_or_else(|| kubeconfig.to_string())
}

impl TargetClients {
    pub fn new(settings: ClusterSettings) -> Self {
        Self {
            inner: Arc::new(Inner {
                cache: Mutex::new(Cache::new(settings.max_clients, settings.idle_timeout)),
                settings,
                keys: Mutex::default(),
                endpoints: Mutex::default(),
                open: Arc::default(),
                built: AtomicU64::new(0),
                released: Default::default(),
                sweeping: Default::default(),
            }),
        }
    }

    pub fn settings(&self) -> &ClusterSettings {
        &self.inner.settings
    }

    /// Uses `client` for every Target whose kubeconfig is `kubeconfig` (as YAML or JSON); it is
    /// never released.
    pub fn register(&self, kubeconfig: &str, client: Client) {
        let key = self.key_of(kubeconfig);
        let cluster = Arc::new(Cluster::new(
            client,
            "in-process".into(),
            Arc::new(Health::up()),
        ));
        self.inner
            .lock_cache()
            .insert(key, cluster, None, true, Instant::now());
    }

    /// The Target `namespace/name` is gone: its client goes unless another Target uses it.
    pub fn forget_target(&self, namespace: &str, name: &str) {
        let id: TargetId = format!("{namespace}/{name}").into();
        if self.inner.lock_cache().forget(&id).is_some() {
            self.inner.count(Release::Target, 1);
        }
    }

    pub fn stats(&self) -> TargetClientStats {
        let unreachable = self
            .inner
            .endpoints
            .lock()
            .expect("poisoned")
            .values()
            .filter_map(Weak::upgrade)
            .filter(|h| h.is_unreachable())
            .count();
        let released = |r: Release| self.inner.released[r as usize].load(Ordering::Relaxed);
        TargetClientStats {
            clients: self.inner.lock_cache().len(),
            connections: self.inner.open.load(Ordering::Relaxed),
            unreachable,
            built: self.inner.built.load(Ordering::Relaxed),
            released_target: released(Release::Target),
            released_idle: released(Release::Idle),
            released_capacity: released(Release::Capacity),
        }
    }

    /// The key of `kubeconfig`, parsed once per distinct text.
    fn key_of(&self, kubeconfig: &str) -> Key {
        if let Some(key) = self.inner.keys.lock().expect("poisoned").get(kubeconfig) {
            return *key;
        }
        let key: Key = Sha256::digest(cluster_key(kubeconfig).as_bytes()).into();
        let mut keys = self.inner.keys.lock().expect("poisoned");
        if keys.len() >= KNOWN_TEXTS {
            keys.clear();
        }
        keys.insert(kubeconfig.to_string(), key);
        key
    }

    /// The cluster of `kubeconfig`, used by the Target `user` (a rotated kubeconfig of that
    /// Target releases the client of the old one).
    pub(super) async fn cluster_for(
        &self,
        kubeconfig: &str,
        user: Option<&TargetId>,
    ) -> Result<Arc<Cluster>, DeployerError> {
        let key = self.key_of(kubeconfig);
        let (hit, released) = self.inner.lock_cache().get(&key, user, Instant::now());
        self.inner.count(Release::Target, released.len());
        if let Some(cluster) = hit {
            return Ok(cluster);
        }
        let cluster = Arc::new(self.build(kubeconfig).await?);
        let released =
            self.inner
                .lock_cache()
                .insert(key, cluster.clone(), user, false, Instant::now());
        for (_, why) in &released {
            self.inner.count(*why, 1);
        }
        self.inner.built.fetch_add(1, Ordering::Relaxed);
        self.start_sweeper();
        Ok(cluster)
    }

    async fn build(&self, kubeconfig: &str) -> Result<Cluster, DeployerError> {
        let config_error = |m: String| error(codes::CONFIGURATION_PROBLEM, "TargetKubeconfig", m);
        let parsed = Kubeconfig::from_yaml(kubeconfig)
            .map_err(|e| config_error(format!("target kubeconfig is invalid: {e}")))?;
        let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
            .await
            .map_err(|e| config_error(format!("target kubeconfig is unusable: {e}")))?;
        if let Some(proxy) = &config.proxy_url {
            return Err(config_error(format!(
                "target kubeconfig names a proxy ({proxy}); the host reaches Target clusters directly"
            )));
        }
        let client = connect::client(&config, &self.inner.settings, self.inner.open.clone())
            .map_err(|e| config_error(format!("cannot build a client for the target: {e}")))?;
        let server: Arc<str> = config.cluster_url.to_string().trim_end_matches('/').into();
        Ok(Cluster::new(client, server, self.health_of(&config)))
    }

    /// The shared reachability of `config`'s endpoint (URL and TLS settings).
    fn health_of(&self, config: &kube::Config) -> Arc<Health> {
        let mut hash = Sha256::new();
        hash.update(config.cluster_url.to_string());
        for cert in config.root_cert.iter().flatten() {
            hash.update(b"\0ca\0");
            hash.update(cert);
        }
        hash.update([u8::from(config.accept_invalid_certs)]);
        hash.update(config.tls_server_name.as_deref().unwrap_or_default());
        let key: Key = hash.finalize().into();
        let mut endpoints = self.inner.endpoints.lock().expect("poisoned");
        if let Some(health) = endpoints.get(&key).and_then(Weak::upgrade) {
            return health;
        }
        let health = Arc::new(Health::default());
        endpoints.insert(key, Arc::downgrade(&health));
        health
    }

    /// Releases idle clients now (the sweeper does this every quarter of the idle timeout, at
    /// most every 10 s).
    pub fn sweep(&self) {
        self.inner.sweep();
    }

    /// Starts the sweeper once; it ends when the last handle of this cache is dropped. After
    /// clients were released (by it or by their Targets), it gives the freed memory back to the
    /// operating system.
    fn start_sweeper(&self) {
        if self.inner.sweeping.swap(true, Ordering::Relaxed) {
            return;
        }
        let every = (self.inner.settings.idle_timeout / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(10));
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut trimmed_at = 0;
            loop {
                tokio::time::sleep(every).await;
                let Some(inner) = inner.upgrade() else { return };
                inner.sweep();
                let released: u64 = inner
                    .released
                    .iter()
                    .map(|r| r.load(Ordering::Relaxed))
                    .sum();
                if released != trimmed_at {
                    trimmed_at = released;
                    crate::allocator::release_freed();
                }
            }
        });
    }
}

impl Inner {
    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache<Key, TargetId, Arc<Cluster>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count(&self, why: Release, n: usize) {
        if n > 0 {
            self.released[why as usize].fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    fn sweep(&self) {
        let released = {
            let mut cache = self.lock_cache();
            let released = cache.sweep(Instant::now());
            // Forget the texts of kubeconfigs no longer held, so that memory returns too.
            let mut keys = self.keys.lock().expect("poisoned");
            keys.retain(|_, key| cache.contains(key));
            keys.shrink_when_sparse();
            released
        };
        self.count(Release::Idle, released.len());
        drop(released);
        let mut endpoints = self.endpoints.lock().expect("poisoned");
        endpoints.retain(|_, health| health.strong_count() > 0);
        endpoints.shrink_when_sparse();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "apiVersion: v1\nclusters:\n- name: c\n  cluster: {server: 'https://a'}\n";
    const JSON: &str =
        r#"{"clusters":[{"cluster":{"server":"https://a"},"name":"c"}],"apiVersion":"v1"}"#;

    #[test]
    fn one_kubeconfig_as_yaml_or_json_is_one_cluster() {
        assert_eq!(cluster_key(YAML), cluster_key(JSON));
        assert_ne!(
            cluster_key(YAML),
            cluster_key(&YAML.replace("https://a", "https://b"))
        );
        assert_eq!(cluster_key("not: [valid"), "not: [valid");
        let clients = TargetClients::default();
        assert_eq!(clients.key_of(YAML), clients.key_of(JSON));
    }

    #[test]
    fn the_known_texts_stay_bounded() {
        let clients = TargetClients::default();
        for i in 0..KNOWN_TEXTS + 10 {
            clients.key_of(&format!("clusters: [{{name: c{i}}}]"));
        }
        assert!(clients.inner.keys.lock().unwrap().len() <= KNOWN_TEXTS);
    }

    fn kubeconfig(server: &str, token: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{server}'}}\n\
             users:\n- name: u\n  user: {{token: {token}}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        )
    }

    #[tokio::test]
    async fn rotation_releases_the_old_client_and_keeps_the_endpoint_state() {
        let clients = TargetClients::default();
        let target: TargetId = "ns/t".into();
        let v1 = clients
            .cluster_for(&kubeconfig("http://127.0.0.1:9", "one"), Some(&target))
            .await
            .unwrap();
        let v2 = clients
            .cluster_for(&kubeconfig("http://127.0.0.1:9", "two"), Some(&target))
            .await
            .unwrap();
        assert!(!Arc::ptr_eq(&v1, &v2), "a rotated token is another client");
        assert!(
            Arc::ptr_eq(&v1.health, &v2.health),
            "one endpoint, one reachability"
        );
        let stats = clients.stats();
        assert_eq!(
            (stats.clients, stats.built, stats.released_target),
            (1, 2, 1)
        );
        clients.forget_target("ns", "t");
        assert_eq!(clients.stats().clients, 0);
    }

    #[tokio::test]
    async fn idle_clients_are_released_with_their_texts() {
        let clients = TargetClients::new(ClusterSettings {
            idle_timeout: Duration::from_millis(50),
            ..ClusterSettings::default()
        });
        clients
            .cluster_for(&kubeconfig("http://127.0.0.1:9", "one"), None)
            .await
            .unwrap();
        clients.register(
            YAML,
            Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap(),
        );
        tokio::time::sleep(Duration::from_millis(60)).await;
        clients.sweep();
        let stats = clients.stats();
        assert_eq!(
            (stats.clients, stats.released_idle),
            (1, 1),
            "the registered one stays"
        );
        assert_eq!(clients.inner.keys.lock().unwrap().len(), 1);
        assert!(clients.inner.endpoints.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_proxy_in_a_target_kubeconfig_is_refused_clearly() {
        let clients = TargetClients::default();
        let with_proxy = kubeconfig("https://10.0.0.1", "t").replace(
            "server: 'https://10.0.0.1'",
            "server: 'https://10.0.0.1', proxy-url: 'http://proxy:3128'",
        );
        let e = clients.cluster_for(&with_proxy, None).await.err().unwrap();
        assert!(e.message.contains("proxy"), "{}", e.message);
    }
}
