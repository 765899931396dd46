//! Manifest deployer end to end (contract 12.3, `pkg/deployer/manifest/test/e2e_test.go`), on
//! the embedded API server with the simulated Landscaper, using the Landscaper testdata YAML.

use std::time::Duration;

use deployer_host::config::LimitsConfig;
use deployer_host::contract::CheckpointMode;
use deployer_host::landscaper::{Phase, codes};
use embedded_apiserver::FaultConfig;
use kube::api::{Patch, PatchParams};
use manifest::*;
use serde_json::json;
use test_support::manifest;
use test_support::skip_on_real;
use test_support::{Harness, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_01_di_when_reconciled_then_the_secret_exists_and_delete_removes_it() {
    let h = Harness::start().await;
    create(&h, &testdata_item("01-di.yaml", "e2e-create")).await;

    let item = wait_done(&h, "e2e-create").await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Succeeded, "{:?}", s.last_error);
    assert_eq!(managed(&item).len(), 1);
    assert_eq!(managed(&item)[0]["policy"], "manage");
    assert_eq!(managed(&item)[0]["resource"]["kind"], "Secret");
    assert!(
        managed(&item)[0]["resource"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert_eq!(
        secret_value(&h, "my-secret", "config").await.as_deref(),
        Some("abc")
    );
    let secret = get(&h, "v1", "Secret", Some("default"), "my-secret")
        .await
        .unwrap();
    assert_eq!(secret["metadata"]["labels"][OWNER_LABEL], "e2e-create");

    delete_item(&h, "e2e-create").await;
    h.wait_gone("default", "e2e-create", Duration::from_secs(30))
        .await;
    assert!(
        get(&h, "v1", "Secret", Some("default"), "my-secret")
            .await
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_deployed_secret_when_the_manifest_changes_with_update_then_the_value_is_replaced()
{
    let h = Harness::start().await;
    create(&h, &testdata_item("01-di.yaml", "e2e-update")).await;
    wait_done(&h, "e2e-update").await;

    let updated = testdata_item("02-di-updated.yaml", "e2e-update");
    let old = set_config(&h, "e2e-update", &updated["spec"]["config"]).await;
    let item = wait_next_job(&h, "e2e-update", &old).await;
    assert_eq!(item.status().phase, Phase::Succeeded);
    assert_eq!(
        secret_value(&h, "my-secret", "config").await.as_deref(),
        Some("efg")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_strategy_patch_when_the_manifest_changes_then_the_value_is_patched_and_foreign_fields_stay()
 {
    let h = Harness::start().await;
    create(&h, &testdata_item("05-di.yaml", "e2e-patch")).await;
    wait_done(&h, "e2e-patch").await;
    // Someone else adds a key: `patch` (server-side apply) keeps fields it does not manage.
    merge(
        &h,
        "v1",
        "Secret",
        Some("default"),
        "my-secret",
        json!({"metadata": {"annotations": {"external": "yes"}}, "stringData": {"external": "x"}}),
    )
    .await;

    let patched = testdata_item("06-di-patched.yaml", "e2e-patch");
    let old = set_config(&h, "e2e-patch", &patched["spec"]["config"]).await;
    let item = wait_next_job(&h, "e2e-patch", &old).await;
    assert_eq!(
        item.status().phase,
        Phase::Succeeded,
        "{:?}",
        item.status().last_error
    );
    assert_eq!(
        secret_value(&h, "my-secret", "config").await.as_deref(),
        Some("efg")
    );
    assert_eq!(
        secret_value(&h, "my-secret", "external").await.as_deref(),
        Some("x")
    );
    let secret = get(&h, "v1", "Secret", Some("default"), "my-secret")
        .await
        .unwrap();
    assert_eq!(secret["metadata"]["annotations"]["external"], "yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_manifest_removed_from_the_list_then_its_object_is_deleted_and_the_new_one_created()
{
    let h = Harness::start().await;
    create(&h, &testdata_item("01-di.yaml", "e2e-cleanup")).await;
    wait_done(&h, "e2e-cleanup").await;

    let removed = testdata_item("03-di-removed.yaml", "e2e-cleanup");
    let old = set_config(&h, "e2e-cleanup", &removed["spec"]["config"]).await;
    let item = wait_next_job(&h, "e2e-cleanup", &old).await;
    assert_eq!(item.status().phase, Phase::Succeeded);
    assert_eq!(managed_names(&item), vec!["my-configmap"]);
    assert!(
        get(&h, "v1", "Secret", Some("default"), "my-secret")
            .await
            .is_none()
    );
    assert_eq!(
        configmap(&h, "my-configmap").await.unwrap()["data"]["config"],
        "abc"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_namespace_that_does_not_exist_then_the_item_keeps_progressing_with_a_clear_error()
{
    let h = Harness::start().await;
    create(&h, &testdata_item("04-di-invalid.yaml", "e2e-invalid")).await;

    let item = h
        .wait_for("default", "e2e-invalid", Duration::from_secs(30), |i| {
            i.status().last_error.is_some()
        })
        .await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Progressing);
    assert_ne!(s.job_id, s.job_id_finished);
    assert!(s.provider_status.is_some(), "providerStatus is written");
    assert!(managed(&item).is_empty());
    let err = s.last_error.unwrap();
    assert_eq!(err.operation, "ApplyObjects");
    assert_eq!(err.reason, "ApplyNewObject");
    assert!(err.codes.is_empty(), "retried: {:?}", err.codes);
    assert!(
        err.message
            .contains("spec.config.manifests[0] (v1 Secret nonexistingns/my-secret)")
            && err.message.contains("nonexistingns"),
        "{}",
        err.message
    );
    assert!(
        get(&h, "v1", "Secret", Some("nonexistingns"), "my-secret")
            .await
            .is_none()
    );

    h.items("default")
        .patch(
            "e2e-invalid",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {"landscaper.gardener.cloud/delete-without-uninstall": "true"}}})),
        )
        .await
        .unwrap();
    delete_item(&h, "e2e-invalid").await;
    h.wait_gone("default", "e2e-invalid", Duration::from_secs(30))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_no_provider_config_then_the_item_fails_with_a_configuration_problem() {
    let h = Harness::start().await;
    create(&h, &testdata_item("08-di-no-config.yaml", "e2e-noconfig")).await;
    let s = wait_done(&h, "e2e-noconfig").await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert!(
        s.last_error
            .unwrap()
            .codes
            .contains(&codes::CONFIGURATION_PROBLEM.to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_namespace_example_then_the_namespace_is_applied_and_listed_before_the_secret() {
    let h = Harness::start().await;
    let path = format!(
        "{}/../../shared/landscaper/examples/40-DeployItem-Manifest-secret.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut example: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    example["metadata"]["namespace"] = json!("default");
    example["spec"]["target"] = json!({"name": "default", "namespace": "default"});
    // Namespaced first in the list: the deployer still applies the Namespace first.
    let m = example["spec"]["config"]["manifests"]
        .as_array_mut()
        .unwrap();
    m.reverse();
    create(&h, &example).await;
    let item = wait_done(&h, "my-secret").await;
    assert_eq!(
        item.status().phase,
        Phase::Succeeded,
        "{:?}",
        item.status().last_error
    );
    assert_eq!(managed_names(&item), vec!["my-namespace", "my-secret"]);
    assert!(
        get(&h, "v1", "Secret", Some("my-namespace"), "my-secret")
            .await
            .is_some()
    );
}

/// A ConfigMap, a custom readiness check `.data.key == val` and an export of `.data`.
fn checkpoint_config() -> serde_json::Value {
    json!({
        "manifests": [{"manifest": cm("cp-cm", json!({"key": "val"}))}],
        "readinessChecks": {"custom": [{"name": "cm-ready",
            "resourceSelector": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cp-cm", "namespace": "default"}],
            "requirements": [{"jsonPath": ".data.key", "operator": "==", "values": [{"value": "val"}]}]}]},
        "exports": {"exports": [{"key": "test-export", "jsonPath": ".data",
            "fromResource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cp-cm", "namespace": "default"}}]}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_timeout_at_each_reconcile_checkpoint_then_the_job_fails_there() {
    for cp in [
        "manifest deployer: start reconcile",
        "deployer: process managed resource manifests",
        "deployer: process manifests",
        "deployer: apply manifests",
        "manifest deployer: before readiness check",
        "manifest deployer: default readiness checks",
        "deployer: during readiness check - resource default/cp-cm of type ConfigMap",
        "manifest deployer: custom readiness checks",
        "deployer: during readiness check",
        "manifest deployer: before reading export values",
        "deployer: during export - key: test-export",
    ] {
        let h = Harness::start_with(Options {
            checkpoint_mode: CheckpointMode::FailAt(cp.into()),
            ..Options::default()
        })
        .await;
        create(&h, &item("cp", checkpoint_config())).await;
        let s = wait_done(&h, "cp").await.status();
        assert_eq!(s.phase, Phase::Failed, "{cp}");
        let err = s.last_error.unwrap();
        assert!(
            err.codes.contains(&codes::TIMEOUT.to_string()),
            "{cp}: {err:?}"
        );
        assert!(err.message.contains(cp), "{cp}: {}", err.message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_timeout_at_cleanup_or_delete_checkpoints_then_the_job_fails_there() {
    // cleanup orphaned: only reached when a manifest was removed.
    let h = Harness::start_with(Options {
        checkpoint_mode: CheckpointMode::FailAt("deployer: cleanup orphaned".into()),
        ..Options::default()
    })
    .await;
    create(
        &h,
        &item(
            "cleanup",
            json!({"manifests": [
        {"manifest": cm("c1", json!({}))}, {"manifest": cm("c2", json!({}))}]}),
        ),
    )
    .await;
    assert_eq!(
        wait_done(&h, "cleanup").await.status().phase,
        Phase::Succeeded
    );
    let old = set_config(
        &h,
        "cleanup",
        &json!({"apiVersion": V1ALPHA2, "kind": "ProviderConfiguration",
        "manifests": [{"manifest": cm("c1", json!({}))}]}),
    )
    .await;
    let s = wait_next_job(&h, "cleanup", &old).await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert!(
        s.last_error
            .unwrap()
            .message
            .contains("deployer: cleanup orphaned")
    );

    for cp in [
        "manifest deployer: start delete",
        "deployer: delete resources",
    ] {
        let h = Harness::start_with(Options {
            checkpoint_mode: CheckpointMode::FailAt(cp.into()),
            ..Options::default()
        })
        .await;
        create(
            &h,
            &item(
                "del",
                json!({"manifests": [{"manifest": cm("d1", json!({}))}]}),
            ),
        )
        .await;
        let first = wait_done(&h, "del").await.status().job_id;
        delete_item(&h, "del").await;
        let s = wait_next_job(&h, "del", &first).await.status();
        assert_eq!(s.phase, Phase::DeleteFailed, "{cp}");
        let err = s.last_error.unwrap();
        assert!(err.message.contains(cp), "{cp}: {}", err.message);
        assert!(err.codes.contains(&codes::TIMEOUT.to_string()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_bad_input_then_last_error_names_the_manifest() {
    let h = Harness::start().await;
    // malformed manifest → configuration problem at once
    create(
        &h,
        &item(
            "bad-manifest",
            json!({"manifests": [{"manifest": {"kind": "ConfigMap", "metadata": {"name": "x"}}}]}),
        ),
    )
    .await;
    let s = wait_done(&h, "bad-manifest").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.reason, "ValidateProviderConfiguration");
    assert!(
        err.message
            .contains("manifests[0].manifest: apiVersion is missing"),
        "{}",
        err.message
    );

    // invalid jsonPath in a readiness check
    create(&h, &item("bad-path", json!({"manifests": [{"manifest": cm("bp", json!({}))}],
        "readinessChecks": {"custom": [{"name": "c", "resourceSelector": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "bp", "namespace": "default"}],
            "requirements": [{"jsonPath": ".data[", "operator": "exists"}]}]}}))).await;
    let s = wait_done(&h, "bad-path").await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert!(
        s.last_error
            .unwrap()
            .message
            .contains("requirements[0].jsonPath")
    );

    // unknown kind → retried with a message naming the manifest, then the timeout
    let mut unknown = item(
        "unknown-kind",
        json!({"manifests": [{"manifest":
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}}}]}),
    );
    unknown["spec"]["timeout"] = json!("2s");
    create(&h, &unknown).await;
    let item = h
        .wait_for("default", "unknown-kind", Duration::from_secs(30), |i| {
            i.status().last_error.is_some()
        })
        .await;
    let err = item.status().last_error.unwrap();
    assert!(
        err.message
            .contains("spec.config.manifests[0] (example.com/v1 Widget default/w)")
            && err.message.contains("unknown kind"),
        "{}",
        err.message
    );
    let s = wait_done(&h, "unknown-kind").await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert!(
        s.last_error
            .unwrap()
            .codes
            .contains(&codes::TIMEOUT.to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_kubernetes_call_that_hangs_then_the_job_fails_with_err_timeout_at_the_plugin_deadline()
 {
    skip_on_real!("needs fault injection (a response delay), which only the embedded server has");
    // Given a 1 s deadline for each call of the manifest plugin,
    let mut options = Options::default();
    options.config.plugins.per_plugin.insert(
        "manifest".into(),
        LimitsConfig {
            deadline: Some("1s".into()),
            ..LimitsConfig::default()
        },
    );
    let h = Harness::start_with(options).await;
    // a ConfigMap `probe` that would satisfy every check below,
    put(&h, cm("probe", json!({"ready": "yes"}))).await;
    // and a Target cluster that from now on never answers requests for ConfigMaps,
    h.server
        .as_ref()
        .expect("embedded")
        .set_faults(FaultConfig {
            response_delay: Duration::from_secs(600),
            delayed_resources: vec!["configmaps".into()],
            ..FaultConfig::default()
        });
    // when one item applies a ConfigMap, one waits for `probe` to be ready and one exports
    // from it (the latter two deploy a Secret, which the cluster answers),
    let started = tokio::time::Instant::now();
    let probe =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "probe", "namespace": "default"});
    let secret = |name: &str| {
        json!({"manifest": {"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"}, "stringData": {"k": "v"}}})
    };
    let cases = [
        (
            "hang-apply",
            json!({"manifests": [{"manifest": cm("hang-cm", json!({}))}]}),
        ),
        (
            "hang-ready",
            json!({"manifests": [secret("hang-ready")],
            "readinessChecks": {"custom": [{"name": "probe", "resourceSelector": [probe],
                "requirements": [{"jsonPath": ".data.ready", "operator": "exists"}]}]}}),
        ),
        (
            "hang-export",
            json!({"manifests": [secret("hang-export")],
            "exports": {"exports": [{"key": "probe", "jsonPath": ".data", "fromResource": probe}]}}),
        ),
    ];
    for (name, config) in &cases {
        create(&h, &item(name, config.clone())).await;
    }
    // then each hanging call is cut at the deadline and its job fails with ERR_TIMEOUT (long
    // before the 10 min progressing timeout), never "not ready yet, call again".
    for (name, _) in &cases {
        let s = wait_done(&h, name).await.status();
        assert_eq!(s.phase, Phase::Failed, "{name}");
        let err = s.last_error.unwrap();
        assert!(
            err.codes.contains(&codes::TIMEOUT.to_string()),
            "{name}: {err:?}"
        );
        assert_eq!(err.reason, "PluginDeadlineExceeded", "{name}: {err:?}");
        assert!(err.message.contains("deadline"), "{name}: {}", err.message);
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // and the deployer is not stuck: once the cluster answers again, the next item succeeds.
    h.server
        .as_ref()
        .expect("embedded")
        .set_faults(FaultConfig::default());
    create(
        &h,
        &item(
            "after-hang",
            json!({"manifests": [{"manifest": cm("after-hang-cm", json!({}))}]}),
        ),
    )
    .await;
    let s = wait_done(&h, "after-hang").await.status();
    assert_eq!(s.phase, Phase::Succeeded, "{:?}", s.last_error);
}
