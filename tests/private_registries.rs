//! Private chart repositories and OCI registries behind a company's own CA (issue #43,
//! docs/helm-deployer.md "Trusted CAs"): the test makes a CA, serves a chart repository
//! (HTTPS on 127.0.0.1) and Debian's `docker-registry` (HTTPS and basic authentication) with
//! certificates it signed, and the helm deployer's items reach them only when **their own
//! Context** names that CA — `helmChartRepoCredentials[].customCAData` for chart repositories,
//! `certificateAuthority` of the OCM credentials (a pull secret's `.ocmcredentialconfig`, the
//! `ocmConfig` ConfigMap) for registries, as Landscaper reads them. An item whose Context lacks
//! the CA fails at once (`Failed`, ERR_CONFIGURATION_PROBLEM) with a message naming the
//! certificate problem and the URL, even after another item's CA was used for the same server:
//! trust is per item, never global. The operator's own CA (`fetch.caBundle`) is trusted for
//! every item and for plugin delivery from a registry behind it. Runs on both backends.

use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::landscaper::{DeployItem, Phase, codes};
use embedded_apiserver::tls::ServingCert;
use manifest::{create, put, wait_done};
use serde_json::{Value, json};
use test_support::chart_repo::{ChartRepo, chart_dir, package};
use test_support::manifest;
use test_support::ocm::resource_key;
use test_support::{Harness, Options};

const TYPE: &str = "landscaper.gardener.cloud/helm";
const API_VERSION: &str = "helm.deployer.landscaper.gardener.cloud/v1alpha1";
const COMPONENT: &str = "example.com/acme/web";

/// A host that may download from 127.0.0.1, over HTTPS only (no `plainHttp`, no
/// `insecureSkipVerify`, no host-wide CA).
async fn harness() -> Harness {
    Harness::start_with(Options {
        config: HostConfig {
            requeue_interval: Some("200ms".into()),
            fetch: serde_yaml::from_str("allow: [127.0.0.1]\nplainHttp: []\n").unwrap(),
            ..HostConfig::default()
        },
        ..Options::default()
    })
    .await
}

/// A helm item installing `chart` as release `name` (namespace `name`) with Context `context`.
fn helm_item(name: &str, context: &str, chart: Value) -> Value {
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": TYPE, "target": {"name": "default", "namespace": "default"},
                 "context": context, "timeout": "60s",
                 "config": {"apiVersion": API_VERSION, "kind": "ProviderConfiguration",
                            "name": name, "namespace": name, "createNamespace": true,
                            "readinessChecks": {"disableDefault": true},
                            "chart": chart}}
    })
}

/// A Context `name` in `default` with `fields`.
async fn context(h: &Harness, name: &str, fields: Value) {
    let mut context = json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
                             "metadata": {"name": name, "namespace": "default"}});
    for (k, v) in fields.as_object().unwrap() {
        context[k] = v.clone();
    }
    put(h, context).await;
}

fn status_of(item: &DeployItem) -> String {
    let s = item.status();
    format!("{:?} {:?}", s.phase, s.last_error)
}

/// The item succeeded and its chart's ConfigMap is on the cluster.
async fn assert_installed(h: &Harness, name: &str) {
    let item = wait_done(h, name).await;
    assert_eq!(
        item.status().phase,
        Phase::Succeeded,
        "{name}: {}",
        status_of(&item)
    );
    let cm = manifest::get(h, "v1", "ConfigMap", Some(name), &format!("{name}-config")).await;
    assert!(cm.is_some(), "{name}: the chart's ConfigMap was applied");
}

