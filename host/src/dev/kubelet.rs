//! The dev kubelet for the container deployer's pods, without a cluster: it runs each pod of its
//! namespace once and writes the pod's status back through the API as a kubelet would. Tests use
//! it to drive pods end to end on any API server; `deployer-host dev --run-pods` uses it to run
//! container DeployItems on a laptop. Two runtimes ([`PodRuntime`]) run the containers; the pod's
//! lifecycle is this file's and the same for both:
//! - init runs first; then main and wait run side by side; exit code 137 is reported as
//!   `OOMKilled`; `activeDeadlineSeconds` kills main and fails the pod with `DeadlineExceeded`;
//!   the termination message is the termination log, else the tail of stderr
//!   (`FallbackToLogsOnError`); each container's output is kept in `<pod dir>/<container>.log`;
//!   an image that cannot be pulled leaves the pod `Pending` with `ErrImagePull` on that
//!   container.
//!
//! [`PodRuntime::Process`] (the default) runs each container as a local process whose file
//! system is a directory:
//! - Secret volumes are written to `<pod dir><mountPath>/<key>`; every environment value under
//!   `/data/ls` or `/var/run/secrets` is moved below the pod directory; `fieldRef`s
//!   `metadata.name|namespace` are resolved; `KUBECONFIG` points at the given kubeconfig.
//! - A command whose first word is `deployer-host` runs this host's binary (init and wait);
//!   any other command runs as given (`sh -c ...`). **The image is not pulled or used**: an
//!   image whose reference contains `unpullable` ends in `ErrImagePull` instead, to exercise
//!   that path.
//! - Not a sandbox: main runs with the user's rights. Use it only with items you trust.
//!
//! [`PodRuntime::Podman`] runs each container as a real container from its image, with the
//! pod's volumes and, for init and wait, API access as on a node: see [`podman`].

pub mod podman;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// What runs a pod's containers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodRuntime {
    /// Local processes; the image is ignored.
    #[default]
    Process,
    /// Real containers (`podman run`).
    Podman,
}

impl std::str::FromStr for PodRuntime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "process" => Ok(Self::Process),
            "podman" => Ok(Self::Podman),
            _ => Err(format!("unknown pod runtime {s:?} (process or podman)")),
        }
    }
}

/// Runs the pods of one namespace ([`ProcessKubelet::run`] as processes,
/// [`ProcessKubelet::run_with`] in either [`PodRuntime`]).
#[derive(Clone)]
pub struct ProcessKubelet {
    pub client: Client,
    pub namespace: String,
    /// Kubeconfig file init and wait use (processes: `KUBECONFIG`; podman: see [`podman`]).
    pub kubeconfig: PathBuf,
    /// The `deployer-host` binary.
    pub binary: PathBuf,
    /// Where each pod gets its directory.
    pub work_dir: PathBuf,
    /// Give init and wait a token of the pod's ServiceAccount (TokenRequest), as a kubelet's
    /// projected token does, instead of `kubeconfig`'s own user: the runner's RBAC is then
    /// what they get. Needs a server that serves `serviceaccounts/token`.
    pub mint_tokens: bool,
}

/// One container's end.
struct Exit {
    code: i32,
    message: String,
}

fn image(c: &Container) -> String {
    c.image.clone().unwrap_or_default()
}

/// Where a pod's containers find their files: its directory and the kubeconfig they use;
/// under podman, what its volumes are on the host.
#[derive(Clone, Copy)]
struct PodFiles<'a> {
    root: &'a Path,
    kubeconfig: &'a Path,
    podman: Option<&'a podman::PodSetup>,
    image_ids: &'a ImageIds,
}

/// What each container's `imageID` says: under podman the image's repository and digest
/// (`<repository>@sha256:…`, as containerd reports it), else `process://<image>`.
#[derive(Clone, Debug, Default)]
struct ImageIds(BTreeMap<String, String>);

impl ImageIds {
    fn of(&self, image: &str) -> String {
        self.0
            .get(image)
            .cloned()
            .unwrap_or_else(|| format!("process://{image}"))
    }
}

