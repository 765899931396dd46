//! Driven by the real Landscaper: its controller (v0.99, both modes, from
//! `../shared/tools/real-landscaper`) creates, triggers, waits for, times out and deletes the
//! DeployItems of Installations, and our host is the only deployer. The Installations use inline
//! blueprints (no component descriptor) and import a Target; their items are of every type the
//! host serves: manifest, helm (an inline chart archive, a real Helm release), mock and container
//! (run by the process kubelet). Runs on the embedded API server only (this Landscaper's writes
//! carry JSON nulls that kube-apiserver 1.20 refuses); with `DEPLOYER_TEST_BACKEND=real` every
//! story says SKIP.

use std::collections::BTreeMap;
use std::time::Duration;

use deployer_host::landscaper::{DeployItem, Phase, codes};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use test_support::real_landscaper::stage::{
    DevStage, HOST_NS, JOB_TIMEOUT, JobRecorder, NS, Seen, Stage, StageOptions, TARGET,
    blueprint_archive, describe, export_of, four_types_deploy_execution, host_config, items,
    job_ends, job_id, outcome, wait_all_gone, wait_item,
};
use test_support::real_landscaper::{
    self as ls, apply, data_object, doc_yaml_blocks, set_operation, wait_job_after,
};
use test_support::require_real_landscaper;
use test_support::{Harness, Options};

/// Where the items deploy to (through the imported Target).
const APP_NS: &str = "demo-app";
/// The host binary the stage's pods run.
const HOST: &str = env!("CARGO_BIN_EXE_deployer-host");

/// The stage (server, our host, the real Landscaper), its pods running this package's host.
async fn stage(options: StageOptions) -> Stage {
    Stage::start(HOST.as_ref(), options).await
}

