//! The host's Helm chart (`charts/wasm-deployer`), installed by real Go Helm (PyPI
//! `helm-python-sdk`): it lints, refuses wrong values, renders byte for byte as our own Helm
//! engine renders it, installs into the API server (embedded with the workload simulator, or a
//! real kube-apiserver 1.20 enforcing RBAC), and the host then runs exactly as the Deployment
//! says — its configuration from the chart's Secret, its identity the chart's ServiceAccount —
//! and finishes a DeployItem. An upgrade with a changed configuration rolls the pods; an
//! uninstall removes everything but the CRDs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use deployer_host::landscaper::{DeployItem, Phase};
use embedded_apiserver::ApiServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use test_support::{skip_on_embedded, skip_on_real};

const RELEASE: &str = "wd";
const NAMESPACE: &str = "ls-system";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chart() -> String {
    repo().join("charts/wasm-deployer").display().to_string()
}

use test_support::real_helm::{ok, run as helm};

/// Values sets every rendering test covers: defaults, scaled out, fenced, everything on.
fn value_sets() -> Vec<(&'static str, Value)> {
    vec![
        ("defaults", json!({})),
        (
            "scaled",
            json!({"hpa": {"maxReplicas": 3}, "replicaCount": 2, "podDisruptionBudget": {"enabled": true}}),
        ),
        (
            "fenced",
            json!({"deployer": {"landscaperClusterKubeconfig": {"kubeconfig": "apiVersion: v1\nkind: Config\n"},
                   "identity": "ls-host", "namespace": "landscaper",
                   "targetSelector": [{"targets": [{"name": "t1"}], "labels": [{"key": "env", "operator": "in", "values": ["a", "b"]}]}]},
                   "container": {"namespace": "deployer-pods"}, "plugins": {"namespace": "plugins", "builtin": false}}),
        ),
        (
            "everything",
            json!({"metrics": {"serviceMonitor": {"enabled": true, "labels": {"release": "prom"}}},
                   "networkPolicy": {"enabled": true, "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]},
                   "crds": {"landscaper": true}, "image": {"digest": format!("sha256:{}", "a".repeat(64))},
                   "hooks": [{"plugin": "continuous-reconcile", "deployItemTypes": ["*"]}],
                   "imagePullSecrets": [{"name": "regcred"}], "tolerations": [{"operator": "Exists"}],
                   "extraConfig": {"events": "all"}, "itemCache": "full", "logFormat": "text", "deployer": {"verbosityLevel": "debug"}}),
        ),
        (
            "ca-bundle",
            json!({"fetch": {"allow": ["registry.corp"], "caBundle": CA_BUNDLE}}),
        ),
    ]
}

/// A CA certificate for the `ca-bundle` value set (the operator's PEM, as given in values).
const CA_BUNDLE: &str =
    "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIUT3R0ZXN0\n-----END CERTIFICATE-----\n";

fn docs(manifest: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(manifest)
        .filter_map(|d| {
            let v: Value = serde::Deserialize::deserialize(d).ok()?;
            (!v.is_null()).then_some(v)
        })
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// The host configuration the chart renders, as the host reads it.
fn rendered_config(docs: &[Value]) -> String {
    let secret = find(docs, "Secret")
        .into_iter()
        .find(|s| s["metadata"]["name"].as_str().unwrap().ends_with("-config"))
        .expect("config Secret");
    secret["stringData"]["config.yaml"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn given_the_chart_then_it_lints_clean_and_our_helm_engine_renders_it_byte_for_byte_as_helm() {
    skip_on_real!("renders only; no API server involved");
    let Some(lint) = helm(json!({"op": "lint", "chart": chart()})) else {
        return;
    };
    assert_eq!(lint["errors"], json!([]), "{lint}");
    for m in lint["messages"].as_array().unwrap() {
        assert!(m["severity"].as_i64().unwrap() < 2, "lint: {m}");
    }
    let loaded = helm_engine::Chart::load_dir(chart()).expect("chart loads");
    for (case, values) in value_sets() {
        let lint = ok(helm(json!({"op": "lint", "chart": chart(), "values": values})).unwrap());
        assert_eq!(lint["errors"], json!([]), "{case}: {lint}");
        let want = ok(
            helm(json!({"op": "render", "chart": chart(), "name": RELEASE,
            "namespace": NAMESPACE, "values": values}))
            .unwrap(),
        );
        let want = want["manifest"].as_str().unwrap();
        // helm-python-sdk 0.2.2 embeds Helm 4.2.3, which splits documents the legacy way.
        let mine = helm_engine::render(
            &loaded,
            &helm_engine::RenderOptions {
                release_name: RELEASE.into(),
                namespace: NAMESPACE.into(),
                values_files: vec![values.to_string()],
                split_mode: helm_engine::sort::SplitMode::Legacy,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{case}: our engine: {e}"))
        .manifest();
        if mine != want {
            let line = mine
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!(
                "{case}: our engine differs from Helm at line {}:\n ours: {:?}\nhelm: {:?}",
                line + 1,
                mine.lines().nth(line),
                want.lines().nth(line)
            );
        }
        // And the configuration it renders is one the host accepts.
        let config: deployer_host::config::HostConfig =
            serde_yaml::from_str(&rendered_config(&docs(want)))
                .unwrap_or_else(|e| panic!("{case}: the host refuses the chart's config: {e}"));
        if case == "ca-bundle" {
            // The bundle goes into the configuration Secret, mounted with the configuration,
            // and the configuration names that file (which exists only in the pod).
            let docs = docs(want);
            let secret = find(&docs, "Secret")
                .into_iter()
                .find(|s| s["metadata"]["name"].as_str().unwrap().ends_with("-config"))
                .unwrap();
            assert_eq!(secret["stringData"]["ca-bundle.pem"], CA_BUNDLE, "{case}");
            assert_eq!(
                config.fetch.ca_bundle.as_deref(),
                Some(std::path::Path::new(
                    "/etc/wasm-deployer/config/ca-bundle.pem"
                ))
            );
            let deployment = &find(&docs, "Deployment")[0];
            assert!(
                deployment["spec"]["template"]["metadata"]["annotations"]["checksum/ca-bundle"]
                    .is_string(),
                "{case}: a new bundle rolls the pods"
            );
        } else {
            config.validate().unwrap();
        }
        let item_cache = if case == "everything" {
            deployer_host::config::ItemCache::Full
        } else {
            deployer_host::config::ItemCache::Metadata
        };
        assert_eq!(config.item_cache, item_cache, "{case}: itemCache");
    }
}

#[test]
fn given_the_chart_when_values_are_wrong_then_helm_refuses_them_naming_the_value() {
    skip_on_real!("renders only; no API server involved");
    for (values, says) in [
        (json!({"hpa": {"maxReplicas": 0}}), "/hpa/maxReplicas"),
        (
            json!({"deployer": {"controller": {"workers": "many"}}}),
            "/deployer/controller/workers",
        ),
        (
            json!({"deployer": {"landscaperClusterKubeconfig": {"secretRef": "a", "kubeconfig": "b"}}}),
            "/deployer/landscaperClusterKubeconfig",
        ),
        (json!({"replicas": 3}), "replicas"),
        (json!({"logFormat": "xml"}), "/logFormat"),
        (json!({"itemCache": "all"}), "/itemCache"),
        (json!({"requeueInterval": "5 seconds"}), "/requeueInterval"),
        (
            json!({"plugins": {"limits": {"memoryMib": "64Mi"}}}),
            "/plugins/limits/memoryMib",
        ),
        (
            json!({"plugins": {"instanceSlots": -1}}),
            "/plugins/instanceSlots",
        ),
    ] {
        let Some(out) = helm(json!({"op": "render", "chart": chart(), "name": RELEASE,
            "namespace": NAMESPACE, "values": values}))
        else {
            return;
        };
        let err = out["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{values} was accepted"));
        assert!(err.contains("schema"), "{values}: {err}");
        assert!(err.contains(says), "{values}: {err} should name {says}");
        // Our engine (the helm plugin's) refuses them the same way.
        let ours = helm_engine::render(
            &helm_engine::Chart::load_dir(chart()).unwrap(),
            &helm_engine::RenderOptions {
                release_name: RELEASE.into(),
                namespace: NAMESPACE.into(),
                values_files: vec![values.to_string()],
                ..Default::default()
            },
        )
        .map(|_| ())
        .expect_err("our engine accepted wrong values")
        .to_string();
        assert!(ours.contains(says), "{values}: ours: {ours}");
    }
}

#[test]
fn given_plugins_instance_slots_then_the_hosts_configuration_carries_them() {
    skip_on_real!("renders only; no API server involved");
    let host = rendered_host_config(json!({"plugins": {"instanceSlots": 0}}));
    assert_eq!(host.plugins.instance_slots, Some(0));
}

#[test]
fn given_several_replicas_then_they_split_by_leases_unless_the_values_say_otherwise() {
    skip_on_real!("renders only; no API server involved");
    // By default, several replicas lock and split the items by Leases of 15 s,
    let host = rendered_host_config(json!({"hpa": {"maxReplicas": 3}}));
    assert!(host.locking_enabled());
    assert_eq!(host.locking.membership, None);
    assert_eq!(host.locking.lease_duration.as_deref(), Some("15s"));
    // the values tune the Lease or switch the split off,
    let host = rendered_host_config(
        json!({"hpa": {"maxReplicas": 3}, "locking": {"membership": false, "leaseDuration": "30s"}}),
    );
    assert_eq!(host.locking.membership, Some(false));
    assert_eq!(host.locking.lease_duration.as_deref(), Some("30s"));
    host.validate().unwrap();
    // and the Role lets the host hold its Lease and read its peers' in its namespace.
    let rules: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(std::path::Path::new(&chart()).join("rbac/host-cluster.yaml"))
            .unwrap(),
    )
    .unwrap();
    let leases = rules["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|r| r["resources"][0] == "leases")
        .expect("a rule for Leases");
    for verb in ["get", "list", "create", "update", "delete"] {
        assert!(
            leases["verbs"]
                .as_sequence()
                .unwrap()
                .iter()
                .any(|v| v == verb),
            "{verb}"
        );
    }
}

/// The host configuration the chart renders from `values` (its config Secret), parsed by the host.
fn rendered_host_config(values: serde_json::Value) -> deployer_host::config::HostConfig {
    let rendered = helm_engine::render(
        &helm_engine::Chart::load_dir(chart()).unwrap(),
        &helm_engine::RenderOptions {
            release_name: RELEASE.into(),
            namespace: NAMESPACE.into(),
            values_files: vec![values.to_string()],
            ..Default::default()
        },
    )
    .unwrap();
    let config = rendered
        .files
        .iter()
        .find_map(|(name, text)| name.ends_with("templates/config.yaml").then_some(text))
        .expect("the config Secret");
    let secret: serde_yaml::Value = serde_yaml::from_str(config).unwrap();
    serde_yaml::from_str(secret["stringData"]["config.yaml"].as_str().unwrap()).unwrap()
}

/// Landscaper's template functions the blueprint uses (`pkg/landscaper/templating`), over the
/// project's Go template engine.
fn landscaper_funcs() -> std::collections::HashMap<&'static str, helm_engine::template::Func> {
    use helm_engine::json::{from_serde, to_serde};
    use helm_engine::template::FuncError;
    let mut funcs = helm_engine::funcs::func_map();
    funcs.insert("getResource", |_, args| {
        let (cd, key, want) = (to_serde(&args[0]), to_serde(&args[1]), to_serde(&args[2]));
        cd["component"]["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r[key.as_str().unwrap()] == want))
            .map(from_serde)
            .ok_or_else(|| FuncError::call(format!("no resource with {key} = {want}")))
    });
    // `registry/repo:tag` -> `registry/repo`; `registry/repo@sha256:…` likewise.
    funcs.insert("ociRefRepo", |_, args| {
        let r = to_serde(&args[0]).as_str().unwrap().to_string();
        let repo = match r.split_once('@') {
            Some((repo, _)) => repo.to_string(),
            None => match r.rsplit_once(':') {
                Some((repo, tag)) if !tag.contains('/') => repo.to_string(),
                _ => r,
            },
        };
        Ok(repo.as_str().into())
    });
    funcs.insert("ociRefVersion", |_, args| {
        let r = to_serde(&args[0]).as_str().unwrap().to_string();
        let version = match r.split_once('@') {
            Some((_, digest)) => digest.to_string(),
            None => match r.rsplit_once(':') {
                Some((_, tag)) if !tag.contains('/') => tag.to_string(),
                _ => String::new(),
            },
        };
        Ok(version.as_str().into())
    });
    funcs
}

#[test]
fn given_the_blueprint_when_landscaper_renders_its_deploy_execution_then_one_helm_item_installs_the_chart_with_the_components_image_and_the_imports()
 {
    skip_on_real!("renders only; no API server involved");
    let dir = repo().join("charts/landscaper");
    let blueprint: Value = serde_yaml::from_str(
        &std::fs::read_to_string(dir.join("blueprint/blueprint.yaml")).unwrap(),
    )
    .unwrap();
    let cd: Value = serde_yaml::from_str(
        &std::fs::read_to_string(dir.join("component-descriptor.yaml")).unwrap(),
    )
    .unwrap();
    let imports: Vec<&str> = blueprint["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        imports,
        [
            "cluster",
            "landscaperCluster",
            "releaseName",
            "releaseNamespace",
            "identity",
            "values",
            "targetSelectors"
        ]
    );
    let execution = &blueprint["deployExecutions"][0];
    assert_eq!(execution["type"], "GoTemplate");

    // The imports of a fenced installation, as Landscaper hands them to the template.
    let landscaper_kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\n";
    let data = json!({
        "cd": cd,
        "imports": {
            "cluster": {"metadata": {"name": "host", "namespace": "ls-system"},
                        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster", "config": {"kubeconfig": "host"}}},
            "landscaperCluster": {"metadata": {"name": "ls", "namespace": "ls-system"},
                        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster", "config": {"kubeconfig": landscaper_kubeconfig}}},
            "releaseName": "wasm-deployer",
            "releaseNamespace": "ls-system",
            "identity": "wasm-deployer-fenced",
            "targetSelectors": [{"annotations": [{"key": "env", "operator": "=", "values": ["prod"]}]}],
            "values": {"hpa": {"maxReplicas": 2}, "image": {"pullPolicy": "Always"}},
        },
    });
    let engine = helm_engine::template::Engine::new(landscaper_funcs());
    engine
        .add("deploy-execution", execution["template"].as_str().unwrap())
        .unwrap();
    let rendered = engine
        .execute("deploy-execution", &helm_engine::json::from_serde(&data))
        .unwrap();
    let rendered: Value = serde_yaml::from_str(&rendered)
        .unwrap_or_else(|e| panic!("{e}: the execution renders invalid YAML:\n{rendered}"));
    let items = rendered["deployItems"].as_array().unwrap();
    assert_eq!(items.len(), 1, "one helm DeployItem");
    let item = &items[0];
    assert_eq!(item["type"], "landscaper.gardener.cloud/helm");
    assert_eq!(item["target"]["import"], "cluster");
    let config = &item["config"];
    assert_eq!(
        config["apiVersion"],
        "helm.deployer.landscaper.gardener.cloud/v1alpha1"
    );
    assert_eq!(config["name"], "wasm-deployer");
    assert_eq!(config["namespace"], "ls-system");
    assert_eq!(
        config["chart"]["ref"],
        "registry.example.com/wasm-deployer/charts/wasm-deployer:0.1.0"
    );
    let values = &config["values"];
    assert_eq!(
        values["image"]["repository"],
        "registry.example.com/wasm-deployer/deployer-host"
    );
    assert_eq!(values["image"]["tag"], "0.1.0");
    assert_eq!(
        values["image"]["pullPolicy"], "Always",
        "the imported values stay"
    );
    assert_eq!(values["deployer"]["identity"], "wasm-deployer-fenced");
    // Each imported selector, and never a deployer-only Target (an environment's host Target,
    // the agent's helm deployer's: it installs this chart there).
    assert_eq!(
        values["deployer"]["targetSelector"],
        json!([{"annotations": [
            {"key": "env", "operator": "=", "values": ["prod"]},
            {"key": "landscaper.gardener.cloud/deployer-only", "operator": "!"},
        ]}])
    );
    assert_eq!(
        values["deployer"]["landscaperClusterKubeconfig"]["kubeconfig"],
        landscaper_kubeconfig
    );
    // Fenced, the host's own ServiceAccount is not `<releaseName>`: deployer lifecycle
    // management gives that name to the Landscaper cluster's ServiceAccount for the host, in the
    // same namespace (the same cluster, for its built-in agent's environment).
    assert_eq!(values["serviceAccount"]["name"], "wasm-deployer-host");

    // The chart takes those values: schema, fenced RBAC, the component's image.
    let Some(out) = helm(
        json!({"op": "render", "chart": chart(), "name": "wasm-deployer",
        "namespace": "ls-system", "values": values}),
    ) else {
        return;
    };
    let docs = docs(ok(out)["manifest"].as_str().unwrap());
    let deployment = find(&docs, "Deployment")[0];
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/wasm-deployer/deployer-host:0.1.0"
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "wasm-deployer-host"
    );
    let cluster_roles: Vec<&str> = find(&docs, "ClusterRole")
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        cluster_roles,
        vec!["wasm-deployer-ls-system-crd"],
        "fenced: no Landscaper-cluster ClusterRole here, only the one for the host's own CRD"
    );
    assert!(find(&docs, "HorizontalPodAutoscaler").len() == 1);
    let config: deployer_host::config::HostConfig =
        serde_yaml::from_str(&rendered_config(&docs)).unwrap();
    assert_eq!(config.identity.as_deref(), Some("wasm-deployer-fenced"));
    assert_eq!(config.target_selectors.len(), 1);
    assert!(config.locking_enabled(), "two replicas lock");
}

/// A bare API server: the chart brings the CRDs. Embedded: served on loopback with the
/// workload simulator; real: a kube-apiserver 1.20 enforcing RBAC.
struct Server {
    admin: Client,
    /// Admin kubeconfig (Helm's and the stand-in Landscaper's).
    kubeconfig: String,
    real: Option<test_support::RealApiServer>,
    _serving: Option<embedded_apiserver::LoopbackServing>,
}

async fn start_server() -> Server {
    match test_support::backend() {
        test_support::Backend::Embedded => {
            let server = ApiServer::new(embedded_apiserver::Options {
                simulate_workloads: true,
                ..Default::default()
            })
            .unwrap();
            let serving = server.serve_on_loopback().await.unwrap();
            Server {
                admin: server.client(),
                kubeconfig: serving.kubeconfig(),
                real: None,
                _serving: Some(serving),
            }
        }
        test_support::Backend::Real => {
            let real = test_support::RealApiServer::start("RBAC");
            Server {
                admin: real.client().await,
                kubeconfig: real.kubeconfig.clone(),
                real: Some(real),
                _serving: None,
            }
        }
    }
}

/// A kubeconfig with a token of the chart's ServiceAccount (real server), or the embedded
/// server's (which does not authenticate).
async fn host_kubeconfig(server: &Server, sa: &str, namespace: &str) -> String {
    let Some(real) = &server.real else {
        return server.kubeconfig.clone();
    };
    let sas: Api<ServiceAccount> = Api::namespaced(server.admin.clone(), namespace);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}});
    let answer: Value = sas
        .create_subresource("token", sa, &PostParams::default(), &request)
        .await
        .expect("TokenRequest for the chart's ServiceAccount");
    let token = answer["status"]["token"].as_str().unwrap();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{}\", insecure-skip-tls-verify: true}}\nusers:\n- name: sa\n  user: {{token: {token}}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: sa}}\ncurrent-context: c\n",
        real.url
    )
}

/// The host process as the installed Deployment runs it: its args, its environment, the
/// configuration from the chart's Secret (paths of the image replaced by this checkout's).
struct HostProcess {
    child: Child,
    metrics: String,
    _dir: tempfile::TempDir,
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The host's log only when the story failed.
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self._dir.path().join("host.log"));
            eprintln!("--- host log\n{}", log.unwrap_or_default());
        }
    }
}