/// The process runtime's pull: an image named `unpullable` fails, as its registry would.
fn process_pull_failure(inits: &[Container], mains: &[Container]) -> Option<(Container, String)> {
    let c = inits
        .iter()
        .chain(mains)
        .find(|c| image(c).contains("unpullable"))?;
    let message = format!(
        "rpc error: pull access denied for {}, repository does not exist",
        image(c)
    );
    Some((c.clone(), message))
}

/// The status of a pod whose container `c` cannot be pulled, as a kubelet reports it: the pod
/// stays `Pending`, `c` waits with `ErrImagePull` and `message`.
fn image_pull_failure(
    inits: &[Container],
    mains: &[Container],
    c: &Container,
    message: &str,
) -> Value {
    let mut statuses: Vec<Value> = mains
        .iter()
        .map(|m| waiting(&m.name, &image(m), "PodInitializing", ""))
        .collect();
    let failing = waiting(&c.name, &image(c), "ErrImagePull", message);
    let in_init = inits.iter().any(|i| i.name == c.name);
    if !in_init {
        statuses.retain(|s| s["name"] != c.name.as_str());
        statuses.push(failing.clone());
    }
    let mut status = json!({"phase": "Pending", "containerStatuses": statuses});
    if in_init {
        status["initContainerStatuses"] = json!([failing]);
    }
    status
}

fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn terminated(name: &str, image: &str, exit: &Exit, ids: &ImageIds) -> Value {
    let reason = match exit.code {
        0 => "Completed",
        137 => "OOMKilled",
        _ => "Error",
    };
    let mut t =
        json!({"exitCode": exit.code, "reason": reason, "startedAt": now(), "finishedAt": now()});
    if !exit.message.is_empty() {
        t["message"] = json!(exit.message);
    }
    json!({"name": name, "image": image, "imageID": ids.of(image), "ready": false,
           "restartCount": 0, "state": {"terminated": t}})
}

fn running(name: &str, image: &str, ids: &ImageIds) -> Value {
    json!({"name": name, "image": image, "imageID": ids.of(image), "ready": true,
           "restartCount": 0, "started": true, "state": {"running": {"startedAt": now()}}})
}

fn waiting(name: &str, image: &str, reason: &str, message: &str) -> Value {
    json!({"name": name, "image": image, "imageID": "", "ready": false, "restartCount": 0,
           "state": {"waiting": {"reason": reason, "message": message}}})
}

