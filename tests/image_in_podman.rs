//! The host's image as users run it: `cargo xtask image`'s image, loaded into a real container
//! runtime (Debian's podman with runc), run exactly as the chart's Deployment says. Real Helm
//! installs the chart; the story reads the installed Deployment's pod template (image, args,
//! environment, security context, volumes and mount paths, probes) and turns it into one
//! `podman run`, so a change to the chart is what is tested. The pod gets its API access as a
//! kubelet gives it: a token of the chart's ServiceAccount, the cluster's CA and the namespace at
//! `/var/run/secrets/kubernetes.io/serviceaccount`, and `KUBERNETES_SERVICE_HOST/PORT` (host
//! network: the API server is on loopback). On the real backend the chart's RBAC is enforced.
//!
//! Needs podman, skopeo and the image layout (`cargo xtask image`): SKIP without them, a
//! failure with `CI=true`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use deployer_host::landscaper::{DeployItem, Phase};
use embedded_apiserver::ApiServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec, Secret, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use test_support::podman::{HOST_IMAGE, Podman};
use test_support::real_helm::{ok, run as helm};

const RELEASE: &str = "wd";
const NAMESPACE: &str = "ls-system";
const DEPLOYMENT: &str = "wd-wasm-deployer";

/// An API server over HTTPS on loopback, with a CA a pod can trust.
struct Cluster {
    admin: Client,
    /// Admin kubeconfig (Helm's, the stand-in Landscaper's and the `default` Target's).
    kubeconfig: String,
    port: u16,
    ca_pem: String,
    _real: Option<test_support::RealApiServer>,
    _serving: Option<embedded_apiserver::LoopbackServing>,
}

