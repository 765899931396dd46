//! The container deployer, natively in the host: a DeployItem of type
//! `landscaper.gardener.cloud/container` runs as a Pod in the host cluster. Its pods are run by
//! the dev kubelet (`deployer_host::dev::kubelet`) — in real containers where podman is there
//! (init and wait from the host's own image, main from a small shell image pulled from a loopback
//! registry, API access as on a node), else as local processes (init and wait are the real
//! `deployer-host container init|wait` processes, main runs the item's `sh -c` script);
//! `DEPLOYER_TEST_PODS=podman|process` chooses. Either way every story proves the whole round
//! trip: item → Secrets → pod → files → program → state and exports → DeployItem status.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::container::pod::{self, paths};
use deployer_host::dev::kubelet::{PodRuntime, ProcessKubelet};
use deployer_host::landscaper::{DeployItem, Phase, codes};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use test_support::podman::Podman;
use test_support::registry::Registry;
use test_support::{Harness, Options};

/// Where the pods run.
const HOST_NS: &str = "container-host";

/// The main image of the process kubelet's items (it is never pulled).
const PROCESS_IMAGE: &str = "alpine:3.19";

/// How this binary's stories run their pods.
enum Pods {
    Process,
    Podman {
        podman: &'static Podman,
        host_image: &'static str,
        /// The shell image main runs, in [`Pods::Podman::registry`].
        shell: String,
        /// The loopback registry's address.
        registry: String,
    },
}

/// The loopback registry of the shell image: lives as long as the test binary.
static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Stops the registry when the test binary exits (statics are never dropped).
extern "C" fn stop_registry() {
    if let Some(registry) = REGISTRY.lock().ok().and_then(|mut r| r.take()) {
        let image = format!("{}/test/sh:1", registry.addr);
        let _ = std::process::Command::new("podman")
            .args(["rmi", "--ignore", &image])
            .output();
        drop(registry);
    }
}

/// `DEPLOYER_TEST_PODS=process|podman`; default: podman where it and the host's image are there
/// (else processes, with the SKIP line [`Podman::get`] or [`Podman::host_image`] prints).
fn pods() -> &'static Pods {
    static PODS: OnceLock<Pods> = OnceLock::new();
    PODS.get_or_init(|| {
        let wanted = std::env::var("DEPLOYER_TEST_PODS").unwrap_or_default();
        if wanted == "process" {
            return Pods::Process;
        }
        let podman = Podman::get();
        let host_image = podman.and_then(Podman::host_image);
        let registry = host_image.and_then(|_| test_support::registry::start_registry());
        let (Some(podman), Some(host_image), Some(registry)) = (podman, host_image, registry)
        else {
            assert!(
                wanted != "podman",
                "DEPLOYER_TEST_PODS=podman, but podman, the host's image or docker-registry is missing"
            );
            return Pods::Process;
        };
        let shell = podman.push_shell_image(&registry.addr, "test/sh:1");
        let addr = registry.addr.clone();
        *REGISTRY.lock().unwrap() = Some(registry);
        // SAFETY: registering a plain `extern "C"` function that only touches a static.
        unsafe { libc::atexit(stop_registry) };
        if std::env::var_os("CONTAINERS_CONF").is_none() {
            // Not the process' environment: stories of other files run beside these.
            deployer_host::dev::kubelet::podman::use_containers_conf(podman.containers_conf());
        }
        Pods::Podman {
            podman,
            host_image,
            shell,
            registry: addr,
        }
    })
}

/// The image of the items' main containers.
fn main_image() -> &'static str {
    match pods() {
        Pods::Process => PROCESS_IMAGE,
        Pods::Podman { shell, .. } => shell,
    }
}

/// The image init and wait run from.
fn host_image() -> &'static str {
    match pods() {
        Pods::Process => "deployer-host:test",
        Pods::Podman { host_image, .. } => host_image,
    }
}

struct Story {
    h: Harness,
    /// Pod directories (each container's output in `<pod>/<container>.log`) and the kubeconfig
    /// of init and wait.
    dir: tempfile::TempDir,
    stop: tokio::sync::watch::Sender<bool>,
    /// The embedded server on loopback, for the init and wait processes.
    _serving: Option<embedded_apiserver::LoopbackServing>,
}

