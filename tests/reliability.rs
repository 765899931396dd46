//! The reliability suite (`docs/reliability.md`): the contract holds while the API server
//! fails requests and drops watches, while replicas die, and while plugins misbehave under load.
//! Every story checks what a Landscaper user relies on: every job finishes exactly once with
//! the right phase, no status is lost, nothing (export Secret, SyncObject) is leaked.
//!
//! Sizes scale with `RELIABILITY_ITEMS` (default 500; 100 on kube-apiserver 1.20) for longer
//! runs by hand. The replica stories run on both backends: on kube-apiserver 1.20 with the
//! kill -9 but without injected faults (fault injection is the embedded server's).

use std::collections::HashMap;
use std::time::Duration;

use deployer_host::landscaper::{DeployItem, Phase};
use embedded_apiserver::FaultConfig;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::replicas::{
    JobLedger, Replica, ReplicaCluster, assert_each_job_picked_up_once, assert_nothing_left,
    assert_succeeded_with_export, names_where, operator_faults, peak_rss_mib, pickups, reason_is,
    retrying,
};
use test_support::skip_on_real;
use test_support::{Harness, Options};

/// `RELIABILITY_ITEMS`; by default 500, and 100 on kube-apiserver 1.20 (the smaller variant:
/// etcd's writes make a job there several times slower than on the embedded server).
fn items_count() -> usize {
    std::env::var("RELIABILITY_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(match test_support::backend() {
            test_support::Backend::Embedded => 500,
            test_support::Backend::Real => 100,
        })
}

/// A mock item that exports `value` (so every job writes an export Secret).
fn exporting_item(name: &str, value: &str) -> DeployItem {
    serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "type": "landscaper.gardener.cloud/mock",
            "config": {
                "apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
                "kind": "ProviderConfiguration",
                "phase": "Succeeded",
                "export": {"value": value},
            },
        },
    }))
    .expect("item")
}

/// Runs `op` on the items `{prefix}-0` … `{prefix}-{n-1}`, 16 at a time (a busy Landscaper).
async fn for_each_item<F, Fut>(api: &Api<DeployItem>, prefix: &str, n: usize, op: F)
where
    F: Fn(Api<DeployItem>, String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    stream::iter(0..n)
        .for_each_concurrent(16, |i| op(api.clone(), format!("{prefix}-{i}")))
        .await;
}

/// Creates `item`, retrying through faults (a 504'd create answers AlreadyExists on retry).
async fn create_retrying(api: &Api<DeployItem>, item: &DeployItem) {
    retrying("create", reason_is("AlreadyExists"), || async {
        api.create(&PostParams::default(), item).await
    })
    .await;
}

/// Merge-patches item `name`, retrying through faults.
async fn patch_retrying(api: &Api<DeployItem>, name: &str, patch: &serde_json::Value) {
    retrying(
        "patch",
        |_| false,
        || async {
            api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
        },
    )
    .await;
}

/// Deletes item `name`, retrying through faults (gone already is done).
async fn delete_retrying(api: &Api<DeployItem>, name: &str) {
    retrying("delete", reason_is("NotFound"), || async {
        api.delete(name, &DeleteParams::default()).await
    })
    .await;
}

