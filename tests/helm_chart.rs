//! The host's Helm chart (`charts/wasm-deployer`), installed by real Go Helm (PyPI
//! `helm-python-sdk`): it lints, refuses wrong values, renders byte for byte as our own Helm
//! engine renders it, installs into the API server (embedded with the workload simulator, or a
//! real kube-apiserver 1.20 enforcing RBAC), and the host then runs exactly as the Deployment
//! says — its configuration from the chart's Secret, its identity the chart's ServiceAccount —
//! and finishes a DeployItem. An upgrade with a changed configuration rolls the pods; an
//! uninstall removes everything but the CRDs.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use deployer_host::landscaper::{DeployItem, Phase};
use embedded_apiserver::ApiServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const RELEASE: &str = "wd";
const NAMESPACE: &str = "ls-system";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chart() -> String {
    repo().join("charts/wasm-deployer").display().to_string()
}

use support::real_helm::{ok, run as helm};

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
                   "extraConfig": {"events": "all"}, "logFormat": "text", "deployer": {"verbosityLevel": "debug"}}),
        ),
    ]
}

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
        config.validate().unwrap();
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
        (json!({"requeueInterval": "5 seconds"}), "/requeueInterval"),
        (
            json!({"plugins": {"limits": {"memoryMib": "64Mi"}}}),
            "/plugins/limits/memoryMib",
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
    assert_eq!(
        values["deployer"]["landscaperClusterKubeconfig"]["kubeconfig"],
        landscaper_kubeconfig
    );

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
    real: Option<support::RealApiServer>,
    _serving: Option<embedded_apiserver::LoopbackServing>,
}