async fn run_as_deployment(server: &Server, deployment: &Deployment) -> HostProcess {
    run_release(server, deployment, RELEASE, NAMESPACE).await
}

/// The chart's full name of release `release` (as `wasm-deployer.fullname`).
fn fullname(release: &str) -> String {
    if release.contains("wasm-deployer") {
        release.to_string()
    } else {
        format!("{release}-wasm-deployer")
    }
}

/// [`run_as_deployment`] for the release `release` in `namespace`.
async fn run_release(
    server: &Server,
    deployment: &Deployment,
    release: &str,
    namespace: &str,
) -> HostProcess {
    let pod = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    let container = &pod.containers[0];
    let sa = pod.service_account_name.clone().unwrap();
    let secrets: Api<Secret> = Api::namespaced(server.admin.clone(), namespace);
    let secret = secrets
        .get(&format!("{}-config", fullname(release)))
        .await
        .unwrap();
    let config = &secret.data.unwrap()["config.yaml"].0;
    let mut config: serde_yaml::Value = serde_yaml::from_slice(config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plugins = &mut config["plugins"];
    assert_eq!(plugins["dir"], "/plugins", "the image's plugin directory");
    plugins["dir"] = test_support::plugins_dir().display().to_string().into();
    // Shared with every story: each host compiling every plugin afresh (the helm plugin is
    // 4 MB) made the stories that start several hosts miss their readiness deadlines.
    plugins["cacheDir"] = test_support::plugins_dir()
        .join("../plugin-cache")
        .display()
        .to_string()
        .into();
    let config_path = dir.path().join("config.yaml");
    std::fs::write(&config_path, serde_yaml::to_string(&config).unwrap()).unwrap();
    let kubeconfig_path = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig_path,
        host_kubeconfig(server, &sa, namespace).await,
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let args: Vec<String> = container
        .args
        .clone()
        .unwrap()
        .into_iter()
        .map(|a| {
            if a.starts_with("--config=") {
                format!("--config={}", config_path.display())
            } else if a.starts_with("--metrics-listen=") {
                format!("--metrics-listen=127.0.0.1:{port}")
            } else {
                a
            }
        })
        .collect();
    assert!(args.contains(&"run".to_string()), "{args:?}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_deployer-host"));
    cmd.args(&args)
        .env("KUBECONFIG", &kubeconfig_path)
        .env("MY_POD_NAME", format!("{}-0", fullname(release)))
        .env("MY_POD_NAMESPACE", namespace)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("host.log")).unwrap());
    for env in container.env.clone().unwrap_or_default() {
        if let Some(v) = env.value {
            cmd.env(env.name, v);
        }
    }
    HostProcess {
        child: cmd.spawn().unwrap(),
        metrics: format!("127.0.0.1:{port}"),
        _dir: dir,
    }
}

