//! A stand-in for a cluster's kubelet and Deployment controller, for the host's own Deployments
//! (the chart's `app.kubernetes.io/name: wasm-deployer`), so that a story can install the host
//! the way a user does (Helm, or Landscaper's helm deployer) and then find it running.
//!
//! Each such Deployment runs as one `deployer-host` process of this checkout, exactly as its pod
//! template says: its args, its literal environment, its Secret volumes written out as files at
//! paths standing in for their mount paths, and the pod's ServiceAccount as its in-cluster
//! identity (a TokenRequest token in `HOST_KUBECONFIG`, as a projected token would be). Image
//! paths are replaced by this checkout's (`/plugins`). Once the process answers `/readyz`, the
//! Deployment's status says it is available (what Landscaper's and Helm's readiness checks read).
//! A changed pod template restarts the process (a rollout); a deleted Deployment stops it.
//!
//! Owns: those processes. Must not touch: the Deployments' specs, or any other workload.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The label the chart puts on the host's Deployment.
const HOST_LABEL: &str = "app.kubernetes.io/name=wasm-deployer";

/// One running host: which Deployment, which pod template, its image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningHost {
    /// `namespace/name` of the Deployment.
    pub deployment: String,
    pub image: String,
    /// The `--metrics-listen` address the process serves on.
    pub metrics: String,
    /// How many times this Deployment's process was started (1, then one per rollout).
    pub starts: u32,
}

