//! The real Gardener Landscaper (`../shared/tools/real-landscaper`: its controller in both modes,
//! built once from source and cached in `~/.cache`) as a partner of the stories, and helpers to
//! read what it writes (Installations, Executions, DataObjects), which the host never reads.
//!
//! Nothing here builds Landscaper: `cargo xtask test --real-landscaper` and `.ci/run` do, before
//! the tests. A story without the built binaries says `SKIP` (a failure with `CI=true`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The tool script, beside the repository.
pub fn tool() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/tools/real-landscaper/real-landscaper")
}

/// Where the tool keeps its build (`REAL_LANDSCAPER_CACHE`, else `~/.cache/real-landscaper/<rev>`,
/// `<rev>` read from the script as it computes it).
pub fn cache_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("REAL_LANDSCAPER_CACHE") {
        return Some(PathBuf::from(dir));
    }
    let script = std::fs::read_to_string(tool()).ok()?;
    let rev = script
        .lines()
        .find_map(|l| l.strip_prefix("REV="))?
        .trim()
        .to_string();
    let home = std::env::var("HOME").ok()?;
    Some(PathBuf::from(home).join(".cache/real-landscaper").join(rev))
}

/// The path of a built binary (`landscaper-controller`, `integration.test`, ...), or `None` with
/// a `SKIP` line; with `CI=true` a missing build is a failure.
pub fn built(name: &str) -> Option<PathBuf> {
    let path = cache_dir().map(|d| d.join(name));
    if let Some(p) = path.as_ref().filter(|p| p.exists()) {
        return Some(p.clone());
    }
    let why = format!(
        "the real Landscaper is not built ({}): run `cargo xtask test --real-landscaper` or `{} build`",
        path.map(|p| p.display().to_string()).unwrap_or_default(),
        tool().display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("SKIP: {why}");
    None
}

/// Returns from the story, saying why, unless the real Landscaper can drive it: it is built, and
/// the stories run on the embedded API server (this Landscaper writes JSON nulls a kube-apiserver
/// 1.20 refuses; see `docs/real-landscaper.md`).
#[macro_export]
macro_rules! require_real_landscaper {
    () => {
        if support::backend() == support::Backend::Real {
            eprintln!(
                "SKIP on the real API server: this Landscaper's status writes carry JSON nulls kube-apiserver 1.20 refuses"
            );
            return;
        }
        if support::real_landscaper::built("landscaper-controller").is_none() {
            return;
        }
    };
}

/// Both modes of the Landscaper controller against one API server; stopped when dropped.
pub struct RealLandscaper {
    dir: tempfile::TempDir,
}

impl RealLandscaper {
    /// Starts the controller against `kubeconfig` (a file) and waits until both modes run their
    /// controllers. `pickup_timeout` is Landscaper's `deployItemTimeouts.pickup` ("30s").
    ///
    /// Both modes install Landscaper's CRDs at start; started together on an empty server, one
    /// may lose the race (`failed to handle CRDs: ... already exists`) and exit. The tool's
    /// `start` can say `ready` before that: so this waits for both to log "starting the
    /// controllers", and starts again (the CRDs then exist) if one of them ended.
    pub fn start(kubeconfig: &Path, pickup_timeout: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("real-landscaper-")
            .tempdir()
            .expect("tempdir");
        let me = Self { dir };
        for attempt in 1..=3 {
            let out = Command::new(tool())
                .arg("start")
                .arg(me.dir.path())
                .arg(kubeconfig)
                .env("LANDSCAPER_PICKUP_TIMEOUT", pickup_timeout)
                .output()
                .expect("running real-landscaper start");
            let said_ready =
                out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ready");
            if said_ready && me.wait_running(Duration::from_secs(60)) {
                return me;
            }
            eprintln!(
                "real-landscaper start, attempt {attempt}: not running; {}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                me.log_tail(5)
            );
            let _ = Command::new(tool()).arg("stop").arg(me.dir.path()).status();
        }
        panic!("the real Landscaper did not start:\n{}", me.log_tail(30));
    }

    /// Whether both modes got to run their controllers within `timeout`, and still run.
    fn wait_running(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let alive = ["main", "central"].iter().all(|m| {
                std::fs::read_to_string(self.dir.path().join(format!("{m}.pid")))
                    .ok()
                    .is_some_and(|pid| {
                        Path::new("/proc").join(pid.trim()).exists()
                            && !std::fs::read_to_string(
                                Path::new("/proc").join(pid.trim()).join("stat"),
                            )
                            .unwrap_or_default()
                            .contains(") Z ")
                    })
            });
            if !alive {
                return false;
            }
            let started = ["main.log", "central.log"].iter().all(|l| {
                std::fs::read_to_string(self.dir.path().join(l))
                    .unwrap_or_default()
                    .contains("starting the controllers")
            });
            if started {
                return true;
            }
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last `lines` lines of both controllers' logs (for failure messages).
    pub fn log_tail(&self, lines: usize) -> String {
        let mut out = String::new();
        for name in ["main.log", "central.log"] {
            let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(lines);
            out.push_str(&format!("--- {name}\n{}\n", all[from..].join("\n")));
        }
        out
    }
}

impl Drop for RealLandscaper {
    fn drop(&mut self) {
        let _ = Command::new(tool())
            .arg("stop")
            .arg(self.dir.path())
            .status();
        if std::thread::panicking() {
            eprintln!("{}", self.log_tail(40));
        }
    }
}

/// `landscaper.gardener.cloud/v1alpha1` resources the host never reads.
pub fn ls_api(client: &Client, kind: &str, plural: &str, namespace: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "landscaper.gardener.cloud".into(),
        version: "v1alpha1".into(),
        api_version: "landscaper.gardener.cloud/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::namespaced_with(client.clone(), namespace, &ar)
}

pub fn installations(client: &Client, namespace: &str) -> Api<DynamicObject> {
    ls_api(client, "Installation", "installations", namespace)
}

pub fn executions(client: &Client, namespace: &str) -> Api<DynamicObject> {
    ls_api(client, "Execution", "executions", namespace)
}

pub fn data_objects(client: &Client, namespace: &str) -> Api<DynamicObject> {
    ls_api(client, "DataObject", "dataobjects", namespace)
}

/// Creates (or replaces) an object of `api` from JSON.
pub async fn apply(api: &Api<DynamicObject>, obj: Value) -> DynamicObject {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    match api.get_opt(&name).await.unwrap() {
        None => api.create(&PostParams::default(), &obj).await.unwrap(),
        Some(old) => {
            let mut obj = obj;
            obj.metadata.resource_version = old.metadata.resource_version;
            api.replace(&name, &PostParams::default(), &obj)
                .await
                .unwrap()
        }
    }
}

/// A DataObject whose data is `data` (Landscaper's data import).
pub fn data_object(name: &str, namespace: &str, data: Value) -> Value {
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DataObject",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    })
}

/// Sets `landscaper.gardener.cloud/operation` on an Installation (`reconcile`, `interrupt`).
pub async fn set_operation(client: &Client, namespace: &str, installation: &str, op: &str) {
    installations(client, namespace)
        .patch(
            installation,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"landscaper.gardener.cloud/operation": op}}
            })),
        )
        .await
        .expect("annotate Installation");
}

