//! Real kube-apiservers (1.20 + etcd, from `../shared/tools/real-apiserver`) for the stories on
//! the real backend: one per story, so every story starts from an empty cluster.
//!
//! What a server costs a story is kept off its clock: a prepared server (Landscaper's CRDs, the
//! `default` Target, Context and ServiceAccount) waits as a spare, started in the background
//! while the stories before it run, and a server is ended with SIGKILL rather than a graceful
//! stop. Every server has a watchdog that ends it when the test process is gone, so a spare left
//! at exit, or a story killed mid-way, leaves no apiserver or etcd behind.
//!
//! Owns: starting, preparing, pooling and ending real servers. Must not touch: which backend a
//! story runs on (`backend`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

mod etcd;

/// A real kube-apiserver + etcd for one story; stopped when dropped.
pub struct RealApiServer {
    /// `None` only while the server is handed on to be recycled.
    dir: Option<tempfile::TempDir>,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// Admin kubeconfig (token of `system:masters`, TLS verification off: self-signed).
    pub kubeconfig: String,
    /// How to put a prepared server back as it was prepared (`None`: ended when dropped).
    recyclable: Option<Arc<Recyclable>>,
}

/// The binaries a real server runs: the tool's own build unless named. `REAL_KUBE_APISERVER`
/// names a kube-apiserver binary and `REAL_ETCD` an etcd (default: `etcd` on `PATH`), for running
/// the real-backend stories on another Kubernetes version (docs/kubernetes-versions.md).
#[derive(Clone, Debug, Default)]
pub struct RealBinaries {
    pub kube_apiserver: Option<PathBuf>,
    pub etcd: Option<PathBuf>,
}

impl RealBinaries {
    /// `REAL_KUBE_APISERVER` and `REAL_ETCD` (unset or empty: the tool's defaults).
    pub fn from_env() -> Self {
        let path = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        RealBinaries {
            kube_apiserver: path("REAL_KUBE_APISERVER"),
            etcd: path("REAL_ETCD"),
        }
    }

    /// The tool starts the kube-apiserver it finds in `$REAL_APISERVER_CACHE` and the first
    /// `etcd` on `PATH`: both are linked into a directory of this server's own, which is set as
    /// the one and put first on `PATH`.
    fn apply(&self, start: &mut Command, dir: &Path) {
        if self.kube_apiserver.is_none() && self.etcd.is_none() {
            return;
        }
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).expect("bin directory");
        let link = |from: &PathBuf, name: &str| {
            let from = std::fs::canonicalize(from)
                .unwrap_or_else(|e| panic!("{name} binary {}: {e}", from.display()));
            std::os::unix::fs::symlink(&from, bin.join(name)).expect("link binary");
        };
        if let Some(apiserver) = &self.kube_apiserver {
            link(apiserver, "kube-apiserver");
            start.env("REAL_APISERVER_CACHE", &bin);
        }
        if let Some(etcd) = &self.etcd {
            link(etcd, "etcd");
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![bin.clone()];
            dirs.extend(std::env::split_paths(&path));
            start.env("PATH", std::env::join_paths(dirs).expect("PATH"));
        }
    }
}

fn tool() -> PathBuf {
    crate::workspace().join("../shared/tools/real-apiserver/real-apiserver")
}

/// Audit policy of [`RealApiServer::start_audited`]: every request's metadata, once.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

impl RealApiServer {
    /// Starts a server with `--authorization-mode=<authz>` (`AlwaysAllow` or `RBAC`).
    pub fn start(authz: &str) -> Self {
        Self::start_with(authz, false)
    }

    /// Like [`RealApiServer::start`], with an audit log (see [`RealApiServer::audit_log`]).
    pub fn start_audited(authz: &str) -> Self {
        Self::start_with(authz, true)
    }

    /// The audit log file (JSON lines), if started with one.
    pub fn audit_log(&self) -> PathBuf {
        self.dir().join("audit.log")
    }

    /// Like [`RealApiServer::start`], on the given binaries rather than `REAL_KUBE_APISERVER` /
    /// `REAL_ETCD`'s.
    pub fn start_on(authz: &str, binaries: &RealBinaries) -> Self {
        Self::start_inner(authz, false, binaries)
    }

    fn start_with(authz: &str, audit: bool) -> Self {
        Self::start_inner(authz, audit, &RealBinaries::from_env())
    }

