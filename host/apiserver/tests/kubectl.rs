//! What a kubectl user sees, against the server on 127.0.0.1:0 (plain HTTP, or HTTPS with
//! RBAC). Skips (saying so) when kubectl is not installed. With `DEPLOYER_TEST_BACKEND=real`
//! the same stories run against a real kube-apiserver 1.20 with the same expectations; what
//! only the embedded server has (namespace finalization without a controller-manager, OpenAPI
//! v3, `kubectl auth whoami`, ClusterRole aggregation) is skipped there, saying why.

use embedded_apiserver::tls::ServingCert;
use embedded_apiserver::{ApiServer, Options};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn kubectl_binary() -> Option<PathBuf> {
    if Path::new("/usr/bin/kubectl").exists() {
        return Some("/usr/bin/kubectl".into());
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("kubectl"))
            .find(|p| p.is_file())
    })
}

struct Kubectl {
    bin: PathBuf,
    dir: tempfile::TempDir,
}

impl Kubectl {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .args(args);
        c.env("HOME", self.dir.path())
            .env("KUBECACHEDIR", self.dir.path().join("cache"))
            .env_remove("KUBECONFIG");
        c
    }

    fn file(&self, name: &str, content: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p.to_string_lossy().into_owned()
    }

    async fn run(&self, args: &[&str]) -> String {
        let mut c = self.cmd(args);
        let out: Output = tokio::task::spawn_blocking(move || c.output().unwrap())
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_smoke() {
    let Some(bin) = kubectl_binary() else {
        skip("kubectl not installed");
        return;
    };
    let c = Cluster::start(bin, Options::default()).await;
    let (k, client) = (&c.k, c.client.clone());

    // create namespace
    assert!(
        k.run(&["create", "namespace", "smoke"])
            .await
            .contains("namespace/smoke created")
    );

    // apply -f with default validation: a ConfigMap, then again with a change (strategic merge path).
    let cm = k.file("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm1\n  namespace: smoke\ndata:\n  a: \"1\"\n");
    assert!(
        k.run(&["apply", "-f", &cm])
            .await
            .contains("configmap/cm1 created")
    );
    let cm = k.file("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm1\n  namespace: smoke\ndata:\n  a: \"2\"\n");
    assert!(
        k.run(&["apply", "-f", &cm])
            .await
            .contains("configmap/cm1 configured")
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "smoke");
    let got = cms.get("cm1").await.unwrap();
    assert_eq!(got.data.unwrap()["a"], "2");
    assert!(
        got.metadata
            .annotations
            .unwrap()
            .contains_key("kubectl.kubernetes.io/last-applied-configuration")
    );

    // The DeployItem CRD, then a DeployItem (discovery is refreshed by kubectl).
    let crd = std::fs::canonicalize(
        "../../charts/wasm-deployer/charts/landscaper-crds/crds/landscaper.gardener.cloud_deployitems.yaml",
    )
    .unwrap();
    assert!(
        k.run(&["apply", "-f", crd.to_str().unwrap()])
            .await
            .contains("created")
    );
    k.run(&[
        "wait",
        "--for=condition=Established",
        "crd/deployitems.landscaper.gardener.cloud",
        "--timeout=30s",
    ])
    .await;
    let di = k.file("di.yaml", "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata:\n  name: di1\n  namespace: smoke\nspec:\n  type: landscaper.gardener.cloud/mock\n");
    assert!(
        k.run(&["apply", "-f", &di])
            .await
            .contains("deployitem.landscaper.gardener.cloud/di1 created")
    );
    let di = k.file("di.yaml", "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata:\n  name: di1\n  namespace: smoke\nspec:\n  type: landscaper.gardener.cloud/mock\n  config:\n    apiVersion: mock.landscaper.gardener.cloud/v1alpha1\n    kind: ProviderConfiguration\n    x: 1\n");
    assert!(k.run(&["apply", "-f", &di]).await.contains("configured"));

    // get, -o yaml
    assert!(
        k.run(&["get", "configmaps", "-n", "smoke"])
            .await
            .contains("cm1")
    );
    let y = k
        .run(&["get", "configmap", "cm1", "-n", "smoke", "-o", "yaml"])
        .await;
    assert!(y.contains("name: cm1") && y.contains("a: \"2\""), "{y}");
    let y = k
        .run(&["get", "di", "di1", "-n", "smoke", "-o", "yaml"])
        .await;
    assert!(y.contains("kind: DeployItem"), "{y}");

    // get -w: spawn, expect a line, kill.
    let mut w = k
        .cmd(&["get", "cm", "-n", "smoke", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = w.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut r = BufReader::new(stdout);
        let mut l = String::new();
        loop {
            l.clear();
            if r.read_line(&mut l).unwrap() == 0 || l.contains("cm1") {
                return l;
            }
        }
    });
    let line = tokio::time::timeout(Duration::from_secs(20), line)
        .await
        .expect("a line from get -w")
        .unwrap();
    assert!(line.contains("cm1"), "{line:?}");
    w.kill().unwrap();
    let _ = w.wait();

    // patch --type merge / json / --subresource=status
    k.run(&[
        "patch",
        "cm",
        "cm1",
        "-n",
        "smoke",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"m":"merge"}}"#,
    ])
    .await;
    k.run(&[
        "patch",
        "cm",
        "cm1",
        "-n",
        "smoke",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"json"}]"#,
    ])
    .await;
    let data = cms.get("cm1").await.unwrap().data.unwrap();
    assert_eq!((data["m"].as_str(), data["j"].as_str()), ("merge", "json"));
    k.run(&[
        "patch",
        "deployitem",
        "di1",
        "-n",
        "smoke",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"phase":"Succeeded","observedGeneration":1}}"#,
    ])
    .await;
    let ar = ApiResource {
        group: "landscaper.gardener.cloud".into(),
        version: "v1alpha1".into(),
        api_version: "landscaper.gardener.cloud/v1alpha1".into(),
        kind: "DeployItem".into(),
        plural: "deployitems".into(),
    };
    let dis: Api<DynamicObject> = Api::namespaced_with(client.clone(), "smoke", &ar);
    assert_eq!(
        dis.get("di1").await.unwrap().data["status"]["phase"],
        "Succeeded"
    );

    // delete waits on a finalizer; removing it through the API lets kubectl return.
    cms.patch(
        "cm1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["smoke.test/hold"]}})),
    )
    .await
    .unwrap();
    let mut del = k
        .cmd(&["delete", "cm", "cm1", "-n", "smoke", "--timeout=60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        del.try_wait().unwrap().is_none(),
        "kubectl delete waits while the finalizer is there"
    );
    assert!(
        cms.get("cm1")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    cms.patch(
        "cm1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = del.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "kubectl delete returned after the finalizer went"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let out = del.wait_with_output().unwrap();
    assert!(status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("configmap \"cm1\" deleted"));

    // A server error is printed like the real server's.
    let out = k
        .cmd(&["get", "cm", "nonexist", "-n", "smoke"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Error from server (NotFound): configmaps \"nonexist\" not found")
    );

    // Typed generators (protobuf bodies) and server-side apply.
    assert!(
        k.run(&[
            "create",
            "configmap",
            "gen",
            "-n",
            "smoke",
            "--from-literal=a=b"
        ])
        .await
        .contains("configmap/gen created")
    );
    assert_eq!(cms.get("gen").await.unwrap().data.unwrap()["a"], "b");
    let ssa = k.file("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: smoke\ndata:\n  a: \"1\"\n  b: \"2\"\n");
    assert!(
        k.run(&["apply", "--server-side", "-f", &ssa])
            .await
            .contains("serverside-applied")
    );
    let ssa = k.file("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: smoke\ndata:\n  a: \"1\"\n");
    k.run(&["apply", "--server-side", "-f", &ssa]).await;
    let data = cms.get("ssa").await.unwrap().data.unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["a"],
        "re-apply without b removed it"
    );

    // Deleting the namespace deletes its content; kubectl waits until it is gone.
    if on_real_backend() {
        eprintln!(
            "SKIP on the real API server: namespace deletion (its namespace controller runs in the controller-manager, which the test server lacks)"
        );
        return;
    }
    assert!(
        k.run(&["delete", "namespace", "smoke", "--timeout=30s"])
            .await
            .contains("namespace \"smoke\" deleted")
    );
    assert!(cms.get("gen").await.is_err());
    c.shut_down().await;
}

/// A missing tool: SKIP locally, a failure in CI (`CI=true`), where `.ci/run` installs it.
fn skip(reason: impl std::fmt::Display) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{reason} (CI=true: a missing tool is a failure, not a skip)");
    }
    println!("SKIP: {reason}");
}