/// Polls (the test's reads may fail: they meet the faults too) until `pred` holds for all items.
async fn wait_all(
    api: &Api<DeployItem>,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&[DeployItem]) -> bool,
) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(list) = api.list(&ListParams::default()).await
            && pred(&list.items)
        {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let list = api
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            let count = list.len();
            let stuck: Vec<String> = list
                .iter()
                .filter(|i| {
                    let s = i.status();
                    s.job_id.is_empty() || s.job_id != s.job_id_finished
                })
                .take(5)
                .map(|i| serde_yaml::to_string(i).unwrap_or_default())
                .collect();
            panic!(
                "{what}: timed out with {count} items; some unfinished:\n{}",
                stuck.join("---\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// 5 % of requests fail (2 % 409, 1 % each 500, 503 and 504-after-applying); a watch drops
/// every ~100 events.
fn five_percent_faults() -> FaultConfig {
    FaultConfig {
        write_conflict_probability: 0.02,
        write_error_probability: 0.01,
        unavailable_probability: 0.01,
        timeout_probability: 0.01,
        watch_drop_probability: 0.01,
        ..FaultConfig::default()
    }
}

fn all_finished(generation: i64, n: usize) -> impl Fn(&[DeployItem]) -> bool {
    move |items| {
        items.len() == n
            && items.iter().all(|i| {
                let s = i.status();
                !s.job_id.is_empty()
                    && s.job_id == s.job_id_finished
                    && s.observed_generation == generation
            })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_api_faults_and_dropped_watches_then_every_item_converges_and_nothing_is_lost() {
    skip_on_real!("fault injection is the embedded server's");
    let n = items_count();
    // Given a host and Landscaper stand-in whose API server fails 5 % of requests (409, 500,
    // 503, and 504 after applying a write) and closes watch streams every ~100 events,
    let h = Harness::start().await;
    let server = h.server.as_ref().expect("embedded");
    let ledger = JobLedger::start(h.client.clone());
    server.set_faults(five_percent_faults());
    let api = h.items("default");

    // when items are created,
    for_each_item(&api, "r", n, |api, name| async move {
        create_retrying(&api, &exporting_item(&name, "v1")).await;
    })
    .await;
    // then every first job finishes Succeeded with its export written,
    wait_all(
        &api,
        "first jobs",
        Duration::from_secs(240),
        all_finished(1, n),
    )
    .await;

    // when every item's spec changes,
    for_each_item(&api, "r", n, |api, name| async move {
        let patch = json!({"spec": {"config": {"export": {"value": "v2"}}}});
        patch_retrying(&api, &name, &patch).await;
    })
    .await;
    // then every second job finishes and its export holds the new value,
    wait_all(
        &api,
        "update jobs",
        Duration::from_secs(240),
        all_finished(2, n),
    )
    .await;
    server.set_faults(FaultConfig::default());
    let items = api.list(&ListParams::default()).await.unwrap().items;
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "default");
    for item in &items {
        let s = item.status();
        assert_eq!(
            s.phase,
            Phase::Succeeded,
            "{}",
            serde_yaml::to_string(item).unwrap()
        );
        let export = s.export_ref.expect("exportRef");
        let secret = secrets
            .get(&export.name)
            .await
            .expect("the exported Secret exists");
        let config = secret.data.unwrap()["config"].0.clone();
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(config["value"], "v2", "the export of the second job");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while ledger.finished_jobs() < 2 * n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ledger.finished_jobs(), 2 * n, "two finished jobs per item");

    // when every item is deleted (faults on again),
    server.set_faults(five_percent_faults());
    for_each_item(&api, "r", n, |api, name| async move {
        delete_retrying(&api, &name).await;
    })
    .await;
    // then all are gone, and so are their export Secrets,
    wait_all(&api, "deletion", Duration::from_secs(240), |items| {
        items.is_empty()
    })
    .await;
    server.set_faults(FaultConfig::default());
    let left = names_where(&secrets, |name| name.starts_with("mock-export")).await;
    assert!(left.is_empty(), "leaked export Secrets: {left:?}");
    // and no job was finished twice or reopened along the way.
    ledger.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_plugin_reaching_beyond_its_grant_then_every_attempt_is_denied_and_only_its_item_fails()
 {
    // Given two more Targets in the item's namespace, one the item names and one it does not
    // (another item's), both reachable clusters, and a ConfigMap `probe` there,
    let mut options = Options {
        test_plugins: true,
        ..Options::default()
    };
    // The deadline cuts the hour-long sleep; it must also leave room for the `reach` item's two
    // Target reads, which on a real kube-apiserver under a loaded CI machine took over 1 s once.
    options.config.plugins.per_plugin.insert(
        "faulty".into(),
        deployer_host::config::LimitsConfig {
            deadline: Some("5s".into()),
            ..Default::default()
        },
    );
    let h = Harness::start_with(options).await;
    let targets: Api<deployer_host::landscaper::Target> =
        Api::namespaced(h.client.clone(), "default");
    for name in ["named", "other-items-target"] {
        let target = serde_json::from_value(json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                     "config": {"kubeconfig": h.target_kubeconfig}},
        }))
        .unwrap();
        targets
            .create(&PostParams::default(), &target)
            .await
            .unwrap();
    }
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(h.client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "probe"}, "data": {"k": "v"}}))
            .unwrap(),
    )
    .await
    .unwrap();
    // when plugins reach for another item's Target, the network, files and environment, and
    // sleep past their deadline on the WASI clock,
    h.create_item(&test_support::faulty_item("reach", "target").replace(
        "action: target\n",
        "action: target\n    targetName: named\n",
    ))
    .await;
    for action in ["net", "fs", "env", "sleep"] {
        h.create_item(&test_support::faulty_item(action, action))
            .await;
    }
    h.create_item(&test_support::mock_item("bystander")).await;

    // then the Target its configuration names is reached and the other one is denied,
    let s = h.wait_finished("default", "reach").await.status();
    assert_eq!(s.phase, Phase::Succeeded, "{:?}", s.last_error);
    let seen = s.provider_status.unwrap();
    assert_eq!(seen["named"], json!({"reached": true}), "{seen}");
    assert_eq!(
        seen["other"]["denied"], "SecondaryTargetNotGranted",
        "{seen}"
    );
    // the network, files and environment do not exist for it,
    let net = h
        .wait_finished("default", "net")
        .await
        .status()
        .provider_status
        .unwrap();
    assert!(net["connect"].is_string(), "connecting failed: {net}");
    let fs = h
        .wait_finished("default", "fs")
        .await
        .status()
        .provider_status
        .unwrap();
    assert!(fs["passwd"].is_string() && fs["write"].is_string(), "{fs}");
    let env = h
        .wait_finished("default", "env")
        .await
        .status()
        .provider_status
        .unwrap();
    assert_eq!(env["env"], json!([]), "{env}");
    // a sleep past the deadline is cut with ERR_TIMEOUT,
    let sleep = h.wait_finished("default", "sleep").await.status();
    assert_eq!(sleep.phase, Phase::Failed);
    assert!(
        sleep.last_error.as_ref().is_some_and(|e| e
            .codes
            .contains(&deployer_host::landscaper::codes::TIMEOUT.to_string())),
        "{:?}",
        sleep.last_error
    );
    // and everyone else goes on.
    assert_eq!(
        h.wait_finished("default", "bystander").await.status().phase,
        Phase::Succeeded
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_three_locking_replicas_when_one_is_killed_and_another_restarted_then_every_job_finishes_once()
 {
    let n = items_count();
    // Given the API server (embedded on loopback, or kube-apiserver 1.20) with Landscaper's
    // CRDs, a Target pointing at it, the replicas' Pods, and three `deployer-host run` replicas with locking,
    let cluster = ReplicaCluster::start(env!("CARGO_BIN_EXE_deployer-host"), 4, "2s").await;
    let (client, pods) = (cluster.client.clone(), cluster.pods.clone());
    let mut replicas: Vec<Replica> = ["replica-0", "replica-1", "replica-2"]
        .iter()
        .map(|p| cluster.replica(p))
        .collect();
    let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(client.clone()));
    let api: Api<DeployItem> = Api::namespaced(client.clone(), "default");

    // when items are created,
    for_each_item(&api, "k", n, |api, name| async move {
        api.create(&PostParams::default(), &exporting_item(&name, "v1"))
            .await
            .unwrap();
    })
    .await;
    // and, once some jobs finished, replica-1 is SIGKILLed and its Pod replaced by replica-3
    // (a new ReplicaSet pod), and replica-2 is SIGKILLed and restarted (a container restart),
    let finished = |items: &[DeployItem]| {
        items
            .iter()
            .filter(|i| {
                let s = i.status();
                !s.job_id.is_empty() && s.job_id == s.job_id_finished
            })
            .count()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let items = api.list(&ListParams::default()).await.unwrap().items;
        if finished(&items) >= n / 5 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no progress: {} finished",
            finished(&items)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    replicas[1].kill();
    pods.delete("replica-1", &DeleteParams::default())
        .await
        .unwrap();
    replicas.push(cluster.replica("replica-3"));
    replicas[2].kill();
    replicas.push(cluster.replica("replica-2"));

    // then every job finishes Succeeded,
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    loop {
        let items = api.list(&ListParams::default()).await.unwrap().items;
        if items.len() == n && finished(&items) == n {
            assert!(items.iter().all(|i| i.status().phase == Phase::Succeeded));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} finished",
            finished(&items)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // no job was picked up by two replicas,
    let mut by_job: HashMap<(String, String), Vec<String>> = HashMap::new();
    for r in &replicas {
        for key in pickups(&r.log) {
            by_job
                .entry(key)
                .or_default()
                .push(r.log.display().to_string());
        }
    }
    let twice: Vec<_> = by_job.iter().filter(|(_, logs)| logs.len() > 1).collect();
    assert!(twice.is_empty(), "picked up more than once: {twice:?}");
    assert!(
        by_job.len() >= n * 9 / 10,
        "pickups logged: {} of {n}",
        by_job.len()
    );
    // and, once every item is deleted, no SyncObject and no export Secret is left behind.
    for_each_item(&api, "k", n, |api, name| async move {
        api.delete(&name, &DeleteParams::default()).await.unwrap();
    })
    .await;
    let syncobjects: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource {
            group: "landscaper.gardener.cloud".into(),
            version: "v1alpha1".into(),
            api_version: "landscaper.gardener.cloud/v1alpha1".into(),
            kind: "SyncObject".into(),
            plural: "syncobjects".into(),
        },
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let items = api.list(&ListParams::default()).await.unwrap().items.len();
        let locks = syncobjects
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        let exports = secrets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|s| {
                s.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("mock-export"))
            })
            .count();
        if items == 0 && locks == 0 && exports == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "left: {items} items, {locks} SyncObjects, {exports} export Secrets"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    landscaper.abort();
    drop(replicas);
    drop(cluster);
}