/// The item failed at once (no retries until its timeout) with a configuration problem whose
/// message holds every needle; nothing of the chart was applied.
async fn assert_failed_naming(h: &Harness, name: &str, needles: &[&str]) {
    let item = h
        .wait_for("default", name, Duration::from_secs(30), |i| {
            let s = i.status();
            !s.job_id.is_empty() && s.job_id == s.job_id_finished
        })
        .await;
    assert_eq!(
        item.status().phase,
        Phase::Failed,
        "{name}: {}",
        status_of(&item)
    );
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
    let cm = manifest::get(h, "v1", "ConfigMap", Some(name), &format!("{name}-config")).await;
    assert!(cm.is_none(), "{name}: nothing was applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_chart_repository_behind_an_internal_ca_when_the_items_context_gives_the_ca_as_custom_ca_data_then_the_chart_installs_and_without_it_the_item_fails_naming_the_certificate_and_the_url()
 {
    // Given: a chart repository over HTTPS with a certificate of the test's CA, wanting a
    // password; Contexts with the credentials and the CA, with the credentials only, and with
    // the CA of another company.
    let cert = ServingCert::generate(&[]).unwrap();
    let other = ServingCert::generate(&[]).unwrap();
    let auth = "Basic dXNlcjpzZWNyZXQ=".to_string();
    let repo = ChartRepo::start_tls(
        vec![("web", "0.1.0", package(&chart_dir("web"), "0.1.0"))],
        Some(auth.clone()),
        &cert,
    )
    .await;
    let h = harness().await;
    let credentials = |ca: Option<&str>| {
        let mut entry = json!({"url": repo.url, "authHeader": auth});
        if let Some(ca) = ca {
            entry["customCAData"] = json!(ca);
        }
        json!({"configurations": {"helmChartRepoCredentials": {"auths": [entry]}}})
    };
    context(&h, "with-ca", credentials(Some(cert.ca_pem()))).await;
    context(&h, "without-ca", credentials(None)).await;
    context(&h, "other-ca", credentials(Some(other.ca_pem()))).await;
    let chart = json!({"helmChartRepo": {"helmChartRepoUrl": repo.url,
                                         "helmChartName": "web", "helmChartVersion": "0.1.0"}});

    // When: an item of each Context installs the chart, the one with the CA first.
    create(&h, &helm_item("repo-with-ca", "with-ca", chart.clone())).await;
    // Then: it installs.
    assert_installed(&h, "repo-with-ca").await;

    // And: the same repository is not trusted for items whose Context lacks that CA, though the
    // host has just spoken to it with it.
    create(
        &h,
        &helm_item("repo-without-ca", "without-ca", chart.clone()),
    )
    .await;
    create(&h, &helm_item("repo-other-ca", "other-ca", chart.clone())).await;
    let index = format!("{}/index.yaml", repo.url);
    assert_failed_naming(
        &h,
        "repo-without-ca",
        &[
            &index,
            "TLS certificate is not trusted",
            "UnknownIssuer",
            "customCAData",
        ],
    )
    .await;
    assert_failed_naming(
        &h,
        "repo-other-ca",
        &[
            &index,
            "TLS certificate is not trusted",
            "did not verify it",
        ],
    )
    .await;
    // The chart archive was downloaded once, by the trusted item only.
    assert_eq!(repo.hits("/web-0.1.0.tgz"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_oci_registry_behind_an_internal_ca_when_the_contexts_ocm_credentials_carry_its_certificate_authority_then_charts_by_ref_and_by_ocm_resource_install_and_without_it_they_fail_naming_the_certificate()
 {
    // Given: a registry over HTTPS (the test's CA) with basic authentication, holding a chart
    // (as `helm push` stores it) and a component version with that chart as a local blob.
    let cert = ServingCert::generate(&[]).unwrap();
    let Some(registry) = test_support::registry::start_registry_tls("ocm", "s3cret", &cert) else {
        return;
    };
    let addr = registry.addr.clone();
    test_support::ocm::trust(&addr, cert.ca_pem());
    let archive = package(&chart_dir("web"), "0.1.0");
    let reference = test_support::ocm::push_chart_as(
        &addr,
        Some(("ocm", "s3cret")),
        "charts/web",
        "0.1.0",
        archive.clone(),
    )
    .await;
    test_support::ocm::push_chart_component(&addr, Some(("ocm", "s3cret")), COMPONENT, archive)
        .await;
    let h = harness().await;

    // The credentials as OCM configurations with the registry's CA — a pull secret's
    // `.ocmcredentialconfig` (what Landscaper's own private-registry spec creates) and an
    // `ocmConfig` ConfigMap — and as a Docker config, which has no place for a CA.
    let (host, port) = addr.rsplit_once(':').unwrap();
    let ocm_credentials = serde_json::to_string(&json!({
        "type": "credentials.config.ocm.software",
        "consumers": [{"identity": {"type": "OCIRegistry", "hostname": host, "port": port},
                       "credentials": [{"type": "Credentials", "properties": {
                           "username": "ocm", "password": "s3cret",
                           "certificateAuthority": cert.ca_pem()}}]}]
    }))
    .unwrap();
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
                   "type: generic.config.ocm.software/v1\nconfigurations:\n- {ocm_credentials}\n")}}),
    )
    .await;
    put(
        &h,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
               "metadata": {"name": "docker-pull", "namespace": "default"},
               "stringData": {".dockerconfigjson": test_support::ocm::docker_config(&addr, "ocm", "s3cret")}}),
    )
    .await;
    let repository = json!({"type": "OCIRegistry", "baseUrl": addr, "subPath": "ocm"});
    context(
        &h,
        "pull-secret-ca",
        json!({"repositoryContext": repository, "registryPullSecrets": [{"name": "ocm-pull"}]}),
    )
    .await;
    context(
        &h,
        "ocm-config-ca",
        json!({"repositoryContext": repository, "ocmConfig": {"name": "ocm-config"}}),
    )
    .await;
    context(
        &h,
        "docker-only",
        json!({"repositoryContext": repository, "registryPullSecrets": [{"name": "docker-pull"}]}),
    )
    .await;
    let by_ref = json!({"ref": reference});
    let by_key = json!({"resourceRef": resource_key(COMPONENT, "1.0.0", "chart")});

    // When: items with the CA in their Context install the chart by `ref` and by OCM key.
    create(
        &h,
        &helm_item("ref-with-ca", "pull-secret-ca", by_ref.clone()),
    )
    .await;
    create(
        &h,
        &helm_item("ocm-with-ca", "ocm-config-ca", by_key.clone()),
    )
    .await;
    // Then: both install.
    assert_installed(&h, "ref-with-ca").await;
    assert_installed(&h, "ocm-with-ca").await;

    // And: items whose Context has the password but not the CA fail, naming the certificate
    // problem and where.
    create(&h, &helm_item("ref-without-ca", "docker-only", by_ref)).await;
    create(&h, &helm_item("ocm-without-ca", "docker-only", by_key)).await;
    for name in ["ref-without-ca", "ocm-without-ca"] {
        assert_failed_naming(
            &h,
            name,
            &[
                &addr,
                "TLS certificate is not trusted",
                "UnknownIssuer",
                "certificateAuthority",
            ],
        )
        .await;
    }
}