/// Which API server the stories run against: `DEPLOYER_TEST_BACKEND=real` is a real
/// kube-apiserver 1.20 + etcd per story (`../shared/tools/real-apiserver`, as the host's stories
/// use; `cargo xtask test --backends embedded,real` runs this binary there too), anything else
/// the embedded server.
fn on_real_backend() -> bool {
    match std::env::var("DEPLOYER_TEST_BACKEND").as_deref() {
        Ok("real") => true,
        Ok("embedded") | Ok("") | Err(_) => false,
        Ok(other) => panic!("DEPLOYER_TEST_BACKEND={other:?}: expected `embedded` or `real`"),
    }
}

/// Returns from the story, saying why, on the real API server.
macro_rules! skip_on_real {
    ($why:literal) => {
        if on_real_backend() {
            eprintln!("SKIP on the real API server: {}", $why);
            return;
        }
    };
}

/// A real kube-apiserver + etcd (`../shared/tools/real-apiserver`), stopped when dropped.
struct RealApiServer {
    dir: tempfile::TempDir,
    url: String,
    /// Admin kubeconfig (a `system:masters` token; TLS verification off: self-signed).
    kubeconfig: String,
}

impl RealApiServer {
    fn tool() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/tools/real-apiserver/real-apiserver")
    }

    /// `--authorization-mode=<authz>` (`AlwaysAllow` or `RBAC`). The tool picks free ports
    /// and then binds them; a parallel start can take one in between: start again.
    fn start(authz: &str) -> Self {
        for attempt in 1.. {
            let dir = tempfile::Builder::new()
                .prefix("real-apiserver-")
                .tempdir()
                .unwrap();
            let out = Command::new(Self::tool())
                .arg("start")
                .arg(dir.path())
                .env("REAL_APISERVER_AUTHZ", authz)
                .env(
                    "REAL_APISERVER_ARGS",
                    "--disable-admission-plugins=ServiceAccount",
                )
                .output()
                .unwrap_or_else(|e| panic!("running {}: {e}", Self::tool().display()));
            let stdout = String::from_utf8_lossy(&out.stdout);
            if let Some(url) = stdout.lines().find_map(|l| l.strip_prefix("ready ")) {
                let kubeconfig = std::fs::read_to_string(dir.path().join("kubeconfig")).unwrap();
                return RealApiServer {
                    url: url.to_string(),
                    dir,
                    kubeconfig,
                };
            }
            let log = std::fs::read_to_string(dir.path().join("apiserver.log")).unwrap_or_default()
                + &std::fs::read_to_string(dir.path().join("etcd.log")).unwrap_or_default();
            let _ = Command::new(Self::tool())
                .arg("stop")
                .arg(dir.path())
                .output();
            assert!(
                attempt < 4 && log.contains("address already in use"),
                "real-apiserver did not start: {stdout}{}\n{}",
                String::from_utf8_lossy(&out.stderr),
                log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
            );
            eprintln!("real-apiserver: port taken by a parallel start, retrying ({attempt})");
        }
        unreachable!()
    }
}

