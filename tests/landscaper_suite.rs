//! Landscaper's own integration tests against our host: the compiled ginkgo suite of the real
//! Landscaper (`integration.test` in `$REAL_LANDSCAPER_BIN`, built outside this repository; without
//! it the test says `SKIP`, naming the variable) runs against
//! `deployer-host dev --no-landscaper` (the embedded API server and our host as the only
//! deployer) and the real Landscaper controller in both modes.
//!
//! Which specs run, and what each must do, is the table of `docs/landscaper-integration-tests.md`
//! (one source of truth): every spec marked `passes` must pass, every spec marked `fails` must
//! still fail (a fixed one says so, so the table stays true); `n/a` specs are not run.
//!
//! The suite builds its Targets to point at `<scheme>://kubernetes.default:<port of Service
//! default/kubernetes>`. The embedded server publishes that Service with the port it listens on,
//! and the host process (only it) resolves `kubernetes.default` to 127.0.0.1: it runs in a private
//! mount namespace (`unshare --mount`) with its own `/etc/hosts` bind-mounted over the machine's,
//! which stays untouched.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::Value;
use test_support::real_landscaper::{self, RealLandscaper};

/// The suite's specs and what each must do, from the docs table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    Passes,
    Fails,
    NotApplicable,
}

#[derive(Debug, Clone)]
struct Row {
    spec: String,
    expect: Expect,
    why: String,
}

fn docs_table() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/landscaper-integration-tests.md")
}

/// The rows of the table: `| `spec` | passes / fails / n/a | why |`.
fn rows(text: &str) -> Vec<Row> {
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.trim().trim_matches('|').split(" | ").collect();
            let [spec, result, why] = cells[..] else {
                return None;
            };
            let spec = spec
                .trim()
                .strip_prefix('`')?
                .strip_suffix('`')?
                .to_string();
            let expect = match result.trim() {
                "passes" => Expect::Passes,
                "fails" => Expect::Fails,
                "n/a" => Expect::NotApplicable,
                _ => return None,
            };
            Some(Row {
                spec,
                expect,
                why: why.trim().to_string(),
            })
        })
        .collect()
}

#[test]
fn the_docs_table_parses_and_names_each_spec_once() {
    let text = std::fs::read_to_string(docs_table()).expect("docs/landscaper-integration-tests.md");
    let rows = rows(&text);
    assert!(
        rows.len() >= 60,
        "every spec of the suite is listed: {}",
        rows.len()
    );
    let mut specs: Vec<&str> = rows.iter().map(|r| r.spec.as_str()).collect();
    specs.sort();
    let before = specs.len();
    specs.dedup();
    assert_eq!(specs.len(), before, "a spec is listed twice");
    for r in &rows {
        assert!(
            r.expect == Expect::Passes || !r.why.is_empty(),
            "{}: a spec that does not pass says why",
            r.spec
        );
    }
}

/// A process stopped when dropped: SIGTERM first, so the host stops its pods' processes (the
/// process kubelet's children die with it), SIGKILL after 10 s.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `deployer-host dev --no-landscaper` where only it resolves `kubernetes.default` to
/// 127.0.0.1. Returns the process and the server's URL.
fn start_host(dir: &Path) -> (Process, String) {
    let hosts = dir.join("hosts");
    let machine = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    std::fs::write(
        &hosts,
        format!("{machine}\n127.0.0.1 kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local\n"),
    )
    .unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // root may unshare the mount namespace at once; anyone else maps themselves to root in a
    // user namespace first (where the kernel allows unprivileged user namespaces).
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let mut cmd = Command::new("unshare");
    if !root {
        cmd.arg("--map-root-user");
    }
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(r#"mount --bind "$0" /etc/hosts && exec "$@""#)
        .arg(&hosts)
        .arg(env!("CARGO_BIN_EXE_deployer-host"))
        // `--run-pods`: the container specs' pods (`sh -c "cp $TARGET_PATH $EXPORTS_PATH"`) run
        // as local processes.
        .args([
            "dev",
            "--no-landscaper",
            "--run-pods",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .arg("--plugins")
        .arg(test_support::plugins_dir())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("host.log")).unwrap());
    let mut child = cmd
        .spawn()
        .expect("unshare (util-linux) runs deployer-host dev");
    let stdout = child.stdout.take().unwrap();
    // The first line, or nothing if the host hangs at start (a cold plugin cache takes seconds).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(180))
        .unwrap_or_default();
    let child = Process(child);
    let Some(url) = line.trim().strip_prefix("ready ") else {
        drop(child);
        panic!(
            "deployer-host dev did not start (expected `ready <url>`, got {line:?}):\n{}",
            std::fs::read_to_string(dir.join("host.log")).unwrap_or_default()
        );
    };
    (child, url.to_string())
}

/// The suite reads its test data relative to Landscaper's repository root. `$REAL_LANDSCAPER_BIN`
/// has `tree/test` (and `tree/hack` where it was copied too); the Manifest Deployer spec also
/// reads an example DeployItem from `examples/deploy-items/`, which a copy of the tree in `dir`
/// gets from `../shared/landscaper/examples/`.
fn suite_tree(suite: &Path, dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("examples/deploy-items")).unwrap();
    let built = suite.parent().unwrap().join("tree");
    let status = Command::new("cp")
        .arg("-r")
        .arg(built.join("test"))
        .args(Some(built.join("hack")).filter(|h| h.exists()))
        .arg(&tree)
        .status()
        .expect("cp");
    assert!(status.success(), "copying {}", built.display());
    let example = "40-DeployItem-Manifest-secret.yaml";
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/landscaper/examples")
            .join(example),
        tree.join("examples/deploy-items").join(example),
    )
    .expect("../shared/landscaper/examples");
    tree
}

