//! Scale-out stories (Landscaper contract section 5): several host replicas against one API
//! server, each with its own pod name, locking with SyncObjects. Who wrote what is read from the
//! API server's own audit log (each replica's client sends its pod name as user agent): the
//! embedded server's, or a real kube-apiserver's `--audit-log-path` file.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::controller::Context;
use deployer_host::dev::{DevEnvironment, landscaper};
use deployer_host::landscaper::{DeployItem, FINALIZER, Phase};
use deployer_host::locking::{self, SyncObject};
use embedded_apiserver::ApiServer;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use plugin_runtime::{
    DeployerError, DeployerPlugin, HostServices, Invocation, PluginRegistry, Response,
};

const PODS_NAMESPACE: &str = "landscaper-system";

/// The cluster the replicas share, and where its audit log is.
struct Cluster {
    embedded: Option<ApiServer>,
    real: Option<test_support::RealApiServer>,
}

/// One successful write, as an audit log records it.
struct Write {
    /// `deployitems.landscaper.gardener.cloud`, ...
    resource: String,
    subresource: Option<String>,
    name: String,
    user_agent: String,
}

impl Cluster {
    /// A client whose requests carry `user_agent`, so the audit log tells the replicas apart.
    async fn client_as(&self, user_agent: &'static str) -> Client {
        if let Some(server) = &self.embedded {
            let service = tower::ServiceBuilder::new()
                .map_request(move |mut req: http::Request<kube::client::Body>| {
                    req.headers_mut().insert(
                        http::header::USER_AGENT,
                        http::HeaderValue::from_static(user_agent),
                    );
                    req
                })
                .service(server.router());
            return Client::new(service, "default");
        }
        let real = self.real.as_ref().expect("a backend");
        let parsed = kube::config::Kubeconfig::from_yaml(&real.kubeconfig).unwrap();
        let mut config = kube::Config::from_custom_kubeconfig(parsed, &Default::default())
            .await
            .unwrap();
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(user_agent),
        ));
        Client::try_from(config).unwrap()
    }

    /// Every write that changed something (embedded: no-op writes excluded; real: 2xx
    /// responses to create, update and patch — the host sends no unchanged writes).
    fn writes(&self) -> Vec<Write> {
        if let Some(server) = &self.embedded {
            return server
                .audit_log()
                .into_iter()
                .filter(|e| e.changed)
                .map(|e| Write {
                    resource: e.resource,
                    subresource: e.subresource,
                    name: e.name,
                    user_agent: e.user_agent.unwrap_or_default(),
                })
                .collect();
        }
        let real = self.real.as_ref().expect("a backend");
        let log = std::fs::read_to_string(real.audit_log()).expect("audit log");
        log.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| {
                matches!(e["verb"].as_str(), Some("create" | "update" | "patch"))
                    && e["responseStatus"]["code"]
                        .as_u64()
                        .is_some_and(|c| (200..300).contains(&c))
            })
            .map(|e| {
                let r = &e["objectRef"];
                let group = r["apiGroup"].as_str().unwrap_or_default();
                let resource = r["resource"].as_str().unwrap_or_default();
                Write {
                    resource: if group.is_empty() {
                        resource.to_string()
                    } else {
                        format!("{resource}.{group}")
                    },
                    subresource: r["subresource"].as_str().map(String::from),
                    name: r["name"].as_str().unwrap_or_default().to_string(),
                    user_agent: e["userAgent"].as_str().unwrap_or_default().to_string(),
                }
            })
            .collect()
    }
}