impl Drop for RealApiServer {
    fn drop(&mut self) {
        let _ = Command::new(Self::tool())
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }
}

/// Serving the embedded server on loopback; stops when `stop` is sent (or dropped).
type Serving = tokio::task::JoinHandle<anyhow::Result<()>>;

/// One story's API server with a kubectl pointed at it (`kubeconfig`: the administrator) and
/// an administrator client for the story's own checks.
struct Cluster {
    k: Kubectl,
    client: kube::Client,
    url: String,
    /// The CA an HTTPS embedded server was started with.
    ca_pem: Option<String>,
    /// The embedded server (`None` on the real backend).
    server: Option<ApiServer>,
    _real: Option<RealApiServer>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    serving: Option<Serving>,
}

impl Cluster {
    /// The backend's server; on the real one, `options.rbac` chooses `--authorization-mode`
    /// (RBAC or AlwaysAllow) and the other options do not apply (it is always HTTPS).
    async fn start(bin: PathBuf, options: Options) -> Self {
        let k = Kubectl {
            bin,
            dir: tempfile::tempdir().unwrap(),
        };
        if on_real_backend() {
            let authz = if options.rbac { "RBAC" } else { "AlwaysAllow" };
            let real = tokio::task::spawn_blocking(move || RealApiServer::start(authz))
                .await
                .unwrap();
            std::fs::write(k.dir.path().join("kubeconfig"), &real.kubeconfig).unwrap();
            return Cluster {
                k,
                client: client_for(&real.kubeconfig).await,
                url: real.url.clone(),
                ca_pem: None,
                server: None,
                _real: Some(real),
                stop: None,
                serving: None,
            };
        }
        let tls = options.tls;
        let server = ApiServer::new(options).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let cert = tls.then(|| ServingCert::generate(&[]).unwrap());
        let scheme = if tls { "https" } else { "http" };
        let url = format!("{scheme}://{}", listener.local_addr().unwrap());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let srv = server.clone();
        let ca_pem = cert.as_ref().map(|c| c.ca_pem().to_string());
        let serving = tokio::spawn(async move {
            let stopped = async {
                let _ = stop_rx.await;
            };
            match cert {
                Some(cert) => srv.serve_tls(listener, &cert, stopped).await,
                None => srv.serve(listener, stopped).await,
            }
        });
        let c = Cluster {
            k,
            client: server.client(),
            url,
            ca_pem,
            server: Some(server),
            _real: None,
            stop: Some(stop_tx),
            serving: Some(serving),
        };
        let admin = c.kubeconfig_with_token(c.server.as_ref().unwrap().admin_token());
        c.k.file("kubeconfig", &admin);
        c
    }