/// A host started with `fetch.caBundle` = `bundle` (or none), plugin delivery running, whose
/// plugin directory holds only the helm plugin (the mock comes from the registry).
async fn host_with_ca_bundle(
    bundle: Option<&std::path::Path>,
) -> (
    Harness,
    std::sync::Arc<deployer_host::plugin_sources::catalog::Catalog>,
    tempfile::TempDir,
) {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        test_support::plugins_dir().join("helm.wasm"),
        plugins.path().join("helm.wasm"),
    )
    .unwrap();
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        fetch: serde_yaml::from_str("allow: [127.0.0.1]\nplainHttp: []\n").unwrap(),
        ..HostConfig::default()
    };
    config.fetch.ca_bundle = bundle.map(|b| b.to_path_buf());
    config.plugins.dir = Some(plugins.path().to_path_buf());
    config.plugins.cache_dir = Some(test_support::plugins_dir().join("../plugin-cache"));
    config.plugins.namespace = Some("default".into());
    config.plugins.poll_interval = Some("200ms".into());
    let h = Harness::start_with(Options {
        config: config.clone(),
        ..Options::default()
    })
    .await;
    let (catalog, _task) = deployer_host::plugins::start_delivery(
        &config,
        h.client.clone(),
        h.deployer.plugins.clone(),
        h.deployer.hooks.clone(),
    )
    .unwrap();
    (h, catalog, plugins)
}

