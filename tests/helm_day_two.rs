//! The helm deployer on day two: what happens when a release cannot be installed yet, and what
//! template mode applies. Runs on both backends (embedded and a real kube-apiserver 1.20).
//!
//! - A failed install is retried until the item's progressing timeout, as Landscaper's helm
//!   deployer retries it: the error stays visible on the item (`lastError`, phase
//!   `Progressing`), the job succeeds once the cause is gone (here: the CRD of a custom resource
//!   the chart renders), and ends `Failed` with that error and `ERR_TIMEOUT` when it never is.
//! - Template mode (`helmDeployment: false`) applies hook templates as ordinary objects, as
//!   Landscaper's manifest-only mode does.

mod manifest;
mod support;

use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::landscaper::{DeployItem, Phase, codes};
use manifest::{create, get, put, wait_done};
use serde_json::{Value, json};
use support::chart_repo::archive_raw;
use support::{Harness, Options};

async fn harness() -> Harness {
    Harness::start_with(Options {
        config: HostConfig {
            requeue_interval: Some("200ms".into()),
            ..HostConfig::default()
        },
        ..Options::default()
    })
    .await
}

/// A helm DeployItem on the harness' `default` Target, with the chart `tests/helm/charts/<chart>`
/// inline.
fn helm_item(name: &str, chart: &str, timeout: &str, mut config: Value) -> Value {
    config["apiVersion"] = json!("helm.deployer.landscaper.gardener.cloud/v1alpha1");
    config["kind"] = json!("ProviderConfiguration");
    config["chart"] = json!({"archive": {"raw": archive_raw(chart, "0.1.0")}});
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/helm",
                 "target": {"name": "default", "namespace": "default"},
                 "timeout": timeout, "config": config}
    })
}