    /// A kubeconfig for this server with `token` (none if empty) — what a ServiceAccount's
    /// user or an anonymous one gets.
    fn kubeconfig_with_token(&self, token: &str) -> String {
        if self._real.is_some() {
            return format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{}\", insecure-skip-tls-verify: true}}\nusers:\n- name: u\n  user: {{token: \"{token}\"}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u, namespace: default}}\ncurrent-context: c\n",
                self.url
            );
        }
        ApiServer::kubeconfig_yaml_tls(&self.url, self.ca_pem.as_deref(), token)
    }

    /// Creates the objects of a YAML stream: in-process on the embedded server, with
    /// `kubectl apply` on the real one.
    async fn install_yaml(&self, yaml: &str) {
        match &self.server {
            Some(server) => server.install_yaml_documents(yaml).unwrap(),
            None => {
                let f = self.k.file("install.yaml", yaml);
                self.k.run(&["apply", "-f", &f]).await;
            }
        }
    }

    /// The DeployItem CRD the host ships, established.
    async fn install_deployitem_crd(&self) {
        let crd = std::fs::read_to_string(
            "../../charts/wasm-deployer/charts/landscaper-crds/crds/landscaper.gardener.cloud_deployitems.yaml",
        )
        .unwrap();
        self.install_yaml(&crd).await;
        self.k
            .run(&[
                "wait",
                "--for=condition=Established",
                "crd/deployitems.landscaper.gardener.cloud",
                "--timeout=30s",
            ])
            .await;
    }

    /// Stops serving (embedded) and waits until the server has stopped.
    async fn shut_down(mut self) {
        if let (Some(stop), Some(serving)) = (self.stop.take(), self.serving.take()) {
            let _ = stop.send(());
            tokio::time::timeout(Duration::from_secs(10), serving)
                .await
                .expect("server stops")
                .unwrap()
                .unwrap();
        }
    }
}