async fn config_map(h: &Harness, ns: &str, name: &str) -> Option<ConfigMap> {
    Api::<ConfigMap>::namespaced(h.client.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
}

async fn helm_releases(h: &Harness) -> Vec<(String, String)> {
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), APP_NS);
    let mut out: Vec<(String, String)> = secrets
        .list(&ListParams::default().labels("owner=helm,name=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| {
            let l = s.metadata.labels.unwrap_or_default();
            (l["version"].clone(), l["status"].clone())
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_installation_with_one_item_of_each_type_when_landscaper_reconciles_updates_and_deletes_it_then_our_host_deploys_upgrades_and_removes_everything()
 {
    require_real_landscaper!();
    let s = stage(StageOptions::default()).await;
    let c = &s.h.client;

    // Given an Installation whose deploy execution makes a manifest, a helm, a container and a
    // mock item in a dependsOn chain, and whose export execution exports the manifest item's
    // export.
    let recorder = JobRecorder::start(c).await;
    apply(
        &ls::data_objects(c, NS),
        data_object("color", NS, json!("blue")),
    )
    .await;
    let deploy = four_types_deploy_execution(APP_NS);
    let export = "exports:\n  color: {{ .deployitems.config.color }}\n  checked: {{ .deployitems.check.checked }}\n";
    apply(
        &ls::installations(c, NS),
        ls::inline_installation(
            NS,
            TARGET,
            "demo",
            &[("color", "color")],
            &[("color", "exported-color"), ("checked", "exported-check")],
            &deploy,
            Some(export),
        ),
    )
    .await;

    // When Landscaper reconciles it, then it succeeds: every item Succeeded, run by our host.
    let (inst, first) = job_ends(&s.h, "demo", None, "Succeeded").await;
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        ["chart", "check", "config", "job"]
    );
    for (name, item) in &first {
        let st = item.status();
        assert_eq!(st.phase, Phase::Succeeded, "{name}: {}", describe(&first));
        assert_eq!(st.job_id, st.job_id_finished);
        assert!(
            st.deployer
                .as_ref()
                .is_some_and(|d| d.identity.starts_with("wasm-deployer")),
            "{name} was run by our host: {:?}",
            st.deployer
        );
        assert!(
            item.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == "finalizer.landscaper.gardener.cloud")
        );
    }
    // ... in dependsOn order: each item's job started only after the one before it finished.
    let chain = ["config", "chart", "job", "check"];
    let expected: Vec<Seen> = chain
        .iter()
        .flat_map(|n| {
            [
                Seen::Started(n.to_string()),
                Seen::Finished(n.to_string(), Phase::Succeeded),
            ]
        })
        .collect();
    assert_eq!(recorder.seen(), expected);
    // ... the objects are there: the ConfigMap, a real Helm release, the container's exports.
    let cm = config_map(&s.h, APP_NS, "settings")
        .await
        .expect("ConfigMap");
    assert_eq!(cm.data.unwrap()["color"], "blue");
    let web = config_map(&s.h, APP_NS, "web-config")
        .await
        .expect("the chart's ConfigMap");
    assert_eq!(web.data.unwrap()["message"], "blue");
    assert_eq!(helm_releases(&s.h).await, [("1".into(), "deployed".into())]);
    assert_eq!(
        export_of(&s.h, &first["job"]).await,
        json!({"operation": "RECONCILE", "color": "blue"})
    );
    // ... and the manifest item's export reached the Installation's exported DataObject.
    let exported = ls::data_objects(c, NS).get("exported-color").await.unwrap();
    assert_eq!(exported.data["data"], "blue");
    let checked = ls::data_objects(c, NS).get("exported-check").await.unwrap();
    assert_eq!(checked.data["data"], "blue");

    // When the import changes and Landscaper is asked to reconcile again,
    apply(
        &ls::data_objects(c, NS),
        data_object("color", NS, json!("green")),
    )
    .await;
    set_operation(c, NS, "demo", "reconcile").await;
    let previous = job_id(&inst);
    let (_, second) = job_ends(&s.h, "demo", previous.as_deref(), "Succeeded").await;
    // then every item ran a new job (the same items, updated in place),
    for (name, item) in &second {
        let st = item.status();
        assert_eq!(st.phase, Phase::Succeeded, "{name}: {}", describe(&second));
        assert_ne!(st.job_id, first[name].status().job_id, "{name}: a new job");
        assert_eq!(
            item.metadata.uid, first[name].metadata.uid,
            "{name}: same item"
        );
    }
    // the objects changed, the Helm release was upgraded and its old revision superseded,
    let cm = config_map(&s.h, APP_NS, "settings").await.unwrap();
    assert_eq!(cm.data.unwrap()["color"], "green");
    let web = config_map(&s.h, APP_NS, "web-config").await.unwrap();
    assert_eq!(web.data.as_ref().unwrap()["message"], "green");
    assert_eq!(web.data.unwrap()["revision"], "2");
    assert_eq!(
        helm_releases(&s.h).await,
        [
            ("1".into(), "superseded".into()),
            ("2".into(), "deployed".into())
        ]
    );
    assert_eq!(
        export_of(&s.h, &second["job"]).await,
        json!({"operation": "RECONCILE", "color": "green"})
    );
    let exported = ls::data_objects(c, NS).get("exported-color").await.unwrap();
    assert_eq!(exported.data["data"], "green");

    // When the Installation is deleted,
    ls::installations(c, NS)
        .delete("demo", &DeleteParams::default())
        .await
        .unwrap();
    // then our host uninstalls every item and removes its finalizer: the items, the Execution
    // and the Installation disappear,
    let deadline = tokio::time::Instant::now() + JOB_TIMEOUT;
    loop {
        let left_items = items(&s.h).await;
        let left_execs = ls::executions(c, NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        let left_inst = ls::installations(c, NS).get_opt("demo").await.unwrap();
        if left_items.is_empty() && left_execs == 0 && left_inst.is_none() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still there: {} executions, installation {:?}, items:\n{}",
            left_execs,
            left_inst.map(|i| ls::status(&i)),
            describe(&left_items)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // and nothing is left in the target: no ConfigMap, no release, no chart objects.
    assert!(config_map(&s.h, APP_NS, "settings").await.is_none());
    assert!(config_map(&s.h, APP_NS, "web-config").await.is_none());
    assert_eq!(helm_releases(&s.h).await, []);
    let ns = Api::<Namespace>::all(c.clone())
        .get_opt(APP_NS)
        .await
        .unwrap();
    assert!(
        ns.is_none_or(|n| n.metadata.deletion_timestamp.is_some()),
        "the manifest item's Namespace is deleted"
    );
    // the container deployer's objects are gone from the host namespace.
    let host_secrets: Api<Secret> = Api::namespaced(c.clone(), HOST_NS);
    let left =
        test_support::replicas::names_where(&host_secrets, |n| !n.starts_with("default-token"))
            .await;
    assert!(left.is_empty(), "container Secrets left: {left:?}");
}

/// A one-item Installation `name` whose item `item` has type `ty` and configuration `config`.
fn one_item(name: &str, ty: &str, config: Value) -> Value {
    let deploy = serde_yaml::to_string(&json!({"deployItems": [{
        "name": "item", "type": ty, "target": {"import": "cluster"}, "config": config,
    }]}))
    .unwrap();
    ls::inline_installation(NS, TARGET, name, &[], &[], &deploy, None)
}

fn mock_config(phase: &str) -> Value {
    json!({"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
           "kind": "ProviderConfiguration", "phase": phase})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_broken_provider_config_when_landscaper_triggers_it_then_the_item_fails_with_our_last_error_and_the_installation_fails()
 {
    require_real_landscaper!();
    let s = stage(StageOptions::default()).await;
    let c = &s.h.client;
    // Given a manifest item whose manifest is not a Kubernetes object (no kind),
    let config = json!({
        "apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha2",
        "kind": "ProviderConfiguration",
        "manifests": [{"policy": "manage", "manifest": {"apiVersion": "v1", "metadata": {"name": "x"}}}],
    });
    apply(
        &ls::installations(c, NS),
        one_item(
            "broken",
            "landscaper.gardener.cloud/kubernetes-manifest",
            config,
        ),
    )
    .await;
    // when Landscaper triggers it, then the item finishes Failed with a lastError that says
    // what is wrong, and the Installation says Failed.
    let (_, items) = job_ends(&s.h, "broken", None, "Failed").await;
    let st = items["item"].status();
    assert_eq!(st.phase, Phase::Failed);
    let err = st.last_error.expect("lastError");
    assert!(
        err.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{err:?}"
    );
    assert!(err.message.contains("kind"), "names the field: {err:?}");
    assert!(
        st.deployer
            .is_some_and(|d| d.identity.starts_with("wasm-deployer")),
        "written by our host"
    );
    // Landscaper's Execution failed too, saying an item failed.
    let exec = ls::executions(c, NS).get("broken").await.unwrap();
    let exec_status = ls::status(&exec);
    assert_eq!(exec_status["phase"], "Failed", "{exec_status}");
    assert_eq!(
        exec_status["lastError"]["message"], "has failed or missing deploy items",
        "{exec_status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_item_type_no_plugin_serves_when_landscaper_triggers_it_then_its_pickup_timeout_fails_it_and_our_host_writes_nothing()
 {
    require_real_landscaper!();
    let s = stage(StageOptions {
        pickup_timeout: "3s",
        ..StageOptions::default()
    })
    .await;
    s.h.server.as_ref().unwrap().enable_audit(true);
    let c = &s.h.client;
    apply(
        &ls::installations(c, NS),
        one_item(
            "unserved",
            "example.com/not-served",
            json!({"apiVersion": "example.com/v1", "kind": "Config"}),
        ),
    )
    .await;
    let (_, items) = job_ends(&s.h, "unserved", None, "Failed").await;
    let item = &items["item"];
    let st = item.status();
    assert_eq!(st.phase, Phase::Failed);
    let err = st.last_error.clone().expect("lastError");
    assert_eq!(err.reason, "PickupTimeout", "{err:?}");
    assert!(err.codes.iter().any(|c| c == codes::TIMEOUT), "{err:?}");
    // Our host never wrote: no pickup, no deployer, and every write to the item came from
    // Landscaper (over HTTP, with its user agent; our host's client is in-process).
    assert!(st.last_reconcile_time.is_none(), "{st:?}");
    assert!(
        st.deployer.as_ref().is_none_or(|d| d.identity.is_empty()),
        "{st:?}"
    );
    let name = item.metadata.name.as_deref().unwrap();
    let writes: Vec<Option<String>> =
        s.h.server
            .as_ref()
            .unwrap()
            .audit_log()
            .into_iter()
            .filter(|e| e.resource == "deployitems.landscaper.gardener.cloud" && e.name == name)
            .map(|e| e.user_agent)
            .collect();
    assert!(writes.len() >= 2, "create and pickup timeout: {writes:?}");
    assert!(
        writes
            .iter()
            .all(|ua| ua.as_deref().is_some_and(|ua| ua.contains("landscaper"))),
        "{writes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_our_host_is_down_when_landscaper_triggers_then_the_pickup_timeout_fails_the_job_and_after_the_host_starts_a_new_job_succeeds()
 {
    require_real_landscaper!();
    let mut s = stage(StageOptions {
        host_up: false,
        pickup_timeout: "3s",
        ..StageOptions::default()
    })
    .await;
    let c = s.h.client.clone();
    apply(
        &ls::installations(&c, NS),
        one_item(
            "late",
            "landscaper.gardener.cloud/mock",
            mock_config("Succeeded"),
        ),
    )
    .await;
    // Given our host is down when Landscaper triggers, the job fails by pickup timeout.
    let (inst, first) = job_ends(&s.h, "late", None, "Failed").await;
    assert_eq!(
        first["item"].status().last_error.unwrap().reason,
        "PickupTimeout"
    );
    // When our host starts, it leaves the finished job alone,
    s.h.start_controller();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = items(&s.h).await;
    assert_eq!(
        still["item"].metadata.resource_version, first["item"].metadata.resource_version,
        "a finished job is not touched"
    );
    // and the next job Landscaper starts succeeds.
    set_operation(&c, NS, "late", "reconcile").await;
    let previous = job_id(&inst);
    let (_, second) = job_ends(&s.h, "late", previous.as_deref(), "Succeeded").await;
    let st = second["item"].status();
    assert_eq!(st.phase, Phase::Succeeded);
    assert!(st.last_error.is_none(), "the old error is cleared: {st:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_running_job_when_the_installation_is_interrupted_then_every_unfinished_item_fails_and_our_host_does_not_overwrite_it()
 {
    require_real_landscaper!();
    let s = stage(StageOptions::default()).await;
    let c = &s.h.client;
    // Given a container item that runs until it is told to stop, and a mock item after it,
    let marker = s.dev.dir().join("release");
    let deploy = format!(
        r#"deployItems:
- name: slow
  type: landscaper.gardener.cloud/container
  target: {{import: cluster}}
  config:
    apiVersion: container.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    image: alpine:3.19
    command: [sh, -c, 'while [ ! -e {marker} ]; do sleep 0.2; done']
- name: after
  type: landscaper.gardener.cloud/mock
  target: {{import: cluster}}
  dependsOn: [slow]
  config: {{apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration, phase: Succeeded}}
"#,
        marker = marker.display()
    );
    apply(
        &ls::installations(c, NS),
        ls::inline_installation(NS, TARGET, "interrupted", &[], &[], &deploy, None),
    )
    .await;
    wait_item(&s.h, "slow", |i| i.status().last_reconcile_time.is_some()).await;
    // when the Installation is interrupted,
    set_operation(c, NS, "interrupted", "interrupt").await;
    // then the Installation fails, both items are finished Failed with Landscaper's
    // InterruptOperation error,
    let (inst, interrupted) = job_ends(&s.h, "interrupted", None, "Failed").await;
    for name in ["slow", "after"] {
        let st = interrupted[name].status();
        assert_eq!(st.phase, Phase::Failed, "{}", describe(&interrupted));
        assert_eq!(st.job_id, st.job_id_finished);
        assert_eq!(st.last_error.unwrap().reason, "InterruptOperation");
    }
    // and when the program ends afterwards, our host does not overwrite the finished job.
    std::fs::write(&marker, "").unwrap();
    let slow = interrupted["slow"].metadata.name.clone().unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), HOST_NS);
    let selector = format!("{}={slow}", deployer_host::container::pod::LABEL_ITEM_NAME);
    let deadline = tokio::time::Instant::now() + JOB_TIMEOUT;
    loop {
        let running = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .iter()
            .any(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
            });
        if !running {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pod never ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // (the host polls the pod every 200ms: give it several polls to misbehave)
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = items(&s.h).await;
    assert_eq!(
        later["slow"].status().phase,
        Phase::Failed,
        "{}",
        describe(&later)
    );
    assert_eq!(
        later["slow"].status().last_error.unwrap().reason,
        "InterruptOperation"
    );
    // A new reconcile then runs both to Succeeded.
    set_operation(c, NS, "interrupted", "reconcile").await;
    let previous = job_id(&inst);
    job_ends(&s.h, "interrupted", previous.as_deref(), "Succeeded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_succeeded_installation_when_an_item_is_annotated_test_reconcile_then_our_host_runs_a_job_of_its_own_and_landscaper_stays_content()
 {
    require_real_landscaper!();
    let s = stage(StageOptions::default()).await;
    let c = &s.h.client;
    apply(
        &ls::installations(c, NS),
        one_item(
            "tested",
            "landscaper.gardener.cloud/mock",
            mock_config("Succeeded"),
        ),
    )
    .await;
    let (inst, mut tested) = job_ends(&s.h, "tested", None, "Succeeded").await;
    let before = tested.remove("item").unwrap();
    let name = before.metadata.name.clone().unwrap();
    // When the item is annotated test-reconcile,
    s.h.items(NS)
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "landscaper.gardener.cloud/operation": "test-reconcile"}}})),
        )
        .await
        .unwrap();
    // then our host mints a job of its own, runs it to Succeeded and removes the annotation,
    let after =
        s.h.wait_for(NS, &name, JOB_TIMEOUT, |i| {
            let st = i.status();
            st.job_id != before.status().job_id && st.job_id == st.job_id_finished
        })
        .await;
    assert_eq!(after.status().phase, Phase::Succeeded);
    assert!(
        !after
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("landscaper.gardener.cloud/operation")
    );
    // and Landscaper's Installation is still Succeeded with the same job.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = ls::installations(c, NS).get("tested").await.unwrap();
    assert_eq!(ls::status(&now)["phase"], "Succeeded");
    assert_eq!(ls::status(&now)["jobID"], ls::status(&inst)["jobID"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_same_installation_when_driven_by_the_real_landscaper_and_by_dev_modes_stand_in_then_our_host_sees_the_same_jobs_and_the_items_end_the_same()
 {
    require_real_landscaper!();
    // Through the real Landscaper: deploy, then delete the Installation.
    let (real_seen, real_outcomes, templates) = {
        let s = stage(StageOptions::default()).await;
        let c = &s.h.client;
        let recorder = JobRecorder::start(c).await;
        apply(
            &ls::data_objects(c, NS),
            data_object("color", NS, json!("blue")),
        )
        .await;
        apply(
            &ls::installations(c, NS),
            ls::inline_installation(
                NS,
                TARGET,
                "same",
                &[("color", "color")],
                &[],
                &four_types_deploy_execution(APP_NS),
                None,
            ),
        )
        .await;
        let (_, deployed) = job_ends(&s.h, "same", None, "Succeeded").await;
        let mut outcomes = BTreeMap::new();
        for (name, item) in &deployed {
            outcomes.insert(name.clone(), outcome(&s.h, item).await);
        }
        ls::installations(c, NS)
            .delete("same", &DeleteParams::default())
            .await
            .unwrap();
        wait_all_gone(&s.h).await;
        // The items as Landscaper made them (rendered config, labels, dependsOn), for the stand-in.
        (recorder.seen(), outcomes, deployed)
    };

    // Through dev mode's stand-in: the same items, created directly, then deleted.
    let h = Harness::start_with(Options {
        config: host_config(),
        landscaper: true,
        ..Options::default()
    })
    .await;
    let dev = {
        // the container item's pods and the Target need the server on loopback, as above
        let stage = DevStage::start(&h, HOST.as_ref()).await;
        let recorder = JobRecorder::start(&h.client).await;
        for item in templates.values() {
            let mut copy = DeployItem {
                metadata: kube::api::ObjectMeta {
                    name: item.metadata.name.clone(),
                    namespace: item.metadata.namespace.clone(),
                    labels: item.metadata.labels.clone(),
                    annotations: item.metadata.annotations.clone(),
                    ..Default::default()
                },
                spec: item.spec.clone(),
                status: None,
                ..item.clone()
            };
            copy.metadata
                .annotations
                .get_or_insert_default()
                .remove("landscaper.gardener.cloud/reconcile-time");
            h.items(NS)
                .create(&PostParams::default(), &copy)
                .await
                .unwrap();
        }
        let deadline = tokio::time::Instant::now() + JOB_TIMEOUT;
        let deployed = loop {
            let all = items(&h).await;
            let done = all.len() == templates.len()
                && all.values().all(|i| {
                    let s = i.status();
                    !s.job_id.is_empty() && s.job_id == s.job_id_finished
                });
            if done {
                break all;
            }
            assert!(tokio::time::Instant::now() < deadline, "{}", describe(&all));
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let mut outcomes = BTreeMap::new();
        for (name, item) in &deployed {
            outcomes.insert(name.clone(), outcome(&h, item).await);
        }
        for item in deployed.values() {
            h.items(NS)
                .delete(
                    item.metadata.name.as_deref().unwrap(),
                    &DeleteParams::default(),
                )
                .await
                .unwrap();
        }
        wait_all_gone(&h).await;
        drop(stage);
        (recorder.seen(), outcomes)
    };

    // Then our host saw the same jobs in the same order (dependsOn on deploy, reversed on
    // delete), and the items ended the same.
    assert_eq!(
        dev.0, real_seen,
        "jobs: stand-in (left) vs real Landscaper (right)"
    );
    assert_eq!(
        dev.1, real_outcomes,
        "outcomes: stand-in (left) vs real Landscaper (right)"
    );
    let chain = ["config", "chart", "job", "check"];
    let starts: Vec<&str> = real_seen
        .iter()
        .filter_map(|s| match s {
            Seen::Started(n) => Some(n.as_str()),
            _ => None,
        })
        .collect();
    let mut expected: Vec<&str> = chain.to_vec();
    expected.extend(chain.iter().rev());
    assert_eq!(
        starts, expected,
        "deploy in dependsOn order, delete in reverse"
    );
}

/// The oracle for OCM (issue #34, docs/ocm.md): the test tooling pushes a component version to a
/// real registry; the real Landscaper resolves the Installation's component descriptor and
/// blueprint from it (proof that what we push is real OCM) and its blueprint names the chart by
/// `getResourceKey`; our helm plugin resolves that key through the host and installs a real
/// Helm release. A container item of the same blueprint names the component version and the
/// blueprint by reference; its program reads both where Landscaper's init container puts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_component_version_in_a_registry_when_landscaper_installs_its_blueprint_then_our_helm_and_container_deployers_resolve_its_resources()
 {
    use test_support::ocm::{
        BLUEPRINT_MEDIA_TYPE, HELM_CHART_LAYER, Resource, Schema, push_component, push_component_as,
    };
    require_real_landscaper!();
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let addr = registry.addr.clone();
    let component = "example.com/acme/web";
    let blueprint = json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "Blueprint",
        "jsonSchema": "https://json-schema.org/draft/2019-09/schema",
        "imports": [{"name": "cluster", "targetType": "landscaper.gardener.cloud/kubernetes-cluster"}],
        "deployExecutions": [{"name": "default", "type": "GoTemplate", "template": format!(
r#"deployItems:
- name: chart
  type: landscaper.gardener.cloud/helm
  target: {{import: cluster}}
  config:
    apiVersion: helm.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    name: web
    namespace: {APP_NS}
    createNamespace: true
    chart: {{resourceRef: {{{{ getResourceKey "cd://resources/chart" }}}}}}
    values: {{message: from-ocm}}
    readinessChecks: {{disableDefault: true}}
- name: chart-db
  type: landscaper.gardener.cloud/helm
  target: {{import: cluster}}
  config:
    apiVersion: helm.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    name: db
    namespace: {APP_NS}
    createNamespace: true
    chart: {{resourceRef: {{{{ getResourceKey "cd://componentReferences/db/resources/chart" }}}}}}
    values: {{message: from-the-reference}}
    readinessChecks: {{disableDefault: true}}
- name: job
  type: landscaper.gardener.cloud/container
  target: {{import: cluster}}
  dependsOn: [chart]
  config:
    apiVersion: container.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    image: alpine:3.19
    command: [sh, -c]
    args:
    - |
      mkdir -p "$(dirname "$EXPORTS_PATH")"
      printf '{{"components": %s, "blueprintKind": "%s"}}' \
        "$(grep -o '"name":"example.com/acme/web"' "$COMPONENT_DESCRIPTOR_PATH" | wc -l)" \
        "$(sed -n 's/^kind: //p' "$CONTENT_PATH/blueprint.yaml")" > "$EXPORTS_PATH"
    componentDescriptor:
      ref:
        componentName: {{{{ .cd.component.name }}}}
        version: {{{{ .cd.component.version }}}}
    blueprint:
      ref: {{resourceName: blueprint}}
"#)}],
    });
    let archive =
        test_support::chart_repo::package(&test_support::chart_repo::chart_dir("web"), "0.1.0");
    // A referenced component (v3) with a chart of its own.
    push_component(
        &addr,
        "ocm",
        "example.com/acme/db",
        "2.0.0",
        vec![Resource::local(
            "chart",
            "helmChart",
            HELM_CHART_LAYER,
            archive.clone(),
        )],
        Schema::V3,
    )
    .await;
    push_component_as(
        &addr,
        None,
        "ocm",
        component,
        "1.0.0",
        vec![
            Resource::local(
                "blueprint",
                "landscaper.gardener.cloud/blueprint",
                BLUEPRINT_MEDIA_TYPE,
                blueprint_archive(&blueprint),
            ),
            Resource::local("chart", "helmChart", HELM_CHART_LAYER, archive),
        ],
        &[("db", "example.com/acme/db", "2.0.0")],
        Schema::V2,
    )
    .await;
    let mut fetch: deployer_host::capabilities::FetchConfig =
        serde_yaml::from_str("allow: [127.0.0.1]\n").unwrap();
    fetch.plain_http = vec![addr.clone()];
    let s = stage(StageOptions {
        fetch: Some(fetch),
        ..StageOptions::default()
    })
    .await;
    let c = &s.h.client;
    // A Context of its own (central mode manages `default`) naming the registry, with OCM on.
    apply(
        &ls::ls_api(c, "Context", "contexts", NS),
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
               "metadata": {"name": "ocm", "namespace": NS},
               "useOCM": true,
               "repositoryContext": {"type": "OCIRegistry", "baseUrl": format!("http://{addr}"),
                                     "subPath": "ocm"}}),
    )
    .await;
    apply(
        &ls::installations(c, NS),
        json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1",
            "kind": "Installation",
            "metadata": {"name": "from-ocm", "namespace": NS,
                         "annotations": {"landscaper.gardener.cloud/operation": "reconcile"}},
            "spec": {
                "context": "ocm",
                "componentDescriptor": {"ref": {"componentName": component, "version": "1.0.0"}},
                "blueprint": {"ref": {"resourceName": "blueprint"}},
                "imports": {"targets": [{"name": "cluster", "target": TARGET}]},
            },
        }),
    )
    .await;

    let (_, items) = job_ends(&s.h, "from-ocm", None, "Succeeded").await;
    let item = &items["chart"];
    let key = item.spec.config.as_ref().unwrap()["chart"]["resourceRef"]
        .as_str()
        .unwrap()
        .to_string();
    let decoded = String::from_utf8(
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &key).unwrap(),
    )
    .unwrap();
    assert!(
        decoded.contains(component) && decoded.contains("name: chart"),
        "Landscaper's key: {decoded}"
    );
    assert_eq!(
        helm_releases(&s.h).await,
        [("1".to_string(), "deployed".to_string())]
    );
    let cm = config_map(&s.h, APP_NS, "web-config")
        .await
        .expect("ConfigMap");
    assert_eq!(cm.data.unwrap()["message"], "from-ocm");
    // The chart of the referenced component: Landscaper's key names that component version.
    let db = config_map(&s.h, APP_NS, "db-config")
        .await
        .expect("ConfigMap of db");
    assert_eq!(db.data.unwrap()["message"], "from-the-reference");
    assert_eq!(items["chart-db"].status().phase, Phase::Succeeded);
    // The container item's program read the component descriptor and the blueprint the host
    // resolved, mounted as Landscaper's init container mounts them.
    let job = &items["job"];
    assert_eq!(job.status().phase, Phase::Succeeded, "{}", describe(&items));
    let out = export_of(&s.h, job).await;
    assert_eq!(out["blueprintKind"], "Blueprint", "{out}");
    assert!(out["components"].as_u64().unwrap_or(0) >= 1, "{out}");
    let db_key = items["chart-db"].spec.config.as_ref().unwrap()["chart"]["resourceRef"]
        .as_str()
        .unwrap()
        .to_string();
    let db_key = String::from_utf8(
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &db_key).unwrap(),
    )
    .unwrap();
    assert!(db_key.contains("example.com/acme/db"), "{db_key}");
}

/// The YAML blocks of docs/ocm.md's walk-through, by `kind`, with the registry
/// `registry.example.com` served at `addr` over plain HTTP (`https://` becomes `http://`).
fn ocm_walk_through(addr: &str) -> BTreeMap<String, Value> {
    doc_yaml_blocks("ocm.md", "\n## Walk-through", &|t| on_loopback(t, addr))
}

/// `text` with the registry `registry.example.com` served at `addr` over plain HTTP.
fn on_loopback(text: &str, addr: &str) -> String {
    text.replace("https://registry.example.com", &format!("http://{addr}"))
        .replace("registry.example.com", addr)
}

/// Issue #45: docs/ocm.md's walk-through, applied as written (its YAML read from the doc), with
/// the real Landscaper and Debian's `docker-registry` as `registry.example.com`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_walk_through_of_docs_ocm_md_when_its_context_and_installation_are_applied_then_landscaper_resolves_the_component_and_our_host_installs_the_chart()
 {
    use test_support::ocm::{
        BLUEPRINT_MEDIA_TYPE, HELM_CHART_LAYER, Resource, Schema, push_component,
    };
    require_real_landscaper!();
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let addr = registry.addr.clone();
    let walk = ocm_walk_through(&addr);
    let (context, blueprint, installation) = (
        walk.get("Context").expect("the walk-through's Context"),
        walk.get("Blueprint").expect("the walk-through's Blueprint"),
        walk.get("Installation")
            .expect("the walk-through's Installation"),
    );
    let ns = installation["metadata"]["namespace"].as_str().unwrap();
    // Given step 1: the component version with the chart and the blueprint, in the registry,
    let component = &installation["spec"]["componentDescriptor"]["ref"];
    push_component(
        &addr,
        context["repositoryContext"]["subPath"].as_str().unwrap(),
        component["componentName"].as_str().unwrap(),
        component["version"].as_str().unwrap(),
        vec![
            Resource::local(
                "chart",
                "helmChart",
                HELM_CHART_LAYER,
                test_support::chart_repo::package(
                    &test_support::chart_repo::chart_dir("web"),
                    "0.1.0",
                ),
            ),
            Resource::local(
                "blueprint",
                "landscaper.gardener.cloud/blueprint",
                BLUEPRINT_MEDIA_TYPE,
                blueprint_archive(blueprint),
            ),
        ],
        Schema::V2,
    )
    .await;
    // step 2: the host may fetch from it (over plain HTTP here),
    let mut fetch: deployer_host::capabilities::FetchConfig =
        serde_yaml::from_str(&format!("allow: [{addr}]\n")).unwrap();
    fetch.plain_http = vec![addr.clone()];
    let s = stage(StageOptions {
        fetch: Some(fetch),
        ..StageOptions::default()
    })
    .await;
    // (the chart's Deployment becomes ready as on a cluster with nodes)
    s.h.server.as_ref().unwrap().set_simulate_workloads(true);
    let c = &s.h.client;
    Api::<Namespace>::all(c.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    // the pull secret the Context names, and the Target `my-cluster` the Installation imports,
    let pull: Secret = serde_json::from_value(json!({
        "metadata": {"name": context["registryPullSecrets"][0]["name"], "namespace": ns},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": test_support::ocm::docker_config(&addr, "user", "secret")},
    }))
    .unwrap();
    Api::<Secret>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &pull)
        .await
        .unwrap();
    let target = installation["spec"]["imports"]["targets"][0]["target"]
        .as_str()
        .unwrap();
    apply(
        &ls::ls_api(c, "Target", "targets", ns),
        json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
            "metadata": {"name": target, "namespace": ns},
            "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                     "config": {"kubeconfig": std::fs::read_to_string(s.dev.kubeconfig()).unwrap()}},
        }),
    )
    .await;
    // step 3: the Context, over the `default` Context Landscaper's central mode made there,
    // when the walk-through's Installation is applied, then Landscaper resolves the component
    // version and its blueprint and the Installation succeeds; our host ran its helm item,
    // resolving the chart by Landscaper's resource key,
    let item = install_one_item(&s, ns, context, installation).await;
    assert!(
        item.spec.config.as_ref().unwrap()["chart"]["resourceRef"].is_string(),
        "Landscaper rendered the key"
    );
    // and the release is there, with the blueprint's values.
    let releases = Api::<Secret>::namespaced(c.clone(), ns)
        .list(&ListParams::default().labels("owner=helm,name=web"))
        .await
        .unwrap()
        .items;
    assert_eq!(releases.len(), 1);
    assert_eq!(
        releases[0].metadata.labels.as_ref().unwrap()["status"],
        "deployed"
    );
    let cm = config_map(&s.h, ns, "web-config")
        .await
        .expect("the chart's ConfigMap");
    assert_eq!(cm.data.unwrap()["message"], "hello from OCM");
    // Landscaper's central mode kept the Context as the walk-through wrote it.
    let kept = ls::ls_api(c, "Context", "contexts", ns)
        .get("default")
        .await
        .unwrap();
    assert_eq!(kept.data["repositoryContext"], context["repositoryContext"]);
}

/// Issue #55: docs/install.md's "Step by step" (section 3), as written: its Target and Context
/// read from the doc, the component, blueprint and Installation from `charts/landscaper/`, the
/// real Landscaper resolving them and our host installing the host's chart as a Helm release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_install_walk_through_of_docs_install_md_when_its_installation_is_applied_then_landscaper_and_our_host_install_the_host_chart()
 {
    require_real_landscaper!();
    // The registry speaks HTTPS with a CA of the story's own, which Landscaper and our host trust
    // (Landscaper reaches a blueprint's OCI artifact only over HTTPS).
    let cert = embedded_apiserver::tls::ServingCert::generate(&[]).unwrap();
    let Some(registry) = test_support::registry::start_registry_tls_anonymous(&cert) else {
        return;
    };
    let addr = registry.addr.clone();
    test_support::ocm::trust(&addr, cert.ca_pem());
    let ca = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca.path(), cert.ca_pem()).unwrap();
    let on_registry = |text: &str| text.replace("registry.example.com", &addr);
    let walk = doc_yaml_blocks("install.md", "\n### Step by step", &on_registry);
    let (target, context) = (
        walk.get("Target").expect("step 2's Target"),
        walk.get("Context").expect("step 3's Context"),
    );
    let installation: Value = serde_yaml::from_str(&on_registry(
        &std::fs::read_to_string(
            test_support::workspace().join("charts/landscaper/installation.yaml"),
        )
        .unwrap(),
    ))
    .unwrap();
    let ns = installation["metadata"]["namespace"].as_str().unwrap();
    // Given step 1: the chart, the blueprint and the component version where the component
    // says (the image is not pulled here: the embedded server plays the Deployment's pods),
    let sub_path = context["repositoryContext"]["subPath"].as_str().unwrap();
    let descriptor = ls::publish_shipped_component(&addr, sub_path, "0.1.0").await;
    // step 4: a wasm-deployer that may download from the registry,
    let mut fetch: deployer_host::capabilities::FetchConfig =
        serde_yaml::from_str(&format!("allow: [{addr}]\n")).unwrap();
    fetch.ca_bundle = Some(ca.path().to_path_buf());
    let s = stage(StageOptions {
        fetch: Some(fetch),
        landscaper_env: vec![("SSL_CERT_FILE", ca.path().display().to_string())],
        ..StageOptions::default()
    })
    .await;
    s.h.server.as_ref().unwrap().set_simulate_workloads(true);
    let c = &s.h.client;
    // (Landscaper's own namespace is already there)
    let namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    match Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("namespace {ns}: {e}"),
    }
    // step 2: the Target `host-cluster` with the kubeconfig written in,
    let mut target = target.clone();
    assert_eq!(target["metadata"]["namespace"], ns);
    target["spec"]["config"]["kubeconfig"] =
        json!(std::fs::read_to_string(s.dev.kubeconfig()).unwrap());
    apply(&ls::ls_api(c, "Target", "targets", ns), target).await;
    // step 3: the Context, over the `default` Context Landscaper's central mode made; when
    // step 5's Installation (charts/landscaper/installation.yaml) is applied, then Landscaper
    // resolves the component and its blueprint, the Installation succeeds, its one helm item
    // run by our host,
    install_one_item(&s, ns, context, &installation).await;
    // and the host's chart is a Helm release whose Deployment runs the component's image.
    let release = installation["spec"]["importDataMappings"]["releaseName"]
        .as_str()
        .unwrap();
    let releases = Api::<Secret>::namespaced(c.clone(), ns)
        .list(&ListParams::default().labels(&format!("owner=helm,name={release}")))
        .await
        .unwrap()
        .items;
    assert_eq!(releases.len(), 1);
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(c.clone(), ns)
        .get(release)
        .await
        .expect("the host's Deployment");
    let image = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    let (image_repository, image_tag) =
        ls::component_reference(&descriptor, &addr, "wasm-deployer-image");
    assert_eq!(image, format!("{addr}/{image_repository}:{image_tag}"));
}