async fn eventually<F, Fut>(what: &str, timeout: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn pod_template_checksum(d: &Deployment) -> String {
    d.spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap()["checksum/config"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_chart_when_helm_installs_it_then_the_host_runs_as_deployed_upgrades_roll_and_uninstall_keeps_only_crds()
 {
    let server = start_server().await;
    let embedded = server.real.is_none();
    let values = json!({"crds": {"landscaper": true}, "deployer": {"controller": {"workers": 4}},
        "requeueInterval": "200ms", "logFormat": "text"});
    let job = |op: &str, values: &Value| {
        json!({"op": op, "chart": chart(), "name": RELEASE, "namespace": NAMESPACE,
            "values": values, "kubeconfig": server.kubeconfig, "wait": embedded})
    };

    // Given the chart, when Helm installs it (waiting for readiness where the simulator plays
    // the controllers), then the release is deployed and its objects are on the server.
    let Some(installed) = helm(job("install", &values)) else {
        return;
    };
    let installed = ok(installed);
    assert_eq!(installed["status"], "deployed", "{installed}");
    let deployments: Api<Deployment> = Api::namespaced(server.admin.clone(), NAMESPACE);
    let deployment = deployments.get("wd-wasm-deployer").await.unwrap();
    let spec = deployment.spec.as_ref().unwrap();
    assert_eq!(
        spec.strategy.as_ref().unwrap().type_.as_deref(),
        Some("Recreate")
    );
    let pod = spec.template.spec.as_ref().unwrap();
    let c = &pod.containers[0];
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        pod.security_context.as_ref().unwrap().run_as_non_root,
        Some(true)
    );
    let env: Vec<_> = c
        .env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert!(
        env.contains(&"MY_POD_NAME") && env.contains(&"MY_POD_NAMESPACE"),
        "{env:?}"
    );
    assert_eq!(
        c.readiness_probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap()
            .path
            .as_deref(),
        Some("/readyz")
    );
    if embedded {
        let status = deployment.status.as_ref().expect("simulated status");
        assert_eq!(status.available_replicas, Some(1), "{status:?}");
    }
    Api::<ClusterRole>::all(server.admin.clone())
        .get("wd-wasm-deployer-ls-system")
        .await
        .unwrap();
    Api::<Role>::namespaced(server.admin.clone(), NAMESPACE)
        .get("wd-wasm-deployer")
        .await
        .unwrap();
    // Landscaper's CRDs come from Helm (crds.landscaper); the WasmPlugin CRD is the host's.
    let crds: Api<CustomResourceDefinition> = Api::all(server.admin.clone());
    crds.get("deployitems.landscaper.gardener.cloud")
        .await
        .unwrap();
    assert!(
        crds.get_opt("wasmplugins.wasm-deployer.dev")
            .await
            .unwrap()
            .is_none(),
        "Helm installs no WasmPlugin CRD"
    );

    // When the host runs as the Deployment says — under the chart's ServiceAccount, which on
    // the real server has only the chart's RBAC — then it becomes ready and finishes a job.
    let mut ready = false;
    for _ in 0..50 {
        if deployer_host::dev::ensure_default_objects(&server.admin, &server.kubeconfig)
            .await
            .is_ok()
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(ready, "the chart's CRDs never became usable");
    test_support::ensure_default_service_account(&server.admin).await;
    let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(server.admin.clone()));
    let host = run_as_deployment(&server, &deployment).await;
    eventually("/readyz answers 200", Duration::from_secs(60), || async {
        test_support::http_status(&host.metrics, "/readyz").await == Some(200)
    })
    .await;
    let wp = crds.get("wasmplugins.wasm-deployer.dev").await;
    assert!(
        wp.as_ref().is_ok_and(deployer_host::crds::is_established),
        "the host created its CRD: {wp:?}"
    );
    let items: Api<DeployItem> = Api::namespaced(server.admin.clone(), "default");
    let item: DeployItem = serde_yaml::from_str(&test_support::mock_item("via-chart")).unwrap();
    items.create(&PostParams::default(), &item).await.unwrap();
    eventually("the item finishes", Duration::from_secs(60), || async {
        let i = items.get("via-chart").await.unwrap();
        let s = i.status.unwrap_or_default();
        !s.job_id.is_empty() && s.job_id == s.job_id_finished && s.phase == Phase::Succeeded
    })
    .await;
    let finished = items.get("via-chart").await.unwrap();
    let deployer = finished.status.unwrap().deployer.unwrap();
    assert_eq!(
        deployer.identity, "wd-wasm-deployer",
        "identity from the chart"
    );
    drop(host);
    landscaper.abort();

    // When Helm upgrades with the same values, then the pods are left alone; with a changed
    // configuration, the pod template changes (a new rollout) and the host reads the new one.
    let before = pod_template_checksum(&deployment);
    ok(helm(job("upgrade", &values)).unwrap());
    let same = deployments.get("wd-wasm-deployer").await.unwrap();
    assert_eq!(
        pod_template_checksum(&same),
        before,
        "same values, same pods"
    );
    assert_eq!(same.metadata.generation, deployment.metadata.generation);
    let mut changed = values.clone();
    changed["events"] = json!("all");
    let upgraded = ok(helm(job("upgrade", &changed)).unwrap());
    assert_eq!(upgraded["revision"], 3, "{upgraded}");
    let rolled = deployments.get("wd-wasm-deployer").await.unwrap();
    assert_ne!(
        pod_template_checksum(&rolled),
        before,
        "changed config rolls the pods"
    );
    assert!(rolled.metadata.generation > deployment.metadata.generation);
    if embedded {
        let status = rolled.status.as_ref().unwrap();
        assert_eq!(status.observed_generation, rolled.metadata.generation);
        assert_eq!(status.updated_replicas, Some(1));
    }
    let secret = Api::<Secret>::namespaced(server.admin.clone(), NAMESPACE)
        .get("wd-wasm-deployer-config")
        .await
        .unwrap();
    let config = String::from_utf8(secret.data.unwrap()["config.yaml"].0.clone()).unwrap();
    assert!(config.contains("events: all"), "{config}");

    // When Helm uninstalls, then everything it installed is gone but the CRDs (and with them
    // every DeployItem).
    ok(helm(job("uninstall", &values)).unwrap());
    assert!(
        deployments
            .get_opt("wd-wasm-deployer")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<ClusterRole>::all(server.admin.clone())
            .get_opt("wd-wasm-deployer-ls-system")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<ServiceAccount>::namespaced(server.admin.clone(), NAMESPACE)
            .get_opt("wd-wasm-deployer")
            .await
            .unwrap()
            .is_none()
    );
    let left: Vec<String> = Api::<Secret>::namespaced(server.admin.clone(), NAMESPACE)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|s| s.name_any())
        .filter(|n| n.starts_with("wd-") || n.starts_with("sh.helm.release"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    for crd in [
        "deployitems.landscaper.gardener.cloud",
        "wasmplugins.wasm-deployer.dev",
    ] {
        crds.get(crd).await.expect("CRDs are kept");
    }
    items.get("via-chart").await.expect("DeployItems survive");
}

#[test]
fn given_the_chart_when_helm_pushes_it_to_an_oci_registry_then_it_installs_from_the_reference_the_component_names()
 {
    skip_on_real!("needs no API server");
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let remote = format!("oci://{}/wasm-deployer/charts", registry.addr);
    let Some(pushed) = helm(json!({"op": "push", "chart": chart(),
        "destination": dir.path().display().to_string(), "remote": remote}))
    else {
        return;
    };
    ok(pushed);
    // The component descriptor's chart resource has this shape: <registry>/…/wasm-deployer:<version>.
    let cd: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo().join("charts/landscaper/component-descriptor.yaml"))
            .unwrap(),
    )
    .unwrap();
    let chart_ref = cd["component"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["type"] == "helm.io/chart")
        .unwrap()["access"]["imageReference"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, version) = chart_ref.rsplit_once(':').unwrap();
    let chart_yaml: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo().join("charts/wasm-deployer/Chart.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        chart_yaml["version"], version,
        "the component names this chart version"
    );
    let from_oci = ok(helm(
        json!({"op": "render", "chart": format!("{remote}/wasm-deployer"),
        "version": version, "name": RELEASE, "namespace": NAMESPACE, "values": {}}),
    )
    .unwrap());
    let from_dir = ok(
        helm(json!({"op": "render", "chart": chart(), "name": RELEASE,
        "namespace": NAMESPACE, "values": {}}))
        .unwrap(),
    );
    assert_eq!(from_oci["manifest"], from_dir["manifest"]);
}

/// Installed by Landscaper, end to end in dev mode: the chart pushed to a registry as the
/// component names it, the blueprint's deploy execution rendered as Landscaper renders it, and
/// its helm DeployItem deployed by the project's own helm plugin: a real Helm release of the
/// chart whose objects (the host's Deployment, configuration, RBAC) appear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_blueprints_helm_item_when_our_helm_plugin_deploys_it_then_the_hosts_objects_appear()
 {
    skip_on_real!("dev mode: the embedded server's workload simulator makes the Deployment ready");
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let remote = format!("oci://{}/wasm-deployer/charts", registry.addr);
    let Some(pushed) = helm(json!({"op": "push", "chart": chart(),
        "destination": dir.path().display().to_string(), "remote": remote}))
    else {
        return;
    };
    ok(pushed);
    // The component as published to this registry.
    let cd_text =
        std::fs::read_to_string(repo().join("charts/landscaper/component-descriptor.yaml"))
            .unwrap()
            .replace("registry.example.com", &registry.addr);
    let cd: Value = serde_yaml::from_str(&cd_text).unwrap();
    let blueprint: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo().join("charts/landscaper/blueprint/blueprint.yaml"))
            .unwrap(),
    )
    .unwrap();
    let data = json!({
        "cd": cd,
        "imports": {
            "cluster": {"metadata": {"name": "default", "namespace": "default"},
                        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster", "config": {"kubeconfig": "host"}}},
            "releaseName": "wasm-deployer",
            "releaseNamespace": "ls-system",
            "identity": "wasm-deployer-installed",
            // The dev cluster has the CRDs already (dev mode installs them).
            "values": {"crds": {"landscaper": false, "wasmPlugin": false}},
        },
    });
    let engine = helm_engine::template::Engine::new(landscaper_funcs());
    engine
        .add(
            "deploy-execution",
            blueprint["deployExecutions"][0]["template"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    let rendered: Value = serde_yaml::from_str(
        &engine
            .execute("deploy-execution", &helm_engine::json::from_serde(&data))
            .unwrap(),
    )
    .unwrap();
    let di = &rendered["deployItems"][0];

    // Landscaper would create this DeployItem with the imported Target; dev mode's Target
    // `default` is the cluster itself.
    let mut options = test_support::Options::default();
    options.config.fetch.allow = Some(vec!["127.0.0.1".into()]);
    options.config.fetch.plain_http = vec![registry.addr.clone()];
    let h = test_support::Harness::start_with(options).await;
    h.server.as_ref().unwrap().set_simulate_workloads(true);
    let item = json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": "wasm-deployer", "namespace": "default"},
        "spec": {"type": di["type"], "target": {"name": "default", "namespace": "default"},
                 "timeout": "120s", "config": di["config"]},
    });
    h.create_item(&item.to_string()).await;
    let item = h
        .wait_for("default", "wasm-deployer", Duration::from_secs(90), |i| {
            let s = i.status();
            !s.job_id.is_empty() && s.job_id == s.job_id_finished
        })
        .await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Succeeded, "{:?}", s.last_error);

    let ns = |kind: &str, name: &str| {
        let client = h.client.clone();
        let (kind, name) = (kind.to_string(), name.to_string());
        async move {
            let (group, version) = match kind.as_str() {
                "Deployment" => ("apps", "v1"),
                _ => ("", "v1"),
            };
            let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                group, version, &kind,
            ));
            let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client, "ls-system", &ar);
            api.get_opt(&name).await.unwrap()
        }
    };
    let deployment = ns("Deployment", "wasm-deployer")
        .await
        .expect("the host's Deployment");
    let d = serde_json::to_value(&deployment).unwrap();
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("{}/wasm-deployer/deployer-host:0.1.0", registry.addr),
        "the component's image"
    );
    assert_eq!(
        d["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "wasm-deployer"
    );
    assert!(ns("ServiceAccount", "wasm-deployer").await.is_some());
    let config = ns("Secret", "wasm-deployer-config")
        .await
        .expect("configuration");
    let config = serde_json::to_value(&config).unwrap();
    let text = String::from_utf8(
        base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            config["data"]["config.yaml"].as_str().unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    let host: deployer_host::config::HostConfig = serde_yaml::from_str(&text).unwrap();
    assert_eq!(host.identity.as_deref(), Some("wasm-deployer-installed"));
    assert!(
        ns("Secret", "sh.helm.release.v1.wasm-deployer.v1")
            .await
            .is_some(),
        "a real Helm release"
    );
}

const WP_CRD: &str = "wasmplugins.wasm-deployer.dev";

/// A real-Helm job on `server` (without waiting: no simulator plays the controllers on the real
/// server, and the stories start the hosts themselves).
fn helm_job(server: &Server, op: &str, name: &str, namespace: &str, values: Value) -> Value {
    json!({"op": op, "chart": chart(), "name": name, "namespace": namespace,
        "values": values, "kubeconfig": server.kubeconfig, "wait": false})
}

/// Helm's marks of release ownership on an object.
fn helm_owned(crd: &CustomResourceDefinition) -> bool {
    crd.annotations()
        .keys()
        .any(|k| k.starts_with("meta.helm.sh/"))
        || crd
            .labels()
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str)
            == Some("Helm")
}

