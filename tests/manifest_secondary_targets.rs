//! Secondary Targets of the manifest deployer (contract 1.4 last paragraph, 6.5 `targetName` of
//! custom readiness checks, 6.6 `customResourceGroup.targetName` with `deleteAllResources`,
//! 6.7 export `targetName`), with two clusters: the harness' API server (the item's Target) and
//! a second one as the cluster of Target `other` (embedded and registered in-process, or a
//! second real kube-apiserver reached through its kubeconfig).

use std::time::Duration;

use deployer_host::landscaper::{Phase, codes};
use embedded_apiserver::ApiServer;
use kube::Client;
use manifest::*;
use serde_json::{Value, json};
use test_support::Harness;
use test_support::manifest;

/// The second cluster; a real one stops when this drops.
struct SecondCluster {
    client: Client,
    _real: Option<test_support::RealApiServer>,
}

impl std::ops::Deref for SecondCluster {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

/// Starts a second cluster and makes it the cluster of Target `name` in `default`, with the
/// kubeconfig inline (`spec.config`) or in a Secret (`spec.secretRef`).
async fn second_cluster(h: &Harness, name: &str, by_secret: bool) -> SecondCluster {
    let (client, kubeconfig, real) = match test_support::backend() {
        test_support::Backend::Embedded => {
            let server = ApiServer::new(Default::default()).expect("second api server");
            let client = server.client();
            let kubeconfig =
                ApiServer::kubeconfig_yaml(&format!("http://{name}.cluster.invalid:6443"));
            h.target_clients.register(&kubeconfig, client.clone());
            (client, kubeconfig, None)
        }
        test_support::Backend::Real => {
            let real = test_support::RealApiServer::start("AlwaysAllow");
            let client = real.client().await;
            (client, real.kubeconfig.clone(), Some(real))
        }
    };
    if by_secret {
        let secret = format!("{name}-access");
        create_secret(h, &secret, json!({"kubeconfig": kubeconfig})).await;
        create_target(
            h,
            name,
            json!({"secretRef": {"name": secret, "key": "kubeconfig"}}),
        )
        .await;
    } else {
        create_target(h, name, json!({"config": {"kubeconfig": kubeconfig}})).await;
    }
    SecondCluster {
        client,
        _real: real,
    }
}

fn cm_ref(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "namespace": "default"})
}

