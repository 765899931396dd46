//! Least privilege, proven on API servers that enforce RBAC — real kube-apiservers with
//! `--authorization-mode=RBAC`, and the embedded server with `Options::rbac` served on loopback:
//! the host runs with ServiceAccount tokens (TokenRequest) bound to exactly the RBAC it ships
//! (`charts/wasm-deployer/rbac/`, which the chart templates read), and every part of the
//! contract works — pickup, finish, export Secret, finalizer, Events, locking with dead-owner
//! checks, orphan cleanup, deletion — in one cluster and fenced (the Landscaper cluster and the
//! host cluster are two servers with two identities); a rule less fails. A plugin's calls to
//! its Target go with the Target's identity, never the host's.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::controller::Context;
use deployer_host::landscaper::{DeployItem, FINALIZER, Phase};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use test_support::RealApiServer;

/// An API server enforcing RBAC, reached over HTTP with an admin kubeconfig: a real one, or the
/// embedded one (`Options::rbac`) on a loopback port. Stops when dropped.
struct RbacServer {
    url: String,
    /// Admin kubeconfig (the `system:masters` token).
    kubeconfig: String,
    _real: Option<RealApiServer>,
    _embedded: Option<(
        embedded_apiserver::ApiServer,
        embedded_apiserver::LoopbackServing,
    )>,
}

impl RbacServer {
    async fn start() -> Self {
        if test_support::backend() == test_support::Backend::Real {
            let real = RealApiServer::start("RBAC");
            return RbacServer {
                url: real.url.clone(),
                kubeconfig: real.kubeconfig.clone(),
                _real: Some(real),
                _embedded: None,
            };
        }
        let server = embedded_apiserver::ApiServer::new(embedded_apiserver::Options {
            rbac: true,
            ..Default::default()
        })
        .expect("embedded API server");
        let serving = server.serve_on_loopback().await.unwrap();
        RbacServer {
            kubeconfig: serving.kubeconfig(),
            url: serving.url.clone(),
            _real: None,
            _embedded: Some((server, serving)),
        }
    }

    /// A client with the admin token.
    async fn client(&self) -> Client {
        test_support::client_for(&self.kubeconfig).await
    }
}

const NAMESPACE: &str = "landscaper-system";
const SA: &str = "wasm-deployer";
const POD: &str = "wasm-deployer-0";

fn shipped(file: &str) -> String {
    let path = format!(
        "{}/../charts/wasm-deployer/rbac/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

async fn create<K>(api: &Api<K>, value: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).expect("object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create");
}

/// Namespace and ServiceAccount `landscaper-system/wasm-deployer` on `server`, and a
/// kubeconfig with a token minted for it (TokenRequest).
async fn service_account(server: &RbacServer, admin: &Client) -> String {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    if namespaces.get_opt(NAMESPACE).await.unwrap().is_none() {
        create(&namespaces, json!({"metadata": {"name": NAMESPACE}})).await;
    }
    identity(server, admin, NAMESPACE, SA).await
}

/// Binds the shipped Landscaper-cluster ClusterRole to the ServiceAccount.
async fn grant_landscaper_cluster(admin: &Client) {
    let role: ClusterRole = serde_yaml::from_str(&shipped("landscaper-cluster.yaml")).unwrap();
    grant_cluster_role(admin, role).await;
}

async fn grant_cluster_role(admin: &Client, role: ClusterRole) {
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": "wasm-deployer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wasm-deployer"},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]}),
    )
    .await;
}