/// What a host's write of the CRD would change: its generation (spec) and revision.
fn spec_and_revision(crd: &CustomResourceDefinition) -> (Option<i64>, u64) {
    (crd.metadata.generation, deployer_host::crds::revision(crd))
}

/// The host of release `release` in `namespace` as its Deployment runs it, once ready.
async fn start_release_host(server: &Server, release: &str, namespace: &str) -> HostProcess {
    let deployments: Api<Deployment> = Api::namespaced(server.admin.clone(), namespace);
    let deployment = deployments.get(&fullname(release)).await.unwrap();
    let host = run_release(server, &deployment, release, namespace).await;
    eventually(
        &format!("{namespace}/{release}: /readyz answers 200"),
        Duration::from_secs(90),
        || async { test_support::http_status(&host.metrics, "/readyz").await == Some(200) },
    )
    .await;
    host
}

fn wasm_plugins(server: &Server, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        server.admin.clone(),
        namespace,
        &deployer_host::plugin_sources::declarations::resource(),
    )
}

/// Declares WasmPlugin `name` in `namespace` (its ConfigMap `missing` does not exist: the host
/// refuses it with FetchFailed, which is all these stories need of a status).
async fn declare_plugin(server: &Server, namespace: &str, name: &str, extra: Value) {
    let mut spec = json!({"source": {"configMap": {"name": "missing"}}});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-deployer.dev/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec,
    }))
    .unwrap();
    wasm_plugins(server, namespace)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