impl Drop for Story {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn config() -> HostConfig {
    let mut config = test_support::container_host_config(HOST_NS);
    config.container.host_image = Some(host_image().to_string());
    config
}

/// A harness with the container deployer and a dev kubelet on `container-host`.
async fn story() -> Story {
    story_with(config()).await
}

async fn story_with(config: HostConfig) -> Story {
    let runtime = match pods() {
        Pods::Process => PodRuntime::Process,
        Pods::Podman { .. } => PodRuntime::Podman,
    };
    let h = Harness::start_with(Options {
        config,
        ..Options::default()
    })
    .await;
    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": HOST_NS}})).unwrap(),
        )
        .await
        .expect("namespace");
    let dir = tempfile::tempdir().unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    // init and wait need the API server on a socket; in containers as on a node (HTTPS with a
    // CA and the pod ServiceAccount's token).
    let (kubeconfig, serving) = match (&h.server, &h.real, runtime) {
        (Some(server), _, PodRuntime::Process) => {
            let serving = server.serve_on_loopback().await.unwrap();
            (serving.kubeconfig(), Some(serving))
        }
        (Some(server), _, PodRuntime::Podman) => {
            let serving = server.serve_tls_on_loopback().await.unwrap();
            (serving.kubeconfig(), Some(serving))
        }
        (None, Some(real), PodRuntime::Process) => (real.kubeconfig.clone(), None),
        (None, Some(real), PodRuntime::Podman) => (real.kubeconfig_with_ca(), None),
        _ => unreachable!(),
    };
    let kubeconfig_path = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig_path, kubeconfig).unwrap();
    let kubelet = ProcessKubelet {
        client: h.client.clone(),
        namespace: HOST_NS.into(),
        kubeconfig: kubeconfig_path,
        binary: PathBuf::from(env!("CARGO_BIN_EXE_deployer-host")),
        work_dir: dir.path().join("pods"),
        mint_tokens: runtime == PodRuntime::Podman,
    };
    tokio::spawn(kubelet.run_with(runtime, stopped()));
    Story {
        h,
        dir,
        stop,
        _serving: serving,
    }
}

/// [`story`], its host allowed to fetch from the plain-HTTP registry at `addr`.
async fn story_fetching_from(addr: &str) -> Story {
    let mut config = config();
    config.fetch = serde_yaml::from_str("allow: [127.0.0.1]\n").unwrap();
    config.fetch.plain_http = vec![addr.to_string()];
    story_with(config).await
}

/// A container item whose main container runs `script` with `sh -c`.
fn item(name: &str, script: &str, extra: Value) -> String {
    let mut config = json!({
        "apiVersion": "container.deployer.landscaper.gardener.cloud/v1alpha1",
        "kind": "ProviderConfiguration",
        "image": main_image(),
        "command": ["sh", "-c", script],
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        config[k] = v;
    }
    serde_json::to_string(&json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "type": "landscaper.gardener.cloud/container",
            "target": {"name": "default", "namespace": "default"},
            "config": config,
        },
    }))
    .unwrap()
}

/// Writes the imports, the operation, the Target and a state counter it keeps as exports.
const ECHO: &str = r#"set -e
n=$(cat "$STATE_PATH/counter" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$STATE_PATH/counter"
mkdir -p "$(dirname "$EXPORTS_PATH")"
printf '{"imports": %s, "operation": "%s", "runs": %s, "targetType": "%s"}' \
  "$(cat "$IMPORTS_PATH")" "$OPERATION" "$n" \
  "$(sed -n 's/.*"type":"\([^"]*\)".*/\1/p' "$TARGET_PATH")" > "$EXPORTS_PATH"
"#;

/// Every main container's output so far.
fn main_logs(s: &Story) -> String {
    let mut logs = String::new();
    for pod in std::fs::read_dir(s.dir.path().join("pods")).unwrap() {
        let log = pod.unwrap().path().join("main.log");
        logs.push_str(&std::fs::read_to_string(log).unwrap_or_default());
    }
    logs
}

async fn exports(h: &Harness, item: &DeployItem) -> Value {
    let r = item
        .status()
        .export_ref
        .expect("exportRef is set after a successful run");
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "default");
    let s = secrets.get(&r.name).await.expect("export Secret");
    serde_json::from_slice(&s.data.unwrap()["config"].0).unwrap()
}

async fn host_pods(h: &Harness, item: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), HOST_NS);
    pods.list(&ListParams::default().labels(&format!("{}={item}", pod::LABEL_ITEM_NAME)))
        .await
        .unwrap()
        .items
}

async fn host_secrets(h: &Harness, item: &str) -> Vec<Secret> {
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), HOST_NS);
    secrets
        .list(&ListParams::default().labels(&format!("{}={item}", pod::LABEL_ITEM_NAME)))
        .await
        .unwrap()
        .items
}

async fn finished(h: &Harness, name: &str) -> DeployItem {
    h.wait_for("default", name, Duration::from_secs(60), |i| {
        let s = i.status();
        !s.job_id.is_empty() && s.job_id == s.job_id_finished
    })
    .await
}

