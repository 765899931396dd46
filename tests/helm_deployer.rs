//! The helm deployer plugin (`plugins/helm`, contract section 7), end to end: DeployItems of
//! type `landscaper.gardener.cloud/helm` whose charts come from an inline archive, a chart
//! repository served over HTTP on 127.0.0.1, and Debian's `docker-registry` (OCI) — downloaded
//! by the host's `fetch` capability — deployed as real Helm releases that **real Go Helm**
//! (PyPI `helm-python-sdk`) lists, upgrades, rolls back and uninstalls, and the other way
//! round; template mode; hooks; failures. Runs on both backends (embedded and a real
//! kube-apiserver 1.20).

use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::landscaper::{DeployItem, Phase, codes};
use manifest::{
    create, delete_item, export_config, get, managed, put, set_config, wait_done, wait_next_job,
};
use serde_json::{Value, json};
use test_support::chart_repo::{ChartRepo, archive_raw, chart_dir, package};
use test_support::manifest;
use test_support::real_helm::RealHelm;
use test_support::{Harness, Options};

const TYPE: &str = "landscaper.gardener.cloud/helm";
const API_VERSION: &str = "helm.deployer.landscaper.gardener.cloud/v1alpha1";

async fn harness() -> Harness {
    Harness::start_with(options()).await
}

fn options() -> Options {
    Options {
        config: HostConfig {
            requeue_interval: Some("200ms".into()),
            fetch: serde_yaml::from_str("allow: [127.0.0.1]\nplainHttp: []\n").unwrap(),
            ..HostConfig::default()
        },
        ..Options::default()
    }
}

/// A helm DeployItem on the harness' `default` Target.
fn helm_item(name: &str, config: Value) -> Value {
    let mut config = config;
    config["apiVersion"] = json!(API_VERSION);
    config["kind"] = json!("ProviderConfiguration");
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": TYPE, "target": {"name": "default", "namespace": "default"},
                 "timeout": "60s", "config": config}
    })
}

/// The `web` chart (`tests/helm/charts/web`) as an inline archive. Its Deployment never becomes
/// ready on a server without controllers, so the default readiness check is off (the `wait`
/// story turns the embedded server's workload simulator on instead).
fn web_config(release: &str, namespace: &str, values: Value) -> Value {
    json!({
        "name": release, "namespace": namespace, "createNamespace": true,
        "chart": {"archive": {"raw": archive_raw("web", "0.1.0")}},
        "values": values,
        "readinessChecks": {"disableDefault": true},
    })
}

/// Asserts the item's job succeeded; otherwise shows its phase and last error.
fn assert_succeeded(item: &DeployItem) {
    assert_eq!(item.status().phase, Phase::Succeeded, "{}", status_of(item));
}

fn status_of(item: &DeployItem) -> String {
    let s = item.status();
    format!("{:?} {:?}", s.phase, s.last_error)
}

async fn wait_phase(h: &Harness, name: &str, phase: Phase) -> DeployItem {
    h.wait_for("default", name, Duration::from_secs(60), |i| {
        let s = i.status();
        !s.job_id.is_empty() && s.job_id == s.job_id_finished && s.phase == phase
    })
    .await
}

/// Replaces the item's configuration (the simulated Landscaper starts a new job) and waits
/// until that job has finished.
async fn reconfigure(h: &Harness, name: &str, config: Value) -> DeployItem {
    let old = set_config(h, name, &helm_item(name, config)["spec"]["config"]).await;
    wait_next_job(h, name, &old).await
}

/// Writes the status a Deployment controller writes once every replica is available (neither
/// backend runs controllers in these stories).
async fn deployment_ready(h: &Harness, namespace: &str, name: &str) {
    let api = manifest::api(&h.client, "apps/v1", "Deployment", Some(namespace));
    let d = api.get(name).await.unwrap();
    let v = serde_json::to_value(&d).unwrap();
    let replicas = v["spec"]["replicas"].as_i64().unwrap_or(1);
    let status = json!({"status": {
        "observedGeneration": v["metadata"]["generation"],
        "replicas": replicas, "updatedReplicas": replicas,
        "readyReplicas": replicas, "availableReplicas": replicas,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}],
    }});
    api.patch_status(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&status),
    )
    .await
    .unwrap();
}

