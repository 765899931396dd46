//! More contract rules as stories (Landscaper contract sections 1.4, 2.1, 3.4, 3.7): the
//! `test-reconcile` operation, `updateOnChangeOnly`, target validation, and Kubernetes Events.

use std::sync::atomic::Ordering;
use std::time::Duration;

use deployer_host::landscaper::{Phase, Target, codes};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::{Harness, Options, mock_item as mock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_test_reconcile_annotation_then_the_host_removes_it_and_runs_a_fresh_job() {
    let h = Harness::start_with(Options {
        landscaper: false,
        ..Options::default()
    })
    .await;
    h.create_item(&mock("tested")).await;
    let patch = json!({"metadata": {"annotations": {"landscaper.gardener.cloud/operation": "test-reconcile"}}});
    h.items("default")
        .patch("tested", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let item = h.wait_finished("default", "tested").await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Succeeded);
    assert_eq!(s.job_id.len(), 36, "a fresh random jobID: {}", s.job_id);
    assert!(
        item.annotation("landscaper.gardener.cloud/operation")
            .is_none(),
        "the annotation is removed"
    );
    assert!(s.transition_times.unwrap().trigger_time.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_update_on_change_only_and_an_unchanged_item_then_a_new_job_finishes_without_the_plugin()
 {
    let h = Harness::start().await;
    h.create_item(&mock("unchanged").replace("spec:\n", "spec:\n  updateOnChangeOnly: true\n"))
        .await;
    let first = h.wait_finished("default", "unchanged").await;
    let calls = h.deployer.stats.plugin_calls.load(Ordering::Relaxed);

    // Landscaper issues a new job although nothing changed.
    let api = h.items("default");
    let next = deployer_host::dev::landscaper::with_new_job(&first);
    api.replace_status("unchanged", &PostParams::default(), &next)
        .await
        .unwrap();
    let second = h
        .wait_for("default", "unchanged", Duration::from_secs(20), |i| {
            let s = i.status();
            s.job_id == next.status().job_id && s.job_id == s.job_id_finished
        })
        .await;
    assert_eq!(second.status().phase, Phase::Succeeded);
    assert_eq!(
        h.deployer.stats.plugin_calls.load(Ordering::Relaxed),
        calls,
        "the plugin was not called"
    );
    // Landscaper's pickup check: every job, even one the deployer is not called for, moves
    // lastReconcileTime to (or past) the job's generation time.
    let picked_up = second
        .status()
        .last_reconcile_time
        .expect("lastReconcileTime");
    let generated = next
        .status()
        .job_id_generation_time
        .expect("jobIDGenerationTime");
    assert!(
        picked_up.parse::<jiff::Timestamp>().unwrap()
            >= generated.parse::<jiff::Timestamp>().unwrap(),
        "lastReconcileTime {picked_up} before jobIDGenerationTime {generated}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_target_whose_kubeconfig_uses_a_token_file_then_the_item_fails_validation() {
    let h = Harness::start().await;
    let targets: Api<Target> = Api::namespaced(h.client.clone(), "default");
    let kubeconfig = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://x'}}]\nusers:\n- name: u\n  user:\n    tokenFile: /var/run/secrets/token\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n";
    let target: Target = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
        "metadata": {"name": "files", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster", "config": {"kubeconfig": kubeconfig}}
    }))
    .unwrap();
    targets
        .create(&PostParams::default(), &target)
        .await
        .unwrap();
    h.create_item(&mock("bad-target").replace(
        "spec:\n",
        "spec:\n  target: {name: files, namespace: default}\n",
    ))
    .await;
    let s = h.wait_finished("default", "bad-target").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.reason, "ValidateTarget");
    assert_eq!(err.codes, vec![codes::CONFIGURATION_PROBLEM.to_string()]);
    assert!(err.message.contains("tokenFile"), "{}", err.message);
}

/// Creates Target `name` (type kubernetes-cluster, `config`) and a manifest item on it; asserts
/// the job ends at once, `Failed` with `ERR_CONFIGURATION_PROBLEM` (retrying would not change the
/// Target), and returns its error.
async fn configuration_problem_of_a_manifest_item_on(
    name: &str,
    config: serde_json::Value,
) -> deployer_host::landscaper::LsError {
    let h = Harness::start().await;
    let targets: Api<Target> = Api::namespaced(h.client.clone(), "default");
    let target: Target = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster", "config": config}
    }))
    .unwrap();
    targets
        .create(&PostParams::default(), &target)
        .await
        .unwrap();
    let item_name = format!("on-{name}");
    let item = test_support::manifest::item_on(
        &item_name,
        name,
        json!({"manifests": [{"manifest": test_support::manifest::cm(&item_name, json!({}))}]}),
    );
    h.create_item(&item.to_string()).await;
    let s = h.wait_finished("default", &item_name).await.status();
    assert_eq!(s.phase, Phase::Failed, "{:?}", s.last_error);
    let err = s.last_error.unwrap();
    assert!(
        err.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{err:?}"
    );
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_landscaper_v1_oidc_target_then_a_kubernetes_item_says_the_host_does_not_support_it()
 {
    // Landscaper v1.x Targets may reach their cluster by `oidcConfig` (or `selfConfig`): a
    // ServiceAccount token the deployer requests. The host does not, and says so.
    let err = configuration_problem_of_a_manifest_item_on(
        "oidc",
        json!({"oidcConfig": {"server": "https://10.0.0.1", "caData": "",
                              "serviceAccount": {"name": "deployer"}, "audience": ["shoot"]}}),
    )
    .await;
    assert!(
        err.message
            .contains("Target \"oidc\" reaches its cluster by oidcConfig")
            && err.message.contains("kubeconfig only"),
        "{}",
        err.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_landscaper_v0_99_target_with_a_kubeconfig_secret_ref_then_the_item_fails_saying_what_to_use()
 {
    // Landscaper v0.99 let a Target name its kubeconfig by `kubeconfig: {secretRef: …}`
    // (deprecated, removed in v0.116). The host does not read it: the item fails at once with a
    // configuration problem that says so and what to write instead.
    let err = configuration_problem_of_a_manifest_item_on(
        "legacy",
        json!({"kubeconfig": {"secretRef":
            {"name": "access", "namespace": "default", "key": "kubeconfig"}}}),
    )
    .await;
    assert!(
        err.message
            .contains("Target \"legacy\" names its kubeconfig by `kubeconfig.secretRef`")
            && err.message.contains("spec.config.kubeconfig"),
        "{}",
        err.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_landscaper_v0_99_provider_configuration_with_a_kubeconfig_then_manifest_and_helm_items_fail_instead_of_deploying_to_their_target()
 {
    // Landscaper v0.99's helm and manifest deployers deployed to a base64 kubeconfig given in
    // the ProviderConfiguration instead of the item's Target (removed in v0.119). Ignored, it
    // would send the objects to the Target's cluster: the job fails at once instead, naming the
    // field and what to write.
    let h = Harness::start().await;
    let kubeconfig = "YXBpVmVyc2lvbjogdjEKa2luZDogQ29uZmlnCg==";
    let manifest = test_support::manifest::item(
        "v099-manifest",
        json!({"kubeconfig": kubeconfig,
               "manifests": [{"manifest": test_support::manifest::cm("v099-manifest", json!({}))}]}),
    );
    h.create_item(&manifest.to_string()).await;
    let helm = json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": "v099-helm", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/helm",
                 "target": {"name": "default", "namespace": "default"},
                 "config": {"apiVersion": "helm.deployer.landscaper.gardener.cloud/v1alpha1",
                            "kind": "ProviderConfiguration", "kubeconfig": kubeconfig,
                            "name": "v099-helm", "namespace": "default",
                            "chart": {"ref": "registry.example.invalid/charts/web:1.0.0"}}},
    });
    h.create_item(&helm.to_string()).await;
    for name in ["v099-manifest", "v099-helm"] {
        let s = h.wait_finished("default", name).await.status();
        assert_eq!(s.phase, Phase::Failed, "{name}: {:?}", s.last_error);
        let err = s.last_error.unwrap();
        assert!(
            err.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
            "{name}: {err:?}"
        );
        assert!(
            err.message.contains("spec.config.kubeconfig")
                && err.message.contains("name it in spec.target"),
            "{name}: {}",
            err.message
        );
    }
    // Nothing reached the Target's cluster.
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(h.client.clone(), "default");
    assert!(maps.get_opt("v099-manifest").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_job_then_pickup_finish_and_errors_are_kubernetes_events_on_the_item() {
    let h = Harness::start_with(Options::with_all_events()).await;
    h.create_item(&mock("evented")).await;
    h.create_item(&mock("evented-bad").replace(
        "spec:\n",
        "spec:\n  target: {name: nope, namespace: default}\n",
    ))
    .await;
    h.wait_finished("default", "evented").await;
    h.wait_finished("default", "evented-bad").await;
    let events: Api<Event> = Api::namespaced(h.client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        let reasons = |name: &str| -> Vec<String> {
            list.iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
                .filter_map(|e| e.reason.clone())
                .collect()
        };
        let ok = reasons("evented");
        let bad = reasons("evented-bad");
        if ok.contains(&"PickedUp".to_string())
            && ok.contains(&"JobFinished".to_string())
            && bad.contains(&"NoTargetFound".to_string())
            && bad.contains(&"JobFailed".to_string())
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "events: ok={ok:?} bad={bad:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_context_with_registry_pull_secrets_then_the_plugin_gets_them_resolved() {
    let h = Harness::start_with(Options {
        test_plugins: true,
        ..Options::default()
    })
    .await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(h.client.clone(), "default");
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "regcred", "namespace": "default"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": "eyJhdXRocyI6e319"}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let contexts: Api<deployer_host::landscaper::Context> =
        Api::namespaced(h.client.clone(), "default");
    let context = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
        "metadata": {"name": "with-pull-secrets", "namespace": "default"},
        "registryPullSecrets": [{"name": "regcred"}]
    }))
    .unwrap();
    contexts
        .create(&PostParams::default(), &context)
        .await
        .unwrap();
    h.create_item(
        &test_support::faulty_item("pulls", "inputs")
            .replace("spec:\n", "spec:\n  context: with-pull-secrets\n"),
    )
    .await;
    let s = h.wait_finished("default", "pulls").await.status();
    assert_eq!(s.phase, Phase::Succeeded, "{:?}", s.last_error);
    let seen = s.provider_status.unwrap();
    assert_eq!(
        seen["context"]["resolvedRegistryPullSecrets"]["regcred"], "{\"auths\":{}}",
        "{seen}"
    );
    assert_eq!(seen["context"]["metadata"]["name"], "with-pull-secrets");
}

/// Deletes the Context CRD and waits until the cluster no longer serves Contexts.
async fn remove_context_kind(h: &Harness) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    crds.delete("contexts.landscaper.gardener.cloud", &Default::default())
        .await
        .unwrap();
    let contexts: Api<deployer_host::landscaper::Context> =
        Api::namespaced(h.client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !matches!(
        deployer_host::apierrors::get(&contexts, "default").await,
        Ok(deployer_host::apierrors::Lookup::KindNotServed)
    ) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Contexts still served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_cluster_without_the_context_kind_then_the_item_says_so_and_times_out() {
    let h = Harness::start().await;
    // The Context cache is watching when the kind goes away (the case a running host meets) …
    test_support::until("the Context cache to list", Duration::from_secs(20), || {
        h.deployer.lookups.contexts.is_synced()
    })
    .await;
    remove_context_kind(&h).await;
    // … and notices that its watch ended and cannot list again: reads are GETs from then on.
    test_support::until(
        "the Context cache to stop serving",
        Duration::from_secs(20),
        || !h.deployer.lookups.contexts.is_synced(),
    )
    .await;
    h.create_item(&mock("no-context-kind").replace("spec:\n", "spec:\n  timeout: 2s\n"))
        .await;
    // First the reason, while the job is open …
    let open = h
        .wait_for("default", "no-context-kind", Duration::from_secs(20), |i| {
            i.status().last_error.is_some()
        })
        .await
        .status();
    let err = open.last_error.unwrap();
    assert_eq!(err.reason, "GetLandscaperContext");
    assert!(
        err.message
            .contains("does not serve landscaper.gardener.cloud/v1alpha1/contexts"),
        "{}",
        err.message
    );
    // … then the progressing timeout ends it: never stuck.
    let s = h.wait_finished("default", "no-context-kind").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.reason, "ProgressingTimeout");
    assert_eq!(err.codes, vec![codes::TIMEOUT.to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_missing_context_then_the_job_ends_in_err_timeout_at_its_progressing_timeout() {
    let h = Harness::start().await;
    h.create_item(
        &mock("no-context").replace("spec:\n", "spec:\n  timeout: 2s\n  context: absent\n"),
    )
    .await;
    let s = h.wait_finished("default", "no-context").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(
        (err.reason.as_str(), err.message.as_str()),
        (
            "ProgressingTimeout",
            r#"timeout at: "mock deployer: start reconcile""#
        )
    );
    let first = s.first_error.unwrap();
    assert_eq!(first.reason, "GetLandscaperContext");
    assert!(
        first.message.contains("\"absent\" not found"),
        "{}",
        first.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_export_that_cannot_be_written_then_the_job_never_finishes_succeeded() {
    let h = Harness::start_with(Options {
        landscaper: false,
        ..Options::default()
    })
    .await;
    let item = mock("exporter")
        .replace("spec:\n", "spec:\n  timeout: 2s\n")
        .replace(
            "phase: Succeeded\n",
            "phase: Succeeded\n    export: {greeting: hi}\n",
        );
    let created = h.create_item(&item).await;
    // When Landscaper issues a job for an item whose export Secret lives in a namespace that
    // no longer exists (so it cannot be written),
    let mut next = deployer_host::dev::landscaper::with_new_job(&created);
    let mut s = next.status();
    s.export_ref = Some(deployer_host::landscaper::ObjectReference {
        name: "mock-export-gone1".into(),
        namespace: Some("nowhere".into()),
    });
    next.status = Some(s);
    h.items("default")
        .replace_status("exporter", &PostParams::default(), &next)
        .await
        .unwrap();
    // then the failed write is the step's error, in the server's words, and the job stays
    // open: never Succeeded with an exportRef to nothing …
    let open = h
        .wait_for("default", "exporter", Duration::from_secs(20), |i| {
            i.status().last_error.is_some()
        })
        .await
        .status();
    assert_ne!(open.phase, Phase::Succeeded);
    assert_ne!(open.job_id, open.job_id_finished);
    let err = open.last_error.unwrap();
    assert_eq!(err.reason, "CreateOrUpdateExport");
    assert!(
        err.message
            .starts_with("writing the export Secret: 404 NotFound: "),
        "{}",
        err.message
    );
    assert!(
        !err.message.contains("Status {"),
        "no debug dump: {}",
        err.message
    );
    // … until the progressing timeout ends it.
    let s = h.wait_finished("default", "exporter").await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(
        s.last_error.unwrap().codes,
        vec![codes::TIMEOUT.to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_test_reconcile_on_an_update_on_change_only_item_then_the_plugin_runs() {
    let h = Harness::start_with(Options {
        landscaper: false,
        ..Options::default()
    })
    .await;
    h.create_item(
        &mock("tested-unchanged").replace("spec:\n", "spec:\n  updateOnChangeOnly: true\n"),
    )
    .await;
    let annotate = || async {
        let patch = json!({"metadata": {"annotations": {"landscaper.gardener.cloud/operation": "test-reconcile"}}});
        h.items("default")
            .patch(
                "tested-unchanged",
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap();
    };
    annotate().await;
    let first = h.wait_finished("default", "tested-unchanged").await;
    assert_eq!(first.status().phase, Phase::Succeeded);
    let calls = h.deployer.stats.plugin_calls.load(Ordering::Relaxed);
    // Unchanged and Succeeded: updateOnChangeOnly alone would finish a job without the plugin,
    // but an item with the test-reconcile annotation is reconciled.
    annotate().await;
    h.wait_for(
        "default",
        "tested-unchanged",
        Duration::from_secs(20),
        |i| {
            let s = i.status();
            s.job_id != first.status().job_id && s.job_id == s.job_id_finished
        },
    )
    .await;
    assert!(
        h.deployer.stats.plugin_calls.load(Ordering::Relaxed) > calls,
        "the plugin was called"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_target_of_another_type_then_a_kubernetes_deployer_fails_at_once_saying_so() {
    let h = Harness::start().await;
    let targets: Api<Target> = Api::namespaced(h.client.clone(), "default");
    let target: Target = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
        "metadata": {"name": "not-a-cluster", "namespace": "default"},
        "spec": {"type": "example.com/ssh-host", "config": {"host": "10.0.0.1"}}
    }))
    .unwrap();
    targets
        .create(&PostParams::default(), &target)
        .await
        .unwrap();
    h.create_item(
        "apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {name: wrong-target, namespace: default}
spec:
  type: landscaper.gardener.cloud/kubernetes-manifest
  target: {name: not-a-cluster, namespace: default}
  config:
    apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
    kind: ProviderConfiguration
    manifests:
    - policy: manage
      manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: x, namespace: default}}
",
    )
    .await;
    let s = h.wait_finished("default", "wrong-target").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.reason, "TargetType");
    assert_eq!(err.codes, vec![codes::CONFIGURATION_PROBLEM.to_string()]);
    assert!(
        err.message.contains("\"example.com/ssh-host\"")
            && err
                .message
                .contains("\"landscaper.gardener.cloud/kubernetes-cluster\""),
        "{}",
        err.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_export_over_the_secret_size_limit_then_the_item_says_so_and_times_out() {
    let h = Harness::start().await;
    let big = "x".repeat(1_100_000);
    // (long enough that a loaded machine reaches the export write before the timeout)
    h.create_item(
        &mock("big-export")
            .replace("spec:\n", "spec:\n  timeout: 6s\n")
            .replace(
                "phase: Succeeded\n",
                &format!("phase: Succeeded\n    export: {{blob: {big}}}\n"),
            ),
    )
    .await;
    let open = h
        .wait_for("default", "big-export", Duration::from_secs(20), |i| {
            i.status().last_error.is_some()
        })
        .await
        .status();
    assert_ne!(open.phase, Phase::Succeeded);
    let err = open.last_error.unwrap();
    assert_eq!(err.reason, "CreateOrUpdateExport");
    // The server's own words follow the prefix: 1.20 says "must have at most 1048576 bytes",
    // 1.36 "may not be more than 1048576 bytes".
    assert!(
        err.message
            .starts_with("writing the export Secret: 422 Invalid: ")
            && err.message.contains("data: Too long: ")
            && err.message.ends_with(" 1048576 bytes"),
        "{}",
        err.message
    );
    let s = h.wait_finished("default", "big-export").await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(
        s.last_error.unwrap().codes,
        vec![codes::TIMEOUT.to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_two_jobs_then_each_job_has_events_of_its_own_that_name_it() {
    let h = Harness::start_with(Options {
        landscaper: false,
        ..Options::with_all_events()
    })
    .await;
    h.create_item(&mock("twice")).await;
    let api = h.items("default");
    let first = deployer_host::dev::landscaper::with_new_job(&api.get("twice").await.unwrap());
    api.replace_status("twice", &PostParams::default(), &first)
        .await
        .unwrap();
    let done = h.wait_finished("default", "twice").await;
    let second = deployer_host::dev::landscaper::with_new_job(&done);
    api.replace_status("twice", &PostParams::default(), &second)
        .await
        .unwrap();
    h.wait_for("default", "twice", Duration::from_secs(20), |i| {
        let s = i.status();
        s.job_id == second.status().job_id && s.job_id == s.job_id_finished
    })
    .await;

    let jobs = [first.status().job_id, second.status().job_id];
    let events = wait_for_events(&h, "twice", |events| {
        jobs.iter().all(|job| {
            ["PickedUp", "JobFinished"].iter().all(|reason| {
                events
                    .iter()
                    .filter(|e| e.reason.as_deref() == Some(*reason))
                    .filter(|e| e.note.as_deref().is_some_and(|n| n.contains(job.as_str())))
                    .count()
                    == 1
            })
        })
    })
    .await;
    assert_eq!(events.len(), 4, "one Event per job step: {events:#?}");
    assert!(
        events.iter().all(|e| e.series.is_none()),
        "no job bumps another's Event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_step_error_repeated_within_one_job_then_it_is_one_event_with_a_series() {
    let h = Harness::start().await;
    h.create_item(&mock("repeating").replace(
        "spec:
",
        "spec:
  context: missing
  timeout: 3s
",
    ))
    .await;
    let item = h.wait_finished("default", "repeating").await;
    let job = item.status().job_id;
    let events = wait_for_events(&h, "repeating", |events| {
        events.iter().any(|e| {
            e.reason.as_deref() == Some("GetLandscaperContext")
                && e.series.as_ref().is_some_and(|s| s.count >= 2)
        })
    })
    .await;
    let context_errors: Vec<_> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("GetLandscaperContext"))
        .collect();
    assert_eq!(context_errors.len(), 1, "{context_errors:#?}");
    let note = context_errors[0].note.as_deref().unwrap_or_default();
    assert!(note.contains(&job), "the note names job {job}: {note}");
    assert_eq!(context_errors[0].type_.as_deref(), Some("Warning"));
}

/// The item's Events once `done` holds for them (10 s at most).
async fn wait_for_events(h: &Harness, item: &str, done: impl Fn(&[Event]) -> bool) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(h.client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let events: Vec<Event> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(item))
            .collect();
        if done(&events) {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "events of {item}: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A manifest item named `name` that applies one ConfigMap through the `default` Target.
fn manifest_on_default_target(name: &str) -> String {
    format!(
        "apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {{name: {name}, namespace: default}}
spec:
  type: landscaper.gardener.cloud/kubernetes-manifest
  target: {{name: default, namespace: default}}
  config:
    apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
    kind: ProviderConfiguration
    manifests:
    - policy: manage
      manifest: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}, namespace: default}}}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_cached_targets_when_a_target_changes_then_the_next_job_uses_the_changed_target() {
    let h = Harness::start().await;
    let lookups = &h.deployer.lookups;
    test_support::until(
        "the Target and Context caches",
        Duration::from_secs(20),
        || lookups.targets.is_synced() && lookups.contexts.is_synced(),
    )
    .await;
    // Given a job on the default Target: its Target and Context come from the caches.
    let (target_gets, context_gets) = (
        lookups.targets.gets.load(Ordering::Relaxed),
        lookups.contexts.gets.load(Ordering::Relaxed),
    );
    h.create_item(&manifest_on_default_target("before-change"))
        .await;
    let s = h.wait_finished("default", "before-change").await.status();
    assert_eq!(s.phase, Phase::Succeeded, "{:?}", s.last_error);
    assert_eq!(lookups.targets.gets.load(Ordering::Relaxed), target_gets);
    assert_eq!(lookups.contexts.gets.load(Ordering::Relaxed), context_gets);
    assert!(lookups.targets.hits.load(Ordering::Relaxed) >= 1);

    // When the Target becomes one of another type...
    let targets: Api<Target> = Api::namespaced(h.client.clone(), "default");
    let mut target = targets.get("default").await.unwrap();
    target.spec.type_ = "example.com/ssh-host".into();
    let changed = targets
        .replace("default", &PostParams::default(), &target)
        .await
        .unwrap();
    test_support::until(
        "the changed Target in the cache",
        Duration::from_secs(10),
        || {
            lookups.targets.cached_version("default", "default")
                == changed.metadata.resource_version
        },
    )
    .await;

    // ...then the next job sees the change, as it would with a GET.
    h.create_item(&manifest_on_default_target("after-change"))
        .await;
    let s = h.wait_finished("default", "after-change").await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.last_error.unwrap().reason, "TargetType");
}

/// Landscaper v1.x writes a Context's `ocmConfig` without omitempty (`null` when unset) and may
/// carry `verificationSignatures` (read by its Installation controller only). Through the API
/// server, such a Context is stored whole and its items run, the plugin seeing what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_landscaper_v1_context_with_ocm_config_null_and_verification_signatures_then_its_items_run()
 {
    let h = Harness::start_with(Options {
        test_plugins: true,
        ..Options::default()
    })
    .await;
    // Given the Context as v1.x writes it, created as raw JSON (not through our model) …
    let contexts: Api<kube::api::DynamicObject> = Api::namespaced_with(
        h.client.clone(),
        "default",
        &kube::api::ApiResource::erase::<deployer_host::landscaper::Context>(&()),
    );
    let written = json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
        "metadata": {"name": "v1-context", "namespace": "default"},
        "ocmConfig": null,
        "verificationSignatures": {"sig": {"publicKeySecretReference":
            {"name": "keys", "namespace": "default", "key": "pub"}}}
    });
    contexts
        .create(
            &PostParams::default(),
            &serde_json::from_value(written).unwrap(),
        )
        .await
        .unwrap();
    // … the API server keeps its signatures (the CRD's schema has them) …
    let stored = contexts.get("v1-context").await.unwrap();
    assert_eq!(
        stored.data["verificationSignatures"]["sig"]["publicKeySecretReference"]["name"],
        "keys"
    );
    // … and an item in that Context runs, its plugin seeing the signatures.
    h.create_item(
        &test_support::faulty_item("v1", "inputs")
            .replace("spec:\n", "spec:\n  context: v1-context\n"),
    )
    .await;
    let s = h.wait_finished("default", "v1").await.status();
    assert_eq!(s.phase, Phase::Succeeded, "{:?}", s.last_error);
    let seen = s.provider_status.unwrap();
    assert_eq!(
        seen["context"]["verificationSignatures"]["sig"]["publicKeySecretReference"]["key"], "pub",
        "{seen}"
    );
}
