//! Manifest deployer features (contract 12.3: `policy_test.go`, `misc_test.go`,
//! `readiness_check_test.go`, `export_test.go`, `objectapplier_test.go`,
//! `defaultreadinesscheck_test.go`), as stories on the embedded API server.

use std::sync::atomic::Ordering;
use std::time::Duration;

use deployer_host::landscaper::{Phase, codes};
use manifest::*;
use serde_json::{Value, json};
use test_support::Harness;
use test_support::manifest;
use test_support::skip_on_real;

fn with_policy(policy: &str, data: Value) -> Value {
    json!({"manifests": [{"policy": policy, "manifest": cm("my-cm", data)}]})
}

/// Deploys `config` as item `name`, updates it to `updated`, deletes it; returns the data of
/// `my-cm` after create, after update, and whether it exists after the delete.
async fn lifecycle(
    h: &Harness,
    name: &str,
    config: Value,
    updated: Value,
) -> (Option<Value>, Option<Value>, bool) {
    create(h, &item(name, config)).await;
    let i = wait_done(h, name).await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    let after_create = configmap(h, "my-cm").await.map(|c| c["data"].clone());
    let mut updated = updated;
    updated["apiVersion"] = json!(V1ALPHA2);
    updated["kind"] = json!("ProviderConfiguration");
    let old = set_config(h, name, &updated).await;
    let i = wait_next_job(h, name, &old).await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    let after_update = configmap(h, "my-cm").await.map(|c| c["data"].clone());
    delete_item(h, name).await;
    h.wait_gone("default", name, Duration::from_secs(30)).await;
    (
        after_create,
        after_update,
        configmap(h, "my-cm").await.is_some(),
    )
}

