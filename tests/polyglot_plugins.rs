//! Plugins written in Rust, Python, JavaScript, C and Go, built from source (`plugins/<lang>/build.sh`,
//! and `plugins/rust-*` by `cargo xtask build-plugins`, into `target/polyglot-plugins/<lang>/`)
//! and run by the host. Each language has the same two examples, so one set of stories checks all:
//! `<lang>-echo` (a deployer: applies a ConfigMap through the Kubernetes capability, exports the
//! message) and `<lang>-hold-hook` (a `BeforeReconcile` hook holding annotated items). And for
//! every language, Rust included, the first thing a new author runs: `plugin new` -> `plugin
//! build` -> `plugin test` passes every conformance check.
//!
//! Locally a language whose toolchain is missing is skipped with a message; under `CI=true` a
//! missing build is a failure (`.ci/run` installs every toolchain).

use std::path::PathBuf;
use std::time::Duration;

use deployer_host::config::{HookRegistration, HostConfig};
use deployer_host::landscaper::{Phase, codes};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use test_support::skip_on_real;
use test_support::{Harness, Options};

/// The built plugins of `lang`, or `None` (skip) when they were not built outside CI.
fn built(lang: &str) -> Option<PathBuf> {
    if lang == "rust" {
        // Built with the host's own plugins: never skipped.
        let dir = test_support::plugins_dir().join("../polyglot-plugins/rust");
        assert!(
            dir.join("rust-echo.wasm").is_file(),
            "run `cargo xtask build-plugins`"
        );
        return Some(dir);
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/polyglot-plugins")
        .join(lang);
    let files = [
        format!("{lang}-echo.wasm"),
        format!("{lang}-hold-hook.wasm"),
    ];
    if files.iter().all(|f| dir.join(f).is_file()) {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{lang} plugins missing in {} (CI=true): `cargo xtask build-polyglot` builds them",
        dir.display()
    );
    eprintln!(
        "skipped: no {lang} plugins in {} (run `cargo xtask build-polyglot`)",
        dir.display()
    );
    None
}

async fn harness(dir: PathBuf, hooks: Option<Vec<HookRegistration>>) -> Harness {
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        hooks,
        ..HostConfig::default()
    };
    config.plugins.dir = Some(dir);
    Harness::start_with(Options {
        config,
        ..Options::default()
    })
    .await
}

/// An echo DeployItem for `lang` in `default`, on the harness' `default` Target.
fn echo_item(lang: &str, name: &str, config: serde_json::Value) -> String {
    let mut c =
        json!({"apiVersion": "examples.wasm-deployer.dev/v1", "kind": "ProviderConfiguration"});
    c.as_object_mut()
        .unwrap()
        .extend(config.as_object().unwrap().clone());
    serde_json::to_string(&json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "type": format!("examples.wasm-deployer.dev/echo-{lang}"),
            "target": {"name": "default", "namespace": "default"},
            "config": c,
        }
    }))
    .unwrap()
}

async fn given_a_valid_config_then_the_configmap_is_applied_exported_and_deleted(lang: &str) {
    let Some(dir) = built(lang) else { return };
    let h = harness(dir, None).await;
    let name = format!("{lang}-hello");
    h.create_item(&echo_item(
        lang,
        &name,
        json!({"message": "hello from a test"}),
    ))
    .await;

    let item = h.wait_finished("default", &name).await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Succeeded, "{lang}: {:?}", s.last_error);
    let provider_status = serde_json::to_value(&s.provider_status).unwrap();
    assert_eq!(
        provider_status["configMap"],
        json!(format!("{name}-echo")),
        "{lang}: providerStatus {provider_status}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let cm = config_maps.get(&format!("{name}-echo")).await.unwrap();
    assert_eq!(
        cm.data.unwrap()["message"],
        "hello from a test",
        "{lang}: the ConfigMap the plugin applied"
    );
    let export = s.export_ref.clone().expect("status.exportRef");
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "default");
    let exported = &secrets.get(&export.name).await.unwrap().data.unwrap()["config"].0;
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(exported).unwrap(),
        json!({"message": "hello from a test"}),
        "{lang}: exports"
    );

    h.items("default")
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("default", &name, Duration::from_secs(30)).await;
    assert!(
        config_maps
            .get_opt(&format!("{name}-echo"))
            .await
            .unwrap()
            .is_none(),
        "{lang}: delete removed the ConfigMap"
    );
}

