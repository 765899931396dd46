//! The stage of the real Landscaper's stories (`tests/real_landscaper.rs`): the embedded API
//! server served on loopback, our host (controller, container deployer, a process kubelet for
//! its pods), the Target the Installations import, and the real Landscaper against it
//! ([`Stage`]); what the stories read back (an Installation's items, their exports, the jobs our
//! host saw: [`JobRecorder`]).
//!
//! Owns: the stage and its readers. Must not touch: the stories' Installations and blueprints
//! (they stay in the story file).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::dev::kubelet::ProcessKubelet;
use deployer_host::landscaper::{DeployItem, Phase};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use super::{self as ls, RealLandscaper, apply, wait_job_after};
use crate::{Harness, Options};

/// Where the Installations, their items and imports live (Context `default` is there).
pub const NS: &str = "default";

/// Where the container deployer runs its pods.
pub const HOST_NS: &str = "container-host";

/// The Target the Installations import.
pub const TARGET: &str = "my-cluster";

/// Generous: a cold Landscaper, four items in a row, Helm and a pod on 2 cores.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(120);

/// The API server, our host (controller, container deployer, process kubelet), and the real
/// Landscaper against the server's loopback URL. Dropped in field order: Landscaper first.
pub struct Stage {
    _landscaper: RealLandscaper,
    pub dev: DevStage,
    pub h: Harness,
}

