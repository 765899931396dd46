//! The Kubernetes API a story runs against, chosen by the harness:
//!
//! - `embedded` (default): the project's own API server, in-process, one per story;
//! - `real` (`DEPLOYER_TEST_BACKEND=real`): a real kube-apiserver 1.20 + etcd on loopback, one
//!   per story, started by `../shared/tools/real-apiserver` (built once, cached in `~/.cache`).
//!   `REAL_KUBE_APISERVER` (and optionally `REAL_ETCD`) name other binaries, e.g. a hand-built
//!   newer kube-apiserver: every real-backend story then runs on that one (docs/kubernetes-versions.md).
//!
//! The same story code runs on both. A story that needs what only one backend has (fault
//! injection, the workload simulator, the audit log) says so in one line with
//! [`skip_on_real!`] and returns.

use std::path::PathBuf;
use std::process::Command;

use embedded_apiserver::ApiServer;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Which API server the stories run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Embedded,
    Real,
}

/// `DEPLOYER_TEST_BACKEND` (`embedded` or `real`; default `embedded`).
pub fn backend() -> Backend {
    match std::env::var("DEPLOYER_TEST_BACKEND").as_deref() {
        Ok("real") => Backend::Real,
        Ok("embedded") | Ok("") | Err(_) => Backend::Embedded,
        Ok(other) => panic!("DEPLOYER_TEST_BACKEND={other:?}: expected `embedded` or `real`"),
    }
}

/// Returns from the story, saying why, when it runs on the real API server.
#[macro_export]
macro_rules! skip_on_real {
    ($why:literal) => {
        if $crate::backend() == $crate::Backend::Real {
            eprintln!("SKIP on the real API server: {}", $why);
            return;
        }
    };
}

/// Returns from the story, saying why, when it runs on the embedded API server.
#[macro_export]
macro_rules! skip_on_embedded {
    ($why:literal) => {
        if $crate::backend() == $crate::Backend::Embedded {
            eprintln!("SKIP on the embedded API server: {}", $why);
            return;
        }
    };
}

/// A real kube-apiserver + etcd for one story; stopped when dropped.
pub struct RealApiServer {
    dir: tempfile::TempDir,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// Admin kubeconfig (token of `system:masters`, TLS verification off: self-signed).
    pub kubeconfig: String,
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
    fn apply(&self, start: &mut Command, dir: &std::path::Path) {
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
        self.dir.path().join("audit.log")
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
        // The tool picks free ports, then binds them; a server of a parallel story can take a
        // port in between ("address already in use"). That is the tool's race, not the story's:
        // start again in a fresh directory.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::try_start(authz, audit, binaries) {
                Ok(server) => return server,
                Err(why) if attempt < 4 && why.contains("address already in use") => {
                    eprintln!(
                        "real-apiserver: port taken by a parallel start, retrying ({attempt})"
                    );
                }
                Err(why) => panic!("{why}"),
            }
        }
    }

    fn try_start(authz: &str, audit: bool, binaries: &RealBinaries) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("real-apiserver-")
            .tempdir()
            .expect("tempdir");
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
            dir,
            url,
            kubeconfig,
        })
    }

    /// The directory the server runs in (its logs, `apiserver.pid` and `etcd.pid`).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A client with the admin token.
    pub async fn client(&self) -> Client {
        client_for(&self.kubeconfig).await
    }
}

impl Drop for RealApiServer {
    fn drop(&mut self) {
        let _ = Command::new(tool())
            .arg("stop")
            .arg(self.dir.path())
            .output();
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

/// The cluster of one story: the Landscaper cluster, also the `default` Target's cluster.
pub struct TestCluster {
    pub client: Client,
    /// Kubeconfig text of the `default` Target.
    pub target_kubeconfig: String,
    /// The embedded server (`None` on the real backend).
    pub embedded: Option<ApiServer>,
    /// The real server (`None` on the embedded backend); stops when dropped.
    pub real: Option<RealApiServer>,
}

impl TestCluster {
    /// Starts the backend's server with Landscaper's CRDs, a `default` Target pointing at the
    /// server itself and a `default` Context (and, on a real server, the `default`
    /// ServiceAccount a controller-manager would create).
    pub async fn start(backend: Backend) -> Self {
        match backend {
            Backend::Embedded => {
                let server = ApiServer::new(Default::default()).expect("api server");
                let env = deployer_host::dev::DevEnvironment::bootstrap(
                    server.clone(),
                    "http://127.0.0.1:1",
                )
                .await
                .expect("bootstrap");
                TestCluster {
                    client: env.client,
                    target_kubeconfig: env.target_kubeconfig,
                    embedded: Some(server),
                    real: None,
                }
            }
            Backend::Real => {
                let real = RealApiServer::start("AlwaysAllow");
                let client = real.client().await;
                deployer_host::dev::install_landscaper_crds(&client)
                    .await
                    .expect("installing Landscaper's CRDs on the real server");
                deployer_host::dev::install_own_crds(&client)
                    .await
                    .expect("installing the WasmPlugin CRD on the real server");
                deployer_host::dev::ensure_default_objects(&client, &real.kubeconfig)
                    .await
                    .expect("default Target and Context");
                ensure_default_service_account(&client).await;
                TestCluster {
                    client,
                    target_kubeconfig: real.kubeconfig.clone(),
                    embedded: None,
                    real: Some(real),
                }
            }
        }
    }
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