    fn start_inner(authz: &str, audit: bool, binaries: &RealBinaries) -> Self {
        Self::try_start_retrying(authz, audit, binaries).unwrap_or_else(|why| panic!("{why}"))
    }

    fn try_start_retrying(
        authz: &str,
        audit: bool,
        binaries: &RealBinaries,
    ) -> Result<Self, String> {
        // The tool picks free ports, then binds them; a server of a parallel story can take a
        // port in between ("address already in use"). That is the tool's race, not the story's:
        // start again in a fresh directory.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::try_start(authz, audit, binaries) {
                Ok(server) => return Ok(server),
                Err(why) if attempt < 4 && why.contains("address already in use") => {
                    eprintln!(
                        "real-apiserver: port taken by a parallel start, retrying ({attempt})"
                    );
                }
                Err(why) => return Err(why),
            }
        }
    }

    fn try_start(authz: &str, audit: bool, binaries: &RealBinaries) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("real-apiserver-")
            .tempdir()
            .expect("tempdir");
        watch_over(dir.path());
        let mut extra = String::new();
        if audit {
            let policy = dir.path().join("audit-policy.yaml");
            std::fs::write(&policy, AUDIT_POLICY).expect("audit policy");
            extra = format!(
                "--audit-policy-file={} --audit-log-path={} --audit-log-mode=blocking",
                policy.display(),
                dir.path().join("audit.log").display()
            );
        }
        // Without a controller-manager no ServiceAccount token is ever minted, and the
        // ServiceAccount admission plugin would refuse every Pod for lack of one.
        let args = format!(
            "--disable-admission-plugins=ServiceAccount {extra} {}",
            std::env::var("REAL_APISERVER_ARGS").unwrap_or_default()
        );
        let mut start = Command::new(tool());
        start
            .arg("start")
            .arg(dir.path())
            .env("REAL_APISERVER_AUTHZ", authz)
            .env("REAL_APISERVER_ARGS", args.trim());
        binaries.apply(&mut start, dir.path());
        let out = start
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", tool().display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(url) = stdout
            .lines()
            .find_map(|l| l.strip_prefix("ready "))
            .map(str::to_string)
        else {
            let log = std::fs::read_to_string(dir.path().join("apiserver.log")).unwrap_or_default();
            let etcd = std::fs::read_to_string(dir.path().join("etcd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            // Whatever did start (etcd) is stopped before the directory goes.
            let _ = Command::new(tool()).arg("stop").arg(dir.path()).output();
            let in_use =
                log.contains("address already in use") || etcd.contains("address already in use");
            return Err(format!(
                "real-apiserver did not start: {stdout}{}\napiserver.log (last lines, newest first):\n{}{}",
                String::from_utf8_lossy(&out.stderr),
                tail.join("\n"),
                if in_use {
                    "\n(address already in use)"
                } else {
                    ""
                }
            ));
        };
        let kubeconfig =
            std::fs::read_to_string(dir.path().join("kubeconfig")).expect("kubeconfig");
        Ok(RealApiServer {
            dir: Some(dir),
            url,
            kubeconfig,
            recyclable: None,
        })
    }

    /// The directory the server runs in (its logs, `apiserver.pid` and `etcd.pid`).
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("a running server").path()
    }

    /// A client with the admin token.
    pub async fn client(&self) -> Client {
        client_for(&self.kubeconfig).await
    }

    /// The CA to trust: kube-apiserver's self-signed serving certificate (for 127.0.0.1 among
    /// others) and the CA that signed it, as it writes them to `certs/apiserver.crt`.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir().join("certs/apiserver.crt")).expect("apiserver.crt")
    }

    /// [`Self::kubeconfig`] trusting [`Self::ca_pem`] instead of skipping verification.
    pub fn kubeconfig_with_ca(&self) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem());
        let mut config: serde_yaml::Value = serde_yaml::from_str(&self.kubeconfig).unwrap();
        for c in config["clusters"].as_sequence_mut().unwrap() {
            let cluster = c["cluster"].as_mapping_mut().unwrap();
            cluster.remove("insecure-skip-tls-verify");
            cluster.insert("certificate-authority-data".into(), ca.clone().into());
        }
        serde_yaml::to_string(&config).unwrap()
    }
}

