//! The plugin CLI: `inspect` (what a plugin is — from a file or an OCI reference — and whether
//! this host can load it, with the reason when it cannot), `run` (one call offline), `pull`,
//! `bench`.

use std::process::Command;

use deployer_host::oci;
use serde_json::Value;
use test_support::skip_on_real;

fn inspect(args: &[&str]) -> (bool, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
        .args(["plugin", "inspect", "--json"])
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), v)
}

#[test]
fn given_plugins_when_inspected_then_their_name_types_hooks_wit_and_digest_are_shown() {
    skip_on_real!("needs no API server");
    let mock = test_support::plugins_dir().join("mock.wasm");
    let (ok, v) = inspect(&[mock.to_str().unwrap()]);
    assert!(ok, "{v}");
    assert_eq!(v["loadable"], true);
    assert_eq!(v["name"], "mock");
    assert_eq!(
        v["deployItemTypes"],
        serde_json::json!(["landscaper.gardener.cloud/mock"])
    );
    assert_eq!(v["wit"], sdk_guest::WIT_VERSION);
    let bytes = std::fs::read(&mock).unwrap();
    assert_eq!(v["size"], bytes.len());
    assert_eq!(
        v["digest"],
        deployer_host::plugin_sources::trust::digest_of(&bytes)
    );
    assert!(
        v["exports"].as_array().unwrap().iter().any(|e| e
            .as_str()
            .unwrap()
            .starts_with("wasm-deployer:plugin/deployer@")),
        "{v}"
    );
    let hook = test_support::plugins_dir().join("continuous-reconcile.wasm");
    let (ok, v) = inspect(&[hook.to_str().unwrap()]);
    assert!(ok);
    assert_eq!(v["hookTypes"], serde_json::json!(["ShouldReconcile"]));
    assert_eq!(v["deployItemTypes"], serde_json::json!([]));
}

