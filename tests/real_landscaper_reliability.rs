//! Issue #46 with the real Landscaper (`docs/reliability.md`): Landscaper's own controller (both
//! modes, `../shared/tools/real-landscaper`) drives Installations whose items our host serves as
//! three `deployer-host run` replicas with SyncObject locking, while the embedded API server fails
//! requests and drops watches (the faults of `tests/reliability.rs`) and one replica is
//! SIGKILLed a few seconds in and replaced. The Installations set
//! `spec.automaticReconcile.failedReconcile`: Landscaper fails an Installation when one of its
//! own writes meets a fault, and tries it again only with that setting.
//!
//! Size: `RELIABILITY_INSTALLATIONS` Installations (default 30) of four items each. Without
//! Landscaper's binaries the test binary prints one SKIP line and returns (`docs/real-landscaper.md`);
//! on kube-apiserver 1.20 it says SKIP (this Landscaper's writes carry JSON nulls 1.20 refuses, and
//! the faults are the embedded server's).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deployer_host::landscaper::DeployItem;
use embedded_apiserver::FaultConfig;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use test_support::real_landscaper::{self as ls, RealLandscaper};
use test_support::replicas::{
    JobLedger, Replica, ReplicaCluster, assert_each_job_picked_up_once, assert_nothing_left,
    assert_succeeded_with_export, operator_faults, reason_is, retrying,
};
use test_support::require_real_landscaper;

/// Where the Installations, their items, imports, exports and deployed ConfigMaps live.
const NS: &str = "default";
/// The Target the Installations import: the cluster's own `default` (the server on loopback).
const TARGET: &str = "default";
/// How often Landscaper tries a failed Installation again (`failedReconcile.interval`).
const RETRY_INTERVAL: &str = "5s";

fn installations_count() -> usize {
    std::env::var("RELIABILITY_INSTALLATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

/// Installation `rel-<i>`: imports DataObject `value-<i>` as `value`, exports item `a`'s export
/// as DataObject `exported-<i>`. Its four items: `a` (manifest: ConfigMap `rel-<i>-a` with the
/// value, exporting it) → `b` (mock, exporting the value), and `c` (manifest, ConfigMap
/// `rel-<i>-c`) → `d` (mock). Failed jobs are tried again every [`RETRY_INTERVAL`].
fn installation(i: usize) -> Value {
    let config_map = |item: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": format!("rel-{i}-{item}"), "namespace": NS});
    let manifest = |item: &str| {
        let object = config_map(item);
        json!({"name": item, "type": "landscaper.gardener.cloud/kubernetes-manifest",
        "target": {"import": "cluster"},
        "config": {
            "apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha2",
            "kind": "ProviderConfiguration",
            "updateStrategy": "update",
            "manifests": [{"policy": "manage", "manifest": {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": object["name"], "namespace": NS},
                "data": {"value": "{{ .imports.value }}"},
            }}],
            "exports": {"exports": [{"key": "value", "jsonPath": ".data.value", "fromResource": object}]},
        }})
    };
    let mock = |item: &str, after: &str| {
        json!({"name": item, "type": "landscaper.gardener.cloud/mock",
        "target": {"import": "cluster"}, "dependsOn": [after],
        "config": {
            "apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
            "kind": "ProviderConfiguration",
            "phase": "Succeeded",
            "export": {"value": "{{ .imports.value }}"},
        }})
    };
    let items = [manifest("a"), mock("b", "a"), manifest("c"), mock("d", "c")];
    let deploy = serde_yaml::to_string(&json!({ "deployItems": items })).unwrap();
    let value = format!("value-{i}");
    let exported = format!("exported-{i}");
    let mut inst = ls::inline_installation(
        NS,
        TARGET,
        &name(i),
        &[("value", &value)],
        &[("value", &exported)],
        &deploy,
        Some("exports:\n  value: {{ .deployitems.a.value }}\n"),
    );
    inst["spec"]["automaticReconcile"] = json!({"failedReconcile": {"interval": RETRY_INTERVAL}});
    inst
}

fn name(i: usize) -> String {
    format!("rel-{i}")
}

/// Creates or replaces `obj` through the faults (after a 504'd create the next try finds it and
/// replaces it; a replace that meets a conflict reads again).
async fn apply_retrying(api: &Api<DynamicObject>, obj: &Value) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    retrying(
        "apply",
        |_| false,
        || async {
            let mut new: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
            match api.get_opt(&name).await? {
                None => api.create(&PostParams::default(), &new).await,
                Some(old) => {
                    new.metadata.resource_version = old.metadata.resource_version;
                    api.replace(&name, &PostParams::default(), &new).await
                }
            }
        },
    )
    .await;
}

/// Lists `api` through the faults.
async fn list_retrying<K>(api: &Api<K>) -> Vec<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    retrying(
        "list",
        |_| false,
        || async { api.list(&ListParams::default()).await },
    )
    .await
    .expect("listed")
    .items
}