// ---- policies (policy_test.go, 15 cases) ----------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_manage_creates_updates_and_deletes() {
    let h = Harness::start().await;
    let (c, u, exists) = lifecycle(
        &h,
        "p-manage",
        with_policy("manage", json!({"k": "1"})),
        with_policy("manage", json!({"k": "2"})),
    )
    .await;
    assert_eq!(c, Some(json!({"k": "1"})));
    assert_eq!(u, Some(json!({"k": "2"})));
    assert!(!exists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_fallback_creates_updates_and_deletes_what_it_owns() {
    let h = Harness::start().await;
    let (c, u, exists) = lifecycle(
        &h,
        "p-fallback",
        with_policy("fallback", json!({"k": "1"})),
        with_policy("fallback", json!({"k": "2"})),
    )
    .await;
    assert_eq!(c, Some(json!({"k": "1"})));
    assert_eq!(u, Some(json!({"k": "2"})));
    assert!(!exists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_fallback_neither_updates_nor_deletes_an_object_owned_by_another_item() {
    let h = Harness::start().await;
    let mut foreign = cm("my-cm", json!({"k": "foreign"}));
    foreign["metadata"]["labels"] = json!({OWNER_LABEL: "someone-else"});
    put(&h, foreign).await;
    create(
        &h,
        &item(
            "p-fb-foreign",
            with_policy("fallback", json!({"k": "mine"})),
        ),
    )
    .await;
    let i = wait_done(&h, "p-fb-foreign").await;
    assert_eq!(i.status().phase, Phase::Succeeded);
    assert!(managed(&i).is_empty(), "not listed");
    assert_eq!(
        configmap(&h, "my-cm").await.unwrap()["data"]["k"],
        "foreign"
    );
    delete_item(&h, "p-fb-foreign").await;
    h.wait_gone("default", "p-fb-foreign", Duration::from_secs(30))
        .await;
    assert!(configmap(&h, "my-cm").await.is_some(), "not deleted");

    // Owned at deploy time, taken over by someone else before the uninstall: not deleted.
    create(
        &h,
        &item(
            "p-fb-taken",
            json!({"manifests": [{"policy": "fallback", "manifest": cm("taken", json!({}))}]}),
        ),
    )
    .await;
    wait_done(&h, "p-fb-taken").await;
    merge(
        &h,
        "v1",
        "ConfigMap",
        Some("default"),
        "taken",
        json!({"metadata": {"labels": {OWNER_LABEL: "other"}}}),
    )
    .await;
    delete_item(&h, "p-fb-taken").await;
    h.wait_gone("default", "p-fb-taken", Duration::from_secs(30))
        .await;
    assert!(configmap(&h, "taken").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_keep_creates_and_updates_but_never_deletes() {
    let h = Harness::start().await;
    let (c, u, exists) = lifecycle(
        &h,
        "p-keep",
        with_policy("keep", json!({"k": "1"})),
        with_policy("keep", json!({"k": "2"})),
    )
    .await;
    assert_eq!(c, Some(json!({"k": "1"})));
    assert_eq!(u, Some(json!({"k": "2"})));
    assert!(exists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_ignore_creates_nothing() {
    let h = Harness::start().await;
    create(
        &h,
        &item("p-ignore", with_policy("ignore", json!({"k": "1"}))),
    )
    .await;
    let i = wait_done(&h, "p-ignore").await;
    assert_eq!(i.status().phase, Phase::Succeeded);
    assert!(managed(&i).is_empty());
    assert!(configmap(&h, "my-cm").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_immutable_creates_never_updates_and_deletes() {
    let h = Harness::start().await;
    let (c, u, exists) = lifecycle(
        &h,
        "p-immutable",
        with_policy("immutable", json!({"k": "1"})),
        with_policy("immutable", json!({"k": "2"})),
    )
    .await;
    assert_eq!(c, Some(json!({"k": "1"})));
    assert_eq!(u, Some(json!({"k": "1"})));
    assert!(!exists);
}

// ---- annotations, patches, lists (misc_test.go) ----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_annotate_before_create_then_the_annotations_are_merged_only_on_creation() {
    let h = Harness::start().await;
    let mut with_existing = cm("abc-1", json!({}));
    with_existing["metadata"]["annotations"] = json!({"own": "x", "a": "manifest"});
    create(
        &h,
        &item(
            "abc",
            json!({"manifests": [
        {"manifest": cm("abc-0", json!({})), "annotateBeforeCreate": {"a": "1"}},
        {"manifest": with_existing, "annotateBeforeCreate": {"a": "1", "b": "2"}}]}),
        ),
    )
    .await;
    assert_eq!(wait_done(&h, "abc").await.status().phase, Phase::Succeeded);
    assert_eq!(
        configmap(&h, "abc-0").await.unwrap()["metadata"]["annotations"],
        json!({"a": "1"})
    );
    assert_eq!(
        configmap(&h, "abc-1").await.unwrap()["metadata"]["annotations"],
        json!({"own": "x", "a": "1", "b": "2"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_annotate_before_delete_then_the_object_carries_them_when_it_is_deleted() {
    let h = Harness::start().await;
    let mut held = cm("abd", json!({}));
    held["metadata"]["finalizers"] = json!(["test/hold"]);
    held["metadata"]["annotations"] = json!({"existing": "yes"});
    create(&h, &item("abd", json!({"manifests": [{"manifest": held, "annotateBeforeDelete": {"deleted-by": "landscaper"}}]}))).await;
    let first = wait_done(&h, "abd").await.status().job_id;
    delete_item(&h, "abd").await;
    // The finalizer holds the ConfigMap: it has its deletionTimestamp and the annotation.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let live = loop {
        let c = configmap(&h, "abd").await.unwrap();
        if c["metadata"]["deletionTimestamp"].is_string() {
            break c;
        }
        assert!(tokio::time::Instant::now() < deadline, "never deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        live["metadata"]["annotations"],
        json!({"existing": "yes", "deleted-by": "landscaper"})
    );
    // The host writes `Deleting` when the plugin's delete call returns, which may be just after
    // the API server set the deletionTimestamp: wait for it rather than race it.
    let s = h
        .wait_for("default", "abd", Duration::from_secs(20), |i| {
            i.status().phase == Phase::Deleting
        })
        .await
        .status();
    assert_ne!(s.job_id, first, "the deletion is a new job");
    assert_ne!(s.job_id, s.job_id_finished, "and it waits for the object");
    merge(
        &h,
        "v1",
        "ConfigMap",
        Some("default"),
        "abd",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    h.wait_gone("default", "abd", Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_patches_then_after_deployment_and_before_delete_they_are_merged_into_the_object() {
    let h = Harness::start().await;
    let mut held = cm("patched", json!({"key1": "val1", "key2": "val2"}));
    held["metadata"]["finalizers"] = json!(["test/hold"]);
    create(
        &h,
        &item(
            "patches",
            json!({"manifests": [{"manifest": held,
        "patchAfterDeployment": {"data": {"key1": "val1b", "key3": "val3"}},
        "patchBeforeDelete": {"data": {"key4": "val4"}}}]}),
        ),
    )
    .await;
    assert_eq!(
        wait_done(&h, "patches").await.status().phase,
        Phase::Succeeded
    );
    assert_eq!(
        configmap(&h, "patched").await.unwrap()["data"],
        json!({"key1": "val1b", "key2": "val2", "key3": "val3"})
    );
    delete_item(&h, "patches").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let c = configmap(&h, "patched").await.unwrap();
        if c["metadata"]["deletionTimestamp"].is_string() {
            assert_eq!(c["data"].as_object().unwrap().len(), 4);
            assert_eq!(c["data"]["key4"], "val4");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    merge(
        &h,
        "v1",
        "ConfigMap",
        Some("default"),
        "patched",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    h.wait_gone("default", "patches", Duration::from_secs(30))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_list_manifest_then_each_item_is_applied_and_an_empty_list_is_fine() {
    let h = Harness::start().await;
    create(&h, &item("list", json!({"manifests": [
        {"manifest": {"apiVersion": "v1", "kind": "List", "items": [cm("l1", json!({})), cm("l2", json!({}))]},
         "annotateBeforeCreate": {"from": "list"}},
        {"manifest": {"apiVersion": "v1", "kind": "List", "items": []}}]}))).await;
    let i = wait_done(&h, "list").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    assert_eq!(managed_names(&i), vec!["l1", "l2"]);
    for n in ["l1", "l2"] {
        assert_eq!(
            configmap(&h, n).await.unwrap()["metadata"]["annotations"]["from"],
            "list"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_target_with_a_secret_ref_then_the_item_deploys_through_the_kubeconfig_in_the_secret()
 {
    let h = Harness::start().await;
    // Given a Secret holding the cluster's kubeconfig under `kubeconfig`, one Target naming
    // that key and one taking every key of the Secret (content `{"kubeconfig": …}`),
    create_secret(
        &h,
        "cluster-access",
        json!({"kubeconfig": h.target_kubeconfig}),
    )
    .await;
    create_target(
        &h,
        "by-key",
        json!({"secretRef": {"name": "cluster-access", "key": "kubeconfig"}}),
    )
    .await;
    create_target(
        &h,
        "all-keys",
        json!({"secretRef": {"name": "cluster-access"}}),
    )
    .await;
    for (target, name) in [("by-key", "via-key"), ("all-keys", "via-all-keys")] {
        // when an item deploys through the Target,
        create(
            &h,
            &item_on(
                name,
                target,
                json!({"manifests": [{"manifest": cm(name, json!({"target": target}))}]}),
            ),
        )
        .await;
        // then it succeeds and the object exists in the cluster,
        let i = wait_done(&h, name).await;
        assert_eq!(
            i.status().phase,
            Phase::Succeeded,
            "{target}: {:?}",
            i.status().last_error
        );
        assert_eq!(configmap(&h, name).await.unwrap()["data"]["target"], target);
        // and the delete reaches the same cluster.
        delete_item(&h, name).await;
        h.wait_gone("default", name, Duration::from_secs(30)).await;
        assert!(configmap(&h, name).await.is_none(), "{target}");
    }

    // A Target whose Secret does not exist: the error names the Secret and the job is retried.
    create_target(
        &h,
        "no-secret",
        json!({"secretRef": {"name": "missing-access", "key": "kubeconfig"}}),
    )
    .await;
    create(
        &h,
        &item_on(
            "via-missing",
            "no-secret",
            json!({"manifests": [{"manifest": cm("never", json!({}))}]}),
        ),
    )
    .await;
    let i = h
        .wait_for("default", "via-missing", Duration::from_secs(20), |i| {
            i.status().last_error.is_some()
        })
        .await;
    let err = i.status().last_error.unwrap();
    assert_eq!(err.reason, "ResolveTarget");
    assert!(err.message.contains("missing-access"), "{}", err.message);
    assert_ne!(i.status().phase, Phase::Succeeded);
    assert!(configmap(&h, "never").await.is_none());
}

// ---- readiness (readiness_check_test.go, defaultreadinesscheck_test.go) ------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_custom_check_then_the_job_waits_until_the_object_becomes_ready() {
    let h = Harness::start().await;
    create(&h, &item("wait-ready", json!({"manifests": [{"manifest": cm("wr", json!({"ready": "false"})), "policy": "immutable"}],
        "readinessChecks": {"custom": [{"name": "ready-key",
            "resourceSelector": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "wr", "namespace": "default"}],
            "requirements": [{"jsonPath": ".data.ready", "operator": "=", "values": [{"value": "true"}]}]}]}}))).await;
    let i = h
        .wait_for("default", "wait-ready", Duration::from_secs(20), |i| {
            i.status().phase == Phase::Progressing
        })
        .await;
    assert_ne!(i.status().job_id, i.status().job_id_finished);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_ne!(
        h.items("default")
            .get("wait-ready")
            .await
            .unwrap()
            .status()
            .phase,
        Phase::Succeeded
    );
    merge(
        &h,
        "v1",
        "ConfigMap",
        Some("default"),
        "wr",
        json!({"data": {"ready": "true"}}),
    )
    .await;
    assert_eq!(
        wait_done(&h, "wait-ready").await.status().phase,
        Phase::Succeeded
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_every_operator_and_a_label_selector_then_matching_checks_pass_and_a_mismatch_times_out()
 {
    let h = Harness::start().await;
    let mut labelled = cm("ops", json!({"key": "val", "n": "1"}));
    labelled["metadata"]["labels"] = json!({"app": "ops"});
    let req = |path: &str, op: &str, values: Value| json!({"jsonPath": path, "operator": op, "values": values});
    create(&h, &item("ops", json!({"manifests": [{"manifest": labelled}],
        "readinessChecks": {"custom": [{"name": "all-ops",
            "labelSelector": {"apiVersion": "v1", "kind": "ConfigMap", "matchLabels": {"app": "ops"}},
            "requirements": [
                req(".data.key", "=", json!([{"value": "val"}])),
                req(".data.key", "==", json!([{"value": "val"}])),
                req(".data.key", "!=", json!([{"value": "other"}])),
                req(".data.key", "in", json!([{"value": "x"}, {"value": "val"}])),
                req(".data.key", "notin", json!([{"value": "x"}, {"value": "y"}])),
                req(".data.n", "exists", json!([])),
                req(".data.missing", "!", json!([]))]}]}}))).await;
    assert_eq!(wait_done(&h, "ops").await.status().phase, Phase::Succeeded);

    let mut mismatch = item(
        "mismatch",
        json!({"manifests": [{"manifest": cm("mm", json!({"key": "val"}))}],
        "readinessChecks": {"custom": [{"name": "never",
            "resourceSelector": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "mm", "namespace": "default"}],
            "requirements": [req(".data.key", "=", json!([{"value": "other"}]))]}]}}),
    );
    // Long enough that the next step comes before the timeout even on a busy real server:
    // the plugin's own wait, not the host's start checkpoint, must be the one that ends it.
    mismatch["spec"]["timeout"] = json!("3s");
    create(&h, &mismatch).await;
    let s = wait_done(&h, "mismatch").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    // The wait ends at its own checkpoint (contract 6.5).
    assert_eq!(err.operation, "WaitForObjectsReady");
    assert_eq!(err.reason, "ProgressingTimeout");
    assert_eq!(
        err.message,
        r#"timeout at: "deployer: during readiness check""#
    );
    assert!(err.codes.contains(&codes::TIMEOUT.to_string()), "{err:?}");
    assert!(
        err.codes.contains(&codes::FOR_INFO_ONLY.to_string()),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_deployment_then_the_default_check_waits_for_its_status() {
    let h = Harness::start().await;
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    create(
        &h,
        &item("deploy", json!({"manifests": [{"manifest": deploy}]})),
    )
    .await;
    h.wait_for("default", "deploy", Duration::from_secs(20), |i| {
        i.status().phase == Phase::Progressing
    })
    .await;
    let live = get(&h, "apps/v1", "Deployment", Some("default"), "web")
        .await
        .unwrap();
    let generation = live["metadata"]["generation"].as_i64().unwrap_or(1);
    let status = json!({"status": {"observedGeneration": generation, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2, "readyReplicas": 2}});
    manifest::api(&h.client, "apps/v1", "Deployment", Some("default"))
        .patch_status(
            "web",
            &Default::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .unwrap();
    assert_eq!(
        wait_done(&h, "deploy").await.status().phase,
        Phase::Succeeded
    );
}

/// Given three new ConfigMaps, then each costs one request (a create: no read before it, as the
/// item did not manage it, and no readiness read after it, as its kind has no readiness rule);
/// when the config changes, then the three it now manages are read, then updated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_three_new_configmaps_then_each_costs_one_create_and_managed_ones_a_read_and_an_update()
 {
    skip_on_real!("counts requests at the embedded API server");
    let h = Harness::start().await;
    let server = h.server.clone().expect("embedded");
    server.reset_stats();
    let config = |value: &str| {
        let manifests: Vec<Value> = ["a", "b", "c"]
            .iter()
            .map(|n| json!({"manifest": cm(&format!("cm-{n}"), json!({"k": value}))}))
            .collect();
        json!({"manifests": manifests})
    };
    create(&h, &item("three", config("1"))).await;
    let i = wait_done(&h, "three").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    let stats = server.stats();
    assert_eq!(stats.count("create", "configmaps"), 3, "{stats:?}");
    assert_eq!(
        stats.count("get", "configmaps"),
        0,
        "new objects are created without a read ({stats:?})"
    );

    server.reset_stats();
    // (`item` fills in the config's apiVersion and kind)
    let first = set_config(&h, "three", &item("three", config("2"))["spec"]["config"]).await;
    let i = wait_next_job(&h, "three", &first).await;
    assert_eq!(i.status().phase, Phase::Succeeded);
    let stats = server.stats();
    assert_eq!(stats.count("get", "configmaps"), 3, "{stats:?}");
    assert_eq!(stats.count("update", "configmaps"), 3, "{stats:?}");
    assert_eq!(stats.count("create", "configmaps"), 0, "{stats:?}");
    let b = get(&h, "v1", "ConfigMap", Some("default"), "cm-b")
        .await
        .unwrap();
    assert_eq!(b["data"]["k"], "2");
}

/// A workload of `kind` named `name` with `replicas` (none for Pods), selecting `app: <name>`.
fn workload(api_version: &str, kind: &str, name: &str, extra_spec: Value) -> Value {
    let labels = json!({"app": name});
    let pod_spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
    let mut spec = if kind == "Pod" {
        pod_spec
    } else {
        let selector = if kind == "ReplicationController" {
            labels.clone()
        } else {
            json!({"matchLabels": labels})
        };
        json!({"selector": selector, "template": {"metadata": {"labels": labels}, "spec": pod_spec}})
    };
    if kind == "StatefulSet" {
        spec["serviceName"] = json!(name);
    }
    extend_object(&mut spec, extra_spec);
    json!({"apiVersion": api_version, "kind": kind,
           "metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": spec})
}

fn extend_object(into: &mut Value, from: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), from) {
        a.extend(b);
    }
}

/// Sets the status subresource of a workload (merge patch), with `observedGeneration` current.
async fn set_status(h: &Harness, api_version: &str, kind: &str, name: &str, mut status: Value) {
    let live = get(h, api_version, kind, Some("default"), name)
        .await
        .unwrap();
    if kind != "Pod" {
        status["observedGeneration"] = live["metadata"]["generation"].clone();
    }
    manifest::api(&h.client, api_version, kind, Some("default"))
        .patch_status(
            name,
            &Default::default(),
            &kube::api::Patch::Merge(&json!({"status": status})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_each_workload_kind_then_the_default_check_keeps_the_item_progressing_until_its_status_is_ready()
 {
    let h = Harness::start().await;
    // Kubernetes before 1.22 (the real backend's 1.20) drops a StatefulSet's
    // status.availableReplicas: readyReplicas count there.
    let version = h.client.apiserver_version().await.expect("/version");
    let minor: u32 = version
        .minor
        .trim_end_matches('+')
        .parse()
        .expect("minor version");
    let keeps_available_replicas = version.major != "1" || minor >= 22;
    // (apiVersion, kind, extra spec, a not-ready status and why, a ready status), contract 6.5
    let cases = [
        (
            "v1",
            "Pod",
            json!({}),
            json!({"conditions": [{"type": "Ready", "status": "False"}]}),
            "condition Ready is not True",
            json!({"conditions": [{"type": "Ready", "status": "True"}]}),
        ),
        (
            "apps/v1",
            "StatefulSet",
            json!({"replicas": 2}),
            json!({"replicas": 2, "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 1}),
            if keeps_available_replicas {
                "availableReplicas is 1, want 2"
            } else {
                "readyReplicas is 1, want 2"
            },
            json!({"replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}),
        ),
        (
            "apps/v1",
            "DaemonSet",
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}}}),
            json!({"desiredNumberScheduled": 4, "currentNumberScheduled": 1, "numberMisscheduled": 0, "numberReady": 1}),
            "1 of 4 pods scheduled (maxUnavailable 2)",
            json!({"desiredNumberScheduled": 4, "currentNumberScheduled": 2, "numberMisscheduled": 0, "numberReady": 2}),
        ),
        (
            "apps/v1",
            "ReplicaSet",
            json!({"replicas": 2}),
            json!({"replicas": 2, "readyReplicas": 2, "conditions": [{"type": "ReplicaFailure", "status": "True", "message": "quota exceeded"}]}),
            "ReplicaFailure: quota exceeded",
            json!({"replicas": 2, "readyReplicas": 2, "conditions": [{"type": "ReplicaFailure", "status": "False"}]}),
        ),
        (
            "v1",
            "ReplicationController",
            json!({"replicas": 1}),
            json!({"replicas": 1, "readyReplicas": 0}),
            "0 of 1 replicas ready",
            json!({"replicas": 1, "readyReplicas": 1}),
        ),
    ];
    // Given one item per kind (no workload simulator: nothing sets a status but the test),
    for (api_version, kind, extra, ..) in &cases {
        let name = kind.to_ascii_lowercase();
        create(&h, &item(&name, json!({"manifests": [{"manifest": workload(api_version, kind, &name, extra.clone())}]}))).await;
    }
    for (api_version, kind, _, not_ready, why, ready) in cases {
        let name = kind.to_ascii_lowercase();
        // when the object has no status, then the item waits for it,
        wait_waiting_for(&h, &name, &format!("{kind} default/{name} is not ready")).await;
        // when its status is not ready by the kind's rule, then it still waits, for that reason,
        set_status(&h, api_version, kind, &name, not_ready).await;
        let i = wait_waiting_for(&h, &name, why).await;
        assert_eq!(i.status().phase, Phase::Progressing, "{kind}");
        // and when the status is ready, then the item succeeds.
        set_status(&h, api_version, kind, &name, ready).await;
        let i = wait_done(&h, &name).await;
        assert_eq!(
            i.status().phase,
            Phase::Succeeded,
            "{kind}: {:?}",
            i.status().last_error
        );
    }

    // A Pod that ran to completion is ready too (reason PodCompleted).
    create(
        &h,
        &item(
            "completed",
            json!({"manifests": [{"manifest": workload("v1", "Pod", "completed", json!({}))}]}),
        ),
    )
    .await;
    wait_waiting_for(&h, "completed", "Pod default/completed is not ready").await;
    set_status(&h, "v1", "Pod", "completed",
        json!({"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted"}]})).await;
    assert_eq!(
        wait_done(&h, "completed").await.status().phase,
        Phase::Succeeded
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_workload_simulator_then_every_simulated_kind_is_ready_and_a_replication_controller_waits_for_its_status()
 {
    skip_on_real!(
        "the workload simulator is the embedded server's (a bare kube-apiserver runs no kubelet or controllers)"
    );
    let h = Harness::start().await;
    // Given the API server plays kubelet and the workload controllers (Pods, Deployments,
    // StatefulSets, DaemonSets, ReplicaSets — not ReplicationControllers),
    h.server
        .as_ref()
        .expect("embedded")
        .set_simulate_workloads(true);
    let one = json!({"replicas": 1});
    let manifests: Vec<Value> = [
        workload("v1", "Pod", "sim-pod", json!({})),
        workload("apps/v1", "Deployment", "sim-deploy", one.clone()),
        workload("apps/v1", "StatefulSet", "sim-sts", one.clone()),
        workload("apps/v1", "DaemonSet", "sim-ds", json!({})),
        workload("apps/v1", "ReplicaSet", "sim-rs", one.clone()),
        workload("v1", "ReplicationController", "sim-rc", one),
    ]
    .into_iter()
    .map(|m| json!({"manifest": m}))
    .collect();
    // when one item deploys one of each,
    create(&h, &item("simulated", json!({"manifests": manifests}))).await;
    // then it waits only for the ReplicationController (checked after the simulated kinds
    // before it in the managed list),
    wait_waiting_for(
        &h,
        "simulated",
        "ReplicationController default/sim-rc is not ready",
    )
    .await;
    // and succeeds once that has a ready status.
    set_status(
        &h,
        "v1",
        "ReplicationController",
        "sim-rc",
        json!({"replicas": 1, "readyReplicas": 1}),
    )
    .await;
    let i = wait_done(&h, "simulated").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    assert_eq!(managed(&i).len(), 6);
}

// ---- exports (export_test.go, exporter_test.go) -----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_exports_then_values_come_from_json_paths_and_object_refs() {
    let h = Harness::start().await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sa-token", "namespace": "default"},
        "stringData": {"token": "t0k3n"}});
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "default"},
        "secrets": [{"name": "sa-token"}]});
    create(&h, &item("exports", json!({"manifests": [{"manifest": cm("my-cm", json!({"a": "1"}))}, {"manifest": secret}, {"manifest": sa}],
        "exports": {"exports": [
            {"key": "my-cm-data", "jsonPath": ".data", "fromResource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "my-cm", "namespace": "default"}},
            {"key": "nested.token", "jsonPath": ".secrets[0]", "fromResource": {"apiVersion": "v1", "kind": "ServiceAccount", "name": "sa", "namespace": "default"},
             "fromObjectRef": {"apiVersion": "v1", "kind": "Secret", "jsonPath": ".data.token"}}]}}))).await;
    let i = wait_done(&h, "exports").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    let export = i.status().export_ref.unwrap();
    let s = get(&h, "v1", "Secret", Some("default"), &export.name)
        .await
        .unwrap();
    let config: Value =
        serde_json::from_str(&base64_decode(s["data"]["config"].as_str().unwrap())).unwrap();
    assert_eq!(config["my-cm-data"], json!({"a": "1"}));
    assert_eq!(
        base64_decode(config["nested"]["token"].as_str().unwrap()),
        "t0k3n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_exports_from_objects_created_later_then_the_job_calls_again_until_they_exist() {
    let h = Harness::start().await;
    // Given an item exporting from a ConfigMap and, through a ServiceAccount's secret
    // reference, from a Secret — none of which exist (they are not among its manifests),
    let r = |kind: &str, name: &str| json!({"apiVersion": "v1", "kind": kind, "name": name, "namespace": "default"});
    create(&h, &item("late", json!({"manifests": [{"manifest": cm("late-own", json!({}))}],
        "exports": {"exports": [
            {"key": "late.value", "jsonPath": ".data.value", "fromResource": r("ConfigMap", "late-cm")},
            {"key": "late.token", "jsonPath": ".secrets[0]", "fromResource": r("ServiceAccount", "late-sa"),
             "fromObjectRef": {"apiVersion": "v1", "kind": "Secret", "jsonPath": ".data.token"}}]}}))).await;

    // when it runs, then it waits for the ConfigMap with short calls ("call again"), not
    // inside one long call,
    wait_waiting_for(&h, "late", "ConfigMap default/late-cm does not exist").await;
    let calls = || h.deployer.stats.plugin_calls.load(Ordering::Relaxed);
    let before = calls();
    wait_waiting_for(&h, "late", "late-cm does not exist").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while calls() < before + 2 {
        assert!(tokio::time::Instant::now() < deadline, "no further calls");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        h.items("default").get("late").await.unwrap().status().phase,
        Phase::Progressing
    );
    // once the ConfigMap exists without the value, it waits for the value (updated later),
    put(&h, cm("late-cm", json!({"other": "x"}))).await;
    wait_waiting_for(
        &h,
        "late",
        "ConfigMap default/late-cm has no value at .data.value",
    )
    .await;
    merge(
        &h,
        "v1",
        "ConfigMap",
        Some("default"),
        "late-cm",
        json!({"data": {"value": "v"}}),
    )
    .await;
    // then for the ServiceAccount, then for the Secret it references,
    wait_waiting_for(&h, "late", "ServiceAccount default/late-sa does not exist").await;
    put(&h, json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "late-sa", "namespace": "default"}, "secrets": [{"name": "late-token"}]})).await;
    wait_waiting_for(
        &h,
        "late",
        "fromObjectRef: Secret default/late-token does not exist",
    )
    .await;
    create_secret(&h, "late-token", json!({"token": "t0k3n"})).await;

    // and once everything exists the job succeeds with both values.
    let i = wait_done(&h, "late").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    let config = export_config(&h, &i).await;
    assert_eq!(config["late"]["value"], "v");
    assert_eq!(
        base64_decode(config["late"]["token"].as_str().unwrap()),
        "t0k3n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_export_whose_object_never_appears_then_the_job_fails_with_err_timeout_at_the_export()
 {
    let h = Harness::start().await;
    // Given an item with a 2 s progressing timeout exporting from a ConfigMap nobody creates,
    let mut never = item(
        "never",
        json!({"manifests": [{"manifest": cm("never-own", json!({}))}],
        "exports": {"exports": [{"key": "never", "jsonPath": ".data",
            "fromResource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "never-cm", "namespace": "default"}}]}}),
    );
    never["spec"]["timeout"] = json!("2s");
    create(&h, &never).await;
    // when the timeout runs out while waiting, then the job fails at the export's checkpoint
    // (contract 6.7: operation Export, ProgressingTimeout, ERR_TIMEOUT),
    let i = wait_done(&h, "never").await;
    let s = i.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.clone().unwrap();
    assert_eq!(err.operation, "Export");
    assert_eq!(err.reason, "ProgressingTimeout");
    assert_eq!(
        err.message,
        r#"timeout at: "deployer: during export - key: never""#
    );
    assert_eq!(err.codes, vec![codes::TIMEOUT.to_string()]);
    // and the condition still says what it waited for.
    assert!(
        waiting_for(&i).contains("ConfigMap default/never-cm does not exist"),
        "{}",
        waiting_for(&i)
    );
    assert!(s.export_ref.is_none());
}

// ---- object applier outcomes (objectapplier_test.go) ------------------------------------------

async fn strategy_outcome(h: &Harness, name: &str, strategy: &str) -> Value {
    let cm_name = format!("s-{name}");
    let mut desired = cm(&cm_name, json!({"a": "1", "b": "1"}));
    desired["metadata"]["labels"] = json!({"l": "1"});
    create(
        h,
        &item(
            name,
            json!({"updateStrategy": strategy, "manifests": [{"manifest": desired.clone()}]}),
        ),
    )
    .await;
    wait_done(h, name).await;
    merge(h, "v1", "ConfigMap", Some("default"), &cm_name,
        json!({"metadata": {"labels": {"external": "x"}, "annotations": {"external": "x"}}, "data": {"external": "x", "a": "changed"}})).await;
    desired["data"] = json!({"a": "2", "b": "2"});
    let old = set_config(
        h,
        name,
        &json!({"apiVersion": V1ALPHA2, "kind": "ProviderConfiguration",
        "updateStrategy": strategy, "manifests": [{"manifest": desired}]}),
    )
    .await;
    let i = wait_next_job(h, name, &old).await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{strategy}: {:?}",
        i.status().last_error
    );
    configmap(h, &cm_name).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_external_changes_then_each_update_strategy_has_its_documented_outcome() {
    let h = Harness::start().await;
    let u = strategy_outcome(&h, "update", "update").await;
    assert_eq!(u["data"], json!({"a": "2", "b": "2"}), "update replaces");
    assert!(u["metadata"]["annotations"].get("external").is_none());
    assert_eq!(u["metadata"]["labels"][OWNER_LABEL], "update");

    let p = strategy_outcome(&h, "patch", "patch").await;
    assert_eq!(
        p["data"],
        json!({"a": "2", "b": "2", "external": "x"}),
        "patch keeps foreign fields"
    );
    assert_eq!(p["metadata"]["annotations"]["external"], "x");

    let m = strategy_outcome(&h, "merge", "merge").await;
    assert_eq!(
        m["data"],
        json!({"a": "changed", "b": "1", "external": "x"}),
        "merge keeps live values"
    );
    assert_eq!(m["metadata"]["labels"]["external"], "x");

    let o = strategy_outcome(&h, "overwrite", "mergeOverwrite").await;
    assert_eq!(
        o["data"],
        json!({"a": "2", "b": "2", "external": "x"}),
        "mergeOverwrite: manifest wins"
    );
    assert_eq!(o["metadata"]["labels"]["external"], "x");
}

// ---- v1alpha1 and deletion groups -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_v1alpha1_config_then_exports_and_deletion_groups_survive_the_conversion() {
    let h = Harness::start().await;
    create(&h, &item("v1a1", json!({
        "apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha1", "kind": "ProviderConfiguration",
        "manifests": [cm("v1a1-cm", json!({"x": "y"}))],
        "exports": {"exports": [{"key": "x", "jsonPath": ".data.x",
            "fromResource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "v1a1-cm", "namespace": "default"}}]},
        "deletionGroups": [{"customResourceGroup": {"resources": [{"apiVersion": "v1", "kind": "configmaps"}]}}]}))).await;
    let i = wait_done(&h, "v1a1").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    assert!(i.status().export_ref.is_some(), "exports kept");
    delete_item(&h, "v1a1").await;
    h.wait_gone("default", "v1a1", Duration::from_secs(30))
        .await;
    assert!(
        configmap(&h, "v1a1-cm").await.is_none(),
        "deleted through the plural-named group"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_deletion_groups_then_groups_are_deleted_in_order_and_unmatched_objects_last() {
    let h = Harness::start().await;
    let mut first = cm("dg-first", json!({}));
    first["metadata"]["finalizers"] = json!(["test/hold"]);
    create(&h, &item("groups", json!({"manifests": [{"manifest": first}, {"manifest": cm("dg-second", json!({}))},
            {"manifest": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "dg-unmatched", "namespace": "default"}}}],
        "deletionGroups": [
            {"customResourceGroup": {"resources": [{"apiVersion": "v1", "kind": "ConfigMap", "names": ["dg-first"]}]}},
            {"customResourceGroup": {"resources": [{"apiVersion": "v1", "kind": "configmap"}]}}]}))).await;
    wait_done(&h, "groups").await;
    delete_item(&h, "groups").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The first group is held by its finalizer: the second has not started.
    assert!(configmap(&h, "dg-second").await.is_some());
    merge(
        &h,
        "v1",
        "ConfigMap",
        Some("default"),
        "dg-first",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    h.wait_gone("default", "groups", Duration::from_secs(30))
        .await;
    assert!(configmap(&h, "dg-second").await.is_none());
    assert!(
        get(&h, "v1", "Secret", Some("default"), "dg-unmatched")
            .await
            .is_none()
    );
}