fn provider_status(item: &DeployItem) -> Value {
    item.status().provider_status.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_container_item_when_reconciled_then_its_program_sees_the_inputs_and_its_exports_come_back()
 {
    let s = story().await;
    let h = &s.h;
    h.create_item(&item(
        "echo",
        ECHO,
        json!({"importValues": {"greeting": "hello"}}),
    ))
    .await;
    let done = finished(h, "echo").await;
    assert_eq!(done.status().phase, Phase::Succeeded, "{:?}", done.status());
    let out = exports(h, &done).await;
    assert_eq!(out["imports"], json!({"greeting": "hello"}));
    assert_eq!(out["operation"], "RECONCILE");
    assert_eq!(out["runs"], 1);
    assert_eq!(
        out["targetType"],
        "landscaper.gardener.cloud/kubernetes-cluster"
    );
    let ps = provider_status(&done);
    assert_eq!(
        ps["apiVersion"],
        "container.deployer.landscaper.gardener.cloud/v1alpha1"
    );
    assert_eq!(ps["lastOperation"], "RECONCILE");
    assert_eq!(ps["podStatus"]["phase"], "Succeeded");
    assert_eq!(
        ps["podStatus"]["lastSuccessfulJobID"],
        done.status().job_id.as_str()
    );
    assert_eq!(ps["podStatus"]["containerStatus"]["exitCode"], 0);

    // The pod as the API server has it: Landscaper's contract.
    let pods = host_pods(h, "echo").await;
    assert_eq!(pods.len(), 1, "the finished pod is kept (keepPods 1)");
    let p = serde_json::to_value(&pods[0]).unwrap();
    assert_eq!(ps["podStatus"]["podName"], p["metadata"]["name"]);
    let spec = &p["spec"];
    assert_eq!(spec["securityContext"]["runAsUser"], 1000);
    assert_eq!(spec["securityContext"]["runAsGroup"], 3000);
    assert_eq!(spec["securityContext"]["fsGroup"], 2000);
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["initContainers"][0]["image"], host_image());
    // Each container's imageID names what ran: under podman the image's repository and the
    // digest its registry serves (as containerd reports it), in processes `process://`.
    let statuses = &p["status"]["containerStatuses"];
    let main_id = statuses[0]["imageID"].as_str().unwrap();
    match self::pods() {
        Pods::Podman { shell, .. } => {
            let (repository, tag) = shell.rsplit_once(':').unwrap();
            // The registry's own word: the digest it answers the tag with.
            let (registry, name) = repository.split_once('/').unwrap();
            deployer_host::oci::install_crypto();
            let served = reqwest::Client::new()
                .head(format!("http://{registry}/v2/{name}/manifests/{tag}"))
                .header(
                    "Accept",
                    "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json",
                )
                .send()
                .await
                .unwrap();
            let digest = served.headers()["docker-content-digest"].to_str().unwrap();
            assert_eq!(main_id, format!("{repository}@{digest}"));
            let init_id = p["status"]["initContainerStatuses"][0]["imageID"]
                .as_str()
                .unwrap();
            assert!(
                init_id.starts_with(&format!(
                    "{}@sha256:",
                    host_image().rsplit_once(':').unwrap().0
                )),
                "{init_id}"
            );
        }
        Pods::Process => assert_eq!(main_id, format!("process://{}", main_image())),
    }
    assert_eq!(
        spec["containers"][1]["command"],
        json!(["deployer-host", "container", "wait"])
    );
    let main_env: Vec<String> = spec["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    for var in [
        "OPERATION",
        "IMPORTS_PATH",
        "EXPORTS_PATH",
        "TARGET_PATH",
        "STATE_PATH",
        "COMPONENT_DESCRIPTOR_PATH",
        "CONTENT_PATH",
        "POD_NAME",
        "POD_NAMESPACE",
    ] {
        assert!(
            main_env.contains(&var.to_string()),
            "main lacks {var}: {main_env:?}"
        );
    }
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": "shared-volume", "mountPath": paths::SHARED}]),
        "the user's container gets no credentials"
    );
    assert!(
        spec["activeDeadlineSeconds"]
            .as_i64()
            .is_some_and(|s| s > 0 && s <= 600)
    );
    // The runner's RBAC: Secrets and its own pod, in the host namespace only.
    let role: Api<Role> = Api::namespaced(h.client.clone(), HOST_NS);
    let role = role.get("default-echo-runner").await.expect("runner Role");
    let rules = serde_json::to_value(role.rules).unwrap();
    assert_eq!(
        rules[1],
        json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]})
    );
    let sa: Api<ServiceAccount> = Api::namespaced(h.client.clone(), HOST_NS);
    sa.get("default-echo-runner")
        .await
        .expect("runner ServiceAccount");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_finished_item_when_its_config_changes_then_the_next_pod_starts_from_the_last_state()
 {
    let s = story().await;
    let h = &s.h;
    h.create_item(&item("stateful", ECHO, json!({"importValues": {"v": 1}})))
        .await;
    let first = finished(h, "stateful").await;
    assert_eq!(exports(h, &first).await["runs"], 1);

    let items = h.items("default");
    let patch = json!({"spec": {"config": {"importValues": {"v": 2}}}});
    items
        .patch("stateful", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let second = h
        .wait_for("default", "stateful", Duration::from_secs(60), |i| {
            let s = i.status();
            s.job_id != first.status().job_id && s.job_id == s.job_id_finished
        })
        .await;
    assert_eq!(
        second.status().phase,
        Phase::Succeeded,
        "{:?}",
        second.status()
    );
    let out = exports(h, &second).await;
    assert_eq!(
        out["runs"], 2,
        "the state directory of run 1 was restored for run 2"
    );
    assert_eq!(out["imports"], json!({"v": 2}));
    // One state backup (the newest), one kept pod (the newest).
    let state: Vec<_> = host_secrets(h, "stateful")
        .await
        .into_iter()
        .filter(|s| s.metadata.labels.as_ref().unwrap()[pod::LABEL_TYPE] == "state")
        .collect();
    assert_eq!(state.len(), 1, "older state backups are removed");
    let pods = host_pods(h, "stateful").await;
    assert_eq!(pods.len(), 1, "only the newest finished pod is kept");
    assert_eq!(
        pods[0].metadata.labels.as_ref().unwrap()[pod::LABEL_JOB_ID],
        second.status().job_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_programs_that_crash_or_run_out_of_memory_then_the_item_fails_with_the_containers_message()
 {
    let s = story().await;
    let h = &s.h;
    h.create_item(&item(
        "crash",
        "echo 'cannot reach the database' >&2; exit 3",
        json!({}),
    ))
    .await;
    h.create_item(&item("oom", "exit 137", json!({}))).await;
    let crash = finished(h, "crash").await;
    let st = crash.status();
    assert_eq!(st.phase, Phase::Failed);
    let err = st.last_error.expect("lastError");
    assert!(
        err.codes.iter().any(|c| c == codes::INTERNAL_PROBLEM),
        "{err:?}"
    );
    assert_eq!(err.reason, "RunMainContainer");
    assert!(
        err.message.contains("exited with code 3"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("cannot reach the database"),
        "{}",
        err.message
    );
    let ps = provider_status(&crash);
    assert_eq!(ps["podStatus"]["phase"], "Failed");
    assert_eq!(ps["podStatus"]["containerStatus"]["exitCode"], 3);

    let oom = finished(h, "oom").await;
    assert_eq!(oom.status().phase, Phase::Failed);
    let err = oom.status().last_error.unwrap();
    assert!(err.message.contains("(OOMKilled)"), "{}", err.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_bad_input_then_the_item_fails_with_a_message_that_says_what_is_wrong() {
    let s = story().await;
    let h = &s.h;
    // An image that cannot be pulled: the process kubelet fails every image named
    // `unpullable`; in containers, one the loopback registry does not have.
    let unpullable_image = match pods() {
        Pods::Process => "registry.invalid/unpullable:1".to_string(),
        Pods::Podman { registry, .. } => format!("{registry}/test/unpullable:1"),
    };
    let unpullable = item("unpullable", "true", json!({})).replace(main_image(), &unpullable_image);
    h.create_item(&unpullable).await;
    // A configuration Landscaper's validation refuses, and a component descriptor reference
    // without a repository (neither in the ref nor in the Context).
    h.create_item(&item(
        "no-ns",
        "true",
        json!({"registryPullSecrets": [{"name": "creds"}]}),
    ))
    .await;
    h.create_item(&item(
        "cd-ref",
        "true",
        json!({"componentDescriptor": {"ref": {"componentName": "x", "version": "1"}}}),
    ))
    .await;

    let pulled = finished(h, "unpullable").await;
    let err = pulled.status().last_error.unwrap();
    assert_eq!(pulled.status().phase, Phase::Failed);
    assert!(
        err.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{err:?}"
    );
    assert_eq!(err.reason, "ErrImagePull");
    assert!(err.message.contains(&unpullable_image), "{}", err.message);
    h.wait_for("default", "unpullable", Duration::from_secs(10), |_| true)
        .await;
    let left: Vec<_> = host_pods(h, "unpullable").await;
    assert!(
        left.iter().all(|p| p.metadata.deletion_timestamp.is_some()),
        "a pod that can never start is removed"
    );

    for (name, needle) in [
        ("no-ns", "spec.config.registryPullSecrets[0].namespace"),
        ("cd-ref", "does not specify a repository context"),
    ] {
        let i = finished(h, name).await;
        assert_eq!(i.status().phase, Phase::Failed);
        let err = i.status().last_error.unwrap();
        assert!(
            err.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
            "{err:?}"
        );
        assert!(err.message.contains(needle), "{name}: {}", err.message);
        assert!(
            host_pods(h, name).await.is_empty(),
            "{name}: no pod for a broken item"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_deployed_item_when_deleted_then_a_delete_pod_runs_and_every_host_object_goes() {
    let s = story().await;
    let h = &s.h;
    // What the DELETE run saw comes back in main's log.
    let script = format!(
        "{ECHO}\nif [ \"$OPERATION\" = DELETE ]; then echo \"deleted-with $(cat \"$IMPORTS_PATH\")\"; fi"
    );
    h.create_item(&item(
        "removable",
        &script,
        json!({"importValues": {"db": "orders"}}),
    ))
    .await;
    let done = finished(h, "removable").await;
    assert_eq!(done.status().phase, Phase::Succeeded);
    assert!(!host_secrets(h, "removable").await.is_empty());

    h.items("default")
        .delete("removable", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("default", "removable", Duration::from_secs(60))
        .await;
    let seen = main_logs(&s)
        .lines()
        .find_map(|l| l.strip_prefix("deleted-with "))
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .expect("the user's program ran with OPERATION=DELETE before the item went");
    assert_eq!(seen, json!({"db": "orders"}));
    assert!(host_pods(h, "removable").await.is_empty(), "pods removed");
    assert!(
        host_secrets(h, "removable").await.is_empty(),
        "config, target, export and state Secrets removed"
    );
    let sa: Api<ServiceAccount> = Api::namespaced(h.client.clone(), HOST_NS);
    assert!(
        sa.get_opt("default-removable-runner")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_delete_pod_that_fails_then_the_item_stays_until_force_cleanup() {
    let s = story().await;
    let h = &s.h;
    let script = "if [ \"$OPERATION\" = DELETE ]; then echo 'refusing to delete' >&2; exit 1; fi";
    h.create_item(&item("sticky", script, json!({}))).await;
    let done = finished(h, "sticky").await;
    assert_eq!(done.status().phase, Phase::Succeeded);

    let items = h.items("default");
    items
        .delete("sticky", &DeleteParams::default())
        .await
        .unwrap();
    let failed = h
        .wait_for("default", "sticky", Duration::from_secs(60), |i| {
            i.status().phase == Phase::DeleteFailed
        })
        .await;
    let err = failed.status().last_error.unwrap();
    assert!(
        err.message.contains("refusing to delete"),
        "{}",
        err.message
    );

    // The user gives up on the DELETE run: force-cleanup, and a new job (as Landscaper issues
    // on a retry).
    let patch = json!({"metadata": {"annotations": {pod::FORCE_CLEANUP: "true"}}});
    items
        .patch("sticky", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let retry = json!({"status": {"jobID": "retry-after-force-cleanup"}});
    items
        .patch_status("sticky", &PatchParams::default(), &Patch::Merge(&retry))
        .await
        .unwrap();
    h.wait_gone("default", "sticky", Duration::from_secs(60))
        .await;
    assert!(host_pods(h, "sticky").await.is_empty());
    assert!(host_secrets(h, "sticky").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_program_that_outlives_the_items_timeout_then_the_job_fails_with_err_timeout() {
    let s = story().await;
    let h = &s.h;
    let slow = item("slow", "sleep 60", json!({})).replace(
        "\"type\":\"landscaper.gardener.cloud/container\"",
        "\"type\":\"landscaper.gardener.cloud/container\",\"timeout\":\"3s\"",
    );
    assert!(slow.contains("\"timeout\":\"3s\""));
    h.create_item(&slow).await;
    let done = finished(h, "slow").await;
    assert_eq!(done.status().phase, Phase::Failed);
    let err = done.status().last_error.unwrap();
    assert!(err.codes.iter().any(|c| c == codes::TIMEOUT), "{err:?}");
    // The pod got the job's remaining time as its deadline, so it does not run on.
    let pods = host_pods(h, "slow").await;
    let deadline = pods[0]
        .spec
        .as_ref()
        .unwrap()
        .active_deadline_seconds
        .unwrap();
    assert!(
        (1..=3).contains(&deadline),
        "activeDeadlineSeconds {deadline}"
    );
    let pods_api: Api<Pod> = Api::namespaced(h.client.clone(), HOST_NS);
    let name = pods[0].metadata.name.clone().unwrap();
    let mut phase = String::new();
    for _ in 0..100 {
        let p = pods_api.get(&name).await.unwrap();
        phase = p.status.and_then(|s| s.phase).unwrap_or_default();
        if phase == "Failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        phase, "Failed",
        "the kubelet stopped the pod at its deadline"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_objects_of_a_vanished_item_and_old_pods_then_the_garbage_collector_removes_them() {
    let s = story().await;
    let h = &s.h;
    h.create_item(&item("kept", ECHO, json!({"importValues": {}})))
        .await;
    finished(h, "kept").await;
    // Left-overs of an item that no longer exists (e.g. deleted with delete-without-uninstall).
    let key = pod::ItemKey {
        namespace: "default".into(),
        name: "ghost".into(),
    };
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), HOST_NS);
    let mut ghost: Secret =
        serde_json::from_value(json!({"metadata": {"name": key.config_secret()}})).unwrap();
    ghost.metadata.labels = Some(key.labels(""));
    ghost.metadata.annotations = Some(key.annotations());
    secrets
        .create(&PostParams::default(), &ghost)
        .await
        .unwrap();
    // An older finished pod of the live item, beyond keepPods.
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), HOST_NS);
    let mut old = host_pods(h, "kept").await.remove(0);
    old.metadata = kube::api::ObjectMeta {
        name: Some("kept-old".into()),
        labels: old.metadata.labels.clone(),
        annotations: old.metadata.annotations.clone(),
        finalizers: Some(vec![pod::POD_FINALIZER.into()]),
        ..Default::default()
    };
    let status = old.status.take();
    let created = pods.create(&PostParams::default(), &old).await.unwrap();
    pods.patch_status(
        "kept-old",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": status})),
    )
    .await
    .unwrap();
    let newest_first = host_pods(h, "kept").await;
    assert_eq!(newest_first.len(), 2);
    let _ = created;

    let gc = h.container.as_ref().unwrap().garbage_collector();
    let collected = gc.collect().await.unwrap();
    assert_eq!(collected.secrets, 1, "{collected:?}");
    assert!(
        secrets
            .get_opt(&key.config_secret())
            .await
            .unwrap()
            .is_none()
    );
    let left = host_pods(h, "kept").await;
    assert_eq!(left.len(), 1, "one finished pod per live item is kept");
    assert!(
        !host_secrets(h, "kept").await.is_empty(),
        "a live item's Secrets stay"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_registry_pull_secrets_then_the_pod_pulls_with_only_its_registrys_credentials() {
    let s = story().await;
    let h = &s.h;
    // The process kubelet pulls nothing; in containers the image is in a registry that wants
    // `user:pass` (base64 dXNlcjpwYXNz), so the pod pulls only with the credentials it is given.
    let (registry, _authenticating) = match pods() {
        Pods::Process => ("registry.example:5000".to_string(), None),
        Pods::Podman { podman, shell, .. } => {
            let r = test_support::registry::start_registry_with_auth("user", "pass")
                .expect("docker-registry");
            let local = format!("localhost/{}", shell.split_once('/').unwrap().1);
            let remote = format!("{}/team/app:1", r.addr);
            podman.run(&[
                "push",
                "--quiet",
                "--tls-verify=false",
                "--creds=user:pass",
                &local,
                &remote,
            ]);
            (r.addr.clone(), Some(r))
        }
    };
    // A Docker config in the Landscaper cluster with credentials for two registries.
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "default");
    let docker = json!({"auths": {
        registry.clone(): {"auth": "dXNlcjpwYXNz"},
        "https://index.docker.io/v1/": {"auth": "b3RoZXI6b3RoZXI="},
    }});
    let mut creds: Secret = serde_json::from_value(json!({"metadata": {"name": "creds"},
        "type": "kubernetes.io/dockerconfigjson"}))
    .unwrap();
    creds.data = Some(
        [(
            ".dockerconfigjson".to_string(),
            k8s_openapi::ByteString(serde_json::to_vec(&docker).unwrap()),
        )]
        .into(),
    );
    secrets
        .create(&PostParams::default(), &creds)
        .await
        .unwrap();
    let private = item(
        "private",
        "true",
        json!({"registryPullSecrets": [{"name": "creds", "namespace": "default"}]}),
    )
    .replace(main_image(), &format!("{registry}/team/app:1"));
    h.create_item(&private).await;
    let done = finished(h, "private").await;
    assert_eq!(done.status().phase, Phase::Succeeded, "{:?}", done.status());
    let pod = host_pods(h, "private").await.remove(0);
    let spec = pod.spec.unwrap();
    assert_eq!(
        spec.image_pull_secrets.unwrap()[0].name,
        "default-private-imgpullsec"
    );
    let host: Api<Secret> = Api::namespaced(h.client.clone(), HOST_NS);
    let pull = host.get("default-private-imgpullsec").await.unwrap();
    assert_eq!(
        pull.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
    let written: Value =
        serde_json::from_slice(&pull.data.unwrap()[".dockerconfigjson"].0).unwrap();
    assert_eq!(
        written,
        json!({"auths": {registry.clone(): {"auth": "dXNlcjpwYXNz"}}}),
        "only the image's registry"
    );
    // A missing pull secret is the item's configuration problem.
    h.create_item(&item(
        "no-creds",
        "true",
        json!({"registryPullSecrets": [{"name": "missing", "namespace": "default"}]}),
    ))
    .await;
    let failed = finished(h, "no-creds").await;
    let err = failed.status().last_error.unwrap();
    assert!(
        err.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{err:?}"
    );
    assert!(
        err.message.contains("default/missing not found"),
        "{}",
        err.message
    );
}

/// OCM (issue #34, docs/ocm.md): `componentDescriptor.ref` and `blueprint.ref` of a component
/// version in a real registry, resolved by the host (the pod gets no registry credentials) and
/// mounted as Landscaper's init container mounts them: the resolved descriptor list (the version
/// and the one it references) at COMPONENT_DESCRIPTOR_PATH, the blueprint's files at
/// CONTENT_PATH. A blueprint that is not there fails the item naming it, and no pod starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_component_descriptor_and_blueprint_by_reference_then_the_program_reads_them_as_in_landscaper()
 {
    use test_support::ocm::{
        BLUEPRINT_MEDIA_TYPE, Resource, Schema, push_component, push_component_as, tgz,
    };
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let addr = registry.addr.clone();
    push_component(
        &addr,
        "ocm",
        "example.com/acme/db",
        "2.0.0",
        vec![],
        Schema::V3,
    )
    .await;
    let blueprint = tgz(&[
        ("blueprint.yaml", b"kind: Blueprint\n"),
        ("data/config.txt", b"from-the-blueprint"),
    ]);
    push_component_as(
        &addr,
        None,
        "ocm",
        "example.com/acme/app",
        "1.0.0",
        vec![Resource::local(
            "installer",
            "landscaper.gardener.cloud/blueprint",
            BLUEPRINT_MEDIA_TYPE,
            blueprint,
        )],
        &[("db", "example.com/acme/db", "2.0.0")],
        Schema::V2,
    )
    .await;
    let s = story_fetching_from(&addr).await;
    let h = &s.h;
    let cd_ref = json!({"ref": {
        "repositoryContext": {"type": "OCIRegistry", "baseUrl": addr, "subPath": "ocm"},
        "componentName": "example.com/acme/app", "version": "1.0.0"}});
    let script = r#"set -e
mkdir -p "$(dirname "$EXPORTS_PATH")"
printf '{"cd": %s, "kind": "%s", "config": "%s"}' "$(cat "$COMPONENT_DESCRIPTOR_PATH")" \
  "$(sed -n 's/^kind: //p' "$CONTENT_PATH/blueprint.yaml")" "$(cat "$CONTENT_PATH/data/config.txt")" > "$EXPORTS_PATH"
"#;
    h.create_item(&item(
        "ocm-ref",
        script,
        json!({"componentDescriptor": cd_ref, "blueprint": {"ref": {"resourceName": "installer"}}}),
    ))
    .await;
    h.create_item(&item(
        "ocm-no-blueprint",
        script,
        json!({"componentDescriptor": cd_ref, "blueprint": {"ref": {"resourceName": "nope"}}}),
    ))
    .await;

    let done = finished(h, "ocm-ref").await;
    assert_eq!(done.status().phase, Phase::Succeeded, "{:?}", done.status());
    let out = exports(h, &done).await;
    assert_eq!(out["cd"]["meta"]["schemaVersion"], "v2");
    let components = out["cd"]["components"].as_array().unwrap();
    assert_eq!(components.len(), 2, "{}", out["cd"]);
    assert_eq!(components[0]["component"]["name"], "example.com/acme/app");
    assert_eq!(components[1]["metadata"]["name"], "example.com/acme/db");
    assert_eq!(out["kind"], "Blueprint");
    assert_eq!(out["config"], "from-the-blueprint");

    let e = failed_before_a_pod(h, "ocm-no-blueprint").await;
    assert!(
        e.message.contains("has no resource name=nope") && e.message.contains("name=installer"),
        "{}",
        e.message
    );
}

/// Waits for `name`'s job; asserts it failed with `ERR_CONFIGURATION_PROBLEM` and that no pod
/// was started for it. Returns the error.
async fn failed_before_a_pod(h: &Harness, name: &str) -> deployer_host::landscaper::LsError {
    let failed = finished(h, name).await;
    assert_eq!(failed.status().phase, Phase::Failed);
    let e = failed.status().last_error.unwrap();
    assert!(
        e.codes.iter().any(|c| c == codes::CONFIGURATION_PROBLEM),
        "{e:?}"
    );
    assert!(host_pods(h, name).await.is_empty(), "no pod started");
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_component_in_a_registry_that_needs_credentials_then_the_contexts_ocm_config_reads_it_and_a_context_without_fails_naming_them()
 {
    // Landscaper v1.x gives the Context's `ocmConfig` to the init container, which resolves the
    // component with it. Here the host resolves references before the pod starts, with the same
    // credentials; main never sees them (in v1.x neither).
    use test_support::manifest::put;
    use test_support::ocm::{BLUEPRINT_MEDIA_TYPE, Resource, Schema, push_component_as, tgz};
    let Some(registry) = test_support::registry::start_registry_with_auth("ocm", "s3cret") else {
        return;
    };
    let addr = registry.addr.clone();
    let blueprint = tgz(&[("blueprint.yaml", b"kind: Blueprint\n")]);
    push_component_as(
        &addr,
        Some(("ocm", "s3cret")),
        "ocm",
        "example.com/acme/private",
        "1.0.0",
        vec![Resource::local(
            "installer",
            "landscaper.gardener.cloud/blueprint",
            BLUEPRINT_MEDIA_TYPE,
            blueprint,
        )],
        &[],
        Schema::V2,
    )
    .await;
    let s = story_fetching_from(&addr).await;
    let h = &s.h;
    // Given a Context whose ocmConfig ConfigMap holds the registry's credentials, and one without.
    let port = addr.rsplit_once(':').unwrap().1;
    let credentials = format!(
        "type: credentials.config.ocm.software\nconsumers:\n- identity: {{type: OCIRegistry, hostname: 127.0.0.1, port: \"{port}\"}}\n  credentials:\n  - type: Credentials\n    properties: {{username: ocm, password: s3cret}}\n"
    );
    put(
        h,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "ocm-config", "namespace": "default"},
               "data": {".ocmconfig": format!(
                   "type: generic.config.ocm.software/v1\nconfigurations:\n- {}",
                   credentials.replace('\n', "\n  "))}}),
    )
    .await;
    let repository = json!({"type": "OCIRegistry", "baseUrl": addr, "subPath": "ocm"});
    for (name, extra) in [
        (
            "with-ocm-config",
            json!({"ocmConfig": {"name": "ocm-config"}}),
        ),
        ("without-credentials", json!({})),
    ] {
        let mut context = json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
                                 "metadata": {"name": name, "namespace": "default"},
                                 "repositoryContext": repository});
        for (k, v) in extra.as_object().unwrap() {
            context[k] = v.clone();
        }
        put(h, context).await;
    }
    // When an item in each Context names the component and its blueprint,
    let script = r#"set -e
mkdir -p "$(dirname "$EXPORTS_PATH")"
printf '{"kind": "%s", "env": "%s"}' "$(sed -n 's/^kind: //p' "$CONTENT_PATH/blueprint.yaml")" \
  "$(env | grep -c -i ocm || true)" > "$EXPORTS_PATH"
"#;
    let cd_ref = json!({"ref": {"repositoryContext": repository,
        "componentName": "example.com/acme/private", "version": "1.0.0"}});
    for (name, context) in [
        ("private-ref", "with-ocm-config"),
        ("private-anonymous", "without-credentials"),
    ] {
        let mut i: Value = serde_json::from_str(&item(
            name,
            script,
            json!({"componentDescriptor": cd_ref, "blueprint": {"ref": {"resourceName": "installer"}}}),
        ))
        .unwrap();
        i["spec"]["context"] = json!(context);
        h.create_item(&i.to_string()).await;
    }
    // then the first reads them (main gets no OCM configuration),
    let done = finished(h, "private-ref").await;
    assert_eq!(done.status().phase, Phase::Succeeded, "{:?}", done.status());
    let out = exports(h, &done).await;
    assert_eq!(out["kind"], "Blueprint", "{out}");
    assert_eq!(out["env"], "0", "{out}");
    // and the second fails at once, naming what is missing, without a pod.
    let e = failed_before_a_pod(h, "private-anonymous").await;
    assert!(
        e.message.contains("missing credentials")
            && e.message
                .contains("context without-credentials has no registryPullSecrets"),
        "{}",
        e.message
    );
}