async fn given_a_bad_config_or_a_crash_then_the_item_fails_with_the_right_code(lang: &str) {
    let Some(dir) = built(lang) else { return };
    let h = harness(dir, None).await;
    let bad = format!("{lang}-bad");
    let crash = format!("{lang}-crash");
    h.create_item(&echo_item(lang, &bad, json!({"msg": "typo"})))
        .await;
    h.create_item(&echo_item(
        lang,
        &crash,
        json!({"message": "x", "crash": true}),
    ))
    .await;

    // A bad config names the field; an uncaught exception's text reaches lastError.
    for (item, code, text) in [
        (&bad, codes::CONFIGURATION_PROBLEM, "message"),
        (&crash, codes::INTERNAL_PROBLEM, "crash requested"),
    ] {
        let s = h.wait_finished("default", item).await.status();
        assert_eq!(s.phase, Phase::Failed, "{lang} {item}");
        let err = s.last_error.expect("lastError");
        assert_eq!(err.codes, vec![code.to_string()], "{lang}: {}", err.message);
        assert!(err.message.contains(text), "{lang} {item}: {}", err.message);
    }
}

async fn given_the_hold_hook_then_an_annotated_item_waits_until_the_annotation_goes(lang: &str) {
    let Some(dir) = built(lang) else { return };
    let hook = format!("{lang}-hold-hook");
    let h = harness(
        dir,
        Some(vec![HookRegistration {
            plugin: hook,
            deploy_item_types: vec!["*".into()],
            hook_types: Vec::new(),
        }]),
    )
    .await;
    let held = format!("{lang}-held");
    let free = format!("{lang}-free");
    let mut item: serde_json::Value =
        serde_json::from_str(&echo_item(lang, &held, json!({"message": "wait"}))).unwrap();
    item["metadata"]["annotations"] = json!({"examples.wasm-deployer.dev/hold": "true"});
    h.create_item(&item.to_string()).await;
    h.create_item(&echo_item(lang, &free, json!({"message": "go"})))
        .await;

    // The unannotated item goes through the same hook and finishes; the held one does not.
    let s = h.wait_finished("default", &free).await.status();
    assert_eq!(s.phase, Phase::Succeeded, "{lang}: {:?}", s.last_error);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = h.items("default").get(&held).await.unwrap().status();
    assert!(
        !s.job_id.is_empty() && s.job_id != s.job_id_finished,
        "{lang}: the held item's job stays open: {s:?}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    assert!(
        config_maps
            .get_opt(&format!("{held}-echo"))
            .await
            .unwrap()
            .is_none(),
        "{lang}: the held item was not reconciled"
    );

    let release = json!({"metadata": {"annotations": {"examples.wasm-deployer.dev/hold": null}}});
    h.items("default")
        .patch(&held, &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    let s = h.wait_finished("default", &held).await.status();
    assert_eq!(s.phase, Phase::Succeeded, "{lang}: {:?}", s.last_error);
}

/// The toolchain environment for `plugin build` of `lang`, or `None` (skip) outside CI when the
/// toolchain `cargo xtask build-polyglot` installs is missing.
fn toolchain_env(lang: &str) -> Option<Vec<(&'static str, PathBuf)>> {
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
    let tc = target.join("guest-toolchains");
    let (needed, env): (PathBuf, Vec<(&'static str, PathBuf)>) = match lang {
        "rust" => (
            target.clone(),
            vec![("CARGO_TARGET_DIR", target.join("scaffold-rust"))],
        ),
        "python" => {
            let cpy = tc.join("python-venv/bin/componentize-py");
            (cpy.clone(), vec![("COMPONENTIZE_PY", cpy)])
        }
        "js" => (
            tc.join("js/node_modules/@bytecodealliance/componentize-js"),
            vec![("WASM_DEPLOYER_JS_TOOLCHAIN", tc.join("js"))],
        ),
        "c" => {
            let tool = target.join("debug/c-componentize");
            (tool.clone(), vec![("C_COMPONENTIZE", tool)])
        }
        "go" => {
            let go = tc.join("go-venv/bin/go");
            let tool = target.join("debug/go-componentize");
            let needed = if go.exists() {
                tool.clone()
            } else {
                go.clone()
            };
            (
                needed,
                vec![
                    ("GO", go),
                    ("GO_COMPONENTIZE", tool),
                    ("GOCACHE", tc.join("go-cache")),
                    ("GOPATH", tc.join("gopath")),
                ],
            )
        }
        other => panic!("no toolchain for {other}"),
    };
    if needed.exists() {
        return Some(env);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{lang} toolchain missing at {} (CI=true)",
        needed.display()
    );
    eprintln!("skipped: no {lang} toolchain at {}", needed.display());
    None
}

/// `plugin new --lang L` -> `plugin build` -> `plugin test --item item.yaml`: what a new plugin
/// author runs first, in every language, with a copy of the binary outside this checkout.
fn given_a_new_project_when_built_then_it_passes_the_conformance_suite(lang: &str) {
    new_project_passes_the_conformance_suite(lang, "echo");
}

/// The same for the `http-api` template, `plugin test --target target.yaml`: the suite plays the
/// Target's API on loopback and checks the plugin PUT its item's body under the Target's URL and
/// DELETEd it, each request with the credential the host added.
fn given_a_new_http_api_project_when_built_then_the_api_received_its_put_and_delete(lang: &str) {
    new_project_passes_the_conformance_suite(lang, "http-api");
}

fn new_project_passes_the_conformance_suite(lang: &str, template: &str) {
    skip_on_real!("needs no API server");
    let Some(env) = toolchain_env(lang) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    // The binary as a plugin author has it: a copy, outside this checkout.
    let host = work.path().join("bin/deployer-host");
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_deployer-host"), &host).unwrap();
    // Distinct names: the Rust projects share one cargo target directory.
    let name = match template {
        "http-api" => format!("my-{lang}-api"),
        _ => format!("my-{lang}-plugin"),
    };
    let dir = work.path().join(&name);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&host)
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let dir_arg = dir.display().to_string();
    let (ok, out, err) = run(&[
        "plugin",
        "new",
        "--lang",
        lang,
        &name,
        "--dir",
        &dir_arg,
        "--template",
        template,
    ]);
    assert!(ok, "{lang} new: {out}{err}");
    let entries = || -> std::collections::BTreeSet<String> {
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let sources = entries();
    // Nothing in the project points back into this checkout: it builds with the binary and the
    // language's toolchain alone.
    let checkout = test_support::workspace().canonicalize().unwrap();
    let checkout = checkout.display().to_string();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                assert!(
                    !text.contains(&checkout),
                    "{lang}: {} names the checkout ({checkout})",
                    path.display()
                );
            }
        }
    }
    let (ok, out, err) = run(&["plugin", "build", &dir_arg]);
    assert!(ok, "{lang} build: {out}{err}");
    let wasm = out.trim().to_string();
    assert!(wasm.ends_with(&format!("{name}.wasm")), "{out}");
    // What the build makes on the way (bindings, the core module) stays under target/, as
    // cargo keeps Rust's: beside the sources there is only the component, and what a language's
    // own tool always writes there (cargo's lock file, Python's bytecode cache).
    let made: Vec<String> = entries().difference(&sources).cloned().collect();
    let own = match lang {
        "rust" => Some("Cargo.lock"),
        "python" => Some("__pycache__"),
        _ => None,
    };
    for entry in &made {
        assert!(
            entry == "target" || *entry == format!("{name}.wasm") || Some(entry.as_str()) == own,
            "{lang}: the build left {entry:?} beside the sources ({made:?})"
        );
    }
    let item = dir.join("item.yaml").display().to_string();
    let target = dir.join("target.yaml").display().to_string();
    let mut args = vec!["plugin", "test", &wasm, "--item", &item, "--json"];
    if template == "http-api" {
        args.extend(["--target", &target]);
    }
    let (ok, out, err) = run(&args);
    let checks: Vec<serde_json::Value> =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{lang}: {e}: {out}{err}"));
    assert!(ok, "{lang}: {checks:#?}");
    for c in &checks {
        assert_eq!(c["outcome"], "pass", "{lang}: {c}");
    }
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    for expected in ["reconcile", "delete-again", "cleanup", "no-ambient-io"] {
        assert!(names.contains(&expected), "{lang}: {names:?}");
    }
    if template == "http-api" {
        for expected in [
            "http-requests",
            "http-credentials",
            "http-api-put",
            "http-api-delete",
        ] {
            assert!(names.contains(&expected), "{lang}: {names:?}");
        }
        let plugins = work.path().join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::copy(&wasm, plugins.join(format!("{name}.wasm"))).unwrap();
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(the_host_serves_the_http_api_plugin(lang, &name, plugins));
    }
}