pub struct StageOptions {
    /// Our host is up when Landscaper starts (off: [`Harness::start_controller`] later).
    pub host_up: bool,
    /// The host's `fetch` configuration (default: nothing may be downloaded).
    pub fetch: Option<deployer_host::capabilities::FetchConfig>,
    /// Landscaper's `deployItemTimeouts.pickup`.
    pub pickup_timeout: &'static str,
    /// More environment for Landscaper (e.g. `SSL_CERT_FILE` to trust a test registry's CA).
    pub landscaper_env: Vec<(&'static str, String)>,
}

impl Default for StageOptions {
    fn default() -> Self {
        Self {
            host_up: true,
            fetch: None,
            pickup_timeout: "30s",
            landscaper_env: Vec::new(),
        }
    }
}

pub fn host_config() -> HostConfig {
    crate::container_host_config(HOST_NS)
}

impl Stage {
    /// Starts the server and our host (whose pods run `host_binary`: the story's
    /// `CARGO_BIN_EXE_deployer-host`), then the real Landscaper.
    pub async fn start(host_binary: &Path, options: StageOptions) -> Self {
        let mut config = host_config();
        if let Some(fetch) = options.fetch {
            config.fetch = fetch;
        }
        let h = Harness::start_with(Options {
            config,
            landscaper: false,
            controller: options.host_up,
            ..Options::default()
        })
        .await;
        let dev = DevStage::start(&h, host_binary).await;
        let landscaper = tokio::task::spawn_blocking({
            let kubeconfig = dev.kubeconfig();
            move || {
                RealLandscaper::start_with_env(
                    &kubeconfig,
                    options.pickup_timeout,
                    &options.landscaper_env,
                )
            }
        })
        .await
        .unwrap();
        Stage {
            _landscaper: landscaper,
            dev,
            h,
        }
    }
}

/// The items of an Installation's execution, by their blueprint name
/// (`execution.landscaper.gardener.cloud/name`).
pub async fn items(h: &Harness) -> BTreeMap<String, DeployItem> {
    h.items(NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|i| {
            let name = i
                .metadata
                .labels
                .as_ref()?
                .get("execution.landscaper.gardener.cloud/name")?
                .clone();
            Some((name, i))
        })
        .collect()
}

/// Waits until the Installation `name` in [`NS`] finished a job other than `previous`, asserts
/// the Installation's phase, and returns it with its items.
pub async fn job_ends(
    h: &Harness,
    name: &str,
    previous: Option<&str>,
    phase: &str,
) -> (DynamicObject, BTreeMap<String, DeployItem>) {
    let (inst, got) = wait_job_after(&h.client, NS, name, previous, JOB_TIMEOUT).await;
    let items = items(h).await;
    assert_eq!(got, phase, "{}\n{}", ls::status(&inst), describe(&items));
    (inst, items)
}

/// The Installation's current jobID (to wait for the next one).
pub fn job_id(inst: &DynamicObject) -> Option<String> {
    ls::status(inst)["jobID"].as_str().map(str::to_string)
}

/// Waits until the Installation's item `name` (blueprint name) exists and `pred` holds.
pub async fn wait_item(h: &Harness, name: &str, pred: impl Fn(&DeployItem) -> bool) -> DeployItem {
    let deadline = tokio::time::Instant::now() + JOB_TIMEOUT;
    loop {
        let all = items(h).await;
        if let Some(item) = all.get(name).filter(|i| pred(i)) {
            return item.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for item {name}:\n{}",
            describe(&all)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn describe(items: &BTreeMap<String, DeployItem>) -> String {
    items
        .iter()
        .map(|(n, i)| {
            let s = i.status();
            format!(
                "{n}: phase={:?} job={} finished={} lastError={:?}",
                s.phase, s.job_id, s.job_id_finished, s.last_error
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The export of an item (the Secret `status.exportRef` names, key `config`).
pub async fn export_of(h: &Harness, item: &DeployItem) -> Value {
    let r = item.status().export_ref.expect("exportRef");
    let secrets: Api<Secret> =
        Api::namespaced(h.client.clone(), r.namespace.as_deref().unwrap_or(NS));
    let s = secrets.get(&r.name).await.expect("export Secret");
    serde_yaml::from_slice(&s.data.unwrap()["config"].0).unwrap()
}

/// One thing the host saw happen to an item (by its name in the Execution): a job started, a
/// job finished with a phase, the item gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Started(String),
    Finished(String, Phase),
    Gone(String),
}

/// Records, in the API server's order, every job start, job finish and removal of the items in
/// [`NS`] that carry an Execution name label, until dropped.
pub struct JobRecorder {
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl JobRecorder {
    /// Starts recording; returns once the watch's first list is done, so nothing created after
    /// it is missed or seen out of order.
    pub async fn start(client: &kube::Client) -> Self {
        use futures::StreamExt;
        use kube::runtime::watcher;
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let api: Api<DeployItem> = Api::namespaced(client.clone(), NS);
        let (listed, is_listed) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let seen = seen.clone();
            let mut listed = Some(listed);
            async move {
                let mut last: BTreeMap<String, (String, String)> = BTreeMap::new();
                let stream = watcher(api, watcher::Config::default());
                futures::pin_mut!(stream);
                while let Some(event) = stream.next().await {
                    let (item, gone) = match event {
                        Ok(watcher::Event::Apply(i) | watcher::Event::InitApply(i)) => (i, false),
                        Ok(watcher::Event::Delete(i)) => (i, true),
                        Ok(watcher::Event::InitDone) => {
                            if let Some(listed) = listed.take() {
                                let _ = listed.send(());
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    let Some(name) = item
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("execution.landscaper.gardener.cloud/name"))
                        .cloned()
                    else {
                        continue;
                    };
                    let s = item.status();
                    let mut out = seen.lock().unwrap();
                    let before = last
                        .insert(name.clone(), (s.job_id.clone(), s.job_id_finished.clone()))
                        .unwrap_or_default();
                    if !s.job_id.is_empty() && s.job_id != before.0 {
                        out.push(Seen::Started(name.clone()));
                    }
                    if !s.job_id.is_empty()
                        && s.job_id == s.job_id_finished
                        && (s.job_id, s.job_id_finished) != before
                    {
                        out.push(Seen::Finished(name.clone(), s.phase.clone()));
                    }
                    if gone {
                        last.remove(&name);
                        out.push(Seen::Gone(name));
                    }
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), is_listed)
            .await
            .expect("the recorder's watch lists within 10s")
            .expect("recorder running");
        Self { seen, task }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for JobRecorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a finished item says that a user relies on: its phase, its error, its export.
pub async fn outcome(h: &Harness, item: &DeployItem) -> (Phase, Option<String>, Option<Value>) {
    let s = item.status();
    let export = match &s.export_ref {
        Some(_) => Some(export_of(h, item).await),
        None => None,
    };
    (s.phase, s.last_error.map(|e| e.message), export)
}

pub async fn wait_all_gone(h: &Harness) {
    let deadline = tokio::time::Instant::now() + JOB_TIMEOUT;
    while !items(h).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "items left:\n{}",
            describe(&items(h).await)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a story needs beside the harness: the server on loopback (Landscaper, the kubelet's
/// init and wait processes and the Target reach it there), a process kubelet for the container
/// deployer's pods, and the Target [`TARGET`] the Installations import.
pub struct DevStage {
    stop: tokio::sync::watch::Sender<bool>,
    dir: tempfile::TempDir,
    /// The embedded server on loopback, for the pods' processes.
    _serving: embedded_apiserver::LoopbackServing,
}

impl DevStage {
    /// Pods run `host_binary` (the story's `CARGO_BIN_EXE_deployer-host`).
    pub async fn start(h: &Harness, host_binary: &Path) -> Self {
        let namespaces: Api<Namespace> = Api::all(h.client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": HOST_NS}})).unwrap(),
            )
            .await
            .expect("namespace");
        let (stop, _) = tokio::sync::watch::channel(false);
        let stopped = || {
            let mut rx = stop.subscribe();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let server = h.server.clone().expect("embedded API server");
        let serving = server.serve_on_loopback().await.unwrap();
        let kubeconfig_text = serving.kubeconfig();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, &kubeconfig_text).unwrap();
        tokio::spawn(
            ProcessKubelet {
                client: h.client.clone(),
                namespace: HOST_NS.into(),
                kubeconfig,
                binary: host_binary.to_path_buf(),
                work_dir: dir.path().join("pods"),
                mint_tokens: false,
            }
            .run(stopped()),
        );
        apply(
            &ls::ls_api(&h.client, "Target", "targets", NS),
            json!({
                "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
                "metadata": {"name": TARGET, "namespace": NS},
                "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                         "config": {"kubeconfig": kubeconfig_text}},
            }),
        )
        .await;
        Self {
            stop,
            dir,
            _serving: serving,
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir().join("kubeconfig")
    }
}

impl Drop for DevStage {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// A blueprint directory (`blueprint.yaml` only) as Landscaper stores blueprints in component
/// versions: a gzipped tar (`application/vnd.gardener.landscaper.blueprint.v1+tar+gzip`).
pub fn blueprint_archive(blueprint: &Value) -> Vec<u8> {
    let yaml = serde_yaml::to_string(blueprint).unwrap();
    crate::ocm::tgz(&[("blueprint.yaml", yaml.as_bytes())])
}

/// The four-type deploy execution: `config` (manifest: the Namespace `app_ns` and a ConfigMap, exporting the
/// ConfigMap's color) -> `chart` (helm: the `web` chart with the color as its message) -> `job`
/// (container: a program that exports what it saw) -> `check` (mock).
pub fn four_types_deploy_execution(app_ns: &str) -> String {
    let chart = crate::chart_repo::archive_raw("web", "0.1.0");
    format!(
        r#"deployItems:
- name: config
  type: landscaper.gardener.cloud/kubernetes-manifest
  target: {{import: cluster}}
  config:
    apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
    kind: ProviderConfiguration
    updateStrategy: update
    manifests:
    - policy: manage
      manifest: {{apiVersion: v1, kind: Namespace, metadata: {{name: {app_ns}}}}}
    - policy: manage
      manifest:
        apiVersion: v1
        kind: ConfigMap
        metadata: {{name: settings, namespace: {app_ns}}}
        data: {{color: {{{{ .imports.color }}}}}}
    exports:
      exports:
      - key: color
        jsonPath: .data.color
        fromResource: {{apiVersion: v1, kind: ConfigMap, name: settings, namespace: {app_ns}}}
- name: chart
  type: landscaper.gardener.cloud/helm
  target: {{import: cluster}}
  dependsOn: [config]
  config:
    apiVersion: helm.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    name: web
    namespace: {app_ns}
    chart: {{archive: {{raw: "{chart}"}}}}
    values: {{message: {{{{ .imports.color }}}}}}
    readinessChecks: {{disableDefault: true}}
- name: job
  type: landscaper.gardener.cloud/container
  target: {{import: cluster}}
  dependsOn: [chart]
  config:
    apiVersion: container.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    image: alpine:3.19
    command: [sh, -c]
    args:
    - |
      mkdir -p "$(dirname "$EXPORTS_PATH")"
      printf '{{"operation": "%s", "color": "{{{{ .imports.color }}}}"}}' "$OPERATION" > "$EXPORTS_PATH"
- name: check
  type: landscaper.gardener.cloud/mock
  target: {{import: cluster}}
  dependsOn: [job]
  config:
    apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    phase: Succeeded
    export: {{checked: {{{{ .imports.color }}}}}}
"#
    )
}
