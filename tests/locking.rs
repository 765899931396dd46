//! Scale-out stories (Landscaper contract section 5): several host replicas against one API
//! server, each with its own pod name, locking with SyncObjects. Who wrote what is read from the
//! API server's own audit log (each replica's client sends its pod name as user agent).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::controller::{self, Deployer, TargetClients};
use deployer_host::dev::{DevEnvironment, landscaper};
use deployer_host::landscaper::{DeployItem, FINALIZER, Phase};
use deployer_host::locking::{self, LockConfig, Locker, SyncObject};
use embedded_apiserver::ApiServer;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use plugin_runtime::{
    DeployerError, DeployerPlugin, HostServices, Invocation, PluginRegistry, Response,
};

const PODS_NAMESPACE: &str = "landscaper-system";

/// A client whose requests carry `user_agent`, so the audit log tells the replicas apart.
fn client_as(server: &ApiServer, user_agent: &'static str) -> Client {
    let service = tower::ServiceBuilder::new()
        .map_request(move |mut req: http::Request<kube::client::Body>| {
            req.headers_mut().insert(
                http::header::USER_AGENT,
                http::HeaderValue::from_static(user_agent),
            );
            req
        })
        .service(server.router());
    Client::new(service, "default")
}

struct Replica {
    deployer: Arc<Deployer>,
    task: tokio::task::JoinHandle<()>,
}

fn config() -> HostConfig {
    HostConfig {
        requeue_interval: Some("200ms".into()),
        workers: Some(4),
        ..HostConfig::default()
    }
}

fn start_replica(server: &ApiServer, registry: Arc<PluginRegistry>, pod: &'static str) -> Replica {
    let client = client_as(server, pod);
    let mut deployer = Deployer::new(
        client.clone(),
        client.clone(),
        registry,
        &config(),
        TargetClients::default(),
    )
    .expect("deployer");
    let mut identity = deployer.deployer.clone();
    identity.identity = pod.to_string();
    deployer.deployer = identity;
    deployer.locker = Some(Locker::new(
        client.clone(),
        client,
        LockConfig {
            prefix: "wasm-deployer".into(),
            pod_name: pod.into(),
            pod_namespace: PODS_NAMESPACE.into(),
            retry_after: Duration::from_millis(200),
            pod_cache_timeout: Duration::from_millis(300),
        },
    ));
    let deployer = Arc::new(deployer);
    let task = tokio::spawn(controller::run(
        deployer.clone(),
        None,
        4,
        std::future::pending(),
    ));
    Replica { deployer, task }
}

async fn setup() -> (ApiServer, Client) {
    let server = ApiServer::new(Default::default()).unwrap();
    server.enable_audit(true);
    let env = DevEnvironment::bootstrap(server.clone(), "http://127.0.0.1:1")
        .await
        .unwrap();
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PODS_NAMESPACE}});
    server.install_object(ns).unwrap();
    for pod in ["host-0", "host-1", "host-2"] {
        let p = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": PODS_NAMESPACE},
            "spec": {"containers": [{"name": "host", "image": "wasm-deployer"}]}});
        server.install_object(p).unwrap();
    }
    (server, env.client)
}

async fn registry(extra: Vec<Arc<dyn DeployerPlugin>>) -> Arc<PluginRegistry> {
    let mut config = HostConfig::default();
    config.plugins.dir = Some(support::plugins_dir());
    config.plugins.cache_dir = Some(support::plugins_dir().join("../plugin-cache"));
    if extra.is_empty() {
        return deployer_host::plugins::load(&config).await.unwrap();
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
    let (server, client) = setup().await;
    let registry = registry(vec![]).await;
    let replicas: Vec<Replica> = ["host-0", "host-1", "host-2"]
        .into_iter()
        .map(|pod| start_replica(&server, registry.clone(), pod))
        .collect();
    let sim = tokio::spawn(landscaper::run(client_as(&server, "landscaper")));

    create_items(&client, 300, "item").await;
    let items = wait_all_finished(&client, 300, Duration::from_secs(120)).await;
    for item in &items {
        assert_eq!(item.status().phase, Phase::Succeeded);
    }

    // From the audit: which replicas wrote each item (status and metadata writes).
    let mut writers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in server.audit_log() {
        if e.resource == "deployitems.landscaper.gardener.cloud" && e.changed {
            let ua = e.user_agent.unwrap_or_default();
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
    // Locks are released at the end of every reconcile.
    let locks: Api<SyncObject> = Api::namespaced(client.clone(), "default");
    for lock in locks.list(&ListParams::default()).await.unwrap().items {
        assert_eq!(
            lock.spec.pod_name, "",
            "{:?} still locked",
            lock.metadata.name
        );
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
    let (server, client) = setup().await;
    let sim = tokio::spawn(landscaper::run(client_as(&server, "landscaper")));
    // host-2 starts first and alone, with a deployer that never finishes: it locks items and hangs.
    let stuck = start_replica(&server, registry(vec![Arc::new(Slow)]).await, "host-2");
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
    let others: Vec<Replica> = ["host-0", "host-1"]
        .into_iter()
        .map(|pod| start_replica(&server, healthy.clone(), pod))
        .collect();

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
    for e in server.audit_log() {
        if e.resource == "deployitems.landscaper.gardener.cloud"
            && e.subresource.as_deref() == Some("status")
            && e.changed
        {
            let ua = e.user_agent.unwrap_or_default();
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
async fn given_an_item_deleted_and_recreated_under_its_name_then_cleanup_removes_only_the_old_lock()
{
    let (server, client) = setup().await;
    let registry = registry(vec![]).await;
    let replica = start_replica(&server, registry, "host-0");
    let sim = tokio::spawn(landscaper::run(client_as(&server, "landscaper")));
    let items: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    let locks: Api<SyncObject> = Api::namespaced(client.clone(), "default");

    create_items(&client, 1, "same").await;
    let old = wait_all_finished(&client, 1, Duration::from_secs(20))
        .await
        .remove(0);
    let old_lock = format!("wasm-deployer-{}", old.metadata.uid.clone().unwrap());
    assert!(
        locks.get_opt(&old_lock).await.unwrap().is_some(),
        "the job left its (unlocked) SyncObject"
    );

    items
        .delete("same-0", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while items.get_opt("same-0").await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "item not deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Same name, new object, new UID; its lock is held right now.
    replica.task.abort();
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