/// A kube-rs client for a kubeconfig text.
async fn client_for(kubeconfig: &str) -> kube::Client {
    let parsed = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(parsed, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// kubectl's texts with runs of spaces as one (its column padding differs between the OpenAPI
/// v3 and v2 code paths, i.e. between current servers and 1.20).
fn squeezed(s: &str) -> String {
    s.split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The header line and the line of `name` in kubectl's table output.
fn header_and_row<'a>(out: &'a str, name: &str) -> (&'a str, &'a str) {
    let header = out.lines().next().unwrap_or("");
    let row = out
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{out}"));
    (header, row)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_the_columns_the_server_defines() {
    let Some(bin) = kubectl_binary() else {
        skip("kubectl not installed");
        return;
    };
    let c = Cluster::start(bin, Options::default()).await;
    let k = &c.k;
    c.install_deployitem_crd().await;
    c.install_yaml(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: cols}\n---\n\
             apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {name: di1, namespace: cols}\n\
             spec: {type: landscaper.gardener.cloud/mock}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm2, namespace: cols}\ndata: {a: '1', b: '2'}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata: {name: s1, namespace: cols}\ntype: kubernetes.io/basic-auth\ndata: {username: YQ==}\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: cols}\n\
             spec: {replicas: 2, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, \
             spec: {containers: [{name: nginx, image: 'nginx:1.27'}]}}}\n",
        )
        .await;
    k.run(&[
        "patch",
        "deployitem",
        "di1",
        "-n",
        "cols",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"phase":"Succeeded","observedGeneration":1,"exportRef":{"name":"di1-export","namespace":"cols"}}}"#,
    ])
    .await;

    // A CRD's additionalPrinterColumns, evaluated by the server.
    let out = k.run(&["get", "deployitems", "-n", "cols"]).await;
    let (header, row) = header_and_row(&out, "di1");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NAME", "TYPE", "PHASE", "EXPORTREF", "AGE"],
        "{out}"
    );
    assert!(
        row.contains("landscaper.gardener.cloud/mock")
            && row.contains("Succeeded")
            && row.contains("di1-export"),
        "{out}"
    );
    // Built-in kinds: the columns kubectl users know.
    let out = k.run(&["get", "configmaps", "-n", "cols"]).await;
    let (header, row) = header_and_row(&out, "cm2");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NAME", "DATA", "AGE"]
    );
    assert_eq!(row.split_whitespace().nth(1), Some("2"), "{out}");
    let out = k.run(&["get", "secrets", "-n", "cols"]).await;
    let (header, row) = header_and_row(&out, "s1");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NAME", "TYPE", "DATA", "AGE"]
    );
    assert!(row.contains("kubernetes.io/basic-auth"), "{out}");
    let out = k
        .run(&["get", "deployments", "-n", "cols", "-o", "wide"])
        .await;
    let (header, row) = header_and_row(&out, "web");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "-o wide adds the priority-1 columns"
    );
    assert!(
        row.contains("0/2") && row.contains("nginx:1.27") && row.contains("app=web"),
        "{out}"
    );
    let out = k.run(&["get", "namespace", "cols"]).await;
    assert!(header_and_row(&out, "cols").1.contains("Active"), "{out}");
    // -A adds the namespace from the rows' metadata.
    let out = k.run(&["get", "deployitems", "-A"]).await;
    let (header, row) = header_and_row(&out, "di1");
    assert!(
        header.starts_with("NAMESPACE") && row.starts_with("cols"),
        "{out}"
    );

    // get -w: the rows of a watch, as tables too.
    let mut w = k
        .cmd(&["get", "deployitems", "-n", "cols", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = w.stdout.take().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        let mut r = BufReader::new(stdout);
        let mut seen = Vec::new();
        loop {
            let mut l = String::new();
            if r.read_line(&mut l).unwrap() == 0 {
                return seen;
            }
            let done = l.contains("di1");
            seen.push(l);
            if done {
                return seen;
            }
        }
    });
    let lines = tokio::time::timeout(Duration::from_secs(20), lines)
        .await
        .expect("a row from get -w")
        .unwrap();
    w.kill().unwrap();
    let _ = w.wait();
    assert!(lines[0].contains("PHASE"), "{lines:?}");
    assert!(lines.last().unwrap().contains("Succeeded"), "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_validates_lists_explains_crd_fields_and_diffs_by_server_dry_run() {
    let Some(bin) = kubectl_binary() else {
        skip("kubectl not installed");
        return;
    };
    let c = Cluster::start(bin, Options::default()).await;
    let k = &c.k;
    c.install_deployitem_crd().await;
    // A `kind: List` with client-side validation on (kubectl reads /openapi/v2 for it).
    let list = k.file(
        "list.yaml",
        "apiVersion: v1\nkind: List\nitems:\n\
         - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default}, data: {k: v}}\n\
         - {apiVersion: landscaper.gardener.cloud/v1alpha1, kind: DeployItem, metadata: {name: d, namespace: default}, spec: {type: example.dev/x}}\n",
    );
    let out = k.run(&["apply", "-f", &list]).await;
    assert!(out.contains("configmap/a created"), "{out}");
    assert!(
        out.contains("deployitem.landscaper.gardener.cloud/d created"),
        "{out}"
    );
    // A field the schema does not have is refused by server-side field validation (Kubernetes
    // 1.25 on; 1.20 prunes it silently).
    if on_real_backend() {
        eprintln!("SKIP on the real API server: server-side field validation (1.25+)");
    } else {
        let bad = k.file(
            "bad.yaml",
            "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {name: e, namespace: default}\n\
             spec: {type: example.dev/x, typo: 1}\n",
        );
        let mut c = k.cmd(&["apply", "-f", &bad]);
        let refused = tokio::task::spawn_blocking(move || c.output().unwrap())
            .await
            .unwrap();
        assert!(!refused.status.success());
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("typo"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
    }
    // `kubectl explain` answers from the CRD's schema.
    // (A real server publishes a new CRD's schema in its OpenAPI a few seconds later.)
    let out = squeezed(&k.run_eventually(&["explain", "deployitem.spec"]).await);
    assert!(out.contains("KIND: DeployItem"), "{out}");
    assert!(
        out.contains("What to deploy, where, and with which deployer"),
        "{out}"
    );
    for field in ["config", "target", "type"] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(field)),
            "{field}: {out}"
        );
    }
    // `kubectl diff`: a server-side dry run shows the change and writes nothing.
    let changed = k.file(
        "changed.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\ndata: {k: changed}\n",
    );
    let mut c = k.cmd(&["diff", "-f", &changed]);
    let diff = tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap();
    // kubectl diff exits 1 when there are differences.
    assert_eq!(diff.status.code(), Some(1), "{diff:?}");
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(
        text.contains("-  k: v") && text.contains("+  k: changed"),
        "{text}"
    );
    let out = k
        .run(&["get", "configmap", "a", "-o", "jsonpath={.data.k}"])
        .await;
    assert_eq!(out, "v", "diff wrote nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_wait_server_side_apply_conflicts_and_raw_discovery() {
    let Some(bin) = kubectl_binary() else {
        skip("kubectl not installed");
        return;
    };
    let c = Cluster::start(bin, Options::default()).await;
    let k = &c.k;
    c.install_deployitem_crd().await;
    c.install_yaml(
        "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {name: w, namespace: default}\n\
             spec: {type: example.dev/x}\n",
    )
    .await;
    // `kubectl wait --for=jsonpath` returns once the status says so (written while it waits).
    let mut c = k.cmd(&[
        "wait",
        "deployitem/w",
        "--for=jsonpath={.status.phase}=Succeeded",
        "--timeout=20s",
    ]);
    let waiting = tokio::task::spawn_blocking(move || c.output().unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    k.run(&[
        "patch",
        "deployitem",
        "w",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Succeeded","observedGeneration":1}}"#,
    ])
    .await;
    let waited = waiting.await.unwrap();
    assert!(
        waited.status.success(),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
    assert!(String::from_utf8_lossy(&waited.stdout).contains("condition met"));

    // Server-side apply: a second manager taking a field is a conflict, unless it forces.
    let first = k.file(
        "first.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: default}\ndata: {k: one}\n",
    );
    let second = k.file(
        "second.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: default}\ndata: {k: two}\n",
    );
    k.run(&[
        "apply",
        "--server-side",
        "--field-manager=alice",
        "-f",
        &first,
    ])
    .await;
    let mut c = k.cmd(&[
        "apply",
        "--server-side",
        "--field-manager=bob",
        "-f",
        &second,
    ]);
    let conflict = tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap();
    assert!(!conflict.status.success());
    let err = String::from_utf8_lossy(&conflict.stderr);
    assert!(err.contains("conflict") && err.contains("alice"), "{err}");
    k.run(&[
        "apply",
        "--server-side",
        "--field-manager=bob",
        "--force-conflicts",
        "-f",
        &second,
    ])
    .await;
    let out = k
        .run(&["get", "configmap", "owned", "-o", "jsonpath={.data.k}"])
        .await;
    assert_eq!(out, "two");

    // `kubectl get --raw` of discovery documents.
    let raw = k
        .run(&["get", "--raw", "/apis/landscaper.gardener.cloud/v1alpha1"])
        .await;
    let doc: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(doc["kind"], "APIResourceList");
    assert!(
        doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "deployitems/status"),
        "{raw}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explains_built_in_kinds_and_its_client_side_apply_merges_lists_by_key() {
    let Some(bin) = kubectl_binary() else {
        skip("kubectl not installed");
        return;
    };
    let c = Cluster::start(bin, Options::default()).await;
    let k = &c.k;
    // Built-in kinds' schemas (with what they reference) are served: explain walks into them.
    let out = squeezed(
        &k.run(&["explain", "deployment.spec.template.spec.containers.image"])
            .await,
    );
    assert!(out.contains("KIND: Deployment"), "{out}");
    assert!(out.contains("FIELD: image <string>"), "{out}");
    let out = k.run(&["explain", "configmap.data"]).await;
    assert!(
        out.contains("Data contains the configuration data"),
        "{out}"
    );

    // The served schemas carry the strategic-merge metadata a real server publishes (OpenAPI
    // v3 is served by Kubernetes 1.27 on, not by the 1.20 test server).
    if on_real_backend() {
        eprintln!("SKIP on the real API server: /openapi/v3 (1.20 serves v2 only)");
    } else {
        let raw = k.run(&["get", "--raw", "/openapi/v3/apis/apps/v1"]).await;
        let doc: serde_json::Value = serde_json::from_str(&raw).unwrap();
        let containers =
            &doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(
            doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"]
                [0]["kind"],
            "Deployment"
        );
    }

    // Client-side apply sends a strategic merge patch and the server merges containers by
    // name, so an env var another writer added survives a re-apply.
    let deploy = |image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: default}}\n\
             spec:\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    \
             spec:\n      containers:\n      - name: app\n        image: {image}\n        env: [{{name: A, value: '1'}}]\n"
        )
    };
    let v1 = k.file("v1.yaml", &deploy("nginx:1"));
    k.run(&["apply", "-f", &v1]).await;
    k.run(&[
        "patch",
        "deployment",
        "web",
        "--type=strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"B","value":"2"}]}]}}}}"#,
    ])
    .await;
    let v2 = k.file("v2.yaml", &deploy("nginx:2"));
    k.run(&["apply", "-f", &v2]).await;
    let image = k
        .run(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(image, "nginx:2");
    let env = k
        .run(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].env[*].name}",
        ])
        .await;
    // (In which order: a real server honours the `$setElementOrder` directive of kubectl's
    // patch and puts B first; the embedded one keeps the stored order.)
    let mut names: Vec<&str> = env.split_whitespace().collect();
    names.sort();
    assert_eq!(
        names,
        ["A", "B"],
        "the env var the other writer added survived the re-apply: {env}"
    );
}