impl Cluster {
    /// Lock writes (SyncObject creates and updates) the server refused with a conflict: lost
    /// races between replicas (embedded: requests less the audited successes; real: 409s in
    /// the audit log).
    fn refused_lock_writes(&self) -> u64 {
        const LOCKS: &str = "syncobjects.landscaper.gardener.cloud";
        if let Some(server) = &self.embedded {
            let stats = server.stats();
            let requested = stats.count("create", LOCKS) + stats.count("update", LOCKS);
            let done = server
                .audit_log()
                .into_iter()
                .filter(|e| e.resource == LOCKS && matches!(e.verb.as_str(), "create" | "update"))
                .count() as u64;
            return requested - done;
        }
        let real = self.real.as_ref().expect("a backend");
        let log = std::fs::read_to_string(real.audit_log()).expect("audit log");
        log.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| {
                e["stage"] == "ResponseComplete"
                    && matches!(e["verb"].as_str(), Some("create" | "update"))
                    && e["objectRef"]["resource"] == "syncobjects"
                    && e["responseStatus"]["code"] == 409
            })
            .count() as u64
    }
}

struct Replica {
    deployer: Arc<Context>,
    task: tokio::task::JoinHandle<()>,
}

fn config() -> HostConfig {
    HostConfig {
        requeue_interval: Some("200ms".into()),
        workers: Some(4),
        ..HostConfig::default()
    }
}

async fn start_replica(
    cluster: &Cluster,
    registry: Arc<PluginRegistry>,
    pod: &'static str,
) -> Replica {
    start_replica_with(cluster, registry, pod, Some(test_support::STORY_LEASE)).await
}

/// A replica that splits the items with its peers by `leases`, or (`None`) races for every lock.
async fn start_replica_with(
    cluster: &Cluster,
    registry: Arc<PluginRegistry>,
    pod: &'static str,
    leases: Option<Duration>,
) -> Replica {
    let client = cluster.client_as(pod).await;
    let (deployer, task) = test_support::start_locking_replica(
        client.clone(),
        client,
        registry,
        &config(),
        pod,
        PODS_NAMESPACE,
        leases,
    );
    Replica { deployer, task }
}

/// Replicas as `pods` that split by Leases, once every one of them sees them all.
async fn agreeing_replicas(
    cluster: &Cluster,
    registry: Arc<PluginRegistry>,
    pods: &[&'static str],
) -> Vec<Replica> {
    let mut replicas = Vec::new();
    for pod in pods {
        replicas.push(start_replica(cluster, registry.clone(), pod).await);
    }
    wait_views(
        &replicas.iter().collect::<Vec<_>>(),
        pods,
        Duration::from_secs(20),
    )
    .await;
    replicas
}

/// Waits until every replica sees exactly `pods` alive by their Leases.
async fn wait_views(replicas: &[&Replica], pods: &[&str], within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let views: Vec<Vec<String>> = replicas
            .iter()
            .map(|r| r.deployer.membership.as_ref().unwrap().members().to_vec())
            .collect();
        if views.iter().all(|v| v == pods) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replicas never agreed on {pods:?}: {views:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn setup() -> (Cluster, Client) {
    let cluster = match test_support::backend() {
        test_support::Backend::Embedded => {
            let server = ApiServer::new(Default::default()).unwrap();
            server.enable_audit(true);
            DevEnvironment::bootstrap(server.clone(), "http://127.0.0.1:1")
                .await
                .unwrap();
            Cluster {
                embedded: Some(server),
                real: None,
            }
        }
        test_support::Backend::Real => {
            let real = test_support::RealApiServer::start_audited("AlwaysAllow");
            let client = real.client().await;
            deployer_host::dev::install_landscaper_crds(&client)
                .await
                .unwrap();
            deployer_host::dev::ensure_default_objects(&client, &real.kubeconfig)
                .await
                .unwrap();
            Cluster {
                embedded: None,
                real: Some(real),
            }
        }
    };
    let client = cluster.client_as("test").await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PODS_NAMESPACE}});
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(ns).unwrap())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NAMESPACE);
    for pod in ["host-0", "host-1", "host-2"] {
        let p = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": PODS_NAMESPACE},
            "spec": {"containers": [{"name": "host", "image": "wasm-deployer"}]}});
        pods.create(&PostParams::default(), &serde_json::from_value(p).unwrap())
            .await
            .unwrap();
    }
    (cluster, client)
}