fn history(v: &Value) -> Vec<(i64, String)> {
    v["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_chart_archive_when_reconciled_then_a_real_helm_release_is_installed_upgraded_and_uninstalled_and_real_helm_agrees()
 {
    let h = harness().await;
    let helm = RealHelm::for_harness(&h).await;
    create(
        &h,
        &helm_item(
            "web",
            json!({
                "name": "web", "namespace": "web-apps", "createNamespace": true,
                "chart": {"archive": {"raw": archive_raw("web", "0.1.0")}},
                "values": {"message": "hi", "extra": true},
                "readinessChecks": {"disableDefault": true},
                "exports": {"exports": [{"key": "greeting", "jsonPath": ".Values.message"},
                                        {"key": "replicas", "jsonPath": ".Values.replicas"},
                                        {"key": "live.revision", "jsonPath": ".data.revision",
                                         "fromResource": {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "name": "web-config", "namespace": "web-apps"}}]},
            }),
        ),
    )
    .await;
    let item = wait_done(&h, "web").await;
    assert_succeeded(&item);

    // Then: release v1 deployed, stored as Helm stores it; objects carry Helm's ownership.
    assert_eq!(
        manifest::release_secrets(&h, "web-apps", "web").await,
        [(1, "deployed".into())]
    );
    let cm = get(&h, "v1", "ConfigMap", Some("web-apps"), "web-config")
        .await
        .expect("ConfigMap of the chart");
    assert_eq!(cm["data"]["message"], "hi");
    assert_eq!(cm["data"]["revision"], "1");
    assert_eq!(
        cm["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "Helm"
    );
    assert_eq!(
        cm["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "web"
    );
    assert_eq!(
        cm["metadata"]["annotations"]["meta.helm.sh/release-namespace"],
        "web-apps"
    );
    assert!(
        get(&h, "v1", "ConfigMap", Some("web-apps"), "web-extra")
            .await
            .is_some()
    );
    let svc = get(&h, "v1", "Service", Some("web-apps"), "web-extra").await;
    assert_eq!(
        svc.expect("Service without a port protocol")["spec"]["ports"][0]["protocol"],
        "TCP"
    );
    assert!(
        get(
            &h,
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "widgets.example.wasm-deployer.dev"
        )
        .await
        .is_some(),
        "crds/ are installed first"
    );
    let managed = managed(&item);
    assert_eq!(managed.len(), 1, "{managed:?}");
    assert_eq!(managed[0]["resource"]["kind"], "Deployment");
    assert_eq!(
        export_config(&h, &item).await,
        json!({"greeting": "hi", "replicas": 1, "live": {"revision": "1"}})
    );

    // Real Helm sees the release.
    if let Some(list) = helm
        .ok(json!({"op": "list", "namespace": "web-apps"}))
        .await
    {
        let r = &list["releases"][0];
        assert_eq!(r["name"], "web");
        assert_eq!(r["status"], "deployed");
        assert_eq!(r["revision"], 1);
        let values = helm
            .ok(json!({"op": "values", "name": "web", "namespace": "web-apps"}))
            .await
            .unwrap();
        assert_eq!(values["values"], json!({"message": "hi", "extra": true}));
    }

    // When the values change: revision 2, the previous one superseded, the removed object gone.
    let item = reconfigure(
        &h,
        "web",
        web_config("web", "web-apps", json!({"message": "ho"})),
    )
    .await;
    assert_succeeded(&item);
    assert_eq!(
        manifest::release_secrets(&h, "web-apps", "web").await,
        [(1, "superseded".into()), (2, "deployed".into())]
    );
    let cm = get(&h, "v1", "ConfigMap", Some("web-apps"), "web-config")
        .await
        .unwrap();
    assert_eq!(cm["data"]["message"], "ho");
    assert_eq!(cm["data"]["upgrade"], "true");
    assert!(
        get(&h, "v1", "ConfigMap", Some("web-apps"), "web-extra")
            .await
            .is_none()
    );
    assert!(
        get(&h, "v1", "Service", Some("web-apps"), "web-extra")
            .await
            .is_none()
    );

    // Real Helm upgrades what the plugin installed, then rolls back to it.
    let chart_tgz = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(chart_tgz.path(), package(&chart_dir("web"), "0.1.0")).unwrap();
    let chart = chart_tgz.path().display().to_string();
    if helm
        .ok(
            json!({"op": "upgrade", "chart": chart, "name": "web", "namespace": "web-apps",
                   "values": {"message": "from real helm"}}),
        )
        .await
        .is_some()
    {
        let cm = get(&h, "v1", "ConfigMap", Some("web-apps"), "web-config")
            .await
            .unwrap();
        assert_eq!(cm["data"]["message"], "from real helm");
        let rolled = helm
            .ok(json!({"op": "rollback", "name": "web", "namespace": "web-apps", "revision": 2}))
            .await
            .unwrap();
        assert_eq!(
            history(&rolled),
            [
                (1, "superseded".into()),
                (2, "superseded".into()),
                (3, "superseded".into()),
                (4, "deployed".into())
            ]
        );
        let cm = get(&h, "v1", "ConfigMap", Some("web-apps"), "web-config")
            .await
            .unwrap();
        assert_eq!(cm["data"]["message"], "ho");

        // And the plugin upgrades what real Helm wrote.
        let item = reconfigure(
            &h,
            "web",
            web_config("web", "web-apps", json!({"message": "again"})),
        )
        .await;
        assert_succeeded(&item);
        let status = helm
            .ok(json!({"op": "status", "name": "web", "namespace": "web-apps"}))
            .await
            .unwrap();
        assert_eq!(status["revision"], 5);
        assert_eq!(status["status"], "deployed");
    }

    // When the item is deleted: the release is uninstalled, its Secrets and objects are gone.
    delete_item(&h, "web").await;
    h.wait_gone("default", "web", Duration::from_secs(60)).await;
    assert!(
        manifest::release_secrets(&h, "web-apps", "web")
            .await
            .is_empty()
    );
    assert!(
        get(&h, "v1", "ConfigMap", Some("web-apps"), "web-config")
            .await
            .is_none()
    );
    assert!(
        get(&h, "apps/v1", "Deployment", Some("web-apps"), "web")
            .await
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_release_real_helm_installed_when_an_item_names_it_then_the_plugin_upgrades_and_uninstalls_it()
 {
    let h = harness().await;
    let helm = RealHelm::for_harness(&h).await;
    let chart_tgz = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(chart_tgz.path(), package(&chart_dir("web"), "0.1.0")).unwrap();
    let Some(_) = helm
        .ok(
            json!({"op": "install", "chart": chart_tgz.path().display().to_string(),
                   "name": "legacy", "namespace": "legacy", "values": {"message": "helm"}}),
        )
        .await
    else {
        return;
    };
    create(
        &h,
        &helm_item(
            "legacy",
            web_config("legacy", "legacy", json!({"message": "plugin"})),
        ),
    )
    .await;
    let item = wait_done(&h, "legacy").await;
    assert_succeeded(&item);
    let hist = helm
        .ok(json!({"op": "history", "name": "legacy", "namespace": "legacy"}))
        .await
        .unwrap();
    assert_eq!(
        history(&hist),
        [(1, "superseded".into()), (2, "deployed".into())]
    );
    let cm = get(&h, "v1", "ConfigMap", Some("legacy"), "legacy-config")
        .await
        .unwrap();
    assert_eq!(cm["data"]["message"], "plugin");
    assert_eq!(cm["data"]["revision"], "2");

    delete_item(&h, "legacy").await;
    h.wait_gone("default", "legacy", Duration::from_secs(60))
        .await;
    let list = helm
        .ok(json!({"op": "list", "namespace": "legacy"}))
        .await
        .unwrap();
    assert_eq!(
        list["releases"],
        json!([]),
        "real helm finds no release left"
    );
    assert!(
        get(&h, "v1", "ConfigMap", Some("legacy"), "legacy-config")
            .await
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_chart_repository_with_credentials_when_two_items_use_one_version_then_the_constraint_resolves_and_the_archive_is_downloaded_once()
 {
    let charts = vec![
        ("web", "0.1.0", package(&chart_dir("web"), "0.1.0")),
        ("web", "0.2.0", package(&chart_dir("web"), "0.2.0")),
        ("web", "1.0.0", package(&chart_dir("web"), "1.0.0")),
    ];
    let auth = "Basic dXNlcjpzZWNyZXQ=".to_string();
    let repo = ChartRepo::start(charts, Some(auth.clone())).await;
    let h = harness().await;
    // The Context carries the repository's credentials in a Secret (Landscaper's shape).
    put(
        &h,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "repo-auth", "namespace": "default"},
               "stringData": {"authHeader": auth}}),
    )
    .await;
    manifest::merge(
        &h,
        "landscaper.gardener.cloud/v1alpha1",
        "Context",
        Some("default"),
        "default",
        json!({"configurations": {"helmChartRepoCredentials": {"auths": [
            {"url": repo.url, "secretRef": {"name": "repo-auth"}}]}}}),
    )
    .await;
    for (name, ns) in [("repo-a", "repo-a"), ("repo-b", "repo-b")] {
        create(
            &h,
            &helm_item(
                name,
                json!({"name": name, "namespace": ns, "createNamespace": true,
                       "readinessChecks": {"disableDefault": true},
                       "chart": {"helmChartRepo": {"helmChartRepoUrl": format!("{}/", repo.url),
                                                   "helmChartName": "web",
                                                   "helmChartVersion": "~0.1 || ^0.2"}}}),
            ),
        )
        .await;
        let item = wait_done(&h, name).await;
        assert_succeeded(&item);
    }
    // `~0.1 || ^0.2` picks the newest match, 0.2.0 (not 1.0.0).
    let secret = get(
        &h,
        "v1",
        "Secret",
        Some("repo-a"),
        "sh.helm.release.v1.repo-a.v1",
    )
    .await
    .unwrap();
    assert_eq!(secret["metadata"]["labels"]["status"], "deployed");
    let item = h.items("default").get("repo-b").await.unwrap();
    assert_eq!(
        item.status().provider_status.unwrap()["release"]["chart"],
        "web-0.2.0"
    );
    assert_eq!(
        repo.hits("/web-0.2.0.tgz"),
        1,
        "cached by digest after the first item"
    );
    assert!(repo.hits("/index.yaml") >= 2, "the index is read per job");
    assert_eq!(repo.hits("/web-1.0.0.tgz"), 0);

    // A version the repository does not have: Failed, saying what is there.
    create(
        &h,
        &helm_item(
            "repo-missing",
            json!({"name": "repo-missing", "namespace": "repo-a",
                   "chart": {"helmChartRepo": {"helmChartRepoUrl": repo.url,
                                               "helmChartName": "web", "helmChartVersion": "9.x"}}}),
        ),
    )
    .await;
    let item = wait_phase(&h, "repo-missing", Phase::Failed).await;
    let e = item.status().last_error.unwrap();
    assert!(
        e.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{e:?}"
    );
    assert!(
        e.message.contains("no chart version found for \"9.x\""),
        "{}",
        e.message
    );
    assert!(e.message.contains("0.2.0"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_chart_in_an_oci_registry_when_reconciled_then_it_is_pulled_and_installed() {
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pushed = tokio::task::spawn_blocking({
        let dir = dir.path().display().to_string();
        let remote = format!("oci://{}/charts", registry.addr);
        move || {
            test_support::real_helm::run(
                json!({"op": "push", "chart": chart_dir("web").display().to_string(),
                           "destination": dir, "remote": remote}),
            )
        }
    })
    .await
    .unwrap();
    let Some(pushed) = pushed else { return };
    assert!(pushed.get("error").is_none(), "helm push: {pushed}");
    let mut o = options();
    o.config.fetch.plain_http = vec![registry.addr.clone()];
    let h = Harness::start_with(o).await;
    create(
        &h,
        &helm_item(
            "oci",
            json!({"name": "oci", "namespace": "oci", "createNamespace": true,
                   "readinessChecks": {"disableDefault": true},
                   "chart": {"ref": format!("{}/charts/web:0.1.0", registry.addr)}}),
        ),
    )
    .await;
    let item = wait_done(&h, "oci").await;
    assert_succeeded(&item);
    assert_eq!(
        manifest::release_secrets(&h, "oci", "oci").await,
        [(1, "deployed".into())]
    );

    // A tag that is not there: Failed, naming the reference.
    create(
        &h,
        &helm_item(
            "oci-missing",
            json!({"name": "oci-missing", "namespace": "oci",
                   "chart": {"ref": format!("{}/charts/web:9.9.9", registry.addr)}}),
        ),
    )
    .await;
    let item = wait_phase(&h, "oci-missing", Phase::Failed).await;
    let e = item.status().last_error.unwrap();
    assert!(e.message.contains("charts/web:9.9.9"), "{}", e.message);
    assert!(
        e.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_helm_deployment_false_when_reconciled_then_the_objects_are_applied_without_a_release_and_deleted_with_the_item()
 {
    let h = harness().await;
    let mut config = web_config("tpl", "tpl", json!({"extra": true}));
    config["helmDeployment"] = json!(false);
    create(&h, &helm_item("tpl", config)).await;
    let item = wait_done(&h, "tpl").await;
    assert_succeeded(&item);
    assert!(
        manifest::release_secrets(&h, "tpl", "tpl").await.is_empty(),
        "no release Secret"
    );
    let cm = get(&h, "v1", "ConfigMap", Some("tpl"), "tpl-config")
        .await
        .unwrap();
    assert_eq!(
        cm["metadata"]["labels"]["helm.deployer.landscaper.gardener.cloud/deployitem"],
        "tpl"
    );
    assert_eq!(
        cm["metadata"]["labels"]["manifest.deployer.landscaper.gardener.cloud/deployitem"],
        "tpl"
    );
    let kinds: Vec<String> = managed(&item)
        .iter()
        .map(|m| {
            format!(
                "{} {}",
                m["resource"]["kind"].as_str().unwrap(),
                m["policy"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        kinds.contains(&"CustomResourceDefinition manage".to_string()),
        "{kinds:?}"
    );
    assert!(kinds.contains(&"Namespace keep".to_string()), "{kinds:?}");
    assert!(
        kinds.contains(&"Deployment manage".to_string()),
        "{kinds:?}"
    );

    delete_item(&h, "tpl").await;
    h.wait_gone("default", "tpl", Duration::from_secs(60)).await;
    assert!(
        get(&h, "v1", "ConfigMap", Some("tpl"), "tpl-config")
            .await
            .is_none()
    );
    assert!(
        get(&h, "v1", "Namespace", None, "tpl").await.is_some(),
        "the keep-policy namespace stays, as helm uninstall keeps it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_chart_hooks_when_installed_and_uninstalled_then_they_run_in_order_with_their_delete_policies()
 {
    let h = harness().await;
    create(
        &h,
        &helm_item(
            "hooks",
            web_config("hooks", "hooks", json!({"hooks": true})),
        ),
    )
    .await;
    let item = wait_done(&h, "hooks").await;
    assert_succeeded(&item);
    let pre = get(&h, "v1", "ConfigMap", Some("hooks"), "hooks-pre-install").await;
    assert_eq!(
        pre.expect("pre-install hook ran")["data"]["ran"],
        "pre-install"
    );
    let post = get(&h, "v1", "ConfigMap", Some("hooks"), "hooks-post")
        .await
        .unwrap();
    assert_eq!(post["data"]["revision"], "1");
    assert!(
        get(&h, "v1", "ConfigMap", Some("hooks"), "hooks-succeeded")
            .await
            .is_none(),
        "hook-succeeded deletes the hook"
    );
    // Hooks are not release resources.
    assert!(
        get(&h, "v1", "ConfigMap", Some("hooks"), "hooks-pre-delete")
            .await
            .is_none()
    );

    delete_item(&h, "hooks").await;
    h.wait_gone("default", "hooks", Duration::from_secs(60))
        .await;
    let pre_delete = get(&h, "v1", "ConfigMap", Some("hooks"), "hooks-pre-delete").await;
    assert_eq!(
        pre_delete.expect("pre-delete hook ran")["data"]["ran"],
        "pre-delete"
    );
    assert!(
        manifest::release_secrets(&h, "hooks", "hooks")
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_upgrade_that_fails_when_atomic_then_the_release_is_rolled_back_and_a_foreign_object_is_adopted_only_with_take_ownership()
 {
    let h = harness().await;
    create(
        &h,
        &helm_item("atomic", web_config("atomic", "atomic", json!({}))),
    )
    .await;
    let item = wait_done(&h, "atomic").await;
    assert_succeeded(&item);
    // atomic implies wait, for the rollback too: the Deployment is up (as a controller says).
    deployment_ready(&h, "atomic", "atomic").await;

    // A pre-upgrade Job hook that never completes (no controller runs it) within the upgrade's
    // timeout: revision 2 fails, atomic rolls back to revision 1 as revision 3.
    let mut config = web_config(
        "atomic",
        "atomic",
        json!({"jobHook": true, "message": "new"}),
    );
    config["helmDeploymentConfig"] = json!({"upgrade": {"atomic": true, "timeout": "3s"}});
    let item = reconfigure(&h, "atomic", config).await;
    assert_eq!(item.status().phase, Phase::Failed, "{}", status_of(&item));
    let e = item.status().last_error.unwrap();
    assert!(
        e.message.contains("rolled back due to atomic being set"),
        "{}",
        e.message
    );
    assert!(e.message.contains("atomic-migrate"), "{}", e.message);
    assert!(e.codes.iter().any(|c| c == codes::TIMEOUT), "{e:?}");
    assert_eq!(
        manifest::release_secrets(&h, "atomic", "atomic").await,
        [
            (1, "superseded".into()),
            (2, "failed".into()),
            (3, "deployed".into())
        ]
    );
    let cm = get(&h, "v1", "ConfigMap", Some("atomic"), "atomic-config")
        .await
        .unwrap();
    assert_eq!(cm["data"]["message"], "hello", "revision 1's values");
    assert_eq!(cm["data"]["revision"], "1");

    // Someone else's ConfigMap that the next revision renders: refused as Helm refuses it,
    // before any revision is written, and retried (as Landscaper retries it) — the job stays
    // open with the refusal on the item.
    put(
        &h,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "foreign", "namespace": "atomic"}, "data": {"a": "b"}}),
    )
    .await;
    let config = web_config("atomic", "atomic", json!({"adopt": "foreign"}));
    let before = set_config(&h, "atomic", &helm_item("atomic", config)["spec"]["config"]).await;
    let item = h
        .wait_for("default", "atomic", Duration::from_secs(60), |i| {
            let s = i.status();
            s.job_id != before
                && s.last_error.as_ref().is_some_and(|e| {
                    e.message.contains("ConfigMap \"foreign\" in namespace \"atomic\" exists and cannot be imported into the current release")
                })
        })
        .await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Progressing, "{}", status_of(&item));
    assert_ne!(s.job_id, s.job_id_finished, "retried, not final");
    let e = s.last_error.unwrap();
    assert!(
        e.codes.iter().any(|c| c == codes::FOR_INFO_ONLY)
            && !e.codes.iter().any(|c| codes::is_unrecoverable(c)),
        "{e:?}"
    );
    assert_eq!(
        manifest::release_secrets(&h, "atomic", "atomic")
            .await
            .last(),
        Some(&(3, "deployed".to_string()))
    );

    // takeOwnership adopts it: the retried job succeeds with the new configuration.
    let mut config = web_config("atomic", "atomic", json!({"adopt": "foreign"}));
    config["helmDeploymentConfig"] = json!({"upgrade": {"takeOwnership": true}});
    set_config(&h, "atomic", &helm_item("atomic", config)["spec"]["config"]).await;
    let item = wait_next_job(&h, "atomic", &before).await;
    assert_succeeded(&item);
    let cm = get(&h, "v1", "ConfigMap", Some("atomic"), "foreign")
        .await
        .unwrap();
    assert_eq!(
        cm["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "atomic"
    );
    assert_eq!(cm["data"]["adopted"], "yes");
}

/// Bad input: each ends `Failed` with the right code and a message naming the cause, and the
/// host keeps serving (the last item still succeeds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_bad_input_when_reconciled_then_the_item_fails_saying_what_is_wrong() {
    let h = harness().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut unreachable = helm_item(
        "bad-unreachable",
        json!({"name": "x", "namespace": "bad",
               "chart": {"helmChartRepo": {"helmChartRepoUrl": format!("http://{closed}"),
                                           "helmChartName": "web", "helmChartVersion": "0.1.0"}}}),
    );
    unreachable["spec"]["timeout"] = json!("4s");
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            helm_item(
                "bad-template",
                web_config("x", "bad", json!({"broken": true})),
            ),
            codes::CONFIGURATION_PROBLEM,
            "web/templates/configmap.yaml:12",
        ),
        (
            helm_item(
                "bad-schema",
                web_config("x", "bad", json!({"replicas": -1})),
            ),
            codes::CONFIGURATION_PROBLEM,
            "replicas",
        ),
        (
            helm_item(
                "bad-config",
                json!({"name": "", "namespace": "bad", "chart": {"archive": {"raw": "x"}}}),
            ),
            codes::CONFIGURATION_PROBLEM,
            "spec.config.name: Required value",
        ),
        (
            helm_item(
                "bad-allow",
                json!({"name": "x", "namespace": "bad",
                       "chart": {"archive": {"remote": {"url": "https://charts.example.com/web-0.1.0.tgz"}}}}),
            ),
            codes::CONFIGURATION_PROBLEM,
            "not allowed by the host's fetch.allow list",
        ),
        (
            helm_item(
                "bad-resource-ref",
                json!({"name": "x", "namespace": "bad", "chart": {"resourceRef": "e30="}}),
            ),
            codes::CONFIGURATION_PROBLEM,
            "does not specify a repository context",
        ),
        (unreachable, codes::TIMEOUT, ""),
    ];
    for (item, _, _) in &cases {
        create(&h, item).await;
    }
    for (item, code, needle) in &cases {
        let name = item["metadata"]["name"].as_str().unwrap();
        let done = wait_phase(&h, name, Phase::Failed).await;
        let e = done.status().last_error.unwrap();
        assert!(e.codes.iter().any(|c| c == code), "{name}: {e:?}");
        assert!(e.message.contains(needle), "{name}: {}", e.message);
    }
    assert!(
        manifest::release_secrets(&h, "bad", "x").await.is_empty(),
        "nothing half-written"
    );
    create(
        &h,
        &helm_item("good", web_config("good", "good", json!({}))),
    )
    .await;
    let item = wait_done(&h, "good").await;
    assert_succeeded(&item);
}

/// `helmDeploymentConfig.upgrade.force`, Helm's replacement strategy: without it an upgrade
/// applies the chart's fields and leaves a field another writer added to a release's object; with
/// it the object is replaced by the chart's, and that field is gone. (Without the chart's Service:
/// a real API server refuses a replaced Service that lacks its allocated clusterIP, as it refuses
/// Helm 3's `--force`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_field_someone_else_added_when_upgraded_with_force_then_the_object_is_replaced() {
    let h = harness().await;
    let values = |message: &str| json!({"service": false, "message": message});
    create(
        &h,
        &helm_item("forced", web_config("forced", "forced", values("first"))),
    )
    .await;
    assert_succeeded(&wait_done(&h, "forced").await);
    // Someone else adds a key to the release's ConfigMap.
    let configmaps = manifest::api(&h.client, "v1", "ConfigMap", Some("forced"));
    configmaps
        .patch(
            "forced-config",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"data": {"added-by-someone": "else"}})),
        )
        .await
        .unwrap();
    let data = |cm: Value| cm["data"].clone();

    // An upgrade without force keeps it …
    let item = reconfigure(
        &h,
        "forced",
        web_config("forced", "forced", values("second")),
    )
    .await;
    assert_succeeded(&item);
    let cm = get(&h, "v1", "ConfigMap", Some("forced"), "forced-config")
        .await
        .unwrap();
    assert_eq!(data(cm.clone())["message"], "second");
    assert_eq!(
        data(cm)["added-by-someone"],
        "else",
        "applied, not replaced"
    );

    // … one with force replaces the object: only the chart's keys are left.
    let mut config = web_config("forced", "forced", values("third"));
    config["helmDeploymentConfig"] = json!({"upgrade": {"force": true}});
    let item = reconfigure(&h, "forced", config).await;
    assert_succeeded(&item);
    let cm = get(&h, "v1", "ConfigMap", Some("forced"), "forced-config")
        .await
        .unwrap();
    assert_eq!(data(cm.clone())["message"], "third");
    assert!(
        data(cm.clone()).get("added-by-someone").is_none(),
        "replaced: {cm}"
    );
}

/// `helmDeploymentConfig.uninstall.wait`: the item's deletion waits until the release's objects
/// are gone, not only deleted. A finalizer someone else holds on a release's ConfigMap keeps the
/// item of the release that waits; the one that does not wait is gone at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_object_held_by_a_finalizer_when_uninstalled_with_wait_then_the_item_waits_until_it_is_gone()
 {
    let h = harness().await;
    let values = json!({"service": false});
    for (name, wait) in [("waits", true), ("nowait", false)] {
        let mut config = web_config(name, name, values.clone());
        config["helmDeploymentConfig"] = json!({"uninstall": {"wait": wait}});
        create(&h, &helm_item(name, config)).await;
    }
    let hold = |name: &str, finalizers: Value| {
        let configmaps = manifest::api(&h.client, "v1", "ConfigMap", Some(name));
        let name = format!("{name}-config");
        async move {
            configmaps
                .patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
                )
                .await
                .unwrap();
        }
    };
    for name in ["waits", "nowait"] {
        assert_succeeded(&wait_done(&h, name).await);
        // Given someone else's finalizer on the release's ConfigMap …
        hold(name, json!(["example.com/hold"])).await;
        // … when the item is deleted …
        delete_item(&h, name).await;
    }
    // … then the release that does not wait is uninstalled at once, its ConfigMap still
    // terminating …
    h.wait_gone("default", "nowait", Duration::from_secs(60))
        .await;
    let held = get(&h, "v1", "ConfigMap", Some("nowait"), "nowait-config")
        .await
        .expect("still there, held by its finalizer");
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    // … while the one that waits keeps its item, saying what it waits for …
    let waiting = h
        .wait_for("default", "waits", Duration::from_secs(30), |i| {
            serde_json::to_value(i.status()).unwrap()["conditions"]
                .as_array()
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c["message"] == "waiting for ConfigMap waits/waits-config to be deleted"
                    })
                })
        })
        .await;
    assert!(
        waiting.metadata.deletion_timestamp.is_some(),
        "{}",
        status_of(&waiting)
    );
    // … until the finalizer goes: then the item goes too.
    hold("waits", Value::Null).await;
    h.wait_gone("default", "waits", Duration::from_secs(60))
        .await;
    hold("nowait", Value::Null).await;
}