/// `kubectl get wasmplugins` as the server answers it (a Table from the CRD's printer columns):
/// the column names, and name -> column -> cell.
async fn wasmplugin_table(
    server: &Server,
    namespace: &str,
) -> (Vec<String>, BTreeMap<String, BTreeMap<String, String>>) {
    test_support::get_table(
        &server.admin,
        &format!("/apis/wasm-deployer.dev/v1alpha1/namespaces/{namespace}/wasmplugins"),
    )
    .await
}

/// Landscaper's CRDs, as a Landscaper cluster has them: the stories below install the chart
/// with its default values (`crds.landscaper: false`).
async fn landscaper_cluster(server: &Server) {
    deployer_host::dev::install_landscaper_crds(&server.admin)
        .await
        .unwrap();
}

/// Issue #36: after `helm uninstall`, installing the chart again under another name failed on
/// the kept CRD's ownership. Helm no longer installs the WasmPlugin CRD (the host does), so no
/// release owns it and every install succeeds; the CRD and the WasmPlugins outlive the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_chart_when_installed_uninstalled_and_installed_under_another_name_then_every_install_succeeds_and_the_crd_and_its_wasmplugins_stay()
 {
    let server = start_server().await;
    landscaper_cluster(&server).await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.admin.clone());
    let bundled = deployer_host::crds::revision(&deployer_host::crds::bundled().unwrap());

    // Given the chart installed with its default values, then Helm brings no WasmPlugin CRD ...
    let Some(first) = helm(helm_job(
        &server,
        "install",
        "wasm-deployer",
        NAMESPACE,
        json!({}),
    )) else {
        return;
    };
    assert_eq!(ok(first)["status"], "deployed");
    assert!(crds.get_opt(WP_CRD).await.unwrap().is_none());
    // ... and its host — under the chart's ServiceAccount, with only the chart's RBAC on the
    // real server — creates it at start: served, at the host's revision, owned by no release.
    let host = start_release_host(&server, "wasm-deployer", NAMESPACE).await;
    let crd = crds.get(WP_CRD).await.unwrap();
    assert!(deployer_host::crds::is_established(&crd));
    assert_eq!(deployer_host::crds::revision(&crd), bundled);
    assert!(!helm_owned(&crd), "{:?}", crd.metadata);
    declare_plugin(&server, NAMESPACE, "users-plugin", json!({})).await;
    drop(host);

    // When the release is uninstalled, then the CRD and the users' WasmPlugins stay.
    ok(helm(helm_job(
        &server,
        "uninstall",
        "wasm-deployer",
        NAMESPACE,
        json!({}),
    ))
    .unwrap());
    let kept = crds.get(WP_CRD).await.expect("the CRD is kept");
    assert_eq!(kept.metadata.uid, crd.metadata.uid);
    wasm_plugins(&server, NAMESPACE)
        .get("users-plugin")
        .await
        .expect("WasmPlugins survive an uninstall");

    // When the chart is installed again under another name (the failing step), then the
    // install succeeds, and its host finds the CRD up to date and writes nothing.
    let second = ok(helm(helm_job(&server, "install", "wd2", NAMESPACE, json!({}))).unwrap());
    assert_eq!(second["status"], "deployed", "{second}");
    let host = start_release_host(&server, "wd2", NAMESPACE).await;
    let after = crds.get(WP_CRD).await.unwrap();
    assert_eq!(spec_and_revision(&after), spec_and_revision(&kept));
    drop(host);
    // And so does an install under the first name again.
    ok(helm(helm_job(&server, "uninstall", "wd2", NAMESPACE, json!({}))).unwrap());
    let third = ok(helm(helm_job(
        &server,
        "install",
        "wasm-deployer",
        NAMESPACE,
        json!({}),
    ))
    .unwrap());
    assert_eq!(third["status"], "deployed", "{third}");
}