async fn registry(extra: Vec<Arc<dyn DeployerPlugin>>) -> Arc<PluginRegistry> {
    let mut config = HostConfig::default();
    config.plugins.dir = Some(test_support::plugins_dir());
    config.plugins.cache_dir = Some(test_support::plugins_dir().join("../plugin-cache"));
    if extra.is_empty() {
        return deployer_host::plugins::load_all(&config, &[config.plugins_dir()], Vec::new())
            .await
            .unwrap();
    }
    Arc::new(PluginRegistry::new(extra).unwrap())
}

/// Creates `n` mock items the way Landscaper does: with the finalizer already set.
async fn create_items(client: &Client, n: usize, prefix: &str) {
    let api: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    for i in 0..n {
        let item: DeployItem = serde_json::from_value(serde_json::json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1",
            "kind": "DeployItem",
            "metadata": {"name": format!("{prefix}-{i}"), "namespace": "default", "finalizers": [FINALIZER]},
            "spec": {"type": "landscaper.gardener.cloud/mock",
                     "config": {"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
                                "kind": "ProviderConfiguration", "phase": "Succeeded"}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &item).await.unwrap();
    }
}

async fn wait_all_finished(client: &Client, n: usize, timeout: Duration) -> Vec<DeployItem> {
    let api: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let items = api.list(&ListParams::default()).await.unwrap().items;
        let done = items
            .iter()
            .filter(|i| {
                let s = i.status();
                !s.job_id.is_empty() && s.job_id == s.job_id_finished
            })
            .count();
        if done == n {
            return items;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {done} of {n} jobs finished"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_three_replicas_and_300_items_then_every_job_is_processed_by_exactly_one_replica() {
    three_replicas_process_every_job_once(Some(test_support::STORY_LEASE)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_three_replicas_without_leases_then_locks_alone_keep_every_job_to_one_replica() {
    // As Landscaper's own deployers run (and ours with `locking.membership: false`).
    three_replicas_process_every_job_once(None).await;
}

async fn three_replicas_process_every_job_once(leases: Option<Duration>) {
    let (cluster, client) = setup().await;
    let registry = registry(vec![]).await;
    let mut replicas = Vec::new();
    for pod in ["host-0", "host-1", "host-2"] {
        replicas.push(start_replica_with(&cluster, registry.clone(), pod, leases).await);
    }
    let sim = tokio::spawn(landscaper::run(cluster.client_as("landscaper").await));

    create_items(&client, 300, "item").await;
    let items = wait_all_finished(&client, 300, Duration::from_secs(120)).await;
    for item in &items {
        assert_eq!(item.status().phase, Phase::Succeeded);
    }

    // From the audit: which replicas wrote each item (status and metadata writes).
    let mut writers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in cluster.writes() {
        if e.resource == "deployitems.landscaper.gardener.cloud" {
            let ua = e.user_agent;
            if ua.starts_with("host-") {
                writers.entry(e.name).or_default().insert(ua);
            }
        }
    }
    assert_eq!(writers.len(), 300, "every item was written by a replica");
    let mut per_replica: BTreeMap<String, usize> = BTreeMap::new();
    for (item, by) in &writers {
        assert_eq!(by.len(), 1, "{item} was written by {by:?}");
        *per_replica
            .entry(by.iter().next().unwrap().clone())
            .or_default() += 1;
    }
    eprintln!("jobs per replica: {per_replica:?}");
    // Every job's pickup names the replica that did the work.
    for item in &items {
        let name = item.metadata.name.clone().unwrap();
        let writer = writers[&name].iter().next().unwrap();
        assert_eq!(&item.status().deployer.unwrap().identity, writer);
    }
    // Locks are released at the end of every reconcile (a replica may still be in one that
    // found the job finished after taking the lock: give it a moment).
    let locks: Api<SyncObject> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let held: Vec<_> = locks
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|l| !l.spec.pod_name.is_empty())
            .map(|l| (l.metadata.name, l.spec.pod_name))
            .collect();
        if held.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still locked: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sim.abort();
    for r in replicas {
        r.task.abort();
    }
}

/// A deployer that holds its item for a long time, so a replica can die mid-job.
struct Slow;

#[async_trait::async_trait]
impl DeployerPlugin for Slow {
    fn description(&self) -> &plugin_runtime::Description {
        static D: std::sync::OnceLock<plugin_runtime::Description> = std::sync::OnceLock::new();
        D.get_or_init(|| plugin_runtime::Description {
            name: "slow-mock".into(),
            version: "0".into(),
            deploy_item_types: vec!["landscaper.gardener.cloud/mock".into()],
            hook_types: vec![],
        })
    }
    fn origin(&self) -> String {
        "test".into()
    }
    async fn reconcile(
        &self,
        _: Invocation,
        _: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(Response::with_phase("Succeeded"))
    }
    async fn delete(
        &self,
        _: Invocation,
        _: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        Ok(Response::default())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_replica_killed_while_holding_locks_when_its_pod_is_gone_then_the_others_take_over()
{
    let (cluster, client) = setup().await;
    let sim = tokio::spawn(landscaper::run(cluster.client_as("landscaper").await));
    // host-2 starts first and alone, with a deployer that never finishes: it locks items and hangs.
    let stuck = start_replica(&cluster, registry(vec![Arc::new(Slow)]).await, "host-2").await;
    create_items(&client, 30, "job").await;
    let locks: Api<SyncObject> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let held = loop {
        let held = locks
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|l| l.spec.pod_name == "host-2")
            .count();
        if held >= 4 {
            break held;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "host-2 never held its locks"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let healthy = registry(vec![]).await;
    let mut others = Vec::new();
    for pod in ["host-0", "host-1"] {
        others.push(start_replica(&cluster, healthy.clone(), pod).await);
    }

    // Kill host-2 without unlocking: its reconciles are dropped mid-call.
    stuck.task.abort();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let still_held = locks
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|l| l.spec.pod_name == "host-2")
        .count();
    assert_eq!(
        still_held, held,
        "its pod still exists, so nobody takes over yet"
    );
    // Its pod goes away (as Kubernetes would delete it); the others now take over.
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NAMESPACE);
    pods.delete("host-2", &DeleteParams::default())
        .await
        .unwrap();

    let items = wait_all_finished(&client, 30, Duration::from_secs(60)).await;
    for item in &items {
        assert_eq!(item.status().phase, Phase::Succeeded);
    }
    // The finishing status write of every item came from a live replica; host-2 had picked up
    // some of them (its identity stays in status.deployer: a running job is continued, not
    // restarted), and the others finished them.
    let mut last_writer: BTreeMap<String, String> = BTreeMap::new();
    let mut picked_by_dead = 0;
    for e in cluster.writes() {
        if e.resource == "deployitems.landscaper.gardener.cloud"
            && e.subresource.as_deref() == Some("status")
        {
            let ua = e.user_agent;
            if ua.starts_with("host-") {
                if ua == "host-2" {
                    picked_by_dead += 1;
                }
                last_writer.insert(e.name, ua);
            }
        }
    }
    assert!(
        picked_by_dead >= held,
        "host-2 had picked up the items it locked"
    );
    assert_eq!(last_writer.len(), 30);
    for (item, writer) in &last_writer {
        assert_ne!(writer, "host-2", "{item} was finished by a live replica");
    }
    sim.abort();
    for r in others {
        r.task.abort();
    }
    drop(stuck.deployer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_item_deleted_then_its_lock_goes_with_it_and_when_recreated_cleanup_removes_only_an_old_lock_left_behind()
 {
    let (cluster, client) = setup().await;
    let registry = registry(vec![]).await;
    let replica = start_replica(&cluster, registry, "host-0").await;
    let sim = tokio::spawn(landscaper::run(cluster.client_as("landscaper").await));
    let items: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    let locks: Api<SyncObject> = Api::namespaced(client.clone(), "default");

    create_items(&client, 1, "same").await;
    let old = wait_all_finished(&client, 1, Duration::from_secs(20))
        .await
        .remove(0);
    let old_lock = format!("wasm-deployer-{}", old.metadata.uid.clone().unwrap());
    if test_support::backend() == test_support::Backend::Embedded {
        assert!(
            locks.get_opt(&old_lock).await.unwrap().is_some(),
            "the job left its (unlocked) SyncObject"
        );
    }

    items
        .delete("same-0", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while items.get_opt("same-0").await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "item not deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its deletion job took its lock with it: the item was gone when the job ended.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while locks.get_opt(&old_lock).await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deleted item's lock is still there"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    replica.task.abort();
    // A lock of the old object left behind by a replica that is gone (a SIGKILL leaves one),
    // and the same name created again, whose lock is held right now.
    let left = locking::SyncObject::new(
        "default",
        &old_lock,
        locking::SyncObjectSpec {
            pod_name: "host-9".into(),
            kind: "DeployItem".into(),
            name: "same-0".into(),
            last_update_time: deployer_host::clock::now(),
            prefix: "wasm-deployer".into(),
        },
    );
    locks.create(&PostParams::default(), &left).await.unwrap();
    create_items(&client, 1, "same").await;
    let new = items.get("same-0").await.unwrap();
    let new_lock = format!("wasm-deployer-{}", new.metadata.uid.clone().unwrap());
    assert_ne!(old_lock, new_lock);
    let held = locking::SyncObject::new(
        "default",
        &new_lock,
        locking::SyncObjectSpec {
            pod_name: "host-1".into(),
            kind: "DeployItem".into(),
            name: "same-0".into(),
            last_update_time: deployer_host::clock::now(),
            prefix: "wasm-deployer".into(),
        },
    );
    locks.create(&PostParams::default(), &held).await.unwrap();

    let deleted = locking::cleaner::cleanup_once(&client, "wasm-deployer", None)
        .await
        .unwrap();
    assert_eq!(deleted, vec![old_lock.clone()]);
    assert!(locks.get_opt(&old_lock).await.unwrap().is_none());
    let kept = locks.get(&new_lock).await.unwrap();
    assert_eq!(
        kept.spec.pod_name, "host-1",
        "the new object's lock is untouched"
    );
    sim.abort();
}

/// Which replica wrote each DeployItem (status and metadata writes), from the audit log.
fn item_writers(cluster: &Cluster) -> BTreeMap<String, BTreeSet<String>> {
    let mut writers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in cluster.writes() {
        if e.resource == "deployitems.landscaper.gardener.cloud"
            && e.user_agent.starts_with("host-")
        {
            writers.entry(e.name).or_default().insert(e.user_agent);
        }
    }
    writers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_five_replicas_splitting_by_leases_then_each_job_is_locked_by_its_replica_alone() {
    // Given five replicas that agree, by their Leases, on who is alive,
    let (cluster, client) = setup().await;
    let registry = registry(vec![]).await;
    let pods = ["host-0", "host-1", "host-2", "host-3", "host-4"];
    let replicas = agreeing_replicas(&cluster, registry, &pods).await;
    let refused_before = cluster.refused_lock_writes();
    let sim = tokio::spawn(landscaper::run(cluster.client_as("landscaper").await));

    // when Landscaper gives 200 items a job,
    create_items(&client, 200, "split").await;
    let items = wait_all_finished(&client, 200, Duration::from_secs(120)).await;
    assert!(items.iter().all(|i| i.status().phase == Phase::Succeeded));

    // then each item was written by one replica, the one the hash names,
    let writers = item_writers(&cluster);
    assert_eq!(writers.len(), 200);
    let members: Vec<String> = pods.iter().map(|p| p.to_string()).collect();
    let mut per_replica: BTreeMap<String, usize> = BTreeMap::new();
    for item in &items {
        let name = item.metadata.name.clone().unwrap();
        let by = &writers[&name];
        assert_eq!(by.len(), 1, "{name} was written by {by:?}");
        let uid = item.metadata.uid.as_deref().unwrap();
        let owner = deployer_host::membership::owner_of(&members, uid).unwrap();
        assert!(
            by.contains(owner),
            "{name}: written by {by:?}, owner {owner}"
        );
        *per_replica.entry(owner.to_string()).or_default() += 1;
    }
    // every replica took a share,
    eprintln!("jobs per replica: {per_replica:?}");
    assert_eq!(per_replica.len(), 5, "{per_replica:?}");
    // and no lock write was refused: no replica raced another for a job.
    assert_eq!(cluster.refused_lock_writes() - refused_before, 0);
    let conflicts: u64 = replicas
        .iter()
        .map(|r| r.deployer.locker.as_ref().unwrap().conflicts())
        .sum();
    assert_eq!(conflicts, 0, "lock attempts refused for a held lock");
    sim.abort();
    for r in replicas {
        r.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_replicas_splitting_by_leases_when_one_dies_then_the_others_take_its_share_once_its_lease_expires()
 {
    // Given three replicas that agree on who is alive,
    let (cluster, client) = setup().await;
    let registry = registry(vec![]).await;
    let pods = ["host-0", "host-1", "host-2"];
    let mut replicas = agreeing_replicas(&cluster, registry, &pods).await;
    // when host-2 dies (its Lease is no longer renewed, its pod is gone),
    let dead = replicas.pop().unwrap();
    dead.task.abort();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), PODS_NAMESPACE);
    pods_api
        .delete("host-2", &DeleteParams::default())
        .await
        .unwrap();
    // and items are created, a third of them host-2's by the hash while its Lease lasts,
    let sim = tokio::spawn(landscaper::run(cluster.client_as("landscaper").await));
    create_items(&client, 60, "orphan").await;
    // then the others see it gone once its Lease expires, and finish every job.
    wait_views(
        &replicas.iter().collect::<Vec<_>>(),
        &["host-0", "host-1"],
        test_support::STORY_LEASE * 5,
    )
    .await;
    let items = wait_all_finished(&client, 60, Duration::from_secs(60)).await;
    assert!(items.iter().all(|i| i.status().phase == Phase::Succeeded));
    let writers = item_writers(&cluster);
    let three: Vec<String> = pods.iter().map(|p| p.to_string()).collect();
    let mut taken_over = 0;
    for item in &items {
        let name = item.metadata.name.clone().unwrap();
        let by = &writers[&name];
        assert_eq!(by.len(), 1, "{name} was written by {by:?}");
        assert!(!by.contains("host-2"), "{name} written by the dead replica");
        let uid = item.metadata.uid.as_deref().unwrap();
        if deployer_host::membership::owner_of(&three, uid) == Some("host-2") {
            taken_over += 1;
        }
    }
    assert!(taken_over > 0, "none of the items was host-2's by the hash");
    sim.abort();
    for r in replicas {
        r.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_generated_sync_object_crd_then_a_status_write_keeps_the_status() {
    // Landscaper's SyncObject CRD names an (empty) status beside its status subresource; a CRD
    // without it would have the API server prune every status write.
    let h = test_support::Harness::start_with(test_support::Options {
        controller: false,
        landscaper: false,
        ..Default::default()
    })
    .await;
    let api: Api<SyncObject> = Api::namespaced(h.client.clone(), "default");
    let mut lock = SyncObject::new(
        "default",
        "status-kept",
        locking::SyncObjectSpec {
            pod_name: "pod-a".into(),
            kind: "DeployItem".into(),
            name: "item".into(),
            last_update_time: "2026-11-28T00:00:00Z".into(),
            prefix: "wasm-deployer".into(),
        },
    );
    let created = api.create(&PostParams::default(), &lock).await.unwrap();
    lock.metadata.resource_version = created.metadata.resource_version;
    lock.status = Some(serde_json::json!({}));
    let written = api
        .replace_status("status-kept", &PostParams::default(), &lock)
        .await
        .unwrap();
    assert_eq!(written.status, Some(serde_json::json!({})));
    let read = api.get("status-kept").await.unwrap();
    assert_eq!(read.status, Some(serde_json::json!({})), "status kept");
    assert_eq!(read.spec.pod_name, "pod-a");
}