/// The Installations' states, for waiting and for failure messages: name → (jobID,
/// jobIDFinished, phase).
async fn installation_states(
    api: &Api<DynamicObject>,
) -> BTreeMap<String, (String, String, String)> {
    list_retrying(api)
        .await
        .into_iter()
        .map(|inst| {
            let s = ls::status(&inst);
            let field = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            (
                inst.metadata.name.clone().unwrap_or_default(),
                (field("jobID"), field("jobIDFinished"), field("phase")),
            )
        })
        .collect()
}

/// Waits until every Installation finished a job Succeeded that is not the one `before` names
/// (none: any job); returns the jobIDs.
async fn wait_all_succeeded(
    api: &Api<DynamicObject>,
    n: usize,
    before: &BTreeMap<String, String>,
    timeout: Duration,
) -> BTreeMap<String, String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let states = installation_states(api).await;
        let done = states.len() == n
            && states.iter().all(|(name, (job, finished, phase))| {
                !job.is_empty()
                    && job == finished
                    && phase == "Succeeded"
                    && before.get(name) != Some(job)
            });
        if done {
            return states
                .into_iter()
                .map(|(n, (job, _, _))| (n, job))
                .collect();
        }
        if tokio::time::Instant::now() > deadline {
            let open: Vec<String> = states
                .iter()
                .filter(|(_, (job, finished, phase))| job != finished || phase != "Succeeded")
                .map(|(n, s)| format!("{n}: {s:?}"))
                .collect();
            panic!(
                "timed out: {} Installations, not done:\n{}",
                states.len(),
                open.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every item's export, every deployed ConfigMap and every Installation's exported DataObject
/// hold `value`; every item is Succeeded.
async fn assert_values(client: &kube::Client, n: usize, value: &str) {
    let items = list_retrying(&Api::<DeployItem>::namespaced(client.clone(), NS)).await;
    assert_eq!(items.len(), 4 * n, "four items per Installation");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    for item in &items {
        assert_succeeded_with_export(&secrets, item, value).await;
    }
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let data_objects = ls::data_objects(client, NS);
    for i in 0..n {
        for item in ["a", "c"] {
            let cm_name = format!("rel-{i}-{item}");
            let cm = retrying("get ConfigMap", |_| false, || configmaps.get(&cm_name))
                .await
                .unwrap();
            assert_eq!(cm.data.unwrap()["value"], value, "rel-{i}-{item}");
        }
        let exported_name = format!("exported-{i}");
        let exported = retrying(
            "get DataObject",
            |_| false,
            || data_objects.get(&exported_name),
        )
        .await
        .unwrap();
        assert_eq!(exported.data["data"], value, "exported-{i}");
    }
}

/// Records every job of an Installation (or Execution) that Landscaper finished in a failed phase
/// (`Failed`, `DeleteFailed`), with its `lastError` (operation, reason, message): what
/// Landscaper's own error handling made of the faults, tried again by `failedReconcile`.
struct FailedJobs {
    seen: Arc<Mutex<BTreeMap<(String, String), String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FailedJobs {
    fn start(api: Api<DynamicObject>) -> Self {
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let stream = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects();
                futures::pin_mut!(stream);
                loop {
                    let inst = match stream.try_next().await {
                        Ok(Some(inst)) => inst,
                        Ok(None) => return,
                        Err(_) => continue,
                    };
                    let s = ls::status(&inst);
                    let phase = s["phase"].as_str().unwrap_or_default();
                    if ls::job_finished(&inst) && (phase == "Failed" || phase == "DeleteFailed") {
                        let e = &s["lastError"];
                        seen.lock().unwrap().insert(
                            (
                                inst.metadata.name.clone().unwrap_or_default(),
                                s["jobID"].as_str().unwrap_or_default().to_string(),
                            ),
                            format!(
                                "{phase}: {} {}: {}",
                                e["operation"].as_str().unwrap_or_default(),
                                e["reason"].as_str().unwrap_or_default(),
                                e["message"].as_str().unwrap_or_default()
                            ),
                        );
                    }
                }
            }
        });
        Self { seen, task }
    }

    /// The failed jobs' errors.
    fn errors(&self) -> Vec<String> {
        self.seen.lock().unwrap().values().cloned().collect()
    }
}