/// The Installation's `status` (empty object if none yet).
pub fn status(obj: &DynamicObject) -> Value {
    obj.data.get("status").cloned().unwrap_or(json!({}))
}

/// Whether the Installation's current job is finished (`jobIDFinished == jobID`, non-empty),
/// Landscaper's own definition.
pub fn job_finished(obj: &DynamicObject) -> bool {
    let s = status(obj);
    let job = s["jobID"].as_str().unwrap_or("");
    !job.is_empty() && s["jobIDFinished"].as_str() == Some(job)
}

/// Polls the Installation until `pred` holds, or panics with its status after `timeout`.
pub async fn wait_installation(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
    pred: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    let api = installations(client, namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let current = api.get_opt(name).await.expect("get Installation");
        if let Some(inst) = &current
            && pred(inst)
        {
            return inst.clone();
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "timed out waiting for Installation {namespace}/{name}; last state:\n{}",
                serde_yaml::to_string(&current.map(|c| status(&c))).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the Installation's job with a different id than `previous` is finished and
/// returns it with its `status.phase`.
pub async fn wait_job_after(
    client: &Client,
    namespace: &str,
    name: &str,
    previous: Option<&str>,
    timeout: Duration,
) -> (DynamicObject, String) {
    let inst = wait_installation(client, namespace, name, timeout, |i| {
        job_finished(i) && status(i)["jobID"].as_str() != previous
    })
    .await;
    let phase = status(&inst)["phase"].as_str().unwrap_or("").to_string();
    (inst, phase)
}