async fn start_server() -> Server {
    match support::backend() {
        support::Backend::Embedded => {
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
        support::Backend::Real => {
            let real = support::RealApiServer::start("RBAC");
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
        .get(&format!("{release}-wasm-deployer-config"))
        .await
        .unwrap();
    let config = &secret.data.unwrap()["config.yaml"].0;
    let mut config: serde_yaml::Value = serde_yaml::from_slice(config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plugins = &mut config["plugins"];
    assert_eq!(plugins["dir"], "/plugins", "the image's plugin directory");
    plugins["dir"] = support::plugins_dir().display().to_string().into();
    plugins["cacheDir"] = dir.path().join("cache").display().to_string().into();
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
        .env("MY_POD_NAME", format!("{release}-wasm-deployer-0"))
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

/// The status code of a plain HTTP GET of `path` on `addr` (`None`: nothing answers yet).
async fn get_status(addr: &str, path: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    answer.split_whitespace().nth(1)?.parse().ok()
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
    let crds: Api<CustomResourceDefinition> = Api::all(server.admin.clone());
    for crd in [
        "deployitems.landscaper.gardener.cloud",
        "wasmplugins.wasm-deployer.dev",
    ] {
        crds.get(crd).await.unwrap();
    }

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
    support::ensure_default_service_account(&server.admin).await;
    let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(server.admin.clone()));
    let host = run_as_deployment(&server, &deployment).await;
    eventually("/readyz answers 200", Duration::from_secs(60), || async {
        get_status(&host.metrics, "/readyz").await == Some(200)
    })
    .await;
    let items: Api<DeployItem> = Api::namespaced(server.admin.clone(), "default");
    let item: DeployItem = serde_yaml::from_str(&support::mock_item("via-chart")).unwrap();
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
    let Some(registry) = support::registry::start_registry() else {
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
    let Some(registry) = support::registry::start_registry() else {
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
    let mut options = support::Options::default();
    options.config.fetch.allow = Some(vec!["127.0.0.1".into()]);
    options.config.fetch.plain_http = vec![registry.addr.clone()];
    let h = support::Harness::start_with(options).await;
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

/// Issue #36: after `helm uninstall`, installing the chart again under another name failed on
/// the kept CRD's ownership. The CRDs now come from Helm's `crds/` (no release owns them) and
/// the host keeps its own CRD up to date: install, uninstall, install under another name, two
/// releases side by side, and an older CRD upgraded by the newer host — never by Helm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_chart_when_installed_uninstalled_reinstalled_and_twice_side_by_side_then_every_install_succeeds_and_the_host_upgrades_an_older_crd()
 {
    const WP: &str = "wasmplugins.wasm-deployer.dev";
    const DI: &str = "deployitems.landscaper.gardener.cloud";
    let server = start_server().await;
    let job = |op: &str, name: &str, namespace: &str, values: Value| {
        json!({"op": op, "chart": chart(), "name": name, "namespace": namespace,
            "values": values, "kubeconfig": server.kubeconfig, "wait": false})
    };
    let crds: Api<CustomResourceDefinition> = Api::all(server.admin.clone());
    let helm_owned = |crd: &CustomResourceDefinition| {
        crd.annotations()
            .keys()
            .any(|k| k.starts_with("meta.helm.sh/"))
    };
    let with_landscaper = json!({"crds": {"landscaper": true}});

    // Given the chart installed with its default values, then the WasmPlugin CRD is there and
    // no release owns it; Landscaper's CRDs are not (crds.landscaper is off by default).
    let Some(first) = helm(job("install", "wasm-deployer", NAMESPACE, json!({}))) else {
        return;
    };
    assert_eq!(ok(first)["status"], "deployed");
    let crd = crds.get(WP).await.unwrap();
    assert!(!helm_owned(&crd), "{:?}", crd.annotations());
    assert!(crds.get_opt(DI).await.unwrap().is_none());

    // When it is uninstalled and installed again under another name, then the install
    // succeeds (the kept CRD no longer names the first release) ...
    ok(helm(job("uninstall", "wasm-deployer", NAMESPACE, json!({}))).unwrap());
    assert!(crds.get_opt(WP).await.unwrap().is_some(), "the CRD is kept");
    let second = ok(helm(job("install", "wd2", NAMESPACE, with_landscaper.clone())).unwrap());
    assert_eq!(second["status"], "deployed", "{second}");
    // ... with Landscaper's CRDs when asked, owned by no release either.
    let di = crds.get(DI).await.expect("crds.landscaper installs them");
    assert!(!helm_owned(&di));
    // And a second release of the first name beside it, in another namespace (one host per
    // fenced environment), installs too.
    let beside = ok(helm(job(
        "install",
        "wasm-deployer",
        "env-b",
        with_landscaper.clone(),
    ))
    .unwrap());
    assert_eq!(beside["status"], "deployed", "{beside}");
    for (name, namespace) in [("wd2", NAMESPACE), ("wasm-deployer", "env-b")] {
        let status = ok(helm(job("status", name, namespace, json!({}))).unwrap());
        assert_eq!(status["status"], "deployed", "{name} in {namespace}");
    }

    // Given an older WasmPlugin CRD in the cluster (as a chart of old left it: no revision, a
    // release's ownership, fewer printer columns) ...
    let bundled = deployer_host::crds::bundled().unwrap();
    let bundled_revision = deployer_host::crds::revision(&bundled);
    let mut old = crds.get(WP).await.unwrap();
    let annotations = old.metadata.annotations.get_or_insert_default();
    annotations.remove(deployer_host::crds::REVISION_ANNOTATION);
    annotations.insert("meta.helm.sh/release-name".into(), "wasm-deployer".into());
    annotations.insert("meta.helm.sh/release-namespace".into(), NAMESPACE.into());
    old.spec.versions[0]
        .additional_printer_columns
        .get_or_insert_default()
        .retain(|c| c.name != "Up-to-date");
    crds.replace(WP, &PostParams::default(), &old)
        .await
        .unwrap();
    // ... when Helm upgrades a release, then Helm leaves the CRD as it is (it never upgrades
    // crds/) ...
    ok(helm(job("upgrade", "wd2", NAMESPACE, with_landscaper.clone())).unwrap());
    assert_eq!(
        deployer_host::crds::revision(&crds.get(WP).await.unwrap()),
        0
    );
    // ... and when the release's host starts — under the chart's ServiceAccount, which on the
    // real server has only the chart's RBAC — then it replaces the CRD with its own revision
    // and drops the old release's ownership.
    let deployments: Api<Deployment> = Api::namespaced(server.admin.clone(), NAMESPACE);
    let deployment = deployments.get("wd2-wasm-deployer").await.unwrap();
    let host = run_release(&server, &deployment, "wd2", NAMESPACE).await;
    eventually(
        "the host upgrades the CRD",
        Duration::from_secs(60),
        || async {
            deployer_host::crds::revision(&crds.get(WP).await.unwrap()) == bundled_revision
        },
    )
    .await;
    drop(host);
    let upgraded = crds.get(WP).await.unwrap();
    assert!(!helm_owned(&upgraded), "{:?}", upgraded.annotations());
    let columns: Vec<String> = upgraded.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect();
    assert!(columns.contains(&"Up-to-date".to_string()), "{columns:?}");

    // Given a newer CRD (a newer host shares the cluster), an older host leaves it alone.
    let mut newer = upgraded.clone();
    newer.metadata.annotations.get_or_insert_default().insert(
        deployer_host::crds::REVISION_ANNOTATION.into(),
        (bundled_revision + 1).to_string(),
    );
    crds.replace(WP, &PostParams::default(), &newer)
        .await
        .unwrap();
    let outcome = deployer_host::crds::ensure_wasm_plugin_crd(&server.admin)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        deployer_host::crds::CrdOutcome::Newer {
            installed: bundled_revision + 1,
            bundled: bundled_revision
        }
    );

    // When both releases are uninstalled, the CRDs stay.
    ok(helm(job("uninstall", "wd2", NAMESPACE, json!({}))).unwrap());
    ok(helm(job("uninstall", "wasm-deployer", "env-b", json!({}))).unwrap());
    assert!(crds.get_opt(WP).await.unwrap().is_some());
    assert!(crds.get_opt(DI).await.unwrap().is_some());
}