/// Binds the shipped host-cluster Role (Pods of the host's namespace) and creates the host's
/// own Pod, which locking checks for liveness.
async fn grant_host_cluster(admin: &Client) {
    let mut role: Role = serde_yaml::from_str(&shipped("host-cluster.yaml")).unwrap();
    role.metadata.namespace = Some(NAMESPACE.into());
    Api::<Role>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), NAMESPACE),
        json!({"metadata": {"name": "wasm-deployer-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "wasm-deployer-pods"},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]}),
    )
    .await;
    create(
        &Api::<Pod>::namespaced(admin.clone(), NAMESPACE),
        json!({"metadata": {"name": POD},
            "spec": {"containers": [{"name": "host", "image": "wasm-deployer"}]}}),
    )
    .await;
}

/// The host as one replica with locking on: `ls` for Landscaper's objects, `host` for its Pods.
async fn start_host(ls: Client, host: Client) -> (Arc<Context>, tokio::task::JoinHandle<()>) {
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        // (the story reads the JobFinished Event: only `all` publishes it)
        events: Some(deployer_host::config::EventMode::All),
        ..HostConfig::default()
    };
    config.plugins.dir = Some(test_support::plugins_dir());
    config.plugins.cache_dir = Some(test_support::plugins_dir().join("../plugin-cache"));
    let registry = deployer_host::plugins::load_all(&config, &[config.plugins_dir()], Vec::new())
        .await
        .unwrap();
    test_support::start_locking_replica(
        ls,
        host,
        registry,
        &config,
        POD,
        NAMESPACE,
        Some(test_support::STORY_LEASE),
    )
}