/// Whether a spec is registered only with `--registry-config` (a private OCI registry).
/// The `WebhookTest` specs need Landscaper's admission webhook server.
fn needs_webhook_server(spec: &str) -> bool {
    spec.starts_with("WebhookTest ")
}

/// Landscaper's admission webhook server (`landscaper-webhooks-server` of the Landscaper with
/// deployer lifecycle management, c1317824f: `$REAL_LANDSCAPER_DLM_BIN`), as Landscaper's own
/// chart runs it, but reached by URL: it generates its CA and serving certificate, keeps them in
/// a Secret in `ls-system`, and registers the ValidatingWebhookConfiguration
/// `landscaper-validation-webhook` with `https://localhost:<port>` (its certificate names 127.0.0.1 only as a DNS name, which TLS does not match against an IP address), which the embedded API
/// server calls for every Installation, Execution, DeployItem and Target write — our host's
/// included. `None` (with a SKIP line) without the binary.
fn start_webhook_server(dir: &Path, kubeconfig: &Path) -> Option<Process> {
    let binary = real_landscaper::dlm::bin_dir().join("landscaper-webhooks-server");
    if !binary.is_file() {
        eprintln!(
            "SKIP the WebhookTest specs: {} is not there (set REAL_LANDSCAPER_DLM_BIN; docs/real-landscaper.md)",
            binary.display()
        );
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Its certificates go to $TMPDIR/k8s-webhook-server/serving-certs: one of this run's own.
    let tmp = dir.join("webhooks-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let child = Command::new(binary)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--port", &port.to_string()])
        .arg(format!("--webhook-url=https://localhost:{port}"))
        .args(["--cert-ns", "ls-system"])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("webhooks.log")).unwrap())
        .spawn()
        .expect("landscaper-webhooks-server");
    let server = Process(child);
    // Ready once it answers and its configuration is registered.
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let registered = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "get",
                "validatingwebhookconfiguration",
                "landscaper-validation-webhook",
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        let serving = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
        if registered && serving {
            return Some(server);
        }
        assert!(
            Instant::now() < deadline,
            "the webhook server did not register within 60 s:\n{}",
            std::fs::read_to_string(dir.join("webhooks.log")).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn needs_registry(spec: &str) -> bool {
    spec.starts_with("RegistryTest ") || spec.contains(" private registry ")
}

/// The private registry the `RegistryTest` and `HelmDeployerTests private registry` specs push
/// to and read from, as Landscaper's own CI sets it up (`hack/int-test-helper`): Debian's
/// `docker-registry` on this machine, HTTPS with a certificate of a CA this test makes, basic
/// authentication. It listens on the machine's own (non-loopback) address, not on 127.0.0.1:
/// the specs push with Helm's registry client, whose resolver (containerd's) speaks plain HTTP
/// to every loopback registry and meets a TLS port with `400 Bad Request`. `--registry-config` names a Docker config with its credentials, and
/// `cacerts.crt` beside it holds the CA (the specs' own clients read it there). The real
/// Landscaper reads the registry with those credentials (`registry.oci.configFiles`) and trusts
/// the CA through its trust store (`SSL_CERT_FILE`: the machine's bundle and the CA), as
/// Landscaper's chart mounts `truststore.secrets`. Our host gets neither: the specs hand it the
/// credentials and the CA in the Context, per item.
struct PrivateRegistry {
    _registry: test_support::registry::Registry,
    /// `--registry-config`
    docker_config: PathBuf,
    /// What the real Landscaper needs: `LANDSCAPER_ARGS` (its configuration) and `SSL_CERT_FILE`.
    landscaper_env: Vec<(&'static str, String)>,
}

impl PrivateRegistry {
    fn start(dir: &Path, pickup_timeout: &str) -> Option<Self> {
        use base64::Engine as _;
        let Some(ip) = own_address() else {
            eprintln!(
                "SKIP the private registry specs: this machine has no non-loopback IPv4 address (hostname -I)"
            );
            return None;
        };
        let cert =
            embedded_apiserver::tls::ServingCert::generate(std::slice::from_ref(&ip)).unwrap();
        let (user, password) = ("landscaper", "integration");
        let registry = test_support::registry::start_registry_tls_on(&ip, user, password, &cert)?;
        let files = dir.join("registry");
        std::fs::create_dir_all(&files).unwrap();
        let docker_config = files.join("docker.config");
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        std::fs::write(
            &docker_config,
            // `username`/`password` as well: the framework decodes the file with plain
            // `json.Unmarshal`, which leaves `auth` undecoded, and builds the spec's OCM
            // credentials from those two fields.
            serde_json::json!({"auths": {&registry.addr: {
                "auth": auth, "username": user, "password": password}}})
            .to_string(),
        )
        .unwrap();
        std::fs::write(files.join("cacerts.crt"), cert.ca_pem()).unwrap();
        let machine =
            std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
        let trust = files.join("trust.pem");
        std::fs::write(&trust, format!("{machine}\n{}", cert.ca_pem())).unwrap();
        // The tool's configuration (`real-landscaper`), and the registry; given with a second
        // `--config`, which wins.
        let config = files.join("landscaper.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: config.landscaper.gardener.cloud/v1alpha1
kind: LandscaperConfiguration
controllers: {{installations: {{workers: 5}}, executions: {{workers: 5}}, deployItems: {{workers: 5}}}}
deployItemTimeouts: {{pickup: {pickup_timeout}}}
crdManagement: {{deployCrd: true, forceUpdate: true}}
lsDeployments:
  deploymentsNamespace: ls-system
  lsHealthCheckName: ls-hc
  lsController: landscaper
  lsMainController: landscaper-main
  webHook: landscaper-webhooks
registry:
  oci:
    allowPlainHttp: false
    insecureSkipVerify: false
    configFiles: [{}]
",
                docker_config.display()
            ),
        )
        .unwrap();
        Some(PrivateRegistry {
            _registry: registry,
            docker_config,
            landscaper_env: vec![
                ("LANDSCAPER_ARGS", format!("--config {}", config.display())),
                ("SSL_CERT_FILE", trust.display().to_string()),
            ],
        })
    }
}

/// The machine's first non-loopback IPv4 address (`hostname -I`).
fn own_address() -> Option<String> {
    let out = Command::new("hostname").arg("-I").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|a| a.parse::<std::net::Ipv4Addr>().ok())
        .find(|a| !a.is_loopback())
        .map(|a| a.to_string())
}