/// Issue #36: one host per fenced environment — two releases of one name in two namespaces,
/// with default values, install and serve side by side on one CRD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_two_releases_in_two_namespaces_with_default_values_then_both_install_and_their_hosts_serve_side_by_side()
 {
    let server = start_server().await;
    landscaper_cluster(&server).await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.admin.clone());

    // Given the chart installed twice under one name, in two namespaces, with default values,
    // then both installs succeed, each with its own cluster-scoped RBAC.
    let Some(a) = helm(helm_job(
        &server,
        "install",
        "wasm-deployer",
        "env-a",
        json!({}),
    )) else {
        return;
    };
    assert_eq!(ok(a)["status"], "deployed");
    let b = ok(helm(helm_job(
        &server,
        "install",
        "wasm-deployer",
        "env-b",
        json!({}),
    ))
    .unwrap());
    assert_eq!(b["status"], "deployed", "{b}");
    let roles = Api::<ClusterRole>::all(server.admin.clone());
    for name in [
        "wasm-deployer-env-a",
        "wasm-deployer-env-a-crd",
        "wasm-deployer-env-b",
        "wasm-deployer-env-b-crd",
    ] {
        roles
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }

    // When both hosts start (at once: one creates the CRD, the other finds it), then both get
    // ready, and each serves the WasmPlugins of its own namespace.
    let (host_a, host_b) = tokio::join!(
        start_release_host(&server, "wasm-deployer", "env-a"),
        start_release_host(&server, "wasm-deployer", "env-b")
    );
    let crd = crds.get(WP_CRD).await.unwrap();
    assert!(!helm_owned(&crd));
    for namespace in ["env-a", "env-b"] {
        declare_plugin(&server, namespace, "p", json!({})).await;
    }
    for namespace in ["env-a", "env-b"] {
        let plugins = wasm_plugins(&server, namespace);
        eventually(
            &format!("the host of {namespace} writes its WasmPlugin's status"),
            Duration::from_secs(60),
            || async {
                let p = plugins.get("p").await.unwrap();
                p.data["status"]["observedGeneration"] == json!(1)
                    && p.data["status"]["conditions"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["reason"] == "FetchFailed"))
            },
        )
        .await;
    }
    // Neither host rewrote the CRD the other one wrote.
    assert_eq!(
        spec_and_revision(&crds.get(WP_CRD).await.unwrap()),
        spec_and_revision(&crd)
    );

    // When one release is uninstalled, then the other stays deployed and its host ready.
    drop(host_a);
    ok(helm(helm_job(
        &server,
        "uninstall",
        "wasm-deployer",
        "env-a",
        json!({}),
    ))
    .unwrap());
    let status = ok(helm(helm_job(
        &server,
        "status",
        "wasm-deployer",
        "env-b",
        json!({}),
    ))
    .unwrap());
    assert_eq!(status["status"], "deployed");
    assert!(
        roles
            .get_opt("wasm-deployer-env-b-crd")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        test_support::http_status(&host_b.metrics, "/readyz").await,
        Some(200)
    );
    assert!(crds.get_opt(WP_CRD).await.unwrap().is_some());
}