impl Drop for RealApiServer {
    /// A prepared server whose story ended without a panic is recycled for a later story (see
    /// [`recycle`]); any other is ended with SIGKILL: the data is thrown away with the
    /// directory, and the tool's graceful `stop` waits about 5 s for kube-apiserver 1.20 to shut
    /// down, which every story would pay.
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else {
            return;
        };
        match self.recyclable.take() {
            Some(recyclable) if !std::thread::panicking() && pooling() => recycle(RealApiServer {
                dir: Some(dir),
                url: std::mem::take(&mut self.url),
                kubeconfig: std::mem::take(&mut self.kubeconfig),
                recyclable: Some(recyclable),
            }),
            _ => {
                if std::thread::panicking() {
                    print_log_tail(dir.path());
                }
                kill_processes(dir.path())
            }
        }
    }
}

/// The end of the server's and etcd's logs, printed (into the failed story's output) before
/// the directory is thrown away: what the server saw is then part of the failure.
fn print_log_tail(dir: &Path) {
    const LINES: usize = 40;
    for name in ["apiserver.log", "etcd.log"] {
        let Ok(log) = std::fs::read_to_string(dir.join(name)) else {
            continue;
        };
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LINES)..];
        eprintln!(
            "--- the last {} lines of {name} ({}) ---\n{}",
            tail.len(),
            dir.display(),
            tail.join("\n")
        );
    }
}

/// SIGKILLs the `apiserver` and `etcd` of a server directory (by their pid files) and waits
/// until both are gone, so that their ports and files are free when this returns.
fn kill_processes(dir: &Path) {
    for name in ["apiserver.pid", "etcd.pid"] {
        let Some(pid) = std::fs::read_to_string(dir.join(name))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        else {
            continue;
        };
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        let proc = PathBuf::from(format!("/proc/{pid}"));
        let deadline = Instant::now() + Duration::from_secs(5);
        // Not our child (the tool's shell started it): it is reaped by init; a zombie counts as gone.
        while proc.exists() && !is_zombie(&proc) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(dir.join(name));
    }
}