struct Process {
    child: Child,
    template: String,
    host: RunningHost,
    dir: tempfile::TempDir,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.path().join("host.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "--- host {} (last lines)\n{}",
                self.host.deployment,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}

/// The host Deployments of one cluster, run as processes until dropped.
pub struct HostDeployments {
    running: Arc<Mutex<BTreeMap<String, Process>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HostDeployments {
    /// Watches the cluster of `admin` (an administrator's client) whose kubeconfig is
    /// `kubeconfig` (its server and CA are what the processes reach), and runs `binary` for each
    /// host Deployment.
    pub fn start(admin: Client, kubeconfig: &str, binary: &Path) -> Self {
        let running: Arc<Mutex<BTreeMap<String, Process>>> = Arc::default();
        let world = World {
            admin,
            kubeconfig: kubeconfig.to_string(),
            binary: binary.to_path_buf(),
        };
        let task = tokio::spawn({
            let running = running.clone();
            async move {
                loop {
                    if let Err(e) = world.sync(&running).await {
                        eprintln!("host deployments: {e:#}");
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
        });
        Self { running, task }
    }

    /// The hosts running now, by Deployment.
    pub fn running(&self) -> Vec<RunningHost> {
        let mut running = self.running.lock().unwrap();
        // A process that ended (crashed) is not running; the next sync starts it again.
        running.retain(|_, p| matches!(p.child.try_wait(), Ok(None)));
        running.values().map(|p| p.host.clone()).collect()
    }

    /// The log of the host of `deployment` (`namespace/name`), for failure messages.
    pub fn log(&self, deployment: &str) -> String {
        let running = self.running.lock().unwrap();
        running
            .get(deployment)
            .map(|p| std::fs::read_to_string(p.dir.path().join("host.log")).unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for HostDeployments {
    fn drop(&mut self) {
        self.task.abort();
        self.running.lock().unwrap().clear();
    }
}

struct World {
    admin: Client,
    kubeconfig: String,
    binary: PathBuf,
}

impl World {
    async fn sync(&self, running: &Mutex<BTreeMap<String, Process>>) -> anyhow::Result<()> {
        let deployments: Api<Deployment> = Api::all(self.admin.clone());
        let list = deployments
            .list(&ListParams::default().labels(HOST_LABEL))
            .await?
            .items;
        let mut wanted = BTreeMap::new();
        for d in list {
            if d.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let key = format!(
                "{}/{}",
                d.metadata.namespace.clone().unwrap_or_default(),
                d.metadata.name.clone().unwrap_or_default()
            );
            let template = serde_json::to_string(&d.spec.as_ref().map(|s| &s.template))?;
            wanted.insert(key, (d, template));
        }
        // Stop what is no longer wanted, or wanted with another template (a rollout).
        let mut starts = BTreeMap::new();
        {
            let mut running = running.lock().unwrap();
            running.retain(|key, p| {
                let keep = wanted.get(key).is_some_and(|(_, t)| *t == p.template)
                    && matches!(p.child.try_wait(), Ok(None));
                if !keep {
                    starts.insert(key.clone(), p.host.starts);
                }
                keep
            });
        }
        for (key, (d, template)) in wanted {
            if running.lock().unwrap().contains_key(&key) {
                continue;
            }
            let previous = starts.get(&key).copied().unwrap_or(0);
            let process = self.run(&d, template, previous + 1).await?;
            let metrics = process.host.metrics.clone();
            running.lock().unwrap().insert(key.clone(), process);
            self.mark_available(&d, &metrics).await?;
        }
        Ok(())
    }

    /// Starts the process of Deployment `d` as its pod template says.
    async fn run(&self, d: &Deployment, template: String, starts: u32) -> anyhow::Result<Process> {
        let namespace = d.metadata.namespace.clone().unwrap_or_default();
        let name = d.metadata.name.clone().unwrap_or_default();
        let pod = d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .ok_or_else(|| anyhow::anyhow!("{name}: no pod template"))?;
        let container = &pod.containers[0];
        let dir = tempfile::Builder::new().prefix("host-pod-").tempdir()?;
        // Every Secret volume as files, at a path standing in for its mount path.
        let mut mounts: Vec<(String, PathBuf)> = Vec::new();
        let secrets: Api<Secret> = Api::namespaced(self.admin.clone(), &namespace);
        for mount in container.volume_mounts.iter().flatten() {
            let local = dir.path().join("mounts").join(&mount.name);
            std::fs::create_dir_all(&local)?;
            let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name);
            if let Some(secret) = volume.and_then(|v| v.secret.as_ref()) {
                let secret_name = secret.secret_name.clone().unwrap_or_default();
                let s = secrets.get(&secret_name).await?;
                for (key, value) in s.data.unwrap_or_default() {
                    std::fs::write(local.join(key), value.0)?;
                }
            }
            mounts.push((mount.mount_path.clone(), local));
        }
        let local_path = |path: &str| -> String {
            for (mount, local) in &mounts {
                if let Some(rest) = path.strip_prefix(mount.as_str()) {
                    return format!("{}{rest}", local.display());
                }
            }
            path.to_string()
        };
        // The image's paths in the configuration: its plugins, and the compiled-code cache
        // shared by every story (each host compiling the 4 MB helm plugin afresh is slow).
        for (mount, local) in &mounts {
            let config = local.join("config.yaml");
            if !mount.ends_with("/config") || !config.exists() {
                continue;
            }
            // Mount paths first, then this checkout's plugin paths: a checkout under a mount
            // path (`/tmp`, an emptyDir of the pod) must not be rewritten into the pod's mount.
            let text = local_path_all(&std::fs::read_to_string(&config)?, &mounts);
            let mut value: serde_yaml::Value = serde_yaml::from_str(&text)?;
            let plugins = &mut value["plugins"];
            plugins["dir"] = crate::plugins_dir().display().to_string().into();
            plugins["cacheDir"] = crate::plugins_dir()
                .join("../plugin-cache")
                .display()
                .to_string()
                .into();
            std::fs::write(&config, serde_yaml::to_string(&value)?)?;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let args: Vec<String> = container
            .args
            .iter()
            .flatten()
            .map(|a| match a.split_once('=') {
                Some(("--metrics-listen", _)) => format!("--metrics-listen=127.0.0.1:{port}"),
                Some((flag, path)) if path.starts_with('/') => {
                    format!("{flag}={}", local_path(path))
                }
                _ => a.clone(),
            })
            .collect();
        // The pod's identity in its own cluster: its ServiceAccount's token.
        let sa = pod
            .service_account_name
            .clone()
            .unwrap_or_else(|| "default".into());
        let in_cluster = dir.path().join("in-cluster-kubeconfig");
        std::fs::write(
            &in_cluster,
            kubeconfig_with_token(
                &self.kubeconfig,
                &sa_token(&self.admin, &namespace, &sa).await?,
            )?,
        )?;
        let pod_name = format!("{name}-{starts}");
        let mut cmd = Command::new(&self.binary);
        cmd.args(&args)
            .env_remove("KUBECONFIG")
            .env("HOST_KUBECONFIG", &in_cluster)
            .env("MY_POD_NAME", &pod_name)
            .env("MY_POD_NAMESPACE", &namespace)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("host.log"))?);
        if !args.iter().any(|a| a.starts_with("--kubeconfig")) {
            // Not fenced: the cluster holding DeployItems is the pod's own.
            cmd.env("KUBECONFIG", &in_cluster);
        }
        for env in container.env.iter().flatten() {
            if let Some(v) = &env.value {
                cmd.env(&env.name, v);
            }
        }
        let child = cmd.spawn()?;
        let metrics = format!("127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while crate::http_status(&metrics, "/readyz").await != Some(200) {
            if tokio::time::Instant::now() > deadline {
                let log = std::fs::read_to_string(dir.path().join("host.log")).unwrap_or_default();
                anyhow::bail!("host {namespace}/{name} not ready within 60s:\n{log}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Process {
            child,
            template,
            host: RunningHost {
                deployment: format!("{namespace}/{name}"),
                image: container.image.clone().unwrap_or_default(),
                metrics,
                starts,
            },
            dir,
        })
    }

    /// Writes the status a Deployment controller writes once its one replica is available.
    async fn mark_available(&self, d: &Deployment, _metrics: &str) -> anyhow::Result<()> {
        let api: Api<Deployment> = Api::namespaced(
            self.admin.clone(),
            d.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let now = chrono_now();
        let status = json!({"status": {
            "observedGeneration": d.metadata.generation,
            "replicas": replicas, "updatedReplicas": replicas, "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability.",
                 "lastUpdateTime": now, "lastTransitionTime": now},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                 "message": "ReplicaSet has successfully progressed.",
                 "lastUpdateTime": now, "lastTransitionTime": now},
            ],
        }});
        api.patch_status(
            d.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await?;
        Ok(())
    }
}

fn local_path_all(text: &str, mounts: &[(String, PathBuf)]) -> String {
    let mut out = text.to_string();
    for (mount, local) in mounts {
        out = out.replace(&format!("{mount}/"), &format!("{}/", local.display()));
    }
    out
}

fn chrono_now() -> Value {
    serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ))
    .unwrap_or_default()
}

/// A token of ServiceAccount `namespace/name` (TokenRequest, one hour), as a projected token.
pub async fn sa_token(admin: &Client, namespace: &str, name: &str) -> anyhow::Result<String> {
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}});
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match sas
            .create_subresource::<_, Value>("token", name, &PostParams::default(), &request)
            .await
        {
            Ok(answer) => {
                return answer["status"]["token"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| anyhow::anyhow!("TokenRequest answered no token"));
            }
            // The chart's ServiceAccount may come after its Deployment.
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => anyhow::bail!("TokenRequest for {namespace}/{name}: {e}"),
        }
    }
}

/// `kubeconfig` (YAML) with its user's credential replaced by bearer `token`.
pub fn kubeconfig_with_token(kubeconfig: &str, token: &str) -> anyhow::Result<String> {
    let mut kc: kube::config::Kubeconfig = serde_yaml::from_str(kubeconfig)?;
    for user in &mut kc.auth_infos {
        user.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.to_string().into()),
            ..Default::default()
        });
    }
    Ok(serde_yaml::to_string(&kc)?)
}