/// Declares the WasmPlugin `delivered` from `reference` (pull secret `regcred`) and waits until
/// its status says whether it serves.
async fn deliver(h: &Harness, reference: &str, docker_config: &str) -> Value {
    use kube::api::{Api, DynamicObject, PostParams};
    put(
        h,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
               "metadata": {"name": "regcred", "namespace": "default"},
               "stringData": {".dockerconfigjson": docker_config}}),
    )
    .await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        h.client.clone(),
        "default",
        &deployer_host::plugin_sources::declarations::resource(),
    );
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-deployer.dev/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": "delivered", "namespace": "default"},
        "spec": {"source": {"oci": {"reference": reference, "pullSecrets": ["regcred"]}}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = api.get("delivered").await.unwrap().data["status"].clone();
        let decided = status["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] != "Unknown")
        });
        if decided {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "WasmPlugin delivered: {status:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_hosts_ca_bundle_when_a_plugin_comes_from_a_registry_and_a_chart_from_a_repository_behind_that_ca_then_both_are_trusted_for_every_item_and_without_it_neither()
 {
    // Given: a registry (HTTPS, basic authentication) holding the mock plugin, and a chart
    // repository (HTTPS), both with certificates of the operator's CA; the CA in a PEM file.
    let cert = ServingCert::generate(&[]).unwrap();
    let Some(registry) = test_support::registry::start_registry_tls("ops", "s3cret", &cert) else {
        return;
    };
    let docker_config = test_support::ocm::docker_config(&registry.addr, "ops", "s3cret");
    let reference = format!("{}/plugins/mock:1", registry.addr);
    let options = deployer_host::oci::RegistryOptions {
        docker_configs: vec![docker_config.clone()],
        ca_certs: vec![cert.ca_pem().to_string()],
        ..Default::default()
    };
    let mock = std::fs::read(test_support::plugins_dir().join("mock.wasm")).unwrap();
    deployer_host::oci::push(&reference, &mock, "mock", &options)
        .await
        .unwrap();
    let repo = ChartRepo::start_tls(
        vec![("web", "0.1.0", package(&chart_dir("web"), "0.1.0"))],
        None,
        &cert,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("ca.pem");
    std::fs::write(&bundle, cert.ca_pem()).unwrap();
    let chart = json!({"helmChartRepo": {"helmChartRepoUrl": repo.url,
                                         "helmChartName": "web", "helmChartVersion": "0.1.0"}});

    // When: the host has the bundle.
    {
        let (h, _catalog, _plugins) = host_with_ca_bundle(Some(&bundle)).await;
        // Then: the plugin is delivered from the registry, and an item whose Context names no
        // CA installs the chart.
        let status = deliver(&h, &reference, &docker_config).await;
        assert_eq!(status["pluginName"], "mock", "{status:#}");
        create(&h, &helm_item("bundle-chart", "default", chart.clone())).await;
        assert_installed(&h, "bundle-chart").await;
    }

    // When: a host without it.
    let (h, _catalog, _plugins) = host_with_ca_bundle(None).await;
    // Then: the plugin is refused naming the certificate, and the item fails naming it.
    let status = deliver(&h, &reference, &docker_config).await;
    let error = status["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("UnknownIssuer") && error.contains(&registry.addr),
        "{status:#}"
    );
    create(&h, &helm_item("no-bundle-chart", "default", chart)).await;
    assert_failed_naming(
        &h,
        "no-bundle-chart",
        &[
            &repo.url,
            "TLS certificate is not trusted",
            "fetch.caBundle",
        ],
    )
    .await;
}