/// Issue #36: a chart upgrade brings its newer CRD — the upgraded release's host replaces an
/// older one at start (here one without the UP-TO-DATE and REASON columns and without
/// `spec.hooks`, still carrying the ownership of a chart that had it as a template), and the API
/// server serves the new columns and field afterwards; Helm itself never touches it. A host
/// older than the CRD in the cluster leaves it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_older_crd_when_the_release_is_upgraded_then_its_host_brings_the_newer_crd_which_is_served_and_an_older_host_never_downgrades_it()
 {
    let server = start_server().await;
    landscaper_cluster(&server).await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.admin.clone());
    let bundled = deployer_host::crds::bundled().unwrap();
    let revision = deployer_host::crds::revision(&bundled);

    Api::<k8s_openapi::api::core::v1::Namespace>::all(server.admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap(),
        )
        .await
        .unwrap();
    // Given the WasmPlugin CRD as an older release left it: the revision before, fewer printer
    // columns, no `spec.hooks` in its schema, a templated chart's ownership on it ...
    let mut old = bundled.clone();
    let annotations = old.metadata.annotations.get_or_insert_default();
    annotations.insert(
        deployer_host::crds::REVISION_ANNOTATION.into(),
        (revision - 1).to_string(),
    );
    annotations.insert("meta.helm.sh/release-name".into(), "wd".into());
    annotations.insert("meta.helm.sh/release-namespace".into(), NAMESPACE.into());
    old.metadata.labels = Some(
        [(
            "app.kubernetes.io/managed-by".to_string(),
            "Helm".to_string(),
        )]
        .into(),
    );
    let version = &mut old.spec.versions[0];
    version
        .additional_printer_columns
        .get_or_insert_default()
        .retain(|c| c.name != "Up-to-date" && c.name != "Reason");
    let schema = version
        .schema
        .as_mut()
        .unwrap()
        .open_api_v3_schema
        .as_mut()
        .unwrap();
    let spec = schema.properties.as_mut().unwrap().get_mut("spec").unwrap();
    assert!(spec.properties.as_mut().unwrap().remove("hooks").is_some());
    crds.create(&PostParams::default(), &old).await.unwrap();
    eventually("the old CRD is served", Duration::from_secs(30), || async {
        deployer_host::crds::is_established(&crds.get(WP_CRD).await.unwrap())
    })
    .await;
    let hooks = json!({"hooks": [{"deployItemTypes": ["*"], "hookTypes": ["ShouldReconcile"]}]});
    // ... which prunes `spec.hooks` and shows no UP-TO-DATE column.
    declare_plugin(&server, NAMESPACE, "before", hooks.clone()).await;
    let before = wasm_plugins(&server, NAMESPACE)
        .get("before")
        .await
        .unwrap();
    assert!(
        before.data["spec"].get("hooks").is_none(),
        "{:?}",
        before.data
    );
    let (columns, _) = wasmplugin_table(&server, NAMESPACE).await;
    assert!(!columns.contains(&"Up-to-date".to_string()), "{columns:?}");

    // When the release is installed and upgraded by Helm, then Helm leaves the CRD alone ...
    let Some(installed) = helm(helm_job(&server, "install", RELEASE, NAMESPACE, json!({}))) else {
        return;
    };
    assert_eq!(ok(installed)["status"], "deployed");
    let upgraded = ok(helm(helm_job(
        &server,
        "upgrade",
        RELEASE,
        NAMESPACE,
        json!({"events": "all"}),
    ))
    .unwrap());
    assert_eq!(upgraded["revision"], 2, "{upgraded}");
    let untouched = crds.get(WP_CRD).await.unwrap();
    assert_eq!(deployer_host::crds::revision(&untouched), revision - 1);
    // ... and when the upgraded release's host starts, then it replaces the CRD with its own
    // revision and drops the old chart's ownership,
    let host = start_release_host(&server, RELEASE, NAMESPACE).await;
    let upgraded = crds.get(WP_CRD).await.unwrap();
    assert_eq!(deployer_host::crds::revision(&upgraded), revision);
    assert_eq!(upgraded.metadata.uid, untouched.metadata.uid);
    assert!(!helm_owned(&upgraded), "{:?}", upgraded.metadata);
    // and the server serves what the new CRD says: the new columns, with the host's status in
    // them, for the WasmPlugin that was there before (it stayed) ...
    eventually(
        "kubectl get wasmplugins shows UP-TO-DATE and REASON",
        Duration::from_secs(60),
        || async {
            let (_, rows) = wasmplugin_table(&server, NAMESPACE).await;
            rows.get("before").is_some_and(|row| {
                row.get("Ready").map(String::as_str) == Some("False")
                    && row.get("Up-to-date").map(String::as_str) == Some("False")
                    && row.get("Reason").map(String::as_str) == Some("FetchFailed")
            })
        },
    )
    .await;
    // ... and the new field.
    declare_plugin(&server, NAMESPACE, "after", hooks.clone()).await;
    let after = wasm_plugins(&server, NAMESPACE).get("after").await.unwrap();
    assert_eq!(
        after.data["spec"]["hooks"], hooks["hooks"],
        "{:?}",
        after.data
    );
    drop(host);

    // Given a newer CRD (a newer host shares the cluster: one more revision, one more column),
    // when this — now older — host starts again, then it leaves the CRD as it is.
    let mut newer = crds.get(WP_CRD).await.unwrap();
    newer.metadata.annotations.get_or_insert_default().insert(
        deployer_host::crds::REVISION_ANNOTATION.into(),
        (revision + 1).to_string(),
    );
    newer.spec.versions[0]
        .additional_printer_columns
        .get_or_insert_default()
        .push(
            serde_json::from_value(
                json!({"name": "Newer", "type": "string", "jsonPath": ".status.pluginName"}),
            )
            .unwrap(),
        );
    let newer = crds
        .replace(WP_CRD, &PostParams::default(), &newer)
        .await
        .unwrap();
    let host = start_release_host(&server, RELEASE, NAMESPACE).await;
    let now = crds.get(WP_CRD).await.unwrap();
    assert_eq!(spec_and_revision(&now), spec_and_revision(&newer));
    eventually(
        "the newer column is still served",
        Duration::from_secs(60),
        || async {
            wasmplugin_table(&server, NAMESPACE)
                .await
                .0
                .contains(&"Newer".to_string())
        },
    )
    .await;
    drop(host);

    // When the release is uninstalled, the CRD and the WasmPlugins stay.
    ok(helm(helm_job(
        &server,
        "uninstall",
        RELEASE,
        NAMESPACE,
        json!({}),
    ))
    .unwrap());
    assert!(crds.get_opt(WP_CRD).await.unwrap().is_some());
    wasm_plugins(&server, NAMESPACE)
        .get("before")
        .await
        .unwrap();
}