/// A manifest item deploying ConfigMap `<name>` with `value`, and exporting that value.
fn manifest_item(name: &str, value: &str) -> DeployItem {
    serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "type": "landscaper.gardener.cloud/kubernetes-manifest",
            "target": {"name": "default", "namespace": "default"},
            "config": {
                "apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha2",
                "kind": "ProviderConfiguration",
                "manifests": [{"policy": "manage", "manifest": {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "default"},
                    "data": {"value": value},
                }}],
                "exports": {"exports": [{"key": "value", "jsonPath": ".data.value",
                    "fromResource": {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "namespace": "default"}}]},
            },
        },
    }))
    .expect("item")
}

/// The name of item `i` of the mixed set: even ones mock (`m-<i>`), odd ones manifest (`c-<i>`).
fn mixed_name(i: usize) -> String {
    if i.is_multiple_of(2) {
        format!("m-{i}")
    } else {
        format!("c-{i}")
    }
}

/// Item `i` of the mixed set, with `value`.
fn mixed_item(i: usize, value: &str) -> DeployItem {
    if i.is_multiple_of(2) {
        exporting_item(&mixed_name(i), value)
    } else {
        manifest_item(&mixed_name(i), value)
    }
}

/// The merge patch that changes item `i`'s value.
fn mixed_patch(i: usize, value: &str) -> serde_json::Value {
    if i.is_multiple_of(2) {
        json!({"spec": {"config": {"export": {"value": value}}}})
    } else {
        let name = mixed_name(i);
        json!({"spec": {"config": {"manifests": [{"policy": "manage", "manifest": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"value": value},
        }}]}}})
    }
}