/// The http-api plugin a new user built, served by the host: its item deploys, updates and
/// deletes an object of a REST API with a token the plugin never sees.
async fn the_host_serves_the_http_api_plugin(lang: &str, name: &str, plugins: PathBuf) {
    use test_support::http_api::{ApiOptions, ApiServer};
    let api = ApiServer::start(ApiOptions::bearer("never-seen-by-the-plugin")).await;
    let h = harness(plugins, None).await;
    for v in [
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "api-token"},
               "stringData": {"token": "never-seen-by-the-plugin"}}),
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
               "metadata": {"name": "api"},
               "spec": {"type": "wasm-deployer.dev/http-api", "config": {"url": api.url(),
                        "auth": {"bearer": {"secretRef": {"name": "api-token", "key": "token"}}}}}}),
    ] {
        let ar = match v["kind"].as_str() {
            Some("Secret") => kube::discovery::ApiResource::erase::<Secret>(&()),
            _ => kube::discovery::ApiResource::erase::<deployer_host::landscaper::Target>(&()),
        };
        let objects: Api<kube::api::DynamicObject> =
            Api::namespaced_with(h.client.clone(), "default", &ar);
        objects
            .create(&Default::default(), &serde_json::from_value(v).unwrap())
            .await
            .unwrap();
    }
    let item = json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem", "metadata": {"name": "thing", "namespace": "default"},
        "spec": {"type": format!("example.dev/{name}"), "target": {"name": "api", "namespace": "default"},
                 "config": {"apiVersion": "example.dev/v1", "kind": "ProviderConfiguration",
                            "path": "things/thing", "body": {"replicas": 1}}}});
    h.create_item(&item.to_string()).await;
    let s = h
        .wait_for("default", "thing", Duration::from_secs(60), |i| {
            let s = i.status();
            !s.job_id.is_empty() && s.job_id == s.job_id_finished
        })
        .await
        .status();
    assert_eq!(s.phase, Phase::Succeeded, "{lang}: {:?}", s.last_error);
    assert_eq!(
        api.objects().get("things/thing"),
        Some(&json!({"replicas": 1})),
        "{lang}"
    );
    // Update: a new body is a new job, PUT again.
    let patch = json!({"spec": {"config": {"body": {"replicas": 2}}}});
    h.items("default")
        .patch("thing", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    h.wait_for("default", "thing", Duration::from_secs(60), |_| {
        api.objects().get("things/thing") == Some(&json!({"replicas": 2}))
    })
    .await;
    h.items("default")
        .delete("thing", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("default", "thing", Duration::from_secs(60))
        .await;
    assert!(api.objects().is_empty(), "{lang}: {:?}", api.objects());
    let requests = api.requests();
    for r in &requests {
        assert_eq!(
            r.headers.get("authorization").map(String::as_str),
            Some("Bearer never-seen-by-the-plugin"),
            "{lang}: {} {}",
            r.method,
            r.path_and_query
        );
    }
    assert!(
        requests.iter().any(|r| r.method == "DELETE"),
        "{lang}: {requests:?}"
    );
}

macro_rules! stories {
    ($($lang:ident),*) => {$(
        mod $lang {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn given_a_valid_config_then_the_configmap_is_applied_exported_and_deleted() {
                super::given_a_valid_config_then_the_configmap_is_applied_exported_and_deleted(
                    stringify!($lang),
                )
                .await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn given_a_bad_config_or_a_crash_then_the_item_fails_with_the_right_code() {
                super::given_a_bad_config_or_a_crash_then_the_item_fails_with_the_right_code(
                    stringify!($lang),
                )
                .await
            }

            #[test]
            fn given_a_new_project_when_built_then_it_passes_the_conformance_suite() {
                super::given_a_new_project_when_built_then_it_passes_the_conformance_suite(
                    stringify!($lang),
                )
            }

            #[test]
            fn given_a_new_http_api_project_when_built_then_the_api_received_its_put_and_delete() {
                super::given_a_new_http_api_project_when_built_then_the_api_received_its_put_and_delete(
                    stringify!($lang),
                )
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn given_the_hold_hook_then_an_annotated_item_waits_until_the_annotation_goes() {
                super::given_the_hold_hook_then_an_annotated_item_waits_until_the_annotation_goes(
                    stringify!($lang),
                )
                .await
            }
        }
    )*};
}

stories!(rust, python, js, c, go);

/// Builds a C plugin made by `plugin new`, changed by `edit` (project directory) first.
fn build_c_variant(
    work: &std::path::Path,
    name: &str,
    edit: impl FnOnce(&std::path::Path),
) -> PathBuf {
    let env = toolchain_env("c").expect("checked by the caller");
    let host = env!("CARGO_BIN_EXE_deployer-host");
    let dir = work.join(name);
    let out = std::process::Command::new(host)
        .args(["plugin", "new", "--lang", "c", name, "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    edit(&dir);
    let out = std::process::Command::new(host)
        .args(["plugin", "build"])
        .arg(&dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// What `plugin inspect` and `plugin test` say about `wasm` (exit status, stdout + stderr).
fn inspect_and_test(wasm: &std::path::Path) -> [(bool, String); 2] {
    ["inspect", "test"].map(|cmd| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_deployer-host"))
            .args(["plugin", cmd])
            .arg(wasm)
            .env("RUST_LOG", "error")
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_broken_plugins_when_inspected_tested_and_loaded_then_each_says_what_is_wrong() {
    skip_on_real!("needs no API server");
    if toolchain_env("c").is_none() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    // Built against a newer WIT (1.9.0) that has an interface this host lacks, and using it.
    let newer = build_c_variant(work.path(), "newer-wit", |dir| {
        for f in [
            "deployer.wit",
            "hooks.wit",
            "kubernetes.wit",
            "fetch.wit",
            "ocm.wit",
        ] {
            let p = dir.join("wit").join(f);
            let text = std::fs::read_to_string(&p)
                .unwrap()
                .replace("@1.5.0", "@1.9.0");
            std::fs::write(&p, text).unwrap();
        }
        let p = dir.join("wit/deployer.wit");
        let text = std::fs::read_to_string(&p).unwrap().replace(
            "    import secondary-targets;",
            "    import secondary-targets;\n    import telepathy;",
        ) + "\ninterface telepathy {\n    fetch: func(url: string) -> result<list<u8>, string>;\n}\n";
        std::fs::write(&p, text).unwrap();
        let p = dir.join("plugin.c");
        let text = std::fs::read_to_string(&p).unwrap().replace(
            "    bool crash, ok = false;\n",
            "    bool crash, ok = false;\n    if (inv->name[0] == '!') { wd_wit_string_t u = {0}; wd_wit_list_u8_t b; wd_wit_string_t e; (void)wasm_deployer_plugin_telepathy_fetch(&u, &b, &e); }\n",
        );
        std::fs::write(&p, text).unwrap();
    });
    // A describe that traps.
    let trapping = build_c_variant(work.path(), "trapping-describe", |dir| {
        let p = dir.join("plugin.c");
        let text = std::fs::read_to_string(&p).unwrap().replace(
            "WD_EXPORT_DEPLOYER(ECHO, ",
            "static const wd_deployer_info *trap_info(void) { __builtin_trap(); }\nWD_EXPORT_DEPLOYER((*trap_info()), ",
        );
        std::fs::write(&p, text).unwrap();
    });
    // A component for another world: a WASI command (exports wasi:cli/run).
    let command = work.path().join("command.wasm");
    let src = work.path().join("main.rs");
    std::fs::write(&src, "fn main() {}\n").unwrap();
    let out = std::process::Command::new("rustc")
        .args(["--target", "wasm32-wasip2", "-O", "-o"])
        .arg(&command)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let cases = [
        (
            &newer,
            "built against wasm-deployer:plugin@1.9.0, newer than this host's 1.5.0",
        ),
        (&trapping, "describe of"),
        (
            &command,
            "exports neither wasm-deployer:plugin/deployer nor",
        ),
    ];
    let runtime =
        plugin_runtime::PluginRuntime::new(plugin_runtime::RuntimeConfig::default()).unwrap();
    for (wasm, expected) in cases {
        for (ok, text) in inspect_and_test(wasm) {
            assert!(!ok, "{}: {text}", wasm.display());
            assert!(text.contains(expected), "{}: {text}", wasm.display());
        }
        // The host refuses it at load with the same words (and serves the other plugins).
        let bytes = std::fs::read(wasm).unwrap();
        let err = runtime
            .load_bytes(&wasm.display().to_string(), &bytes)
            .await
            .expect_err("refused");
        assert!(format!("{err:#}").contains(expected), "{err:#}");
    }
    let (_, text) = &inspect_and_test(&trapping)[0];
    assert!(text.contains("trapped"), "{text}");
}

/// Start-up with a 19 MB Python plugin compiling cold (seconds) beside the small mock: the host
/// serves the mock at once, and the Python plugin's type as soon as it has compiled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_large_plugin_compiling_cold_when_the_host_starts_then_the_others_serve_at_once() {
    use std::io::{BufRead, BufReader};
    skip_on_real!("starts its own dev API server");
    let Some(python) = built("python") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let plugins = work.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    for (from, name) in [
        (test_support::plugins_dir().join("mock.wasm"), "mock.wasm"),
        (python.join("python-echo.wasm"), "python-echo.wasm"),
    ] {
        std::fs::copy(from, plugins.join(name)).unwrap();
    }
    // A fresh compiled-code cache: the Python component really compiles.
    let config = work.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "plugins:\n  cacheDir: {}\n",
            work.path().join("cache").display()
        ),
    )
    .unwrap();
    let kubeconfig = work.path().join("kubeconfig");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_deployer-host"))
        .args(["dev", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .arg("--plugins")
        .arg(&plugins)
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _child = Kill(child);
    assert!(line.starts_with("ready "), "{line:?}");
    let client = test_support::client_for(&std::fs::read_to_string(&kubeconfig).unwrap()).await;
    let items: Api<deployer_host::landscaper::DeployItem> = Api::namespaced(client, "default");
    let create = |yaml: String| {
        let items = items.clone();
        async move {
            let item: deployer_host::landscaper::DeployItem = serde_json::from_str(&yaml)
                .or_else(|_| serde_yaml::from_str(&yaml))
                .unwrap();
            items.create(&Default::default(), &item).await.unwrap();
        }
    };
    create(echo_item("python", "late", json!({"message": "later"}))).await;
    create(test_support::mock_item("early")).await;
    let finished = |i: &deployer_host::landscaper::DeployItem| {
        let s = i.status();
        !s.job_id.is_empty() && s.job_id == s.job_id_finished
    };
    let started = std::time::Instant::now();
    loop {
        let early = items.get("early").await.unwrap();
        if finished(&early) {
            assert_eq!(early.status().phase, Phase::Succeeded);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "mock not served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !finished(&items.get("late").await.unwrap()),
        "the mock finished while the Python plugin was still compiling"
    );
    loop {
        let late = items.get("late").await.unwrap();
        if finished(&late) {
            assert_eq!(late.status().phase, Phase::Succeeded, "{:?}", late.status());
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the Python plugin never joined"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