/// Kubernetes versions (docs/kubernetes-versions.md): the real-backend stories run on whatever
/// kube-apiserver `REAL_KUBE_APISERVER` names, e.g. a hand-built newer one. Proven with a copy of
/// the tool's own build under another path: the server the stories get is that very binary.
#[tokio::test]
async fn given_real_kube_apiserver_names_a_binary_when_a_story_starts_the_real_server_then_that_binary_serves_it()
 {
    skip_on_embedded!("about the real backend's kube-apiserver");
    let cache = std::env::var_os("REAL_APISERVER_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/real-apiserver")
        });
    let own_build = cache.join("kube-apiserver");
    let elsewhere = tempfile::tempdir().unwrap();
    let named = elsewhere.path().join("kube-apiserver-of-my-own");
    std::fs::copy(&own_build, &named).expect("copying the tool's kube-apiserver");
    let binaries = test_support::RealBinaries {
        kube_apiserver: Some(named.clone()),
        etcd: None,
    };
    let real = test_support::RealApiServer::start_on("AlwaysAllow", &binaries);
    let pid = std::fs::read_to_string(real.dir().join("apiserver.pid")).expect("apiserver.pid");
    let exe = std::fs::read_link(format!("/proc/{}/exe", pid.trim())).expect("the server's binary");
    assert_eq!(
        exe,
        named.canonicalize().unwrap(),
        "the server runs the named binary"
    );
    let version = real
        .client()
        .await
        .apiserver_version()
        .await
        .expect("/version");
    assert_eq!(version.major, "1", "{version:?}");
}