async fn start_cluster() -> Cluster {
    match test_support::backend() {
        test_support::Backend::Embedded => {
            let server = ApiServer::new(embedded_apiserver::Options {
                // Plays the Deployment controller for the helm item's release.
                simulate_workloads: true,
                ..Default::default()
            })
            .unwrap();
            let serving = server.serve_tls_on_loopback().await.unwrap();
            let kubeconfig = serving.kubeconfig();
            Cluster {
                admin: test_support::client_for(&kubeconfig).await,
                kubeconfig,
                port: serving.port(),
                ca_pem: serving.ca_pem().unwrap().to_string(),
                _real: None,
                _serving: Some(serving),
            }
        }
        test_support::Backend::Real => {
            let real = test_support::RealApiServer::start("RBAC");
            let port = real.url.rsplit(':').next().unwrap().parse().unwrap();
            Cluster {
                admin: real.client().await,
                kubeconfig: real.kubeconfig.clone(),
                port,
                ca_pem: real.ca_pem(),
                _real: Some(real),
                _serving: None,
            }
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Installs the chart with real Helm (`None`: Helm is not installed, SKIP).
fn install_chart(cluster: &Cluster, values: Value) -> Option<()> {
    let chart = test_support::workspace().join("charts/wasm-deployer");
    let job = json!({"op": "install", "chart": chart.display().to_string(), "name": RELEASE,
        "namespace": NAMESPACE, "values": values, "kubeconfig": cluster.kubeconfig,
        "wait": false});
    let installed = ok(helm(job)?);
    assert_eq!(installed["status"], "deployed", "{installed}");
    Some(())
}

/// The chart's values for the image under test: the loaded image, never pulled, the metrics
/// port free on this machine (host network), Landscaper's CRDs from the chart.
fn values(metrics_port: u16, extra: Value) -> Value {
    let (repository, tag) = HOST_IMAGE.rsplit_once(':').unwrap();
    let mut values = json!({
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "metrics": {"port": metrics_port},
        "crds": {"landscaper": true},
        "requeueInterval": "200ms",
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        values[k] = v;
    }
    values
}

/// The pod of the chart's Deployment on this machine: its volumes as host directories, run in
/// podman as the pod spec says. Removed when dropped (its log printed if the story failed).
struct ChartPod {
    podman: &'static Podman,
    spec: PodSpec,
    name: String,
    namespace: String,
    /// The pod's volumes (`<dir>/<volume>`) and its service-account files.
    dir: tempfile::TempDir,
    running: Option<String>,
}

impl Drop for ChartPod {
    fn drop(&mut self) {
        if let Some(c) = self.running.take() {
            if std::thread::panicking() {
                let logs = self.podman.command().args(["logs", &c]).output();
                if let Ok(out) = logs {
                    eprintln!(
                        "--- host log\n{}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                // The reason once more, after the log: a long CI log keeps its end.
                if let Some(why) = test_support::why::last_panic() {
                    eprintln!("--- the story failed at {why}");
                }
            }
            let _ = self
                .podman
                .command()
                .args(["rm", "-f", "-t", "0", &c])
                .output();
        }
    }
}

fn container(spec: &PodSpec) -> &Container {
    &spec.containers[0]
}

impl ChartPod {
    /// The installed Deployment's pod, its volumes filled as a kubelet fills them: Secret
    /// volumes with the Secret's keys, emptyDirs empty and writable by anyone (as a kubelet
    /// creates them), the service-account files with a fresh token of the pod's account.
    async fn prepare(podman: &'static Podman, cluster: &Cluster) -> ChartPod {
        test_support::why::remember_panics();
        let deployments: Api<Deployment> = Api::namespaced(cluster.admin.clone(), NAMESPACE);
        let deployment = deployments.get(DEPLOYMENT).await.unwrap();
        let spec = deployment.spec.unwrap().template.spec.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let secrets: Api<Secret> = Api::namespaced(cluster.admin.clone(), NAMESPACE);
        for v in spec.volumes.iter().flatten() {
            let path = dir.path().join(&v.name);
            std::fs::create_dir_all(&path).unwrap();
            if let Some(secret) = &v.secret {
                let name = secret.secret_name.clone().unwrap();
                let data = secrets.get(&name).await.unwrap().data.unwrap_or_default();
                for (key, value) in data {
                    std::fs::write(path.join(&key), value.0).unwrap();
                    set_mode(&path.join(&key), 0o644);
                }
                set_mode(&path, 0o755);
            } else {
                assert!(v.empty_dir.is_some(), "volume {} is neither", v.name);
                set_mode(&path, 0o777);
            }
        }
        let sa = spec.service_account_name.clone().unwrap();
        let token = service_account_token(&cluster.admin, &sa).await;
        let files = dir.path().join("serviceaccount");
        std::fs::create_dir_all(&files).unwrap();
        for (name, content) in [
            ("token", token.as_str()),
            ("ca.crt", cluster.ca_pem.as_str()),
            ("namespace", NAMESPACE),
        ] {
            std::fs::write(files.join(name), content).unwrap();
            set_mode(&files.join(name), 0o644);
        }
        set_mode(&files, 0o755);
        ChartPod {
            podman,
            spec,
            name: format!("{DEPLOYMENT}-{}-{}", std::process::id(), free_port()),
            namespace: NAMESPACE.into(),
            dir,
            running: None,
        }
    }

    fn volume(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Where a path of the container is on this machine (through the volume mounted there).
    fn host_path(&self, in_container: &str) -> PathBuf {
        let c = container(&self.spec);
        let mount = c
            .volume_mounts
            .iter()
            .flatten()
            .filter(|m| Path::new(in_container).starts_with(&m.mount_path))
            .max_by_key(|m| m.mount_path.len())
            .unwrap_or_else(|| panic!("{in_container} is on no volume"));
        let rest = Path::new(in_container)
            .strip_prefix(&mount.mount_path)
            .unwrap();
        self.volume(&mount.name).join(rest)
    }

    /// The host configuration the pod reads (the chart's Secret, as mounted).
    fn config(&self) -> Value {
        let arg = container(&self.spec)
            .args
            .iter()
            .flatten()
            .find_map(|a| a.strip_prefix("--config="))
            .unwrap()
            .to_string();
        serde_yaml::from_str(&std::fs::read_to_string(self.host_path(&arg)).unwrap()).unwrap()
    }

    /// `podman run` for the pod's container, as the pod spec says.
    fn run_args(&self, container_name: &str, api_port: u16) -> Vec<String> {
        let c = container(&self.spec);
        let pod_sc = self.spec.security_context.clone().unwrap_or_default();
        let sc = c.security_context.clone().unwrap_or_default();
        let mut args: Vec<String> = vec!["run".into(), "-d".into(), "--name".into()];
        args.push(container_name.into());
        args.extend(["--pull".into(), "never".into()]);
        assert_eq!(
            c.image_pull_policy.as_deref(),
            Some("Never"),
            "the story's values"
        );
        let user = sc.run_as_user.or(pod_sc.run_as_user);
        let group = sc.run_as_group.or(pod_sc.run_as_group);
        if let Some(user) = user {
            let group = group.map(|g| format!(":{g}")).unwrap_or_default();
            args.extend(["--user".into(), format!("{user}{group}")]);
        }
        if sc.run_as_non_root.or(pod_sc.run_as_non_root) == Some(true) {
            assert_ne!(user, Some(0), "runAsNonRoot with user 0");
        }
        if let Some(fs_group) = pod_sc.fs_group {
            args.extend(["--group-add".into(), fs_group.to_string()]);
        }
        if sc.read_only_root_filesystem == Some(true) {
            args.push("--read-only".into());
        }
        if sc.allow_privilege_escalation == Some(false) {
            args.extend(["--security-opt".into(), "no-new-privileges".into()]);
        }
        for cap in sc.capabilities.iter().flat_map(|c| c.drop.iter().flatten()) {
            args.extend(["--cap-drop".into(), cap.to_lowercase()]);
        }
        let limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
        if let Some(memory) = limits.and_then(|l| l.get("memory")) {
            args.extend(["--memory".into(), memory.0.replace("Mi", "m")]);
        }
        for m in c.volume_mounts.iter().flatten() {
            let ro = if m.read_only == Some(true) { ":ro" } else { "" };
            let host = self.volume(&m.name);
            args.extend([
                "-v".into(),
                format!("{}:{}{ro}", host.display(), m.mount_path),
            ]);
        }
        args.extend([
            "-v".into(),
            format!(
                "{}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
                self.volume("serviceaccount").display()
            ),
            "-e".into(),
            "KUBERNETES_SERVICE_HOST=127.0.0.1".into(),
            "-e".into(),
            format!("KUBERNETES_SERVICE_PORT={api_port}"),
        ]);
        for e in c.env.iter().flatten() {
            let value = match (&e.value, &e.value_from) {
                (Some(v), _) => v.clone(),
                (None, Some(from)) => {
                    match from.field_ref.as_ref().map(|f| f.field_path.as_str()) {
                        Some("metadata.name") => self.name.clone(),
                        Some("metadata.namespace") => self.namespace.clone(),
                        other => panic!("env {} from {other:?}: not played here", e.name),
                    }
                }
                _ => String::new(),
            };
            args.extend(["-e".into(), format!("{}={value}", e.name)]);
        }
        args.push(c.image.clone().unwrap());
        args.extend(c.command.clone().unwrap_or_default());
        args.extend(c.args.clone().unwrap_or_default());
        args
    }

    /// Starts (or restarts: the volumes stay, as they do when a pod's container restarts) the
    /// container.
    fn start(&mut self, api_port: u16) {
        if let Some(old) = self.running.take() {
            self.podman.run(&["rm", "-f", "-t", "10", &old]);
        }
        let name = format!("{}-{}", self.name, free_port());
        let args = self.run_args(&name, api_port);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Removed when dropped even if podman creates it and then fails to start it.
        self.running = Some(name);
        self.podman.run(&args);
    }

    /// The port of a probe (a named port of the container, or a number).
    fn probe(&self, readiness: bool) -> (u16, String) {
        let c = container(&self.spec);
        let probe = if readiness {
            c.readiness_probe.as_ref()
        } else {
            c.liveness_probe.as_ref()
        };
        let get = probe.unwrap().http_get.clone().unwrap();
        let port = match get.port {
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => n,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(name) => {
                c.ports
                    .iter()
                    .flatten()
                    .find(|p| p.name.as_deref() == Some(name.as_str()))
                    .unwrap()
                    .container_port
            }
        };
        (port as u16, get.path.unwrap())
    }

    /// Whether the container still runs; its exit code once it has stopped.
    fn exit_code(&self) -> Option<i32> {
        let c = self.running.as_ref().unwrap();
        let state =
            self.podman
                .run(&["inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", c]);
        let (running, code) = state.trim().split_once(' ').unwrap();
        (running == "false").then(|| code.parse().unwrap())
    }

    fn logs(&self) -> String {
        let c = self.running.as_ref().unwrap();
        let out = self.podman.command().args(["logs", c]).output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Waits until both probes answer 200, as the kubelet would before the pod is ready.
    async fn wait_ready(&self, within: Duration) {
        let started = Instant::now();
        for readiness in [false, true] {
            let (port, path) = self.probe(readiness);
            loop {
                if test_support::http_status(&format!("127.0.0.1:{port}"), &path).await == Some(200)
                {
                    break;
                }
                if let Some(code) = self.exit_code() {
                    panic!("the host exited with {code}:\n{}", self.logs());
                }
                assert!(
                    started.elapsed() < within,
                    "{path} never answered 200:\n{}",
                    self.logs()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A token of `sa` in the chart's namespace, for the API server's audience (as a projected
/// service-account token is).
async fn service_account_token(admin: &Client, sa: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), NAMESPACE);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}});
    let answer: Value = sas
        .create_subresource("token", sa, &PostParams::default(), &request)
        .await
        .expect("TokenRequest for the chart's ServiceAccount");
    answer["status"]["token"].as_str().unwrap().to_string()
}

/// Podman and the image, or `None` (SKIP).
fn podman_with_image() -> Option<&'static Podman> {
    let podman = Podman::get()?;
    podman.host_image()?;
    Some(podman)
}

/// Landscaper's side of the cluster: the `default` Target and Context (the items' cluster is
/// this one, through the admin kubeconfig) and the stand-in Landscaper that issues jobIDs.
async fn landscaper_side(cluster: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while deployer_host::dev::ensure_default_objects(&cluster.admin, &cluster.kubeconfig)
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the chart's CRDs never served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    test_support::ensure_default_service_account(&cluster.admin).await;
    tokio::spawn(deployer_host::dev::landscaper::run(cluster.admin.clone()));
}

async fn apply_and_finish(admin: &Client, item: DeployItem) -> DeployItem {
    let items: Api<DeployItem> = Api::namespaced(admin.clone(), "default");
    let name = item.name_any();
    items.create(&PostParams::default(), &item).await.unwrap();
    let started = Instant::now();
    loop {
        let item = items.get(&name).await.unwrap();
        let s = item.status();
        if !s.job_id.is_empty() && s.job_id == s.job_id_finished {
            return item;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{name} never finished: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn example(file: &str) -> DeployItem {
    let path = test_support::workspace().join("examples").join(file);
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The mock, manifest and helm examples (the helm item's readiness checked only where the
/// embedded server's simulator makes its Deployment ready: a bare kube-apiserver runs no
/// controllers).
fn examples() -> Vec<DeployItem> {
    let mut helm = serde_json::to_value(example("30-deployitem-helm.yaml")).unwrap();
    if test_support::backend() == test_support::Backend::Real {
        helm["spec"]["config"]["readinessChecks"] = json!({"disableDefault": true});
    }
    vec![
        example("10-deployitem-mock.yaml"),
        example("20-deployitem-manifest-continuous.yaml"),
        serde_json::from_value(helm).unwrap(),
    ]
}

fn cached_artifacts(cache: &Path) -> Vec<(String, SystemTime)> {
    let mut files: Vec<(String, SystemTime)> = std::fs::read_dir(cache)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().modified().unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_chart_when_its_pod_runs_the_image_in_a_real_container_then_it_serves_mock_manifest_and_helm_items_and_restarts_from_its_cache()
 {
    let Some(podman) = podman_with_image() else {
        return;
    };
    // Given the chart installed by real Helm, with the image under test.
    let cluster = start_cluster().await;
    let metrics_port = free_port();
    if install_chart(&cluster, values(metrics_port, json!({"logFormat": "json"}))).is_none() {
        return;
    }
    landscaper_side(&cluster).await;

    // When its pod runs in podman as the Deployment says (in-cluster configuration, read-only
    // root, user 65532, no capabilities),
    let mut pod = ChartPod::prepare(podman, &cluster).await;
    pod.start(cluster.port);

    // then it answers its probes on the chart's port,
    assert_eq!(pod.probe(true).0, metrics_port);
    pod.wait_ready(Duration::from_secs(120)).await;
    // and finishes the mock, manifest and helm examples.
    for item in examples() {
        let name = item.name_any();
        let done = apply_and_finish(&cluster.admin, item).await;
        let s = done.status();
        assert_eq!(s.phase, Phase::Succeeded, "{name}: {:?}", s.last_error);
    }
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(cluster.admin.clone(), "default");
    assert_eq!(
        maps.get("colors").await.unwrap().data.unwrap()["sky"],
        "blue"
    );
    let releases: Api<Secret> = Api::namespaced(cluster.admin.clone(), "web-demo");
    assert!(
        releases
            .get_opt("sh.helm.release.v1.web-demo.v1")
            .await
            .unwrap()
            .is_some(),
        "the helm item's release"
    );
    // Every log line is JSON, as the chart's logFormat says.
    let logs = pod.logs();
    for line in logs.lines().filter(|l| !l.trim().is_empty()) {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\n{logs}"));
    }

    // The compiled plugins are in the cache volume, written by the host's user.
    let cache = pod.host_path(pod.config()["plugins"]["cacheDir"].as_str().unwrap());
    let compiled = cached_artifacts(&cache);
    assert!(
        compiled.len() >= 3,
        "mock, manifest and helm compiled into the cache: {compiled:?}"
    );
    // When the container restarts (the pod's volumes stay),
    pod.start(cluster.port);
    pod.wait_ready(Duration::from_secs(60)).await;
    // then it loads the plugins from the cache (no artifact is rewritten) and serves again.
    assert_eq!(
        cached_artifacts(&cache),
        compiled,
        "recompiled after a restart"
    );
    let mut again = example("10-deployitem-mock.yaml");
    again.metadata.name = Some("after-restart".into());
    let done = apply_and_finish(&cluster.admin, again).await;
    assert_eq!(done.status().phase, Phase::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_cache_volume_the_host_cannot_write_when_the_pod_starts_then_it_exits_saying_which_directory()
 {
    let Some(podman) = podman_with_image() else {
        return;
    };
    let cluster = start_cluster().await;
    if install_chart(&cluster, values(free_port(), json!({"logFormat": "json"}))).is_none() {
        return;
    }
    landscaper_side(&cluster).await;
    // Given the cache volume owned by root and closed to others (not as a kubelet makes it),
    let mut pod = ChartPod::prepare(podman, &cluster).await;
    set_mode(&pod.volume("cache"), 0o755);
    // when the pod starts, then the host stops with an error naming the cache directory.
    pod.start(cluster.port);
    let started = Instant::now();
    let code = loop {
        if let Some(code) = pod.exit_code() {
            break code;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still running without a writable cache:\n{}",
            pod.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_ne!(code, 0);
    let logs = pod.logs();
    let last: Value = serde_json::from_str(logs.lines().last().unwrap())
        .unwrap_or_else(|e| panic!("last line not JSON ({e}):\n{logs}"));
    let text = last.to_string();
    eprintln!("the host's last words: {text}");
    assert!(
        text.contains("/var/cache/wasm-deployer") && text.contains("ERROR"),
        "{logs}"
    );
}

/// The fenced variant: the host runs in one cluster (its pod's in-cluster configuration) and
/// serves the items of another, the Landscaper cluster, through the kubeconfig the chart mounts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_fenced_chart_when_its_pod_runs_the_image_then_it_serves_the_landscaper_clusters_items()
 {
    let Some(podman) = podman_with_image() else {
        return;
    };
    let host_cluster = start_cluster().await;
    let landscaper = start_cluster().await;
    let fenced = json!({"deployer": {"landscaperClusterKubeconfig": {"kubeconfig": landscaper.kubeconfig}},
        "crds": {"landscaper": false}});
    // Landscaper's CRDs live in the Landscaper cluster.
    deployer_host::dev::install_landscaper_crds(&landscaper.admin)
        .await
        .unwrap();
    if install_chart(&host_cluster, values(free_port(), fenced)).is_none() {
        return;
    }
    landscaper_side(&landscaper).await;
    let mut pod = ChartPod::prepare(podman, &host_cluster).await;
    let args = container(&pod.spec).args.clone().unwrap();
    assert!(
        args.iter().any(|a| a.starts_with("--kubeconfig=")),
        "{args:?}"
    );
    pod.start(host_cluster.port);
    pod.wait_ready(Duration::from_secs(120)).await;
    let done = apply_and_finish(&landscaper.admin, example("10-deployitem-mock.yaml")).await;
    assert_eq!(done.status().phase, Phase::Succeeded);
    // Nothing of Landscaper's is in the host's cluster.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(host_cluster.admin.clone());
    assert!(
        crds.get_opt("deployitems.landscaper.gardener.cloud")
            .await
            .unwrap()
            .is_none()
    );
}