/// The CRD of the `gadget` chart's custom resource (not in the chart: the cluster must serve it).
fn gadget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.day-two.wasm-deployer.dev"},
        "spec": {
            "group": "day-two.wasm-deployer.dev",
            "names": {"kind": "Gadget", "listKind": "GadgetList", "plural": "gadgets", "singular": "gadget"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

fn status_of(item: &DeployItem) -> String {
    let s = item.status();
    format!("{:?} {:?}", s.phase, s.last_error)
}

/// The release Secrets of `release` in `namespace` (their `status` labels, by revision).
async fn release_statuses(h: &Harness, namespace: &str, release: &str) -> Vec<String> {
    let secrets = manifest::api(&h.client, "v1", "Secret", Some(namespace));
    let lp = kube::api::ListParams::default().labels(&format!("owner=helm,name={release}"));
    let mut out: Vec<(i64, String)> = secrets
        .list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| {
            let labels = s.metadata.labels.unwrap_or_default();
            (labels["version"].parse().unwrap(), labels["status"].clone())
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, s)| s).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_custom_resource_whose_crd_is_missing_when_the_crd_appears_within_the_timeout_then_the_retried_install_succeeds()
 {
    let h = harness().await;
    for (name, helm_deployment) in [("gadget", true), ("gadget-tpl", false)] {
        create(
            &h,
            &helm_item(
                name,
                "gadget",
                "120s",
                json!({"name": name, "namespace": name, "createNamespace": true,
                       "helmDeployment": helm_deployment, "values": {"size": 3}}),
            ),
        )
        .await;
    }
    for name in ["gadget", "gadget-tpl"] {
        // The install fails on the custom resource and is retried: Progressing, the error on the
        // item, no unrecoverable code, the job open.
        let item = h
            .wait_for("default", name, Duration::from_secs(60), |i| {
                i.status()
                    .last_errors
                    .iter()
                    .filter(|e| e.message.contains("Gadget"))
                    .count()
                    >= 2
            })
            .await;
        let s = item.status();
        assert_eq!(s.phase, Phase::Progressing, "{name}: {}", status_of(&item));
        assert_ne!(s.job_id, s.job_id_finished, "{name}: the job stays open");
        let e = s.last_error.unwrap();
        assert!(
            e.codes
                .iter()
                .all(|c| !deployer_host::landscaper::codes::is_unrecoverable(c)),
            "{name}: retried, not final: {e:?}"
        );
        if name == "gadget" {
            assert_eq!(e.operation, "InstallHelmRelease");
            assert!(
                e.message.contains("no matches for kind \"Gadget\"")
                    && e.message.contains("ensure CRDs are installed first"),
                "{}",
                e.message
            );
            // Helm fails while building the objects: no revision is recorded for that.
            assert!(release_statuses(&h, name, name).await.is_empty());
        }
    }

    // The CRD arrives (another release, an operator): the next attempt installs.
    put(&h, gadget_crd()).await;
    for name in ["gadget", "gadget-tpl"] {
        let item = h
            .wait_for("default", name, Duration::from_secs(60), |i| {
                let s = i.status();
                s.job_id == s.job_id_finished
            })
            .await;
        assert_eq!(
            item.status().phase,
            Phase::Succeeded,
            "{name}: {}",
            status_of(&item)
        );
        assert!(item.status().last_error.is_none());
        let gadget = get(
            &h,
            "day-two.wasm-deployer.dev/v1",
            "Gadget",
            Some(name),
            name,
        )
        .await
        .expect("the custom resource is applied");
        assert_eq!(gadget["spec"]["size"], 3);
    }
    assert_eq!(release_statuses(&h, "gadget", "gadget").await, ["deployed"]);
    assert!(
        release_statuses(&h, "gadget-tpl", "gadget-tpl")
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_custom_resource_whose_crd_never_appears_when_the_timeout_passes_then_the_item_fails_with_the_last_error()
 {
    let h = harness().await;
    create(
        &h,
        &helm_item(
            "never",
            "gadget",
            "8s",
            json!({"name": "never", "namespace": "never", "createNamespace": true}),
        ),
    )
    .await;
    let item = wait_done(&h, "never").await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Failed, "{}", status_of(&item));
    let e = s.last_error.unwrap();
    assert!(
        e.codes.iter().any(|c| c == codes::TIMEOUT),
        "ends at the progressing timeout: {e:?}"
    );
    assert_eq!(e.operation, "InstallHelmRelease");
    assert!(
        e.message.contains("no matches for kind \"Gadget\"")
            && e.message.contains("retried until the progressing timeout"),
        "the last error, not a bare timeout: {}",
        e.message
    );
    assert!(
        s.last_errors.len() >= 2,
        "it was retried: {:?}",
        s.last_errors
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_helm_deployment_false_when_the_chart_has_hooks_then_they_are_applied_as_ordinary_objects()
 {
    let h = harness().await;
    create(
        &h,
        &helm_item(
            "tpl-hooks",
            "web",
            "60s",
            json!({"name": "tpl", "namespace": "tpl", "createNamespace": true,
                   "helmDeployment": false, "values": {"hooks": true},
                   "readinessChecks": {"disableDefault": true}}),
        ),
    )
    .await;
    let item = wait_done(&h, "tpl-hooks").await;
    assert_eq!(
        item.status().phase,
        Phase::Succeeded,
        "{}",
        status_of(&item)
    );
    // Every hook of every event, as Landscaper's manifest-only mode applies them: rendered once,
    // labelled and managed like the other templates (delete policies do not apply).
    let managed: Vec<String> = manifest::managed(&item)
        .iter()
        .map(|m| m["resource"]["name"].as_str().unwrap().to_string())
        .collect();
    for hook in [
        "tpl-pre-install",
        "tpl-post",
        "tpl-succeeded",
        "tpl-pre-delete",
    ] {
        let cm = get(&h, "v1", "ConfigMap", Some("tpl"), hook)
            .await
            .unwrap_or_else(|| panic!("hook {hook} applied"));
        assert_eq!(
            cm["metadata"]["labels"]["helm.deployer.landscaper.gardener.cloud/deployitem"],
            "tpl-hooks"
        );
        assert!(
            cm["metadata"]["annotations"]["helm.sh/hook"].is_string(),
            "applied as rendered"
        );
        assert!(managed.contains(&hook.to_string()), "{managed:?}");
    }
    assert_eq!(
        get(&h, "v1", "ConfigMap", Some("tpl"), "tpl-post")
            .await
            .unwrap()["data"]["revision"],
        "1",
        "rendered as an install"
    );
    // The release's ordinary templates are there too, and no release Secret.
    assert!(
        get(&h, "v1", "ConfigMap", Some("tpl"), "tpl-config")
            .await
            .is_some()
    );
    assert!(release_statuses(&h, "tpl", "tpl").await.is_empty());
}