impl Kubectl {
    /// [`Kubectl::run`], retried for up to 30 s until it succeeds.
    async fn run_eventually(&self, args: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (code, out, err) = self.run_as("kubeconfig", args).await;
            if code == 0 {
                return out;
            }
            assert!(Instant::now() < deadline, "kubectl {args:?} failed: {err}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// kubectl with another kubeconfig file of the same directory: (exit code, stdout, stderr).
    async fn run_as(&self, kubeconfig: &str, args: &[&str]) -> (i32, String, String) {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(self.dir.path().join(kubeconfig))
            .args(args)
            .env("HOME", self.dir.path())
            .env("KUBECACHEDIR", self.dir.path().join("cache"))
            .env_remove("KUBECONFIG");
        let out = tokio::task::spawn_blocking(move || c.output().unwrap())
            .await
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// RBAC on, served over HTTPS (kubectl sends tokens only over TLS), with a chosen admin token.
fn rbac_over_https() -> Options {
    Options {
        rbac: true,
        tls: true,
        admin_token: Some("an-admin-token-for-this-story".into()),
        ..Options::default()
    }
}

/// RBAC on, over HTTPS (kubectl sends a kubeconfig's token only over TLS; the embedded server
/// serves a certificate generated at start, its CA in the kubeconfig): the admin kubeconfig
/// creates a ServiceAccount, mints its token (`kubectl create token`) and grants it a Role;
/// `kubectl auth can-i` (as the account with its own kubeconfig, and `--as` through
/// impersonation), `auth can-i --list`, `auth whoami`, a forbidden `get`, and a kubeconfig
/// without a token (anonymous) answer as on a real cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_with_rbac() {
    let Some(bin) = kubectl_binary() else {
        skip("kubectl not installed");
        return;
    };
    let options = rbac_over_https();
    let c = Cluster::start(bin, options).await;
    let k = &c.k;
    if !on_real_backend() {
        assert!(c.url.starts_with("https://"), "{}", c.url);
        // Only the configured administrator token is the administrator.
        k.file(
            "well-known-kubeconfig",
            &c.kubeconfig_with_token(embedded_apiserver::auth::ADMIN_TOKEN),
        );
        let (code, _, err) = k
            .run_as("well-known-kubeconfig", &["get", "namespaces"])
            .await;
        assert_ne!(code, 0);
        // A 401, in kubectl's words for it.
        assert!(err.contains("You must be logged in to the server"), "{err}");
    }
    // Anonymous (no token): not even discovery. (kubectl itself would prompt for a password
    // over HTTPS without credentials: a kube-rs client trusting the kubeconfig's CA asks.)
    let anonymous = client_for(&c.kubeconfig_with_token("")).await;
    let refused = anonymous
        .request_text(http::Request::get("/api").body(Vec::new()).unwrap())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert_eq!(
        status.message, r#"forbidden: User "system:anonymous" cannot get path "/api""#,
        "{status:?}"
    );
    // The administrator's kubeconfig works.
    k.run(&["create", "namespace", "team"]).await;
    let sa = k.file(
        "sa.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: team\n",
    );
    k.run(&["apply", "-f", &sa]).await;
    let token = k.run(&["create", "token", "sa", "-n", "team"]).await;
    let token = token.trim();
    assert!(!token.is_empty());
    k.file("sa-kubeconfig", &c.kubeconfig_with_token(token));
    let as_sa = "--as=system:serviceaccount:team:sa";
    let (code, out, _) = k
        .run_as(
            "kubeconfig",
            &["auth", "can-i", "list", "configmaps", "-n", "team", as_sa],
        )
        .await;
    assert_eq!((code, out.trim()), (1, "no"));
    let (code, out, _) = k
        .run_as(
            "sa-kubeconfig",
            &["auth", "can-i", "list", "configmaps", "-n", "team"],
        )
        .await;
    assert_eq!((code, out.trim()), (1, "no"));
    let (code, _, err) = k
        .run_as("sa-kubeconfig", &["get", "configmaps", "-n", "team"])
        .await;
    assert_ne!(code, 0);
    assert!(
        err.contains(r#"Error from server (Forbidden): configmaps is forbidden: User "system:serviceaccount:team:sa" cannot list resource "configmaps" in API group "" in the namespace "team""#),
        "{err}"
    );

    let rbac = k.file(
        "rbac.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: cm-reader\n  namespace: team\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: sa-reads\n  namespace: team\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: cm-reader\nsubjects:\n- kind: ServiceAccount\n  name: sa\n  namespace: team\n",
    );
    k.run(&["apply", "-f", &rbac]).await;
    let (code, out, err) = k
        .run_as(
            "kubeconfig",
            &["auth", "can-i", "list", "configmaps", "-n", "team", as_sa],
        )
        .await;
    assert_eq!((code, out.trim()), (0, "yes"), "{err}");
    let (code, out, _) = k
        .run_as(
            "sa-kubeconfig",
            &["auth", "can-i", "list", "configmaps", "-n", "team"],
        )
        .await;
    assert_eq!((code, out.trim()), (0, "yes"));
    let (code, out, _) = k
        .run_as(
            "sa-kubeconfig",
            &["auth", "can-i", "delete", "configmaps", "-n", "team"],
        )
        .await;
    assert_eq!((code, out.trim()), (1, "no"));
    let (code, out, _) = k
        .run_as(
            "sa-kubeconfig",
            &["auth", "can-i", "list", "configmaps", "-n", "default"],
        )
        .await;
    assert_eq!((code, out.trim()), (1, "no"));
    let (code, _, err) = k
        .run_as("sa-kubeconfig", &["get", "configmaps", "-n", "team"])
        .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = k
        .run_as("sa-kubeconfig", &["auth", "can-i", "--list", "-n", "team"])
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("configmaps ") && l.contains("[get list]")),
        "{out}"
    );
    skip_on_real!("`kubectl auth whoami` (SelfSubjectReview is served from 1.28 on)");
    let (code, out, err) = k.run_as("sa-kubeconfig", &["auth", "whoami"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("system:serviceaccount:team:sa"), "{out}");
}

/// Aggregated ClusterRoles, as the clusterrole-aggregation controller keeps them: `kubectl create
/// rolebinding --clusterrole=view` grants what `view` aggregates, and a ClusterRole labelled
/// `aggregate-to-view` (what a CRD's author ships) extends `view` at once, and stops to when
/// it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_follows_aggregated_cluster_roles() {
    skip_on_real!("ClusterRole aggregation is the controller-manager's; the test server runs none");
    let Some(bin) = kubectl_binary() else {
        skip("kubectl not installed");
        return;
    };
    let options = rbac_over_https();
    let c = Cluster::start(bin, options).await;
    let k = &c.k;
    c.install_deployitem_crd().await;
    k.run(&["create", "namespace", "team"]).await;
    k.run(&["create", "serviceaccount", "sa", "-n", "team"])
        .await;
    k.run(&[
        "create",
        "rolebinding",
        "sa-views",
        "--clusterrole=view",
        "--serviceaccount=team:sa",
        "-n",
        "team",
    ])
    .await;
    let can_i = |verb: &'static str, what: &'static str| async move {
        let (code, out, err) = k
            .run_as(
                "kubeconfig",
                &[
                    "auth",
                    "can-i",
                    verb,
                    what,
                    "-n",
                    "team",
                    "--as=system:serviceaccount:team:sa",
                ],
            )
            .await;
        assert!(code == 0 || code == 1, "{err}");
        out.trim() == "yes"
    };
    assert!(can_i("list", "configmaps").await, "view aggregates reading");
    assert!(can_i("watch", "deployments.apps").await);
    assert!(
        !can_i("list", "secrets").await,
        "view does not read secrets"
    );
    assert!(!can_i("create", "configmaps").await);
    assert!(!can_i("list", "deployitems.landscaper.gardener.cloud").await);

    // A CRD's author extends `view`.
    let extension = k.file(
        "extension.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: deployitems-view\n  labels:\n    rbac.authorization.k8s.io/aggregate-to-view: \"true\"\nrules:\n- apiGroups: [landscaper.gardener.cloud]\n  resources: [deployitems]\n  verbs: [get, list, watch]\n",
    );
    k.run(&["apply", "-f", &extension]).await;
    assert!(can_i("list", "deployitems.landscaper.gardener.cloud").await);
    // The controller wrote the rule into `view` (and, through `edit`, into `admin`).
    for role in ["view", "edit", "admin"] {
        let rules = k
            .run(&["get", "clusterrole", role, "-o", "jsonpath={.rules}"])
            .await;
        assert!(rules.contains("deployitems"), "{role}: {rules}");
    }
    k.run(&["delete", "clusterrole", "deployitems-view"]).await;
    assert!(!can_i("list", "deployitems.landscaper.gardener.cloud").await);
    assert!(can_i("list", "configmaps").await);
}