/// A mock item with an export, and a manifest item that creates a ConfigMap on the Target
/// (whose kubeconfig is the admin's: what a Target may do is the Target's business).
async fn run_items(admin: &Client) {
    // Landscaper's side of the protocol (new jobIDs), with admin rights.
    let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(admin.clone()));
    let items: Api<DeployItem> = Api::namespaced(admin.clone(), "default");
    let mock: DeployItem = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": "mock", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/mock",
            "config": {"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
                "kind": "ProviderConfiguration", "export": {"greeting": "hi"}}}
    }))
    .unwrap();
    let manifest: DeployItem = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": "manifest", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/kubernetes-manifest",
            "target": {"name": "default", "namespace": "default"},
            "config": {"apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha2",
                "kind": "ProviderConfiguration",
                "manifests": [{"policy": "manage", "manifest": {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "from-rbac-story", "namespace": "default"}, "data": {"a": "b"}}}]}}
    }))
    .unwrap();
    for item in [mock, manifest] {
        items.create(&PostParams::default(), &item).await.unwrap();
    }
    for name in ["mock", "manifest"] {
        let item = wait_finished(&items, name).await;
        let s = item.status();
        assert_eq!(s.phase, Phase::Succeeded, "{name}: {:?}", s.last_error);
        assert!(item.has_finalizer(FINALIZER), "{name}");
    }
    // The export Secret the host wrote.
    let export = wait(&items, "mock", |i| i.status().export_ref.is_some())
        .await
        .status()
        .export_ref
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "default");
    secrets.get(&export.name).await.expect("export Secret");
    // Events on the item.
    let events: Api<Event> = Api::namespaced(admin.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some("JobFinished"))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no JobFinished Event"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Deletion: the plugins' delete, the export Secret, the finalizer — then the items are gone.
    for name in ["mock", "manifest"] {
        items.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !items
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty()
    {
        assert!(tokio::time::Instant::now() < deadline, "items not deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(secrets.get_opt(&export.name).await.unwrap().is_none());
    landscaper.abort();
}

/// `name` once its job is finished (`jobID == jobIDFinished`, not empty).
async fn wait_finished(items: &Api<DeployItem>, name: &str) -> DeployItem {
    wait(items, name, |i| {
        let s = i.status();
        !s.job_id.is_empty() && s.job_id == s.job_id_finished
    })
    .await
}

async fn wait(
    items: &Api<DeployItem>,
    name: &str,
    pred: impl Fn(&DeployItem) -> bool,
) -> DeployItem {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let item = items.get_opt(name).await.unwrap();
        if let Some(item) = item.as_ref().filter(|i| pred(i)) {
            return item.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: {}",
            serde_yaml::to_string(&item).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Landscaper's CRDs and the default Target (admin kubeconfig) and Context.
async fn landscaper_cluster(server: &RbacServer) -> Client {
    let admin = server.client().await;
    deployer_host::dev::install_landscaper_crds(&admin)
        .await
        .unwrap();
    deployer_host::dev::ensure_default_objects(&admin, &server.kubeconfig)
        .await
        .unwrap();
    admin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_only_the_shipped_rbac_then_the_whole_contract_works() {
    let server = RbacServer::start().await;
    let admin = landscaper_cluster(&server).await;
    let kubeconfig = service_account(&server, &admin).await;
    let me = test_support::client_for(&kubeconfig).await;
    // Without a grant the host's identity can read nothing.
    let items: Api<DeployItem> = Api::namespaced(me.clone(), "default");
    let refused = items.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused}"
    );
    grant_landscaper_cluster(&admin).await;
    grant_host_cluster(&admin).await;
    // What the shipped roles leave out stays refused: DeployItems are never deleted or
    // created by the host, Secrets never listed.
    let refused = items
        .delete("anything", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403 && s.message.contains("cannot delete resource \"deployitems\" in API group \"landscaper.gardener.cloud\"")),
        "{refused}"
    );
    let secrets: Api<Secret> = Api::namespaced(me.clone(), "default");
    let refused = secrets.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused}"
    );

    let (deployer, task) = start_host(me.clone(), me.clone()).await;
    test_support::until(
        "the Target and Context caches",
        Duration::from_secs(20),
        || deployer.lookups.targets.is_synced() && deployer.lookups.contexts.is_synced(),
    )
    .await;
    run_items(&admin).await;
    // The replica holds its Lease and reads its peers' with the same rights (a refused Lease
    // would leave it out of the split, racing for every lock).
    let membership = deployer.membership.as_ref().expect("the split by Leases");
    assert_eq!(&*membership.members(), [POD.to_string()]);
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(admin.clone(), NAMESPACE);
    let lease = leases
        .get(&deployer_host::membership::lease_name("wasm-deployer", POD))
        .await
        .expect("the replica's Lease");
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some(POD));
    // The jobs read their Target and Context from the watch-fed caches, not with GETs.
    let lookups = &deployer.lookups;
    assert!(
        lookups.targets.hits.load(Relaxed) >= 1 && lookups.contexts.hits.load(Relaxed) >= 1,
        "targets {:?} / {:?}, contexts {:?} / {:?} (cache hits / GETs)",
        lookups.targets.hits,
        lookups.targets.gets,
        lookups.contexts.hits,
        lookups.contexts.gets
    );
    // The orphan cleaner works with the same rights.
    deployer_host::locking::cleaner::cleanup_once(&me, "wasm-deployer", None)
        .await
        .expect("cleanup with the shipped rights");
    task.abort();
}