#[test]
fn given_something_that_is_not_a_component_when_inspected_then_it_says_why_it_cannot_load() {
    skip_on_real!("needs no API server");
    let dir = tempfile::tempdir().unwrap();
    // A core module, not a component.
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let (ok, v) = inspect(&[core.to_str().unwrap()]);
    assert!(!ok, "exit code 1");
    assert_eq!(v["loadable"], false);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("core WebAssembly module, not a component"),
        "{v}"
    );
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm at all").unwrap();
    let (ok, v) = inspect(&[junk.to_str().unwrap()]);
    assert!(!ok);
    assert_eq!(v["loadable"], false);
    assert!(
        v["error"].as_str().unwrap().contains("not WebAssembly"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_plugin_in_a_registry_when_inspected_by_reference_then_it_is_pulled_and_described()
{
    skip_on_real!("needs no API server");
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let bytes = std::fs::read(test_support::plugins_dir().join("mock.wasm")).unwrap();
    let reference = format!("{}/plugins/mock:inspect", registry.addr);
    let options = oci::RegistryOptions {
        plain_http: vec![registry.addr.clone()],
        ..Default::default()
    };
    oci::push(&reference, &bytes, "mock", &options)
        .await
        .unwrap();
    let r = reference.clone();
    let (ok, v) = tokio::task::spawn_blocking(move || inspect(&[&r, "--plain-http"]))
        .await
        .unwrap();
    assert!(ok, "{v}");
    assert_eq!(v["name"], "mock");
    assert_eq!(v["size"], bytes.len());
    // And `plugin pull` brings back the same bytes.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pulled.wasm");
    let pulled = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
        .args(["plugin", "pull", &reference, "--plain-http", "-o"])
        .arg(&out)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        pulled.status.success(),
        "{}",
        String::from_utf8_lossy(&pulled.stderr)
    );
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    assert_eq!(
        String::from_utf8_lossy(&pulled.stdout).trim(),
        deployer_host::plugin_sources::trust::digest_of(&bytes)
    );
}

#[test]
fn given_an_item_when_a_plugin_is_benchmarked_then_calls_per_second_and_percentiles_are_printed() {
    skip_on_real!("needs no API server");
    let dir = tempfile::tempdir().unwrap();
    let item = dir.path().join("item.yaml");
    std::fs::write(
        &item,
        "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {name: m, namespace: default}\n\
         spec: {type: landscaper.gardener.cloud/mock, config: {apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration, phase: Succeeded}}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
        .args(["plugin", "bench"])
        .arg(test_support::plugins_dir().join("mock.wasm"))
        .arg("--item")
        .arg(&item)
        .args(["--calls", "200"])
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("200 reconcile calls (0 returned an error)"),
        "{text}"
    );
    for line in ["calls/s: ", "p50: ", "p99: "] {
        assert!(text.contains(line), "{text}");
    }
}

fn run_plugin(plugin: &str, files: &[(&str, &str)], extra: &[&str]) -> (bool, Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_deployer-host"));
    cmd.args(["plugin", "run"])
        .arg(test_support::plugins_dir().join(plugin))
        .env("RUST_LOG", "error");
    for (flag, yaml) in files {
        let path = dir.path().join(format!("{flag}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        cmd.arg(format!("--{flag}")).arg(path);
    }
    let out = cmd.args(extra).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.success(), v)
}

#[test]
fn given_an_item_file_when_a_plugin_runs_offline_then_its_response_errors_and_host_calls_are_printed()
 {
    skip_on_real!("needs no API server");
    let mock = |config: &str| {
        format!(
            "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {{name: m, namespace: default}}\n\
             spec:\n  type: landscaper.gardener.cloud/mock\n  config: {{apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1, kind: ProviderConfiguration, {config}}}\n"
        )
    };
    let (ok, v) = run_plugin(
        "mock.wasm",
        &[("item", &mock("phase: Succeeded, export: {a: 1}"))],
        &[],
    );
    assert!(ok, "{v}");
    assert_eq!(v["response"]["phase"], "Succeeded");
    assert_eq!(v["response"]["exports"]["a"], 1);
    // A broken config: the plugin's error, with Landscaper's code, and exit 1.
    let (ok, v) = run_plugin(
        "mock.wasm",
        &[("item", &mock("phase: [not, a, phase]"))],
        &[],
    );
    assert!(!ok);
    assert!(
        v["error"]["codes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "ERR_CONFIGURATION_PROBLEM"),
        "{v}"
    );
    // The manifest deployer with a Target: its Kubernetes calls are recorded, none made.
    let item = "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {name: mf, namespace: default}\n\
        spec:\n  type: landscaper.gardener.cloud/kubernetes-manifest\n  target: {name: t, namespace: default}\n  config:\n    \
        apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2\n    kind: ProviderConfiguration\n    manifests:\n    - policy: manage\n      \
        manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}, data: {k: v}}\n";
    let target = "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: Target\nmetadata: {name: t, namespace: default}\n\
        spec: {type: landscaper.gardener.cloud/kubernetes-cluster, config: {kubeconfig: \"apiVersion: v1\\nkind: Config\\n\"}}\n";
    let (ok, v) = run_plugin("manifest.wasm", &[("item", item), ("target", target)], &[]);
    assert!(!ok, "no cluster offline: {v}");
    let calls = v["hostCalls"].as_array().unwrap();
    assert!(
        calls.iter().any(|c| c["kind"] == "kubernetes"),
        "the manifest deployer's Kubernetes call is recorded: {v}"
    );
    assert!(calls.iter().any(|c| c["kind"] == "checkpoint"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_cluster_when_a_run_is_recorded_then_it_replays_offline_and_a_changed_call_is_refused()
 {
    skip_on_real!("the recording needs a server this test starts itself");
    let server = embedded_apiserver::ApiServer::new(Default::default()).unwrap();
    let serving = server.serve_on_loopback().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, serving.kubeconfig()).unwrap();
    let item = |cm: &str| {
        format!(
            "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {{name: mf, namespace: default}}\n\
             spec:\n  type: landscaper.gardener.cloud/kubernetes-manifest\n  config:\n    \
             apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2\n    kind: ProviderConfiguration\n    manifests:\n    - policy: manage\n      \
             manifest: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {cm}, namespace: default}}, data: {{k: v}}}}\n"
        )
    };
    let recording = dir.path().join("recording.json");
    let run = |item: String, extra: Vec<String>| async move {
        tokio::task::spawn_blocking(move || {
            run_plugin(
                "manifest.wasm",
                &[("item", &item)],
                &extra.iter().map(String::as_str).collect::<Vec<_>>(),
            )
        })
        .await
        .unwrap()
    };

    // Live, recorded: the ConfigMap really exists afterwards.
    let (ok, live) = run(
        item("recorded"),
        vec![
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "--record".into(),
            recording.display().to_string(),
        ],
    )
    .await;
    assert!(ok, "{live}");
    assert_eq!(live["response"]["phase"], "Succeeded", "{live}");
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(server.client(), "default");
    assert_eq!(
        cms.get("recorded").await.unwrap().data.unwrap()["k"],
        "v",
        "the live run applied the manifest"
    );
    let exchanges: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    assert!(!exchanges.is_empty(), "calls were recorded");
    drop(serving);

    // Offline, replayed: the same response without a server.
    let (ok, replayed) = run(
        item("recorded"),
        vec!["--replay".into(), recording.display().to_string()],
    )
    .await;
    assert!(ok, "{replayed}");
    assert_eq!(replayed["response"], live["response"]);
    assert_eq!(replayed["hostCalls"], live["hostCalls"]);

    // A plugin (or item) that now calls something else is told where it departs from the recording.
    let (ok, changed) = run(
        item("other"),
        vec!["--replay".into(), recording.display().to_string()],
    )
    .await;
    assert!(!ok, "{changed}");
    let diverged = changed["replayDiverged"].as_str().unwrap_or_default();
    // (the first call that departs: the create of the other ConfigMap, where the recording
    // has the create of `recorded`)
    assert!(
        diverged.contains("\\\"name\\\":\\\"other\\\"")
            && diverged.contains("where the recording has")
            && diverged.contains("\\\"name\\\":\\\"recorded\\\""),
        "{changed}"
    );
}

#[test]
fn given_a_plugin_when_the_conformance_suite_runs_then_a_good_plugin_passes_and_a_broken_item_fails()
 {
    skip_on_real!("needs no API server");
    let dir = tempfile::tempdir().unwrap();
    let suite = |item: &str| {
        let path = dir.path().join("item.yaml");
        std::fs::write(&path, item).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
            .args(["plugin", "test"])
            .arg(test_support::plugins_dir().join("manifest.wasm"))
            .arg("--item")
            .arg(&path)
            .arg("--json")
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        let checks: Vec<Value> = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let outcome = |name: &str| {
            checks
                .iter()
                .find(|c| c["name"] == name)
                .map(|c| c["outcome"].as_str().unwrap().to_string())
                .unwrap_or_default()
        };
        (
            out.status.success(),
            [
                "describe-valid",
                "describe-stable",
                "reconcile",
                "reconcile-again",
                "delete",
                "delete-again",
                "cleanup",
                "deadline",
                "no-ambient-io",
            ]
            .map(outcome),
            checks,
        )
    };
    let manifest = |manifests: &str| {
        format!(
            "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {{name: mf, namespace: default}}\n\
             spec:\n  type: landscaper.gardener.cloud/kubernetes-manifest\n  config:\n    \
             apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2\n    kind: ProviderConfiguration\n    manifests: {manifests}\n"
        )
    };
    // The manifest deployer with a ConfigMap: every check passes, delete removes what it made.
    let (ok, outcomes, checks) = suite(&manifest(
        "[{policy: manage, manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}, data: {k: v}}}]",
    ));
    assert!(ok, "{checks:#?}");
    assert!(outcomes.iter().all(|o| o == "pass"), "{checks:#?}");
    assert!(
        checks
            .iter()
            .filter(|c| c["name"].as_str().unwrap().starts_with("bad-config"))
            .all(|c| c["outcome"] == "pass"),
        "{checks:#?}"
    );
    // An item the plugin cannot reconcile: the suite says which check failed, and exits 1.
    let (ok, outcomes, checks) =
        suite(&manifest("[{policy: manage, manifest: {kind: ConfigMap}}]"));
    assert!(!ok, "{checks:#?}");
    assert_eq!(outcomes[2], "fail", "reconcile: {checks:#?}");
}

#[test]
fn given_a_hook_plugin_when_run_with_a_hook_type_then_its_answer_is_printed() {
    skip_on_real!("needs no API server");
    let hook = test_support::plugins_dir().join("../polyglot-plugins/rust/rust-hold-hook.wasm");
    let item = |annotations: &str| {
        format!(
            "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\n\
             metadata: {{name: h, namespace: default, annotations: {{{annotations}}}}}\n\
             spec: {{type: example.dev/x}}\n"
        )
    };
    let run = |annotations: &str, op: &str| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("item.yaml");
        std::fs::write(&path, item(annotations)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
            .args(["plugin", "run"])
            .arg(&hook)
            .arg("--item")
            .arg(&path)
            .args(["--op", op])
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        (
            out.status.success(),
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, held, _) = run("examples.wasm-deployer.dev/hold: 'true'", "BeforeReconcile");
    assert!(ok, "{held}");
    assert_eq!(held["plugin"], "rust-hold-hook");
    assert_eq!(held["hookResult"]["abortReconcile"], true, "{held}");
    assert_eq!(held["hookResult"]["requeue"], false, "{held}");
    let (ok, free, _) = run("", "BeforeReconcile");
    assert!(ok, "{free}");
    assert!(free["hookResult"].is_null(), "no opinion: {free}");
    // Not a hook type and not reconcile/delete: the CLI says what --op takes.
    let (ok, _, err) = run("", "Reconcile");
    assert!(!ok);
    assert!(err.contains("a hook type"), "{err}");
}

/// Given an older Go first in line (Debian's Go 1.19 at `/usr/bin/go`, here a stand-in that
/// answers `go version` as it does), when a Go plugin made by `plugin new` is built, then the
/// build stops before compiling and says which Go it found, its version, the version Go plugins
/// need and how to point at another — not Go's own `-buildmode=c-shared not supported`.
#[test]
fn given_an_older_go_when_a_go_plugin_is_built_then_it_names_that_go_and_the_version_needed() {
    skip_on_real!("needs no API server");
    let work = tempfile::tempdir().unwrap();
    let old_go = work.path().join("go");
    std::fs::write(
        &old_go,
        "#!/bin/sh\necho 'go version go1.19.8 linux/amd64'\n[ \"$1\" = version ] || exit 2\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&old_go, std::fs::Permissions::from_mode(0o755)).unwrap();
    let project = work.path().join("my-go-plugin");
    let host = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
            .args(args)
            .env("GO", &old_go)
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let dir = project.display().to_string();
    let (ok, err) = host(&[
        "plugin",
        "new",
        "--lang",
        "go",
        "my-go-plugin",
        "--dir",
        &dir,
    ]);
    assert!(ok, "plugin new: {err}");

    let (ok, err) = host(&["plugin", "build", &dir]);

    assert!(!ok, "an old Go must not build: {err}");
    for said in [
        old_go.display().to_string().as_str(),
        "(from $GO) is Go 1.19.8",
        "need Go 1.24 or newer",
        "GO=",
    ] {
        assert!(err.contains(said), "{said:?} missing in: {err}");
    }
    assert!(!project.join("gen/core.wasm").exists());
}