impl ProcessKubelet {
    /// Runs until `stop` resolves: every new pod of the namespace is started once, as local
    /// processes.
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) {
        self.run_with(PodRuntime::Process, stop).await
    }

    /// [`ProcessKubelet::run`] with the containers run by `runtime`.
    pub async fn run_with(self, runtime: PodRuntime, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut started = BTreeSet::new();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for pod in list.items {
                    let uid = pod.uid().unwrap_or_default();
                    let fresh = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.as_deref())
                        .is_none_or(|p| p == "Pending")
                        && pod.metadata.deletion_timestamp.is_none();
                    if fresh && started.insert(uid) {
                        let me = self.clone();
                        tokio::spawn(async move {
                            let name = pod.name_any();
                            if let Err(e) = me.run_pod(pod, runtime).await {
                                tracing::warn!(pod = %name, error = %crate::apierrors::render_chain(&e), "dev kubelet: pod run failed");
                            }
                        });
                    }
                }
            }
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }

    async fn set_status(&self, pod: &str, status: Value) -> kube::Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        pods.patch_status(
            pod,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .map(|_| ())
    }

    async fn run_pod(&self, pod: Pod, runtime: PodRuntime) -> anyhow::Result<()> {
        let name = pod.name_any();
        let spec = pod.spec.clone().unwrap_or_default();
        let root = self.work_dir.join(&name);
        std::fs::create_dir_all(&root)?;
        let inits = spec.init_containers.clone().unwrap_or_default();
        let mains = spec.containers.clone();
        let pulled = match runtime {
            PodRuntime::Process => match process_pull_failure(&inits, &mains) {
                Some(failure) => Err(failure),
                None => Ok(ImageIds::default()),
            },
            PodRuntime::Podman => self.podman_pull(&pod, &root).await?,
        };
        let image_ids = match pulled {
            Ok(ids) => ids,
            Err((c, message)) => {
                let status = image_pull_failure(&inits, &mains, &c, &message);
                self.set_status(&name, status).await?;
                return Ok(());
            }
        };

        let secrets = self.secret_volumes(&pod).await?;
        let kubeconfig = if self.mint_tokens {
            self.pod_kubeconfig(&pod, &root).await?
        } else {
            self.kubeconfig.clone()
        };
        let setup = match runtime {
            PodRuntime::Process => {
                write_secret_volumes(&pod, &root, &secrets)?;
                None
            }
            PodRuntime::Podman => Some(podman::prepare(&pod, &root, &secrets, &kubeconfig)?),
        };
        let files = PodFiles {
            root: &root,
            kubeconfig: &kubeconfig,
            podman: setup.as_ref(),
            image_ids: &image_ids,
        };
        let Some(init_statuses) = self.run_inits(&pod, &inits, &mains, files).await? else {
            return Ok(());
        };
        self.set_status(&name, json!({"phase": "Running", "initContainerStatuses": init_statuses,
            "containerStatuses": mains.iter().map(|m| running(&m.name, &image(m), &image_ids)).collect::<Vec<_>>()}))
            .await?;
        let deadline = spec
            .active_deadline_seconds
            .map(|s| Duration::from_secs(s.max(1) as u64));
        self.run_mains(&pod, &mains, init_statuses, deadline, files)
            .await
    }

    /// Pulls every image of the pod with its `imagePullSecrets`: their image IDs, or the first
    /// that fails and why.
    async fn podman_pull(
        &self,
        pod: &Pod,
        root: &Path,
    ) -> anyhow::Result<Result<ImageIds, (Container, String)>> {
        let spec = pod.spec.clone().unwrap_or_default();
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut configs = Vec::new();
        for s in spec.image_pull_secrets.iter().flatten() {
            // A missing pull secret is no pull secret, as on a node.
            let data = secrets.get_opt(&s.name).await?.and_then(|s| s.data);
            if let Some(config) = data.and_then(|mut d| d.remove(".dockerconfigjson")) {
                configs.push(config.0);
            }
        }
        let authfile = podman::write_authfile(root, &configs)?;
        let mut ids = BTreeMap::new();
        for c in spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
        {
            if let Err(message) = podman::pull(c, authfile.as_deref()).await {
                return Ok(Err((c.clone(), message)));
            }
            let image = image(c);
            if let Some(id) = podman::image_id(&image, authfile.as_deref()).await {
                ids.insert(image, id);
            }
        }
        Ok(Ok(ImageIds(ids)))
    }

    /// Runs the init containers in order. `None`: one failed, and the pod with it (its status
    /// is written).
    async fn run_inits(
        &self,
        pod: &Pod,
        inits: &[Container],
        mains: &[Container],
        files: PodFiles<'_>,
    ) -> anyhow::Result<Option<Vec<Value>>> {
        let name = pod.name_any();
        let mut init_statuses = Vec::new();
        for c in inits {
            self.set_status(&name, json!({"phase": "Pending", "startTime": now(),
                "initContainerStatuses": [running(&c.name, &image(c), files.image_ids)],
                "containerStatuses": mains.iter().map(|m| waiting(&m.name, &image(m), "PodInitializing", "")).collect::<Vec<_>>()}))
                .await?;
            let exit = self.run_container(pod, c, files, None).await?;
            init_statuses.push(terminated(&c.name, &image(c), &exit, files.image_ids));
            if exit.code != 0 {
                self.set_status(&name, json!({"phase": "Failed", "initContainerStatuses": init_statuses,
                    "containerStatuses": mains.iter().map(|m| waiting(&m.name, &image(m), "PodInitializing", "")).collect::<Vec<_>>()}))
                    .await?;
                return Ok(None);
            }
        }
        Ok(Some(init_statuses))
    }

    /// Runs `main` with the pod's deadline and the other containers (wait) beside it, then
    /// writes the pod's final phase.
    async fn run_mains(
        &self,
        pod: &Pod,
        mains: &[Container],
        init_statuses: Vec<Value>,
        deadline: Option<Duration>,
        files: PodFiles<'_>,
    ) -> anyhow::Result<()> {
        let name = pod.name_any();
        let mut exits: BTreeMap<String, Exit> = BTreeMap::new();
        let mut sidecars = Vec::new();
        for c in mains.iter().filter(|c| c.name != "main") {
            let me = self.clone();
            let (pod, c, root, kubeconfig) = (
                pod.clone(),
                c.clone(),
                files.root.to_path_buf(),
                files.kubeconfig.to_path_buf(),
            );
            let setup = files.podman.cloned();
            let image_ids = files.image_ids.clone();
            sidecars.push(tokio::spawn(async move {
                let files = PodFiles {
                    root: &root,
                    kubeconfig: &kubeconfig,
                    podman: setup.as_ref(),
                    image_ids: &image_ids,
                };
                let exit = me.run_container(&pod, &c, files, None).await;
                (c.name.clone(), exit)
            }));
        }
        let mut deadline_exceeded = false;
        if let Some(main) = mains.iter().find(|c| c.name == "main") {
            let mut exit = self.run_container(pod, main, files, deadline).await?;
            deadline_exceeded = exit.code == -1;
            if deadline_exceeded {
                exit.code = 137;
            }
            exits.insert("main".into(), exit);
            let statuses: Vec<Value> = mains
                .iter()
                .map(|m| match exits.get(&m.name) {
                    Some(e) => terminated(&m.name, &image(m), e, files.image_ids),
                    None => running(&m.name, &image(m), files.image_ids),
                })
                .collect();
            self.set_status(&name, json!({"phase": "Running", "initContainerStatuses": init_statuses, "containerStatuses": statuses}))
                .await?;
        }
        for s in sidecars {
            let (n, exit) = s.await?;
            exits.insert(n, exit?);
        }
        let failed = exits.values().any(|e| e.code != 0);
        let statuses: Vec<Value> = mains
            .iter()
            .filter_map(|m| {
                exits
                    .get(&m.name)
                    .map(|e| terminated(&m.name, &image(m), e, files.image_ids))
            })
            .collect();
        let mut status = json!({"phase": if failed { "Failed" } else { "Succeeded" },
            "initContainerStatuses": init_statuses, "containerStatuses": statuses});
        if deadline_exceeded {
            status["reason"] = json!("DeadlineExceeded");
            status["message"] = json!(format!(
                "Pod was active on the node longer than the specified deadline"
            ));
        }
        self.set_status(&name, status).await?;
        Ok(())
    }

    /// A kubeconfig for the pod's ServiceAccount: `kubeconfig`'s cluster, a fresh token.
    async fn pod_kubeconfig(&self, pod: &Pod, root: &Path) -> anyhow::Result<PathBuf> {
        let sa = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into());
        let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600}});
        let answer: Value = accounts
            .create_subresource("token", &sa, &kube::api::PostParams::default(), &request)
            .await?;
        let token = answer["status"]["token"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("TokenRequest for {sa} returned no token"))?;
        let mut config: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&self.kubeconfig)?)?;
        let user = serde_yaml::to_value(json!({"token": token}))?;
        if let Some(users) = config.get_mut("users").and_then(|u| u.as_sequence_mut()) {
            for u in users {
                u["user"] = user.clone();
            }
        }
        let path = root.join("kubeconfig");
        std::fs::write(&path, serde_yaml::to_string(&config)?)?;
        Ok(path)
    }

    /// The data of every Secret volume of the pod, by volume name.
    async fn secret_volumes(&self, pod: &Pod) -> anyhow::Result<SecretVolumes> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut out = SecretVolumes::new();
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let Some(secret) = &v.secret else { continue };
            let name = secret.secret_name.clone().unwrap_or_default();
            let data = secrets.get(&name).await?.data.unwrap_or_default();
            let files = data.into_iter().map(|(k, v)| (k, v.0)).collect();
            out.insert(v.name.clone(), files);
        }
        Ok(out)
    }

    /// Runs one container; exit code -1 = killed at `deadline`. Its output is kept in
    /// `<pod dir>/<container>.log`.
    async fn run_container(
        &self,
        pod: &Pod,
        c: &Container,
        files: PodFiles<'_>,
        deadline: Option<Duration>,
    ) -> anyhow::Result<Exit> {
        let (termination_log, output) = match files.podman {
            Some(setup) => {
                let log = podman::termination_log(files.root, c)?;
                let default_path = !podman::image_sets_path(&image(c)).await;
                let args = podman::run_args(pod, c, setup, &log, default_path);
                let name = podman::container_name(pod, c);
                (log, podman::run(&args, &name, deadline).await?)
            }
            None => {
                let log = files.root.join(format!("{}.termination-log", c.name));
                (
                    log.clone(),
                    self.run_process(pod, c, files, &log, deadline).await?,
                )
            }
        };
        let Some(output) = output else {
            return Ok(Exit {
                code: -1,
                message: "killed at the pod's activeDeadlineSeconds".into(),
            });
        };
        let code = output.status.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + output.status.signal().unwrap_or(9)
        });
        let mut message = std::fs::read_to_string(&termination_log).unwrap_or_default();
        if message.is_empty() && code != 0 {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(10).collect();
            message = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
        }
        let log = files.root.join(format!("{}.log", c.name));
        let _ = std::fs::write(log, [output.stdout, output.stderr].concat());
        Ok(Exit { code, message })
    }

    /// Runs one container as a local process. `None`: killed at `deadline`.
    async fn run_process(
        &self,
        pod: &Pod,
        c: &Container,
        files: PodFiles<'_>,
        termination_log: &Path,
        deadline: Option<Duration>,
    ) -> anyhow::Result<Option<std::process::Output>> {
        let root = files.root;
        let mut argv: Vec<String> = c.command.clone().unwrap_or_default();
        argv.extend(c.args.clone().unwrap_or_default());
        if argv.is_empty() {
            anyhow::bail!("container {} has no command (images are not run)", c.name);
        }
        let program = if argv[0] == "deployer-host" {
            self.binary.clone()
        } else {
            PathBuf::from(&argv[0])
        };
        let remap = |v: &str| {
            if v.starts_with("/data/ls") || v.starts_with("/var/run/secrets") {
                root.join(v.trim_start_matches('/')).display().to_string()
            } else {
                v.to_string()
            }
        };
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&argv[1..])
            .current_dir(root)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("KUBECONFIG", files.kubeconfig)
            .env("TERMINATION_LOG", termination_log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for e in c.env.iter().flatten() {
            let value = match (&e.value, &e.value_from) {
                (Some(v), _) => remap(v),
                (None, Some(from)) => {
                    match from.field_ref.as_ref().map(|f| f.field_path.as_str()) {
                        Some("metadata.name") => pod.name_any(),
                        Some("metadata.namespace") => pod.namespace().unwrap_or_default(),
                        _ => String::new(),
                    }
                }
                _ => String::new(),
            };
            cmd.env(&e.name, value);
        }
        let child = cmd.spawn()?;
        Ok(match deadline {
            None => Some(child.wait_with_output().await?),
            Some(d) => match tokio::time::timeout(d, child.wait_with_output()).await {
                Ok(out) => Some(out?),
                Err(_) => None,
            },
        })
    }
}

/// Secret volumes' files (key → content) by volume name.
type SecretVolumes = BTreeMap<String, BTreeMap<String, Vec<u8>>>;

/// Writes every Secret volume into the pod directory at its mount paths (process runtime).
fn write_secret_volumes(pod: &Pod, root: &Path, secrets: &SecretVolumes) -> anyhow::Result<()> {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut mounts: BTreeMap<String, String> = BTreeMap::new();
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        for m in c.volume_mounts.iter().flatten() {
            mounts.insert(m.name.clone(), m.mount_path.clone());
        }
    }
    for (volume, data) in secrets {
        let Some(path) = mounts.get(volume) else {
            continue;
        };
        let dir = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir)?;
        for (k, v) in data {
            std::fs::write(dir.join(k), v)?;
        }
    }
    Ok(())
}