/// Landscaper's deployer lifecycle management binds a deployer to its own ClusterRole
/// (`landscaper:deployer`), which grants the core group's `events`, not `events.k8s.io`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_role_granting_only_core_events_then_the_hosts_events_are_written_through_the_core_api()
 {
    let server = RbacServer::start().await;
    let admin = landscaper_cluster(&server).await;
    let kubeconfig = service_account(&server, &admin).await;
    let me = test_support::client_for(&kubeconfig).await;
    let mut role: ClusterRole = serde_yaml::from_str(&shipped("landscaper-cluster.yaml")).unwrap();
    for rule in role.rules.iter_mut().flatten() {
        if rule.resources.iter().flatten().any(|r| r == "events") {
            rule.api_groups = Some(vec![String::new()]);
        }
    }
    grant_cluster_role(&admin, role).await;
    grant_host_cluster(&admin).await;
    let refused = Api::<Event>::namespaced(me.clone(), "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "probe"},
                "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "x",
                "reportingInstance": "y", "action": "a", "reason": "r", "type": "Normal"}))
            .unwrap(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "events.k8s.io is refused: {refused}"
    );
    let (_deployer, task) = start_host(me.clone(), me.clone()).await;
    // The whole contract works, and the JobFinished Event (read through events.k8s.io: one
    // store serves both APIs) was written through the core API.
    run_items(&admin).await;
    let core: Vec<k8s_openapi::api::core::v1::Event> = Api::namespaced(admin.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let finished = core
        .iter()
        .find(|e| e.reason.as_deref() == Some("JobFinished"))
        .expect("a JobFinished Event");
    assert_eq!(finished.involved_object.kind.as_deref(), Some("DeployItem"));
    assert_eq!(finished.type_.as_deref(), Some("Normal"));
    assert!(finished.count.unwrap_or_default() >= 1);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_role_that_may_only_get_targets_and_contexts_then_jobs_read_them_one_by_one() {
    let server = RbacServer::start().await;
    let admin = landscaper_cluster(&server).await;
    let kubeconfig = service_account(&server, &admin).await;
    let me = test_support::client_for(&kubeconfig).await;
    // A hand-made role from before the caches: `get` only.
    let mut role: ClusterRole = serde_yaml::from_str(&shipped("landscaper-cluster.yaml")).unwrap();
    for rule in role.rules.iter_mut().flatten() {
        if rule.resources.as_deref() == Some(&["targets".to_string(), "contexts".to_string()]) {
            rule.verbs = vec!["get".into()];
        }
    }
    grant_cluster_role(&admin, role).await;
    grant_host_cluster(&admin).await;
    let targets: Api<deployer_host::landscaper::Target> = Api::namespaced(me.clone(), "default");
    let refused = targets.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused}"
    );

    let (deployer, task) = start_host(me.clone(), me.clone()).await;
    run_items(&admin).await;
    let lookups = &deployer.lookups;
    assert_eq!(lookups.targets.hits.load(Relaxed), 0);
    assert!(lookups.targets.gets.load(Relaxed) >= 1);
    assert!(lookups.contexts.gets.load(Relaxed) >= 2);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_fenced_setup_then_each_cluster_needs_only_its_own_role() {
    // The Landscaper cluster and the cluster the host runs in are two servers.
    let ls_server = RbacServer::start().await;
    let host_server = RbacServer::start().await;
    let ls_admin = landscaper_cluster(&ls_server).await;
    let host_admin = host_server.client().await;
    let ls_me = test_support::client_for(&service_account(&ls_server, &ls_admin).await).await;
    let host_me = test_support::client_for(&service_account(&host_server, &host_admin).await).await;
    grant_landscaper_cluster(&ls_admin).await;
    grant_host_cluster(&host_admin).await;
    // Neither identity has anything in the other cluster's role.
    let pods: Api<Pod> = Api::namespaced(ls_me.clone(), NAMESPACE);
    assert!(
        pods.list(&ListParams::default()).await.is_err(),
        "no Pods in the LS cluster"
    );

    let (_deployer, task) = start_host(ls_me, host_me).await;
    run_items(&ls_admin).await;
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_only_the_shipped_rbac_then_container_items_run_and_their_pods_need_only_the_runner_role()
 {
    let server = RbacServer::start().await;
    let admin = landscaper_cluster(&server).await;
    let me = test_support::client_for(&service_account(&server, &admin).await).await;
    grant_landscaper_cluster(&admin).await;
    grant_host_cluster(&admin).await;

    // The host, with the container deployer running pods in its own namespace.
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        ..HostConfig::default()
    };
    config.plugins.dir = Some(test_support::plugins_dir());
    config.plugins.cache_dir = Some(test_support::plugins_dir().join("../plugin-cache"));
    config.container = serde_yaml::from_str(&format!(
        "namespace: {NAMESPACE}\npollInterval: 200ms\nwaitPollInterval: 100ms\n"
    ))
    .unwrap();
    let clusters = deployer_host::plugins::Clusters::single(me.clone());
    let (registry, _) = deployer_host::plugins::load(&config, &clusters)
        .await
        .unwrap();
    let (_deployer, task) = test_support::start_locking_replica(
        me.clone(),
        me,
        registry,
        &config,
        POD,
        NAMESPACE,
        Some(test_support::STORY_LEASE),
    );
    // The kubelet (admin, as a kubelet is) gives init and wait a token of the runner account
    // the host created: what they can do is what the host granted it.
    let dir = tempfile::tempdir().unwrap();
    let admin_kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&admin_kubeconfig, &server.kubeconfig).unwrap();
    let kubelet = tokio::spawn(
        deployer_host::dev::kubelet::ProcessKubelet {
            client: admin.clone(),
            namespace: NAMESPACE.into(),
            kubeconfig: admin_kubeconfig,
            binary: env!("CARGO_BIN_EXE_deployer-host").into(),
            work_dir: dir.path().join("pods"),
            mint_tokens: true,
        }
        .run(std::future::pending()),
    );
    let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(admin.clone()));

    let items: Api<DeployItem> = Api::namespaced(admin.clone(), "default");
    let script = r#"n=$(cat "$STATE_PATH/n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$STATE_PATH/n"