fn ready_is_true() -> Value {
    json!([{"jsonPath": ".data.ready", "operator": "==", "values": [{"value": "true"}]}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_readiness_checks_with_target_name_then_the_objects_are_read_on_that_target() {
    let h = Harness::start().await;
    let other = second_cluster(&h, "other", false).await;
    // Given a ConfigMap `gate` that is ready on the item's cluster but absent on `other`,
    put(&h, cm("gate", json!({"ready": "true"}))).await;
    // when an item checks `gate` on Target `other`, by name and by label,
    create(
        &h,
        &item(
            "gated",
            json!({"manifests": [{"manifest": cm("app", json!({}))}],
            "readinessChecks": {"custom": [
                {"name": "by-name", "targetName": "other", "resourceSelector": [cm_ref("gate")],
                 "requirements": ready_is_true()},
                {"name": "by-label", "targetName": "other",
                 "labelSelector": {"apiVersion": "v1", "kind": "ConfigMap", "matchLabels": {"role": "gate"}},
                 "requirements": ready_is_true()}]}}),
        ),
    )
    .await;
    // then it waits for `gate` there,
    wait_waiting_for(
        &h,
        "gated",
        r#"check "by-name": ConfigMap gate does not exist on Target "other""#,
    )
    .await;
    // then, once `gate` exists there but is not ready, for its value there,
    let mut gate = cm("gate", json!({"ready": "false"}));
    gate["metadata"]["labels"] = json!({"role": "gate"});
    put_on(&other, gate.clone()).await;
    wait_waiting_for(
        &h,
        "gated",
        r#"ConfigMap default/gate on Target "other": .data.ready is "false""#,
    )
    .await;
    // and it succeeds once `gate` is ready on `other`.
    gate["data"]["ready"] = json!("true");
    put_on(&other, gate).await;
    let i = wait_done(&h, "gated").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    // The manifests themselves went to the item's Target only.
    assert!(configmap(&h, "app").await.is_some());
    assert!(
        get_on(&other, "v1", "ConfigMap", Some("default"), "app")
            .await
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_exports_with_target_name_then_the_values_come_from_that_target() {
    let h = Harness::start().await;
    // (Target `other` through a secretRef this time.)
    let other = second_cluster(&h, "other", true).await;
    // Given `info` and a ServiceAccount → Secret chain on both clusters, with different values,
    for (client, who) in [(&h.client, "item"), (&other.client, "other")] {
        put_on(client, cm("info", json!({"who": who}))).await;
        put_on(
            client,
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "reader", "namespace": "default"}, "secrets": [{"name": "reader-token"}]}),
        )
        .await;
        put_on(
            client,
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "reader-token", "namespace": "default"}, "stringData": {"token": who}}),
        )
        .await;
    }
    // when an item exports from `other` (directly and via fromObjectRef) and from its own Target,
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "name": "reader", "namespace": "default"});
    create(
        &h,
        &item(
            "exports-other",
            json!({"manifests": [{"manifest": cm("exports-own", json!({}))}],
            "exports": {"exports": [
                {"key": "other.who", "jsonPath": ".data.who", "targetName": "other", "fromResource": cm_ref("info")},
                {"key": "other.token", "jsonPath": ".secrets[0]", "targetName": "other", "fromResource": sa,
                 "fromObjectRef": {"apiVersion": "v1", "kind": "Secret", "jsonPath": ".data.token"}},
                {"key": "mine", "jsonPath": ".data.who", "fromResource": cm_ref("info")}]}}),
        ),
    )
    .await;
    // then each value comes from the Target its export names.
    let i = wait_done(&h, "exports-other").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    let config = export_config(&h, &i).await;
    assert_eq!(config["other"]["who"], "other");
    assert_eq!(
        base64_decode(config["other"]["token"].as_str().unwrap()),
        "other"
    );
    assert_eq!(config["mine"], "item");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_deletion_group_on_another_target_then_the_uninstall_deletes_there_first() {
    let h = Harness::start().await;
    let other = second_cluster(&h, "other", false).await;
    // Given `other` holds `leftover-1` (held by a finalizer), `leftover-2` and `keep-me`, and
    // the item's own cluster an unmanaged `leftover-1` too,
    let mut held = cm("leftover-1", json!({}));
    held["metadata"]["finalizers"] = json!(["test/hold"]);
    put_on(&other, held).await;
    put_on(&other, cm("leftover-2", json!({}))).await;
    put_on(&other, cm("keep-me", json!({}))).await;
    put(&h, cm("leftover-1", json!({}))).await;
    // and an item whose first deletion group deletes both leftovers on `other`,
    create(
        &h,
        &item(
            "cleaner",
            json!({"manifests": [{"manifest": cm("cleaner-cm", json!({}))}],
            "deletionGroups": [
                {"customResourceGroup": {"targetName": "other", "deleteAllResources": true,
                    "resources": [{"apiVersion": "v1", "kind": "ConfigMap", "namespaces": ["default"],
                                   "names": ["leftover-1", "leftover-2"]}]}},
                {"predefinedResourceGroup": {"type": "namespaced-resources"}}]}),
        ),
    )
    .await;
    let i = wait_done(&h, "cleaner").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );

    // when the item is deleted,
    delete_item(&h, "cleaner").await;
    // then the group on `other` goes first and waits for the held ConfigMap there, while the
    // item's own ConfigMap is still untouched,
    let i = wait_waiting_for(
        &h,
        "cleaner",
        r#"ConfigMap default/leftover-1 on Target "other""#,
    )
    .await;
    assert_eq!(i.status().phase, Phase::Deleting);
    assert!(
        managed(&i)
            .iter()
            .any(|m| m["targetName"] == "other" && m["resource"]["name"] == "leftover-1"),
        "{:?}",
        managed(&i)
    );
    assert!(
        get_on(&other, "v1", "ConfigMap", Some("default"), "leftover-2")
            .await
            .is_none()
    );
    let held = get_on(&other, "v1", "ConfigMap", Some("default"), "leftover-1")
        .await
        .unwrap();
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    assert!(configmap(&h, "cleaner-cm").await.is_some());
    // and once it is gone, the item's own objects are deleted and the item disappears.
    api(&other, "v1", "ConfigMap", Some("default"))
        .patch(
            "leftover-1",
            &Default::default(),
            &kube::api::Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    h.wait_gone("default", "cleaner", Duration::from_secs(30))
        .await;
    assert!(configmap(&h, "cleaner-cm").await.is_none());
    assert!(
        get_on(&other, "v1", "ConfigMap", Some("default"), "leftover-1")
            .await
            .is_none()
    );
    // Objects the group does not name, and the item cluster's namesake, are left alone.
    assert!(
        get_on(&other, "v1", "ConfigMap", Some("default"), "keep-me")
            .await
            .is_some()
    );
    assert!(configmap(&h, "leftover-1").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_missing_or_invalid_secondary_target_then_the_error_names_it() {
    let h = Harness::start().await;
    // A Target that does not exist (yet): the check waits, naming the Target.
    create(
        &h,
        &item(
            "no-target",
            json!({"manifests": [{"manifest": cm("nt", json!({}))}],
            "readinessChecks": {"custom": [{"name": "c", "targetName": "nowhere",
                "resourceSelector": [cm_ref("nt")], "requirements": [{"jsonPath": ".data", "operator": "exists"}]}]}}),
        ),
    )
    .await;
    wait_waiting_for(
        &h,
        "no-target",
        r#"secondary Target "nowhere" not found in namespace "default""#,
    )
    .await;

    // A Target whose kubeconfig runs an exec plugin: validated like the item's own Target,
    // the job fails at once with ERR_CONFIGURATION_PROBLEM.
    let exec_kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://exec.invalid'}\nusers:\n- name: u\n  user:\n    exec: {command: get-token, apiVersion: client.authentication.k8s.io/v1}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";
    create_target(
        &h,
        "exec",
        json!({"config": {"kubeconfig": exec_kubeconfig}}),
    )
    .await;
    create(
        &h,
        &item(
            "exec-target",
            json!({"manifests": [{"manifest": cm("et", json!({}))}],
            "exports": {"exports": [{"key": "k", "jsonPath": ".data", "targetName": "exec", "fromResource": cm_ref("et")}]}}),
        ),
    )
    .await;
    let s = wait_done(&h, "exec-target").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.reason, "ValidateTarget", "{err:?}");
    assert!(
        err.codes
            .contains(&codes::CONFIGURATION_PROBLEM.to_string()),
        "{err:?}"
    );
    assert!(
        err.message.contains(r#"secondary Target "exec""#) && err.message.contains("exec"),
        "{}",
        err.message
    );

    // A custom deletion group on another Target that would only delete managed objects is
    // rejected by validation (contract 6.6).
    create(
        &h,
        &item(
            "bad-group",
            json!({"manifests": [{"manifest": cm("bg", json!({}))}],
            "deletionGroups": [{"customResourceGroup": {"targetName": "other",
                "resources": [{"apiVersion": "v1", "kind": "ConfigMap"}]}}]}),
        ),
    )
    .await;
    let s = wait_done(&h, "bad-group").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.reason, "ValidateProviderConfiguration");
    assert!(
        err.message.contains(
            "deletionGroups[0].customResourceGroup.targetName: only allowed with deleteAllResources: true"
        ),
        "{}",
        err.message
    );
}

/// The helm deployer reads secondary Targets with the manifest deployer's code (the applier's
/// readiness checks and exports): a custom readiness check and an export with `targetName` on a
/// helm item read the cluster of that Target, not the release's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_helm_item_with_target_name_checks_and_exports_then_they_read_that_target() {
    let h = Harness::start().await;
    let other = second_cluster(&h, "other", false).await;
    // Given `info` on both clusters, with different values, and `gate` ready only on `other` …
    for (client, who) in [(&h.client, "item"), (&other.client, "other")] {
        put_on(client, cm("info", json!({"who": who}))).await;
    }
    put_on(&other, cm("gate", json!({"ready": "true"}))).await;
    // … when a helm item checks `gate` on `other` and exports `info` from there and from its own
    // cluster …
    let config = json!({
        "apiVersion": "helm.deployer.landscaper.gardener.cloud/v1alpha1",
        "kind": "ProviderConfiguration",
        "name": "secondary", "namespace": "secondary", "createNamespace": true,
        "chart": {"archive": {"raw": test_support::chart_repo::archive_raw("web", "0.1.0")}},
        "values": {"service": false},
        "readinessChecks": {"disableDefault": true, "custom": [
            {"name": "gate", "targetName": "other", "resourceSelector": [cm_ref("gate")],
             "requirements": ready_is_true()}]},
        "exports": {"exports": [
            {"key": "other", "jsonPath": ".data.who", "targetName": "other", "fromResource": cm_ref("info")},
            {"key": "mine", "jsonPath": ".data.who", "fromResource": cm_ref("info")}]},
    });
    let mut helm_item = item("helm-secondary", config);
    helm_item["spec"]["type"] = json!("landscaper.gardener.cloud/helm");
    create(&h, &helm_item).await;
    // … then it succeeds, each value from the Target its export names.
    let i = wait_done(&h, "helm-secondary").await;
    assert_eq!(
        i.status().phase,
        Phase::Succeeded,
        "{:?}",
        i.status().last_error
    );
    let exported = export_config(&h, &i).await;
    assert_eq!(exported["other"], "other");
    assert_eq!(exported["mine"], "item");
}
