//! What the replica stories share (`tests/reliability.rs`, `tests/real_landscaper_reliability.rs`):
//! `deployer-host run` processes as locking replicas ([`Replica`]) of one cluster
//! ([`ReplicaCluster`]: the embedded server on loopback, or a real kube-apiserver with
//! `DEPLOYER_TEST_BACKEND=real`), the jobs they picked up (from their JSON logs), a ledger of
//! every finished job ([`JobLedger`]), the faults of issue #46 and the test side's own retries
//! through them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deployer_host::landscaper::{DeployItem, Phase};
use embedded_apiserver::FaultConfig;
use futures::TryStreamExt;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

/// Runs a test-side API call until it succeeds: the test's own requests meet the same faults
/// as the host's. `done_if` accepts errors that mean an earlier, unacknowledged attempt
/// took effect (a 504'd create answered AlreadyExists on retry).
pub async fn retrying<T, F, Fut>(
    what: &str,
    done_if: impl Fn(&kube::Error) -> bool,
    op: F,
) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    for _ in 0..100 {
        match op().await {
            Ok(v) => return Some(v),
            Err(e) if done_if(&e) => return None,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    panic!("{what}: still failing after 100 attempts");
}

pub fn reason_is(reason: &'static str) -> impl Fn(&kube::Error) -> bool {
    move |e| matches!(e, kube::Error::Api(s) if s.reason == reason)
}

/// Watches every DeployItem and checks, on every version it sees, that a job once finished
/// stays finished with the same phase: no job is finished twice, reopened or rewritten.
pub struct JobLedger {
    /// (item uid, jobID) → the phase it finished with.
    finished: Arc<Mutex<HashMap<(String, String), Phase>>>,
    violations: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl JobLedger {
    pub fn start(client: kube::Client) -> Self {
        let finished = Arc::new(Mutex::new(HashMap::new()));
        let violations = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let (finished, violations) = (finished.clone(), violations.clone());
            async move {
                let api: Api<DeployItem> = Api::namespaced(client, "default");
                let stream = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects();
                futures::pin_mut!(stream);
                loop {
                    let item = match stream.try_next().await {
                        Ok(Some(item)) => item,
                        Ok(None) => return,
                        Err(_) => continue,
                    };
                    let s = item.status();
                    let uid = item.metadata.uid.clone().unwrap_or_default();
                    let name = item.metadata.name.clone().unwrap_or_default();
                    let mut finished = finished.lock().unwrap();
                    let key = (uid, s.job_id.clone());
                    let done = !s.job_id.is_empty() && s.job_id == s.job_id_finished;
                    match (finished.get(&key), done) {
                        (None, true) => {
                            if !s.phase.is_final() {
                                violations.lock().unwrap().push(format!(
                                    "{name}: job {} finished in non-final phase {}",
                                    s.job_id, s.phase
                                ));
                            }
                            finished.insert(key, s.phase.clone());
                        }
                        (Some(phase), true) if *phase != s.phase => {
                            violations.lock().unwrap().push(format!(
                                "{name}: job {} finished twice ({phase}, then {})",
                                s.job_id, s.phase
                            ))
                        }
                        (Some(_), false) => violations.lock().unwrap().push(format!(
                            "{name}: job {} reopened after it finished (phase {})",
                            s.job_id, s.phase
                        )),
                        _ => {}
                    }
                }
            }
        });
        Self {
            finished,
            violations,
            task,
        }
    }

    pub fn finished_jobs(&self) -> usize {
        self.finished.lock().unwrap().len()
    }

    /// How many jobs finished in each phase.
    pub fn phases(&self) -> std::collections::BTreeMap<String, usize> {
        let mut out = std::collections::BTreeMap::new();
        for phase in self.finished.lock().unwrap().values() {
            *out.entry(phase.to_string()).or_default() += 1;
        }
        out
    }

    pub fn assert_clean(&self) {
        let v = self.violations.lock().unwrap();
        assert!(v.is_empty(), "{} violations:\n{}", v.len(), v.join("\n"));
    }
}