fn is_zombie(proc: &Path) -> bool {
    std::fs::read_to_string(proc.join("stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// A server whose Landscaper objects are in place, or why there is none.
type Prepared = Result<RealApiServer, String>;

/// What puts a prepared server back as it was when prepared.
struct Recyclable {
    /// etcd's client URL.
    etcd: String,
    /// Every etcd key once the server was prepared.
    snapshot: etcd::Snapshot,
}

/// Servers for the stories to come: recycled ones ready to take, one being prepared from
/// scratch (the spare) and how many are being recycled.
struct Pool {
    ready: Vec<RealApiServer>,
    spare: Option<JoinHandle<Prepared>>,
    recycling: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    ready: Vec::new(),
    spare: None,
    recycling: 0,
});
/// Signalled when a recycling ends (with a server ready or ended).
static RECYCLED: Condvar = Condvar::new();

/// How long a story's server is left alone after the story before it is recycled: the story's
/// runtime and what it started are ended by then, so nothing of it writes into the next story.
const GRACE: Duration = Duration::from_millis(500);
/// Recycled servers kept ready; more are ended.
const MAX_READY: usize = 2;

/// `DEPLOYER_TEST_REAL_POOL=0` turns the pool off: every story then starts its own server on its
/// own clock and ends it.
fn pooling() -> bool {
    std::env::var("DEPLOYER_TEST_REAL_POOL").as_deref() != Ok("0")
}

fn lock_pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

impl RealApiServer {
    /// A server with `AlwaysAllow`, Landscaper's CRDs, the WasmPlugin CRD, the `default` Target
    /// and Context and the `default` ServiceAccount, and nothing else: a recycled one when one
    /// is ready (or is about to be), else the spare, else one started now; a spare is started
    /// for the next caller when no recycling is under way.
    pub fn prepared() -> Self {
        if !pooling() {
            return prepare_on_a_thread(None);
        }
        let mut pool = lock_pool();
        loop {
            if let Some(server) = pool.ready.pop() {
                return server;
            }
            if let Some(spare) = pool.spare.take() {
                if pool.recycling == 0 {
                    pool.spare = Some(std::thread::spawn(prepare));
                }
                drop(pool);
                return prepare_on_a_thread(Some(spare));
            }
            if pool.recycling == 0 {
                break;
            }
            // A server comes back within about a second: cheaper than starting one.
            let (guard, waited) = RECYCLED
                .wait_timeout(pool, Duration::from_secs(10))
                .unwrap_or_else(|p| p.into_inner());
            pool = guard;
            if waited.timed_out() && pool.ready.is_empty() {
                break;
            }
        }
        pool.spare = Some(std::thread::spawn(prepare));
        drop(pool);
        prepare_on_a_thread(None)
    }
}

/// The server `started` prepares (or one prepared now), on a thread of its own: the caller is
/// usually inside a runtime, where the preparation's own runtime cannot block. One more try when
/// it fails.
fn prepare_on_a_thread(started: Option<JoinHandle<Prepared>>) -> RealApiServer {
    let started = started.unwrap_or_else(|| std::thread::spawn(prepare));
    match started.join() {
        Ok(Ok(server)) => server,
        failed => {
            let why = match failed {
                Ok(Err(why)) => why,
                _ => "it panicked".to_string(),
            };
            eprintln!("real-apiserver: preparing a server failed ({why}); trying once more");
            std::thread::spawn(prepare)
                .join()
                .unwrap_or_else(|_| Err("preparing a server panicked".into()))
                .unwrap_or_else(|why| panic!("{why}"))
        }
    }
}

/// Starts a server, puts in place what every story expects (see [`RealApiServer::prepared`])
/// and takes the snapshot it is recycled to.
fn prepare() -> Prepared {
    let mut real =
        RealApiServer::try_start_retrying("AlwaysAllow", false, &RealBinaries::from_env())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let recyclable = runtime.block_on(async {
        let client = real.client().await;
        deployer_host::dev::install_landscaper_crds(&client)
            .await
            .map_err(|e| format!("installing Landscaper's CRDs on the real server: {e:#}"))?;
        deployer_host::dev::install_own_crds(&client)
            .await
            .map_err(|e| format!("installing the WasmPlugin CRD on the real server: {e:#}"))?;
        deployer_host::dev::ensure_default_objects(&client, &real.kubeconfig)
            .await
            .map_err(|e| format!("default Target and Context: {e:#}"))?;
        ensure_default_service_account(&client).await;
        let pid = std::fs::read_to_string(real.dir().join("apiserver.pid"))
            .map_err(|e| format!("apiserver.pid: {e}"))?;
        let etcd = etcd::url_of(&pid)?;
        let snapshot = etcd::snapshot(&reqwest::Client::new(), &etcd).await?;
        Ok::<_, String>(Recyclable { etcd, snapshot })
    })?;
    real.recyclable = Some(Arc::new(recyclable));
    Ok(real)
}

/// Puts `server` back as it was prepared, on a thread of its own after [`GRACE`], and adds it
/// to the ready servers; a server that cannot be put back is ended.
fn recycle(server: RealApiServer) {
    lock_pool().recycling += 1;
    std::thread::spawn(move || {
        std::thread::sleep(GRACE);
        let reset = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))
            .and_then(|runtime| runtime.block_on(server.reset()));
        let mut server = Some(server);
        let mut pool = lock_pool();
        pool.recycling -= 1;
        match reset {
            Ok(()) if pool.ready.len() < MAX_READY => pool.ready.extend(server.take()),
            Ok(()) => {}
            Err(why) => eprintln!("real-apiserver: not recycled, ended ({why})"),
        }
        drop(pool);
        RECYCLED.notify_all();
        if let Some(mut server) = server {
            server.recyclable = None;
        }
    });
}

impl RealApiServer {
    /// Every etcd key back as it was prepared, then the API server's watch caches of what
    /// changed are waited for, so that the next story reads only what it writes.
    async fn reset(&self) -> Result<(), String> {
        let recyclable = self.recyclable.as_ref().ok_or("not a prepared server")?;
        let changed = etcd::restore(
            &reqwest::Client::new(),
            &recyclable.etcd,
            &recyclable.snapshot,
        )
        .await?;
        if changed.is_empty() {
            return Ok(());
        }
        let client = self.client().await;
        let mut paths = ApiPaths::default();
        for (prefix, revision) in &changed {
            let Some(path) = paths.list_path(&client, prefix).await else {
                continue;
            };
            // Served from the watch cache once it has seen `revision` (it waits up to 3 s).
            let request = http::Request::get(format!(
                "{path}?resourceVersion={revision}&resourceVersionMatch=NotOlderThan"
            ))
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
            client
                .request_text(request)
                .await
                .map_err(|e| format!("waiting for the watch cache of {path}: {e}"))?;
        }
        Ok(())
    }
}