/// Issue #46, as an operator runs it: three locking replicas behind one API server that fails
/// requests and drops watches, one of them SIGKILLed a few seconds in and replaced; mock and
/// manifest items driven by dev mode's Landscaper stand-in through create → job → change → job →
/// delete. `RELIABILITY_ITEMS` sets the size (default 500; the documented full run is 10,000).
/// The periodic SyncObject cleanup is set to an hour, so every lock must be released by the
/// replicas themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_faults_and_a_killed_replica_when_mock_and_manifest_items_live_and_die_then_each_job_runs_once_and_nothing_is_left()
 {
    let n = items_count();
    let started = std::time::Instant::now();
    // Given the API server (the embedded one on loopback, injecting faults; on kube-apiserver
    // 1.20 without faults) with Landscaper's CRDs, a Target pointing at it, the replicas' Pods
    // and three `deployer-host run` replicas with locking (no cleanup within the story), the
    // stand-in, and a ledger of every finished job,
    let cluster = ReplicaCluster::start(env!("CARGO_BIN_EXE_deployer-host"), 8, "1h").await;
    let client = cluster.client.clone();
    let mut replicas: Vec<(String, Replica)> = ["replica-0", "replica-1", "replica-2"]
        .iter()
        .map(|p| (p.to_string(), cluster.replica(p)))
        .collect();
    let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(client.clone()));
    let ledger = JobLedger::start(client.clone());
    let api: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    cluster.set_faults(operator_faults());

    // when the items are created (half mock, half manifest),
    stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move { create_retrying(&api, &mixed_item(i, "v1")).await }
        })
        .await;
    // and, a fifth of the jobs in, replica-1 is SIGKILLed and its Pod replaced by replica-3,
    cluster
        .kill_and_replace(&mut replicas, &ledger, n / 5, Duration::from_secs(120))
        .await;
    let timeout = Duration::from_secs(240 + n as u64 / 10);
    // then every first job finishes Succeeded (the replicas splitting the items by their
    // Leases, the killed one's still there until it has expired ten times over),
    wait_all(&api, "first jobs", timeout, all_finished(1, n)).await;
    cluster.set_faults(FaultConfig::default());
    let holders = cluster.lease_holders().await;
    for live in ["replica-0", "replica-2", "replica-3"] {
        assert!(holders.iter().any(|h| h == live), "{live} in {holders:?}");
    }
    cluster.set_faults(operator_faults());

    // when every item's value changes,
    stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move { patch_retrying(&api, &mixed_name(i), &mixed_patch(i, "v2")).await }
        })
        .await;
    // then every second job finishes Succeeded, every export holds the new value and every
    // ConfigMap the new data,
    wait_all(&api, "update jobs", timeout, all_finished(2, n)).await;
    cluster.set_faults(FaultConfig::default());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    for item in api.list(&ListParams::default()).await.unwrap().items {
        let name = item.metadata.name.clone().unwrap_or_default();
        assert_succeeded_with_export(&secrets, &item, "v2").await;
        if name.starts_with("c-") {
            let cm = configmaps.get(&name).await.expect("the deployed ConfigMap");
            assert_eq!(cm.data.unwrap()["value"], "v2", "{name}");
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while ledger.finished_jobs() < 2 * n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ledger.finished_jobs(), 2 * n, "two finished jobs per item");

    // when every item is deleted (faults on again),
    cluster.set_faults(operator_faults());
    stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move { delete_retrying(&api, &mixed_name(i)).await }
        })
        .await;
    // then nothing is left: no item, no deployed ConfigMap, no export Secret, no SyncObject,
    wait_all(&api, "deletion", timeout, |items| items.is_empty()).await;
    cluster.set_faults(FaultConfig::default());
    assert_nothing_left(&client, "default", "c-").await;
    // no job finished twice or reopened, and none was picked up by two replicas.
    ledger.assert_clean();
    assert_each_job_picked_up_once(&replicas);
    // (The size, time and each live replica's peak RSS, for docs/reliability.md.)
    let rss: Vec<String> = replicas
        .iter()
        .filter(|(pod, _)| pod != "replica-1")
        .map(|(pod, r)| format!("{pod} {:.0} MiB", peak_rss_mib(r.child.id())))
        .collect();
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "reliability: {n} items (mock + manifest), {} jobs, in {:.0?}; peak RSS: {}",
        2 * n,
        started.elapsed(),
        rss.join(", ")
    );
    landscaper.abort();
    drop(replicas);
    drop(cluster);
}
