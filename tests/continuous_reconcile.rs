//! Continuous reconcile, as stories: the `continuous-reconcile` hook plugin (a real wasm
//! component) re-applies a finished manifest item on its schedule, so a hand-edited object
//! comes back — without a new job, and with the item's phase and jobID fields untouched.

use std::sync::atomic::Ordering;
use std::time::Duration;

use deployer_host::config::{HookRegistration, HostConfig, ItemCache};
use deployer_host::dev::landscaper::with_new_job;
use deployer_host::landscaper::{DeployItem, Phase};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::manifest;
use test_support::skip_on_real;
use test_support::{Harness, Options};

async fn harness() -> Harness {
    Harness::start_with(Options {
        config: HostConfig {
            requeue_interval: Some("200ms".into()),
            hooks: Some(vec![HookRegistration {
                plugin: "continuous-reconcile".into(),
                deploy_item_types: vec!["*".into()],
                hook_types: Vec::new(),
            }]),
            ..HostConfig::default()
        },
        ..Options::default()
    })
    .await
}

/// A manifest item managing ConfigMap `default/<name>` with `data.color: blue`.
fn configmap_item(name: &str, every: &str) -> serde_json::Value {
    manifest::item(
        name,
        json!({
            "updateStrategy": "update",
            "continuousReconcile": {"every": every},
            "manifests": [{"policy": "manage", "manifest": {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
                "data": {"color": "blue"}
            }}]
        }),
    )
}

async fn edit_by_hand(h: &Harness, name: &str) {
    let patch = json!({"data": {"color": "red"}});
    Api::<ConfigMap>::namespaced(h.client.clone(), "default")
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn color(h: &Harness, name: &str) -> String {
    let cm = Api::<ConfigMap>::namespaced(h.client.clone(), "default")
        .get(name)
        .await
        .unwrap();
    cm.data
        .unwrap_or_default()
        .get("color")
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_hand_edited_configmap_then_continuous_reconcile_restores_it_within_the_interval() {
    let h = harness().await;
    manifest::create(&h, &configmap_item("palette", "2s")).await;
    let done = manifest::wait_done(&h, "palette").await;
    let job = done.status().job_id.clone();
    assert_eq!(color(&h, "palette").await, "blue");

    edit_by_hand(&h, "palette").await;
    assert_eq!(color(&h, "palette").await, "red");
    // Due at lastReconcileTime + 2s (whole seconds): restored within the interval plus slack.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while color(&h, "palette").await != "blue" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not restored within the interval"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The re-apply's one status write follows the apply: wait for it, then check it.
    let item = h
        .wait_for("default", "palette", Duration::from_secs(5), |i| {
            i.status().last_reconcile_time != done.status().last_reconcile_time
        })
        .await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Succeeded);
    assert_eq!(s.job_id, job, "no new job");
    assert_eq!(s.job_id_finished, job, "jobID == jobIDFinished throughout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_active_false_annotation_then_a_hand_edit_stays() {
    let h = harness().await;
    let mut item = configmap_item("frozen", "1s");
    item["metadata"]["annotations"] =
        json!({"continuousreconcile.extensions.landscaper.gardener.cloud/active": "false"});
    manifest::create(&h, &item).await;
    let done = manifest::wait_done(&h, "frozen").await;
    edit_by_hand(&h, "frozen").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        color(&h, "frozen").await,
        "red",
        "switched off: nothing re-applies"
    );
    let now = h.items("default").get("frozen").await.unwrap();
    assert_eq!(
        now.status().last_reconcile_time,
        done.status().last_reconcile_time
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_invalid_schedule_then_the_job_fails_with_a_configuration_error() {
    let h = harness().await;
    let mut item = configmap_item("garbled", "1s");
    item["spec"]["config"]["continuousReconcile"] = json!({"cron": "every tuesday"});
    manifest::create(&h, &item).await;
    let done = manifest::wait_done(&h, "garbled").await;
    let s = done.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert!(err.codes.contains(&"ERR_CONFIGURATION_PROBLEM".to_string()));
    assert!(
        err.message.contains("continuousReconcile.cron"),
        "{}",
        err.message
    );
}

/// Given a ShouldReconcile hook (which keeps the host from skipping finished items unread),
/// when a job runs to its end, then the events of the host's own status writes are decided on
/// the objects those writes returned: the item is read once per job, for Landscaper's write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_should_reconcile_hook_then_the_hosts_own_writes_cost_no_read_of_the_item() {
    skip_on_real!("counts requests at the embedded API server");
    let h = Harness::start_with(Options {
        landscaper: false,
        config: HostConfig {
            hooks: Some(vec![HookRegistration {
                plugin: "continuous-reconcile".into(),
                deploy_item_types: vec!["*".into()],
                hook_types: Vec::new(),
            }]),
            ..HostConfig::default()
        },
        record_hooks: true,
        ..Options::default()
    })
    .await;
    let server = h.server.clone().expect("embedded");
    let items = h.items("default");
    let item: DeployItem =
        serde_yaml::from_str(&test_support::mock_item("counted")).expect("mock item");
    let mut item = items.create(&PostParams::default(), &item).await.unwrap();
    // The creation's event is read and decided before the counters start (on a loaded machine
    // it could otherwise land in job 1's count).
    test_support::until(
        "the host to decide the creation's event",
        Duration::from_secs(20),
        || {
            h.hook_types_for("counted")
                .contains(&deployer_host::hooks::HookType::ShouldReconcile)
        },
    )
    .await;
    for job in 1..=3 {
        // Landscaper's write: a new job (one write, read before the counters start).
        let finished_before = h.deployer.stats.jobs_finished.load(Ordering::Relaxed);
        server.reset_stats();
        items
            .replace_status("counted", &PostParams::default(), &with_new_job(&item))
            .await
            .unwrap();
        // Wait on the host's counter, not on the API: the test itself reads nothing.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while h.deployer.stats.jobs_finished.load(Ordering::Relaxed) == finished_before {
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {job} did not finish"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Let the events of the pickup and the final write arrive and be decided.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let stats = server.stats();
        let reads = stats.count("get", "deployitems.landscaper.gardener.cloud");
        let writes = stats.count("update", "deployitems.landscaper.gardener.cloud/status");
        assert_eq!(
            writes, 3,
            "job {job}: Landscaper's write, the pickup and the finish"
        );
        // (With `itemCache: full` not even that one: the watch holds the item.)
        let expected = match test_support::item_cache() {
            ItemCache::Metadata => 1,
            ItemCache::Full => 0,
        };
        assert_eq!(
            reads, expected,
            "job {job}: one read, for Landscaper's write ({stats:?})"
        );
        item = items.get("counted").await.unwrap();
        assert_eq!(item.status().phase, Phase::Succeeded);
        assert_eq!(item.status().job_id_finished, item.status().job_id);
    }
    let asked = h
        .hook_types_for("counted")
        .into_iter()
        .filter(|t| *t == deployer_host::hooks::HookType::ShouldReconcile)
        .count();
    assert!(
        asked >= 6,
        "the hook is still asked at every event (pickup and final writes too): {asked}"
    );
}
