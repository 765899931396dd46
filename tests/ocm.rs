//! OCM component versions (issue #34, docs/ocm.md), end to end on a real OCI registry (Debian's
//! `docker-registry` on 127.0.0.1): the test tooling pushes component versions laid out as the
//! OCM CLI lays them out (`tests/support/src/ocm.rs`), the Context's `repositoryContext` names the
//! registry, and the helm deployer's `chart.resourceRef` (Landscaper's `getResourceKey`) is
//! resolved by the host's OCM reader (WIT `ocm`, 1.3) to a chart — as a local blob and as an OCI
//! artifact, in descriptors v2 and v3 — installed as a real Helm release. What is missing (a
//! resource, a component version, the repository context, the allowlist) ends the item `Failed`
//! with ERR_CONFIGURATION_PROBLEM and a message naming it, with nothing installed. (A one-off
//! cross-check against the OCM Go library, done outside the repository, is recorded in
//! docs/ocm.md.)

use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::landscaper::{DeployItem, Phase, codes};
use manifest::{create, put, wait_done};
use serde_json::{Value, json};
use test_support::chart_repo::{chart_dir, package};
use test_support::manifest;
use test_support::ocm::{
    HELM_CHART_LAYER, Resource, Schema, push_chart, push_component, resource_key,
};
use test_support::{Harness, Options};

const TYPE: &str = "landscaper.gardener.cloud/helm";
const API_VERSION: &str = "helm.deployer.landscaper.gardener.cloud/v1alpha1";
const COMPONENT: &str = "example.com/acme/web";

fn options(registry: &str, allow: &str) -> Options {
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        fetch: serde_yaml::from_str(&format!("allow: [{allow}]\n")).unwrap(),
        ..HostConfig::default()
    };
    config.fetch.plain_http = vec![registry.to_string()];
    Options {
        config,
        ..Options::default()
    }
}

/// A helm item installing the chart `resource_ref` names as release `name` in namespace `name`.
fn helm_item(name: &str, context: &str, resource_ref: &str) -> Value {
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": TYPE, "target": {"name": "default", "namespace": "default"},
                 "context": context, "timeout": "60s",
                 "config": {"apiVersion": API_VERSION, "kind": "ProviderConfiguration",
                            "name": name, "namespace": name, "createNamespace": true,
                            "readinessChecks": {"disableDefault": true},
                            "chart": {"resourceRef": resource_ref}}}
    })
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

/// Revisions and states of the Helm release `release` in `namespace` (its release Secrets).
async fn release_states(h: &Harness, namespace: &str, release: &str) -> Vec<String> {
    let secrets = manifest::api(&h.client, "v1", "Secret", Some(namespace));
    let lp = kube::api::ListParams::default().labels(&format!("owner=helm,name={release}"));
    let mut out: Vec<String> = secrets
        .list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| {
            let labels = s.metadata.labels.unwrap_or_default();
            format!("v{} {}", labels["version"], labels["status"])
        })
        .collect();
    out.sort();
    out
}

/// Item `name` ended `Succeeded` with a deployed Helm release `name` whose chart's ConfigMap is
/// applied.
async fn assert_installed(h: &Harness, name: &str) {
    let item = wait_done(h, name).await;
    assert_eq!(
        item.status().phase,
        Phase::Succeeded,
        "{name}: {}",
        status_of(&item)
    );
    assert_eq!(
        release_states(h, name, name).await,
        ["v1 deployed"],
        "{name}"
    );
    let cm = manifest::get(h, "v1", "ConfigMap", Some(name), &format!("{name}-config")).await;
    assert!(cm.is_some(), "{name}: the chart's ConfigMap was applied");
}