mkdir -p "$(dirname "$EXPORTS_PATH")"; echo "{\"runs\": $n}" > "$EXPORTS_PATH""#;
    let item: DeployItem = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": "container", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/container",
            "config": {"apiVersion": "container.deployer.landscaper.gardener.cloud/v1alpha1",
                "kind": "ProviderConfiguration", "image": "alpine:3.19",
                "command": ["sh", "-c", script], "importValues": {"run": 1}}}
    }))
    .unwrap();
    items.create(&PostParams::default(), &item).await.unwrap();
    let first = wait_finished(&items, "container").await;
    assert_eq!(
        first.status().phase,
        Phase::Succeeded,
        "{:?}",
        first.status().last_error
    );
    // A second run restores the state the first one stored: init lists and reads, wait creates
    // and deletes Secrets with the runner's token.
    let patch = json!({"spec": {"config": {"importValues": {"run": 2}}}});
    items
        .patch(
            "container",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let second = wait(&items, "container", |i| {
        let s = i.status();
        s.job_id != first.status().job_id && s.job_id == s.job_id_finished
    })
    .await;
    assert_eq!(
        second.status().phase,
        Phase::Succeeded,
        "{:?}",
        second.status().last_error
    );
    let export = second.status().export_ref.unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "default");
    let values: serde_json::Value =
        serde_json::from_slice(&secrets.get(&export.name).await.unwrap().data.unwrap()["config"].0)
            .unwrap();
    assert_eq!(values, json!({"runs": 2}));
    // Deletion runs the DELETE pod and removes the host objects, with the same rights.
    items
        .delete("container", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while items.get_opt("container").await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "item not deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let host_secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let left = host_secrets
        .list(
            &ListParams::default()
                .labels("deployitem.container.deployer.landscaper.gardener.cloud/name=container"),
        )
        .await
        .unwrap();
    assert!(
        left.items.is_empty(),
        "host Secrets left: {}",
        left.items.len()
    );
    kubelet.abort();
    landscaper.abort();
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_only_the_shipped_rbac_then_plugins_are_delivered_from_configmaps() {
    let server = RbacServer::start().await;
    let admin = landscaper_cluster(&server).await;
    deployer_host::dev::install_own_crds(&admin).await.unwrap();
    let me = test_support::client_for(&service_account(&server, &admin).await).await;
    grant_landscaper_cluster(&admin).await;
    grant_host_cluster(&admin).await;

    // The host starts with no mock at all: it comes from a ConfigMap, declared by a WasmPlugin.
    let empty = tempfile::tempdir().unwrap();
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        ..HostConfig::default()
    };
    config.plugins.dir = Some(empty.path().to_path_buf());
    config.plugins.cache_dir = Some(test_support::plugins_dir().join("../plugin-cache"));
    config.plugins.namespace = Some(NAMESPACE.into());
    config.plugins.poll_interval = Some("200ms".into());
    let registry =
        deployer_host::plugins::load_all(&config, &[empty.path().to_path_buf()], Vec::new())
            .await
            .unwrap();
    let (deployer, task) = test_support::start_locking_replica(
        me.clone(),
        me.clone(),
        registry,
        &config,
        POD,
        NAMESPACE,
        Some(test_support::STORY_LEASE),
    );
    let (_catalog, delivery) = deployer_host::plugins::start_delivery(
        &config,
        me.clone(),
        deployer.plugins.clone(),
        deployer.hooks.clone(),
    )
    .unwrap();
    let mock = std::fs::read(test_support::plugins_dir().join("mock.wasm")).unwrap();
    let mut cm: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "mock-plugin"}})).unwrap();
    cm.binary_data = Some([("mock.wasm".to_string(), k8s_openapi::ByteString(mock))].into());
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let plugins: Api<kube::api::DynamicObject> = Api::namespaced_with(
        admin.clone(),
        NAMESPACE,
        &deployer_host::plugin_sources::declarations::resource(),
    );
    let declaration: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-deployer.dev/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": "mock"}, "spec": {"source": {"configMap": {"name": "mock-plugin"}}}
    }))
    .unwrap();
    plugins
        .create(&PostParams::default(), &declaration)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = plugins.get("mock").await.unwrap().data["status"].clone();
        if status["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        }) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not Ready: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A mock item is served by the delivered plugin, with the host's shipped rights.
    let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(admin.clone()));
    let items: Api<DeployItem> = Api::namespaced(admin.clone(), "default");
    let item: DeployItem = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": "delivered", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/mock",
            "config": {"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
                "kind": "ProviderConfiguration", "phase": "Succeeded"}}
    }))
    .unwrap();
    items.create(&PostParams::default(), &item).await.unwrap();
    let done = wait_finished(&items, "delivered").await;
    assert_eq!(
        done.status().phase,
        Phase::Succeeded,
        "{:?}",
        done.status().last_error
    );
    landscaper.abort();
    delivery.abort();
    task.abort();
}