impl Drop for FailedJobs {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_faults_and_a_killed_replica_when_the_real_landscaper_installs_changes_and_deletes_installations_then_each_job_runs_once_and_nothing_is_left()
 {
    require_real_landscaper!();
    let n = installations_count();
    let started = std::time::Instant::now();
    // Given the embedded server on loopback with a Target `default` pointing at it, the real
    // Landscaper against it, three `deployer-host run` replicas with locking (no periodic
    // cleanup within the story) and a ledger of every finished job,
    let cluster = ReplicaCluster::start(env!("CARGO_BIN_EXE_deployer-host"), 4, "1h").await;
    let client = cluster.client.clone();
    let landscaper = tokio::task::spawn_blocking({
        let kubeconfig = cluster.kubeconfig.clone();
        move || RealLandscaper::start(&kubeconfig, "2m")
    })
    .await
    .unwrap();
    let mut replicas: Vec<(String, Replica)> = ["replica-0", "replica-1", "replica-2"]
        .iter()
        .map(|p| (p.to_string(), cluster.replica(p)))
        .collect();
    let ledger = JobLedger::start(client.clone());
    let installations = ls::installations(&client, NS);
    let failed = FailedJobs::start(installations.clone());
    let failed_executions = FailedJobs::start(ls::executions(&client, NS));
    let data_objects = ls::data_objects(&client, NS);
    // and the server failing requests as on a bad day (2 % of writes 409, 1 % 500, 1 % of
    // requests 503, 2 % 504 after applying, a watch dropped every ~100 events),
    cluster.set_faults(operator_faults());

    // when the Installations are created (each failed job tried again every 5 s),
    stream::iter(0..n)
        .for_each_concurrent(8, |i| {
            let (data_objects, installations) = (data_objects.clone(), installations.clone());
            async move {
                let value = ls::data_object(&format!("value-{i}"), NS, json!("v1"));
                apply_retrying(&data_objects, &value).await;
                apply_retrying(&installations, &installation(i)).await;
            }
        })
        .await;
    // and a few seconds in, once jobs finish, replica-1 is SIGKILLed and its Pod replaced by
    // replica-3,
    cluster
        .kill_and_replace(&mut replicas, &ledger, n / 2 + 1, Duration::from_secs(180))
        .await;
    let timeout = Duration::from_secs(300 + 10 * n as u64);
    // then every Installation ends Succeeded, its items' exports, ConfigMaps and export hold v1,
    let first = wait_all_succeeded(&installations, n, &BTreeMap::new(), timeout).await;
    let first_round = started.elapsed();
    cluster.set_faults(FaultConfig::default());
    assert_values(&client, n, "v1").await;
    cluster.set_faults(operator_faults());