impl Drop for JobLedger {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One `deployer-host run` process: a replica as pod `pod`, logging JSON to `log`.
pub struct Replica {
    pub child: std::process::Child,
    /// Its JSON log (stderr).
    pub log: std::path::PathBuf,
}

impl Replica {
    fn start(
        host_binary: &std::path::Path,
        pod: &str,
        kubeconfig: &std::path::Path,
        config: &std::path::Path,
        dir: &std::path::Path,
    ) -> Self {
        let log = dir.join(format!("{pod}-{}.log", uuid_suffix()));
        let child = std::process::Command::new(host_binary)
            .args(["--log-format", "json", "run", "--kubeconfig"])
            .arg(kubeconfig)
            .arg("--config")
            .arg(config)
            .env("MY_POD_NAME", pod)
            .env("MY_POD_NAMESPACE", "ls-system")
            // `DEPLOYER_TEST_REPLICA_LOG`: another filter (e.g. `info,deployer_host=debug`).
            .env(
                "RUST_LOG",
                std::env::var("DEPLOYER_TEST_REPLICA_LOG")
                    .unwrap_or_else(|_| "info,kube=warn".into()),
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("deployer-host run");
        Self { child, log }
    }

    /// SIGKILL: no shutdown, no lock released.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

fn uuid_suffix() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// (item, jobID) of every "picked up job" line in a replica's JSON log.
pub fn pickups(log: &std::path::Path) -> Vec<(String, String)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["message"] == "picked up job")
        .map(|l| {
            let span = &l["span"];
            (
                span["item"].as_str().unwrap_or_default().to_string(),
                span["job"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The cluster of the replica stories: the API server ([`super::backend`]: the embedded one,
/// served on loopback, or a real kube-apiserver) with Landscaper's CRDs, a Target `default`
/// pointing at it, namespace `ls-system` with the Pods `replica-0` … `replica-3`, and the
/// configuration of `deployer-host run` replicas with locking (`workers`, `cleanup_interval`).
pub struct ReplicaCluster {
    /// The embedded server (`None` on the real backend, which has no fault injection).
    pub server: Option<embedded_apiserver::ApiServer>,
    pub client: kube::Client,
    pub pods: Api<k8s_openapi::api::core::v1::Pod>,
    /// The replicas' kubeconfig (a file).
    pub kubeconfig: std::path::PathBuf,
    config: std::path::PathBuf,
    dir: tempfile::TempDir,
    _serving: Option<embedded_apiserver::LoopbackServing>,
    _real: Option<super::RealApiServer>,
    /// The `deployer-host` binary the replicas run.
    host_binary: std::path::PathBuf,
}

impl ReplicaCluster {
    /// `host_binary`: the story's `CARGO_BIN_EXE_deployer-host`.
    pub async fn start(
        host_binary: impl Into<std::path::PathBuf>,
        workers: usize,
        cleanup_interval: &str,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let (server, serving, real, client) = match super::backend() {
            super::Backend::Embedded => {
                let server = embedded_apiserver::ApiServer::new(Default::default()).unwrap();
                let serving = server.serve_on_loopback().await.unwrap();
                let url = serving.url.clone();
                let env = deployer_host::dev::DevEnvironment::bootstrap(server.clone(), &url)
                    .await
                    .unwrap();
                std::fs::write(
                    &kubeconfig,
                    embedded_apiserver::ApiServer::kubeconfig_yaml(&url),
                )
                .unwrap();
                (Some(server), Some(serving), None, env.client)
            }
            super::Backend::Real => {
                let env = super::TestCluster::start(super::Backend::Real).await;
                let real = env.real.expect("the real server");
                std::fs::write(&kubeconfig, &real.kubeconfig).unwrap();
                (None, None, Some(real), env.client)
            }
        };
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "requeueInterval: 200ms\nworkers: {workers}\nhpa: {{maxReplicas: 3}}\n\
                 locking: {{retryAfter: 200ms, podCacheTimeout: 300ms, cleanupInterval: {cleanup_interval}, leaseDuration: 2s}}\n\
                 plugins: {{dir: {:?}, cacheDir: {:?}}}\n",
                super::plugins_dir(),
                super::plugins_dir().join("../plugin-cache"),
            ),
        )
        .unwrap();
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "ls-system"}})).unwrap(),
            )
            .await
            .unwrap();
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(client.clone(), "ls-system");
        for name in ["replica-0", "replica-1", "replica-2", "replica-3"] {
            let pod = serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"containers": [{"name": "host", "image": "wasm-deployer"}]}}))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap();
        }
        Self {
            server,
            client,
            pods,
            kubeconfig,
            config,
            dir,
            _serving: serving,
            _real: real,
            host_binary: host_binary.into(),
        }
    }

    /// The holders of the replicas' Leases in `ls-system` (the split by Leases, on by default),
    /// sorted.
    pub async fn lease_holders(&self) -> Vec<String> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.clone(), "ls-system");
        let mut holders: Vec<String> = leases
            .list(&kube::api::ListParams::default().labels(deployer_host::membership::GROUP_LABEL))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|l| l.spec.and_then(|s| s.holder_identity))
            .collect();
        holders.sort();
        holders
    }

    /// Sets the embedded server's faults; the real server has none to inject, so there the
    /// stories run with the kill only.
    pub fn set_faults(&self, faults: FaultConfig) {
        if let Some(server) = &self.server {
            server.set_faults(faults);
        }
    }

    /// A `deployer-host run` replica as Pod `pod`.
    pub fn replica(&self, pod: &str) -> Replica {
        Replica::start(
            &self.host_binary,
            pod,
            &self.kubeconfig,
            &self.config,
            self.dir.path(),
        )
    }

    /// Once `after_jobs` jobs finished (by `ledger`, within `timeout`), SIGKILLs `replica-1` of
    /// `replicas` (pod name, replica) and replaces its Pod by `replica-3`, as a ReplicaSet does.
    pub async fn kill_and_replace(
        &self,
        replicas: &mut Vec<(String, Replica)>,
        ledger: &JobLedger,
        after_jobs: usize,
        timeout: Duration,
    ) {
        let deadline = tokio::time::Instant::now() + timeout;
        while ledger.finished_jobs() < after_jobs {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no progress: {} jobs finished",
                ledger.finished_jobs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let killed = replicas
            .iter_mut()
            .find(|(pod, _)| pod == "replica-1")
            .expect("replica-1 runs");
        killed.1.kill();
        retrying(
            "delete the killed replica's Pod",
            reason_is("NotFound"),
            || async {
                self.pods
                    .delete("replica-1", &kube::api::DeleteParams::default())
                    .await
            },
        )
        .await;
        replicas.push(("replica-3".into(), self.replica("replica-3")));
    }

    /// The directory the replicas' configuration and logs are in.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for ReplicaCluster {
    /// A failed story keeps its replicas' logs (under `target/replica-logs/`) and says where.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let kept = super::workspace()
            .join("target/replica-logs")
            .join(uuid_suffix());
        let _ = std::fs::create_dir_all(&kept);
        for entry in std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "log") {
                let _ = std::fs::copy(&path, kept.join(entry.file_name()));
            }
        }
        eprintln!("--- the replicas' logs are kept in {}", kept.display());
    }
}