/// A kubeconfig for ServiceAccount `namespace/name` on `server` (created, token minted).
async fn identity(server: &RbacServer, admin: &Client, namespace: &str, name: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    create(&sas, json!({"metadata": {"name": name}})).await;
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}});
    let answer: serde_json::Value = sas
        .create_subresource("token", name, &PostParams::default(), &request)
        .await
        .expect("TokenRequest");
    let token = answer["status"]["token"].as_str().expect("token");
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{}\", insecure-skip-tls-verify: true}}\nusers:\n- name: sa\n  user: {{token: {token}}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: sa, namespace: {namespace}}}\ncurrent-context: c\n",
        server.url
    )
}

/// Given a Target whose identity may manage only ConfigMaps in `default`, then the manifest
/// plugin's Kubernetes calls go through that identity, not the host's (which may write Secrets
/// there, for exports): its ConfigMap is applied, its Secret is refused in the API server's
/// words naming the Target's ServiceAccount, and no Secret appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_restricted_target_then_plugins_act_with_the_targets_identity_only() {
    let server = RbacServer::start().await;
    let admin = landscaper_cluster(&server).await;
    let kubeconfig = service_account(&server, &admin).await;
    let me = test_support::client_for(&kubeconfig).await;
    grant_landscaper_cluster(&admin).await;
    grant_host_cluster(&admin).await;

    let roles: Api<Role> = Api::namespaced(admin.clone(), "default");
    create(
        &roles,
        json!({"metadata": {"name": "configmaps-only"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]}),
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "default");
    create(&bindings, json!({"metadata": {"name": "configmaps-only"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmaps-only"},
        "subjects": [{"kind": "ServiceAccount", "name": "deploy-bot", "namespace": "default"}]}))
    .await;
    let target_kubeconfig = identity(&server, &admin, "default", "deploy-bot").await;
    let targets: Api<deployer_host::landscaper::Target> = Api::namespaced(admin.clone(), "default");
    create(
        &targets,
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
        "metadata": {"name": "restricted", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                 "config": {"kubeconfig": target_kubeconfig}}}),
    )
    .await;
    // A Target whose credentials the cluster no longer accepts (a revoked token: 401).
    let revoked_kubeconfig = target_kubeconfig.replace(
        &token_of(&target_kubeconfig),
        "revoked-token-the-cluster-does-not-know",
    );
    create(
        &targets,
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
        "metadata": {"name": "revoked", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                 "config": {"kubeconfig": revoked_kubeconfig}}}),
    )
    .await;

    let (_deployer, task) = start_host(me.clone(), me).await;
    let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(admin.clone()));
    let items: Api<DeployItem> = Api::namespaced(admin.clone(), "default");
    let item_on = |target: &str, name: &str, manifest: serde_json::Value| -> DeployItem {
        serde_json::from_value(json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "landscaper.gardener.cloud/kubernetes-manifest",
                "target": {"name": target, "namespace": "default"},
                "config": {"apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha2",
                    "kind": "ProviderConfiguration",
                    "manifests": [{"policy": "manage", "manifest": manifest}]}}
        }))
        .unwrap()
    };
    let manifest_item = |name: &str, manifest| item_on("restricted", name, manifest);
    let allowed = manifest_item(
        "allowed",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "by-deploy-bot", "namespace": "default"}, "data": {"a": "b"}}),
    );
    let refused = manifest_item(
        "refused",
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "by-deploy-bot", "namespace": "default"}, "stringData": {"a": "b"}}),
    );
    let unauthenticated = item_on(
        "revoked",
        "unauthenticated",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "by-nobody", "namespace": "default"}, "data": {"a": "b"}}),
    );
    for item in [allowed, refused, unauthenticated] {
        items.create(&PostParams::default(), &item).await.unwrap();
    }

    let done = wait_finished(&items, "allowed").await;
    assert_eq!(
        done.status().phase,
        Phase::Succeeded,
        "{:?}",
        done.status().last_error
    );
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(admin.clone(), "default");
    configmaps
        .get("by-deploy-bot")
        .await
        .expect("applied with the Target's identity");

    let failed = wait(&items, "refused", |i| {
        i.status()
            .last_error
            .is_some_and(|e| e.message.contains("forbidden"))
    })
    .await;
    let message = failed.status().last_error.unwrap().message;
    assert!(
        message.contains("system:serviceaccount:default:deploy-bot")
            && message.contains("resource \"secrets\""),
        "refused as the Target's identity, in the API server's words: {message}"
    );
    assert_eq!(failed.status().phase, Phase::Failed);
    // Refused (403) and unauthenticated (401) alike end the job with Landscaper's unrecoverable
    // ERR_UNAUTHORIZED (v0.120+; v0.99 would retry it until the timeout).
    let codes = failed.status().last_error.unwrap().codes;
    assert!(codes.iter().any(|c| c == "ERR_UNAUTHORIZED"), "{codes:?}");
    let unauthenticated = wait_finished(&items, "unauthenticated").await;
    let error = unauthenticated.status().last_error.expect("a lastError");
    assert_eq!(unauthenticated.status().phase, Phase::Failed, "{error:?}");
    assert!(
        error.codes.iter().any(|c| c == "ERR_UNAUTHORIZED"),
        "a 401 from the Target's cluster is ERR_UNAUTHORIZED: {error:?}"
    );
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "default");
    assert!(
        secrets.get_opt("by-deploy-bot").await.unwrap().is_none(),
        "nothing written with the host's rights"
    );
    landscaper.abort();
    task.abort();
}

