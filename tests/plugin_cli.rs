//! `deployer-host plugin inspect`: what a plugin is — from a file or an OCI reference — and
//! whether this host can load it, with the reason when it cannot (exit code 1).

mod support;

use std::process::Command;

use deployer_host::plugin_sources::oci;
use serde_json::Value;

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
    let mock = support::plugins_dir().join("mock.wasm");
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
    let hook = support::plugins_dir().join("continuous-reconcile.wasm");
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
    let Some(registry) = support::registry::start_registry() else {
        return;
    };
    let bytes = std::fs::read(support::plugins_dir().join("mock.wasm")).unwrap();
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
}