/// Escapes a spec text for `-ginkgo.focus` (Go's regexp syntax).
fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The spec reports of a ginkgo JSON report: full text -> (state, failure message).
fn outcomes(report: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for suite in report.as_array().into_iter().flatten() {
        for spec in suite["SpecReports"].as_array().into_iter().flatten() {
            if spec["LeafNodeType"] != "It" {
                continue;
            }
            let mut parts: Vec<String> = spec["ContainerHierarchyTexts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect();
            parts.push(spec["LeafNodeText"].as_str().unwrap_or("").to_string());
            let failure = spec["Failure"]["Message"]
                .as_str()
                .unwrap_or("")
                .to_string();
            out.push((
                parts.join(" "),
                spec["State"].as_str().unwrap_or("").to_string(),
                failure,
            ));
        }
    }
    out
}

#[test]
fn landscapers_own_integration_tests_pass_against_our_host_as_the_docs_table_says() {
    if test_support::backend() == test_support::Backend::Real {
        eprintln!(
            "SKIP on the real API server: this Landscaper's status writes carry JSON nulls kube-apiserver 1.20 refuses"
        );
        return;
    }
    let Some(suite) = real_landscaper::built("integration.test") else {
        return;
    };
    let text = std::fs::read_to_string(docs_table()).expect("docs table");
    let rows = rows(&text);
    let to_run: Vec<&Row> = rows
        .iter()
        .filter(|r| r.expect != Expect::NotApplicable)
        .collect();
    // `SPEC_FOCUS` (a substring of spec texts) narrows the run, e.g. to one spec while fixing it.
    let narrow = std::env::var("SPEC_FOCUS").ok();
    let to_run: Vec<&Row> = to_run
        .into_iter()
        .filter(|r| narrow.as_ref().is_none_or(|f| r.spec.contains(f.as_str())))
        .collect();
    assert!(!to_run.is_empty());

    let dir = tempfile::Builder::new()
        .prefix("landscaper-suite-")
        .tempdir()
        .unwrap();
    let pickup_timeout = "10s";
    let registry = match to_run.iter().any(|r| needs_registry(&r.spec)) {
        true => PrivateRegistry::start(dir.path(), pickup_timeout),
        false => None,
    };
    let to_run: Vec<&Row> = match &registry {
        Some(_) => to_run,
        // docker-registry is missing (said SKIP): the registry specs cannot be registered.
        None => to_run
            .into_iter()
            .filter(|r| !needs_registry(&r.spec))
            .collect(),
    };
    let (_host, _url) = start_host(dir.path());
    let kubeconfig = dir.path().join("kubeconfig");
    let _landscaper = RealLandscaper::start_with_env(
        &kubeconfig,
        pickup_timeout,
        registry
            .as_ref()
            .map(|r| r.landscaper_env.as_slice())
            .unwrap_or_default(),
    );
    // (after Landscaper: its namespace and CRDs are there)
    let webhooks = match to_run.iter().any(|r| needs_webhook_server(&r.spec)) {
        true => start_webhook_server(dir.path(), &kubeconfig),
        false => None,
    };
    let to_run: Vec<&Row> = match &webhooks {
        Some(_) => to_run,
        None => to_run
            .into_iter()
            .filter(|r| !needs_webhook_server(&r.spec))
            .collect(),
    };

    let focus = to_run
        .iter()
        // ginkgo matches more than the spec text at the front (no `^`), the end is exact.
        .map(|r| format!("{}$", regex_escape(&r.spec)))
        .collect::<Vec<_>>()
        .join("|");
    let report = dir.path().join("report.json");
    let tree = suite_tree(&suite, dir.path()).join("test/integration");
    let started = Instant::now();
    let out = Command::new(&suite)
        .current_dir(&tree)
        .arg(format!("-ginkgo.focus={focus}"))
        .arg(format!("-ginkgo.json-report={}", report.display()))
        .args(["-ginkgo.v", "-ginkgo.timeout=60m"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "--ls-namespace",
            "ls-system",
            "--skip-waiting-for-system-components",
        ])
        .args(registry.iter().flat_map(|r| {
            [
                std::ffi::OsStr::new("--registry-config"),
                r.docker_config.as_os_str(),
            ]
        }))
        .stdout(std::fs::File::create(dir.path().join("suite.log")).unwrap())
        .stderr(Stdio::inherit())
        .status()
        .expect("integration.test");
    eprintln!(
        "suite: {} specs in {:.0?} (exit {out}); log {}",
        to_run.len(),
        started.elapsed(),
        dir.path().join("suite.log").display()
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap_or_else(|e| {
        panic!(
            "no ginkgo report ({e}); suite log:\n{}",
            std::fs::read_to_string(dir.path().join("suite.log")).unwrap_or_default()
        )
    }))
    .unwrap();
    let outcomes = outcomes(&report);

    let mut wrong = Vec::new();
    for row in &to_run {
        let Some((_, state, failure)) = outcomes.iter().find(|(t, _, _)| *t == row.spec) else {
            wrong.push(format!(
                "{}: not run (is the text in the table exact?)",
                row.spec
            ));
            continue;
        };
        match (&row.expect, state.as_str()) {
            (Expect::Passes, "passed") | (Expect::Fails, "failed") => {}
            (Expect::Passes, _) => wrong.push(format!("{}: {state}: {failure}", row.spec)),
            (Expect::Fails, "passed") => wrong.push(format!(
                "{}: passes now; mark it `passes` in docs/landscaper-integration-tests.md",
                row.spec
            )),
            (_, other) => wrong.push(format!("{}: {other}: {failure}", row.spec)),
        }
    }
    if !wrong.is_empty() {
        // Keep the logs of a failed run for a look.
        let kept = dir.keep();
        panic!(
            "{} of {} specs differ from the table (logs in {}):\n{}",
            wrong.len(),
            to_run.len(),
            kept.display(),
            wrong.join("\n\n")
        );
    }
}