/// The bearer token of a kubeconfig written by [`identity`].
fn token_of(kubeconfig: &str) -> String {
    let parsed: serde_json::Value = serde_yaml::from_str(kubeconfig).expect("kubeconfig");
    parsed["users"][0]["user"]["token"]
        .as_str()
        .expect("a token")
        .to_string()
}

/// `f` until it succeeds: an RBAC grant takes a moment to reach the real server's authorizer.
async fn until_ok<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) => assert!(tokio::time::Instant::now() < deadline, "{what}: {e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `e` is the API server's 403.
fn forbidden(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<kube::Error>()
            .is_some_and(|e| matches!(e, kube::Error::Api(s) if s.code == 403))
    })
}

/// The host keeps its own CRD (`crdManagement.deployCrd`, host/src/crds.rs) with exactly the
/// shipped `rbac/host-cluster-crd.yaml`: without its `create` rule it cannot create the missing
/// CRD; with the file it creates it and later upgrades an older one; it may not read, change or
/// delete any other CRD, nor delete or list its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_only_the_shipped_crd_role_then_the_host_creates_and_upgrades_its_crd_and_touches_no_other()
 {
    use deployer_host::crds;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    const WP: &str = "wasmplugins.wasm-deployer.dev";
    let server = RbacServer::start().await;
    let admin = landscaper_cluster(&server).await;
    let me = test_support::client_for(&service_account(&server, &admin).await).await;
    let shipped_role: ClusterRole =
        serde_yaml::from_str(&shipped("host-cluster-crd.yaml")).unwrap();
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let role_name = shipped_role.metadata.name.clone().unwrap();

    // Given the role less its `create` rule, then the host cannot create its missing CRD.
    let mut without_create = shipped_role.clone();
    without_create
        .rules
        .get_or_insert_default()
        .retain(|r| !r.verbs.contains(&"create".to_string()));
    roles
        .create(&PostParams::default(), &without_create)
        .await
        .unwrap();
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": role_name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]}),
    )
    .await;
    // (the grant of `get` has arrived once the GET of the missing CRD answers 404, not 403)
    let my_crds: Api<CustomResourceDefinition> = Api::all(me.clone());
    until_ok("the get rule", || async {
        match my_crds.get_opt(WP).await {
            Ok(None) => Ok(()),
            other => anyhow::bail!("{other:?}"),
        }
    })
    .await;
    let refused = crds::ensure_wasm_plugin_crd(&me).await.unwrap_err();
    assert!(forbidden(&refused), "{refused:#}");

    // When the role is the shipped one, then it creates the CRD ...
    let mut role = roles.get(&role_name).await.unwrap();
    role.rules = shipped_role.rules.clone();
    roles
        .replace(&role_name, &PostParams::default(), &role)
        .await
        .unwrap();
    let created = until_ok("creating the CRD", || crds::ensure_wasm_plugin_crd(&me)).await;
    let bundled = crds::revision(&crds::bundled().unwrap());
    assert_eq!(created, crds::CrdOutcome::Created { revision: bundled });
    // ... and upgrades an older one.
    let all: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let mut old = all.get(WP).await.unwrap();
    old.metadata
        .annotations
        .get_or_insert_default()
        .insert(crds::REVISION_ANNOTATION.into(), "0".into());
    all.replace(WP, &PostParams::default(), &old).await.unwrap();
    assert_eq!(
        crds::ensure_wasm_plugin_crd(&me).await.unwrap(),
        crds::CrdOutcome::Upgraded {
            from: 0,
            to: bundled
        }
    );

    // What the role leaves out stays refused: other CRDs, deleting or listing its own.
    let other = "deployitems.landscaper.gardener.cloud";
    let refused = my_crds.get(other).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused}"
    );
    let theirs = all.get(other).await.unwrap();
    let refused = my_crds
        .replace(other, &PostParams::default(), &theirs)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused}"
    );
    let refused = my_crds
        .delete(WP, &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused}"
    );
    let refused = my_crds.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused}"
    );
}