/// Applies `context` over the `default` Context Landscaper's central mode makes in `ns`, then
/// `installation`; waits for its job and asserts that it `Succeeded` with one item, run by our
/// host. Returns that item.
async fn install_one_item(
    s: &Stage,
    ns: &str,
    context: &Value,
    installation: &Value,
) -> DeployItem {
    let c = &s.h.client;
    let contexts = ls::ls_api(c, "Context", "contexts", ns);
    let deadline = tokio::time::Instant::now() + JOB_TIMEOUT;
    while contexts.get_opt("default").await.unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Landscaper made no default Context in {ns}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    apply(&contexts, context.clone()).await;
    apply(&ls::installations(c, ns), installation.clone()).await;
    let name = installation["metadata"]["name"].as_str().unwrap();
    let (inst, phase) = wait_job_after(c, ns, name, None, JOB_TIMEOUT).await;
    let items =
        s.h.items(ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
    let described = items
        .iter()
        .map(|i| format!("{:?}: {:?}", i.metadata.name, i.status().last_error))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(phase, "Succeeded", "{}\n{described}", ls::status(&inst));
    assert_eq!(items.len(), 1, "{described}");
    let st = items[0].status();
    assert_eq!(st.phase, Phase::Succeeded);
    assert!(
        st.deployer
            .is_some_and(|d| d.identity.starts_with("wasm-deployer")),
        "run by our host"
    );
    items.into_iter().next().unwrap()
}