/// The Context `default` names the registry's OCM repository.
async fn point_context_at(h: &Harness, registry: &str, sub_path: &str) {
    manifest::merge(
        h,
        "landscaper.gardener.cloud/v1alpha1",
        "Context",
        Some("default"),
        "default",
        json!({"repositoryContext": {"type": "OCIRegistry", "baseUrl": registry, "subPath": sub_path}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_component_version_in_a_registry_when_helm_items_name_its_charts_by_resource_key_then_real_releases_are_installed()
 {
    // Given: a component version (descriptor v2) whose chart is a local blob and, as a second
    // resource, an OCI artifact in the same registry; and a v3 descriptor of a later version.
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let addr = registry.addr.clone();
    let archive = package(&chart_dir("web"), "0.1.0");
    let chart_ref = push_chart(&addr, "charts/web", "0.1.0", archive.clone()).await;
    // ... and a classic Helm repository (HTTP, index.yaml) and an OCI one (`helm` access).
    let repo = test_support::chart_repo::ChartRepo::start(
        vec![
            ("web", "0.1.0", archive.clone()),
            ("web", "0.2.0", package(&chart_dir("web"), "0.2.0")),
        ],
        None,
    )
    .await;
    push_component(
        &addr,
        "ocm",
        COMPONENT,
        "1.0.0",
        vec![
            Resource::local("chart", "helmChart", HELM_CHART_LAYER, archive.clone()),
            Resource::oci("chart-oci", "helmChart", &chart_ref),
            Resource::helm("chart-repo", &repo.url, "web:0.1.0"),
            Resource::helm(
                "chart-helm-oci",
                &format!("oci://{addr}/charts"),
                "web:0.1.0",
            ),
            Resource::helm("chart-repo-missing", &repo.url, "web:9.9.9"),
        ],
        Schema::V2,
    )
    .await;
    push_component(
        &addr,
        "ocm",
        COMPONENT,
        "2.0.0+build.7",
        vec![Resource::local(
            "chart",
            "helmChart",
            HELM_CHART_LAYER,
            archive,
        )],
        Schema::V3,
    )
    .await;
    let h = Harness::start_with(options(&addr, "127.0.0.1")).await;
    point_context_at(&h, &addr, "ocm").await;

    // When: helm items name the charts by Landscaper's resource key.
    let items = [
        ("ocm-local", resource_key(COMPONENT, "1.0.0", "chart")),
        ("ocm-oci", resource_key(COMPONENT, "1.0.0", "chart-oci")),
        ("ocm-v3", resource_key(COMPONENT, "2.0.0+build.7", "chart")),
        ("ocm-repo", resource_key(COMPONENT, "1.0.0", "chart-repo")),
        (
            "ocm-helm-oci",
            resource_key(COMPONENT, "1.0.0", "chart-helm-oci"),
        ),
    ];
    for (name, key) in &items {
        create(&h, &helm_item(name, "default", key)).await;
    }

    // Then: each is a real, deployed Helm release of the chart.
    for (name, _) in &items {
        assert_installed(&h, name).await;
    }
    // The Helm repository's index was read; its chart has the digest the index names, which is
    // the local blob's too: downloaded at most once (the host's digest cache). A version the
    // repository lacks is named.
    assert!(repo.hits("/index.yaml") >= 1);
    assert!(repo.hits("/web-0.1.0.tgz") <= 1);
    create(
        &h,
        &helm_item(
            "ocm-repo-missing",
            "default",
            &resource_key(COMPONENT, "1.0.0", "chart-repo-missing"),
        ),
    )
    .await;
    let item = wait_phase(&h, "ocm-repo-missing", Phase::Failed).await;
    let e = item.status().last_error.unwrap();
    assert!(
        e.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{e:?}"
    );
    assert!(
        e.message
            .contains("chart web version 9.9.9 is not in the Helm repository")
            && e.message.contains("0.1.0, 0.2.0"),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_what_a_resource_key_needs_is_missing_when_reconciled_then_the_item_fails_naming_it()
{
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let addr = registry.addr.clone();
    let archive = package(&chart_dir("web"), "0.1.0");
    push_component(
        &addr,
        "ocm",
        COMPONENT,
        "1.0.0",
        vec![Resource::local(
            "chart",
            "helmChart",
            HELM_CHART_LAYER,
            archive,
        )],
        Schema::V2,
    )
    .await;
    let h = Harness::start_with(options(&addr, "127.0.0.1")).await;
    point_context_at(&h, &addr, "ocm").await;
    // A Context without repositoryContext, and one whose registry the host may not reach.
    put(
        &h,
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
               "metadata": {"name": "bare", "namespace": "default"}}),
    )
    .await;
    put(
        &h,
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
               "metadata": {"name": "elsewhere", "namespace": "default"},
               "repositoryContext": {"type": "OCIRegistry", "baseUrl": "registry.example.com/ocm"}}),
    )
    .await;
    let cases = [
        (
            "ocm-no-resource",
            "default",
            resource_key(COMPONENT, "1.0.0", "nope"),
            vec!["has no resource name=nope", "it has: name=chart"],
        ),
        (
            "ocm-no-component",
            "default",
            resource_key("example.com/acme/missing", "1.0.0", "chart"),
            vec![
                "component version example.com/acme/missing:1.0.0",
                "not found",
            ],
        ),
        (
            "ocm-no-version",
            "default",
            resource_key(COMPONENT, "9.9.9", "chart"),
            vec!["component version example.com/acme/web:9.9.9"],
        ),
        (
            "ocm-no-repository",
            "bare",
            resource_key(COMPONENT, "1.0.0", "chart"),
            vec!["does not specify a repository context"],
        ),
        (
            "ocm-not-allowed",
            "elsewhere",
            resource_key(COMPONENT, "1.0.0", "chart"),
            vec![
                "registry.example.com/ocm/component-descriptors/example.com/acme/web:1.0.0",
                "fetch.allow",
            ],
        ),
        (
            "ocm-bad-key",
            "default",
            "e30=".to_string(),
            vec!["not a global resource identity"],
        ),
    ];
    for (name, context, key, _) in &cases {
        create(&h, &helm_item(name, context, key)).await;
    }
    for (name, _, _, needles) in &cases {
        let item = wait_phase(&h, name, Phase::Failed).await;
        let e = item.status().last_error.unwrap();
        assert!(
            e.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
            "{name}: {e:?}"
        );
        for needle in needles {
            assert!(
                e.message.contains(needle),
                "{name}: {:?} lacks {needle:?}",
                e.message
            );
        }
        assert!(
            release_states(&h, name, name).await.is_empty(),
            "{name}: nothing installed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_registry_that_wants_credentials_when_the_context_has_its_pull_secret_then_the_chart_installs_and_without_it_the_item_fails_naming_what_is_missing()
 {
    // Given: a registry with basic authentication holding the component version.
    let Some(registry) = test_support::registry::start_registry_with_auth("ocm", "s3cret") else {
        return;
    };
    let addr = registry.addr.clone();
    let archive = package(&chart_dir("web"), "0.1.0");
    test_support::ocm::push_chart_component(&addr, Some(("ocm", "s3cret")), COMPONENT, archive)
        .await;
    let h = Harness::start_with(options(&addr, "127.0.0.1")).await;
    // The Context `default` names the repository and a pull secret with the credentials; the
    // Context `anonymous` names the same repository without one.
    put(
        &h,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
               "metadata": {"name": "registry-pull", "namespace": "default"},
               "stringData": {".dockerconfigjson": test_support::ocm::docker_config(&addr, "ocm", "s3cret")}}),
    )
    .await;
    let repository = json!({"type": "OCIRegistry", "baseUrl": addr, "subPath": "ocm"});
    manifest::merge(
        &h,
        "landscaper.gardener.cloud/v1alpha1",
        "Context",
        Some("default"),
        "default",
        json!({"repositoryContext": repository, "registryPullSecrets": [{"name": "registry-pull"}]}),
    )
    .await;
    put(
        &h,
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
               "metadata": {"name": "anonymous", "namespace": "default"},
               "repositoryContext": repository}),
    )
    .await;

    // The same credentials as OCM configurations: a pull secret with `.ocmcredentialconfig`,
    // and the Context's `ocmConfig` ConfigMap (`.ocmconfig`); and an ocmConfig that is missing.
    let port = addr.rsplit_once(':').unwrap().1;
    let ocm_credentials = format!(
        "type: credentials.config.ocm.software\nconsumers:\n- identity: {{type: OCIRegistry, hostname: 127.0.0.1, port: \"{port}\"}}\n  credentials:\n  - type: Credentials\n    properties: {{username: ocm, password: s3cret}}\n"
    );
    put(
        &h,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "ocm-pull", "namespace": "default"},
               "stringData": {".ocmcredentialconfig": ocm_credentials}}),
    )
    .await;
    put(
        &h,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "ocm-config", "namespace": "default"},
               "data": {".ocmconfig": format!(
                   "type: generic.config.ocm.software/v1\nconfigurations:\n- {}",
                   ocm_credentials.replace('\n', "\n  "))}}),
    )
    .await;
    for (name, extra) in [
        (
            "ocm-secret",
            json!({"registryPullSecrets": [{"name": "ocm-pull"}]}),
        ),
        ("ocm-config", json!({"ocmConfig": {"name": "ocm-config"}})),
        (
            "ocm-config-missing",
            json!({"ocmConfig": {"name": "nowhere"}}),
        ),
    ] {
        let mut context = json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
                                 "metadata": {"name": name, "namespace": "default"},
                                 "repositoryContext": repository});
        for (k, v) in extra.as_object().unwrap() {
            context[k] = v.clone();
        }
        put(&h, context).await;
    }

    // When: one item per Context names the chart.
    let key = resource_key(COMPONENT, "1.0.0", "chart");
    create(&h, &helm_item("ocm-auth", "default", &key)).await;
    create(&h, &helm_item("ocm-anonymous", "anonymous", &key)).await;
    for name in ["ocm-secret", "ocm-config", "ocm-config-missing"] {
        create(&h, &helm_item(name, name, &key)).await;
    }

    // Then: with the pull secret a release; without, Failed naming the missing credentials.
    let item = wait_done(&h, "ocm-auth").await;
    assert_eq!(
        item.status().phase,
        Phase::Succeeded,
        "{}",
        status_of(&item)
    );
    assert_eq!(
        release_states(&h, "ocm-auth", "ocm-auth").await,
        ["v1 deployed"]
    );
    let item = wait_phase(&h, "ocm-anonymous", Phase::Failed).await;
    let e = item.status().last_error.unwrap();
    assert!(
        e.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{e:?}"
    );
    assert!(
        e.message.contains("missing credentials")
            && e.message
                .contains("context anonymous has no registryPullSecrets"),
        "{}",
        e.message
    );
    assert!(
        release_states(&h, "ocm-anonymous", "ocm-anonymous")
            .await
            .is_empty()
    );
    for name in ["ocm-secret", "ocm-config"] {
        let item = wait_done(&h, name).await;
        assert_eq!(
            item.status().phase,
            Phase::Succeeded,
            "{name}: {}",
            status_of(&item)
        );
        assert_eq!(
            release_states(&h, name, name).await,
            ["v1 deployed"],
            "{name}"
        );
    }
    let item = wait_phase(&h, "ocm-config-missing", Phase::Failed).await;
    let e = item.status().last_error.unwrap();
    assert!(
        e.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{e:?}"
    );
    assert!(
        e.message
            .contains("ConfigMap default/nowhere (the Context's ocmConfig) not found"),
        "{}",
        e.message
    );
}