/// The API's list paths of etcd key prefixes, from discovery.
#[derive(Default)]
struct ApiPaths {
    /// Group → its preferred version's resources (`None`: not asked yet).
    groups: Option<Vec<(String, String)>>,
    resources: std::collections::HashMap<String, Vec<String>>,
}

impl ApiPaths {
    /// `/api/v1/<resource>` or `/apis/<group>/<version>/<resource>` for a key prefix as
    /// `etcd::restore` names it; `None` for what the API does not serve (allocation ranges, a
    /// custom resource whose definition is gone).
    async fn list_path(&mut self, client: &Client, prefix: &str) -> Option<String> {
        let parts: Vec<&str> = prefix.trim_matches('/').split('/').skip(1).collect();
        let (group, resource) = match parts.as_slice() {
            ["services", "specs"] => (Some(""), "services"),
            ["services", "endpoints"] => (Some(""), "endpoints"),
            ["minions"] => (Some(""), "nodes"),
            ["controllers"] => (Some(""), "replicationcontrollers"),
            ["ranges"] | ["masterleases"] => return None,
            [group, resource] if group.contains('.') => (Some(*group), *resource),
            [resource] => (None, *resource),
            _ => return None,
        };
        if group.is_none_or(str::is_empty) && self.served(client, "v1", resource).await {
            return Some(format!("/api/v1/{resource}"));
        }
        if self.groups.is_none() {
            let list = client.list_api_groups().await.ok()?;
            self.groups = Some(
                list.groups
                    .iter()
                    .filter_map(|g| {
                        let v = g.preferred_version.as_ref()?;
                        Some((g.name.clone(), v.group_version.clone()))
                    })
                    .collect(),
            );
        }
        let candidates: Vec<String> = self
            .groups
            .iter()
            .flatten()
            .filter(|(name, _)| group.is_none_or(|g| g == name))
            .map(|(_, gv)| gv.clone())
            .collect();
        for gv in candidates {
            if self.served(client, &gv, resource).await {
                return Some(format!("/apis/{gv}/{resource}"));
            }
        }
        None
    }

    async fn served(&mut self, client: &Client, group_version: &str, resource: &str) -> bool {
        if !self.resources.contains_key(group_version) {
            let list = if group_version == "v1" {
                client.list_core_api_resources("v1").await
            } else {
                client.list_api_group_resources(group_version).await
            };
            let names = list
                .map(|l| l.resources.into_iter().map(|r| r.name).collect())
                .unwrap_or_default();
            self.resources.insert(group_version.to_string(), names);
        }
        self.resources[group_version].iter().any(|r| r == resource)
    }
}

/// Ends the server in `dir` when this process is gone (or stops watching once `dir` is
/// removed, as [`RealApiServer`]'s drop does): test servers stop by themselves. The watchdog
/// runs in the background of a shell that exits at once, so it is not left a zombie of ours.
fn watch_over(dir: &Path) {
    // Once this process is gone: kill whatever the pid files name for a while (a start still
    // under way writes them late), then remove the directory.
    let script = r#"(
while kill -0 "$0" 2>/dev/null && [ -d "$1" ]; do sleep 0.5; done
i=0
while [ -d "$1" ] && [ $i -lt 70 ]; do
  for f in "$1/apiserver.pid" "$1/etcd.pid"; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
  i=$((i + 1)); sleep 0.5
done
rm -rf "$1"
) >/dev/null 2>&1 &"#;
    let started = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(std::process::id().to_string())
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .status();
    if !started.is_ok_and(|s| s.success()) {
        eprintln!("real-apiserver: no watchdog for {}", dir.display());
    }
}

/// A client for a kubeconfig text (as the host builds one for a Target).
pub async fn client_for(kubeconfig: &str) -> Client {
    let parsed = Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .expect("client config");
    Client::try_from(config).expect("client")
}

/// Pods need a ServiceAccount; without a controller-manager nobody creates `default`.
pub async fn ensure_default_service_account(client: &Client) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::{Api, PostParams};
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    if sas.get_opt("default").await.expect("get sa").is_none() {
        let sa: ServiceAccount =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}}))
                .expect("sa");
        sas.create(&PostParams::default(), &sa)
            .await
            .expect("create default ServiceAccount");
    }
}