    // when every import changes and Landscaper is asked to reconcile,
    stream::iter(0..n)
        .for_each_concurrent(8, |i| {
            let (data_objects, installations) = (data_objects.clone(), installations.clone());
            async move {
                let value = ls::data_object(&format!("value-{i}"), NS, json!("v2"));
                apply_retrying(&data_objects, &value).await;
                let op = Patch::Merge(json!({"metadata": {"annotations": {
                    "landscaper.gardener.cloud/operation": "reconcile"}}}));
                let (name, params) = (name(i), PatchParams::default());
                retrying(
                    "annotate",
                    |_| false,
                    || installations.patch(&name, &params, &op),
                )
                .await;
            }
        })
        .await;
    // then every Installation ends Succeeded again, with a new job, and everything holds v2,
    wait_all_succeeded(&installations, n, &first, timeout).await;
    let second_round = started.elapsed();
    cluster.set_faults(FaultConfig::default());
    assert_values(&client, n, "v2").await;
    let items_deployed = ledger.finished_jobs();
    cluster.set_faults(operator_faults());

    // when every Installation is deleted,
    stream::iter(0..n)
        .for_each_concurrent(8, |i| {
            let installations = installations.clone();
            async move {
                let (name, params) = (name(i), DeleteParams::default());
                retrying("delete", reason_is("NotFound"), || {
                    installations.delete(&name, &params)
                })
                .await;
            }
        })
        .await;
    // then nothing is left: no Installation, Execution or DeployItem (so no finalizer), no
    // deployed ConfigMap, no export Secret, no SyncObject (held or not),
    let executions = ls::executions(&client, NS);
    let items: Api<DeployItem> = Api::namespaced(client.clone(), NS);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let (insts, execs, left) = (
            installation_states(&installations).await,
            list_retrying(&executions).await.len(),
            list_retrying(&items).await.len(),
        );
        if insts.is_empty() && execs == 0 && left == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still there: {execs} Executions, {left} DeployItems, Installations {insts:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let deleted = started.elapsed();
    cluster.set_faults(FaultConfig::default());
    assert_nothing_left(&client, NS, "rel-").await;
    // and no job of ours finished twice or reopened, and none was picked up by two replicas.
    ledger.assert_clean();
    let picked_up = assert_each_job_picked_up_once(&replicas);
    // (The size, the times and the counts, for docs/reliability.md; and what Landscaper's own
    // objects it left: DataObjects and Targets other than the story's imports and Target.)
    let landscapers_left: Vec<String> = list_retrying(&data_objects)
        .await
        .into_iter()
        .chain(list_retrying(&ls::ls_api(&client, "Target", "targets", NS)).await)
        .filter_map(|o| o.metadata.name)
        .filter(|n| !n.starts_with("value-") && n != TARGET)
        .collect();
    let retried = landscaper.log_count("update retry status");
    // Central mode deletes the SyncObjects of deleted objects every 3 h after a random delay
    // (`pkg/utils/lock/lock_cleaner.go`): had it run, it could have masked a lock we leaked.
    let ls_cleanups = landscaper.log_count("locker: starting syncobject cleanup");
    let kinds = |errors: &[String]| {
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for e in errors {
            // the kind of failure: phase, operation and reason, without object names
            let kind: String = e.split(": ").take(2).collect::<Vec<_>>().join(": ");
            let kind = kind
                .split(['"', '/'])
                .next()
                .unwrap_or_default()
                .split(" rel-")
                .next()
                .unwrap_or_default()
                .trim_end()
                .to_string();
            *kinds.entry(kind).or_default() += 1;
        }
        kinds
    };
    let (errors, execution_errors) = (failed.errors(), failed_executions.errors());
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "real-landscaper reliability: {n} Installations, {} items; {items_deployed} item jobs \
         finished before deletion, {} in all, {} picked up; Landscaper retried {retried} times; \
         Landscaper's SyncObject cleanup ran {ls_cleanups} times; Landscaper's DataObjects and \
         Targets left: {landscapers_left:?}; deployed in {first_round:.0?}, \
         changed by {second_round:.0?}, deleted by {deleted:.0?}; \
         item jobs by phase {:?}; {} Installation jobs failed by Landscaper: {:#?}; \
         {} Execution jobs: {:#?}; the first:\n{}",
        4 * n,
        ledger.finished_jobs(),
        picked_up,
        ledger.phases(),
        errors.len(),
        kinds(&errors),
        execution_errors.len(),
        kinds(&execution_errors),
        execution_errors
            .iter()
            .chain(&errors)
            .take(12)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
    );
    drop(landscaper);
    drop(replicas);
    drop(cluster);
}