/// The faults an operator's cluster has on a bad day (issue #46): 2 % of writes 409, 1 % 500,
/// 1 % of requests 503, 2 % 504 after applying, a watch dropped every ~100 events.
pub fn operator_faults() -> FaultConfig {
    FaultConfig {
        write_conflict_probability: 0.02,
        write_error_probability: 0.01,
        unavailable_probability: 0.01,
        timeout_probability: 0.02,
        watch_drop_probability: 0.01,
        ..FaultConfig::default()
    }
}

/// A process' peak resident set (VmHWM), in MiB.
pub fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// Waits (up to 30 s) until nothing the host writes is left in `namespace` — no SyncObject, held
/// or not, no export Secret, no ConfigMap named `configmap_prefix…` (the items' objects) — and
/// asserts it. (Call it with the faults off.)
pub async fn assert_nothing_left(client: &kube::Client, namespace: &str, configmap_prefix: &str) {
    use kube::api::ListParams;
    let syncobjects: Api<deployer_host::locking::SyncObject> =
        Api::namespaced(client.clone(), namespace);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), namespace);
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let left = loop {
        let locks: Vec<String> = syncobjects
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|o| format!("{} (owner {:?})", o.spec.name, o.spec.pod_name))
            .collect();
        let exports = names_where(&secrets, |n| {
            n.starts_with("mock-export") || n.ends_with("-export")
        })
        .await;
        let objects = names_where(&configmaps, |n| n.starts_with(configmap_prefix)).await;
        if (locks.is_empty() && exports.is_empty() && objects.is_empty())
            || tokio::time::Instant::now() > deadline
        {
            break (locks, exports, objects);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        left,
        (vec![], vec![], vec![]),
        "left behind: (SyncObjects, export Secrets, ConfigMaps)"
    );
}

/// The names of the objects of `api` for which `keep` holds.
pub async fn names_where<K>(api: &Api<K>, keep: impl Fn(&str) -> bool) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.meta().name.clone())
        .filter(|n| keep(n))
        .collect()
}

/// Asserts that no (item, jobID) was picked up by two of `replicas` (pod name, replica), from
/// their logs; returns how many jobs were picked up.
pub fn assert_each_job_picked_up_once(replicas: &[(String, Replica)]) -> usize {
    let mut by_job: HashMap<(String, String), Vec<String>> = HashMap::new();
    for (pod, r) in replicas {
        for key in pickups(&r.log) {
            by_job.entry(key).or_default().push(pod.clone());
        }
    }
    let twice: Vec<_> = by_job.iter().filter(|(_, pods)| pods.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "picked up by more than one replica: {twice:?}"
    );
    by_job.len()
}

/// Asserts that `item` finished `Succeeded` and that its export (the Secret `status.exportRef`
/// names, read through `secrets`) holds `value` under the key `value`.
pub async fn assert_succeeded_with_export(
    secrets: &Api<k8s_openapi::api::core::v1::Secret>,
    item: &DeployItem,
    value: &str,
) {
    let name = item.metadata.name.clone().unwrap_or_default();
    let s = item.status();
    assert_eq!(s.phase, Phase::Succeeded, "{name}: {:?}", s.last_error);
    let export = s
        .export_ref
        .unwrap_or_else(|| panic!("{name}: no exportRef"));
    let secret = secrets.get(&export.name).await.expect("the export Secret");
    let config: serde_json::Value =
        serde_yaml::from_slice(&secret.data.unwrap()["config"].0).unwrap();
    assert_eq!(config["value"], value, "{name}: its export");
}
