//! Shared helpers for the runtime integration tests: locating the components built by
//! `cargo xtask build-plugins` and building DeployItems.

#![allow(dead_code)]

use plugin_runtime::{DeployerError, HostServices, Invocation, KubeOp};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// `<target-dir>/<sub>/<name>.wasm`, where target-dir is found from the test binary's path
/// (or `WASM_DEPLOYER_TARGET_DIR`).
pub fn component(sub: &str, name: &str) -> PathBuf {
    let file = format!("{name}.wasm");
    if let Ok(dir) = std::env::var("WASM_DEPLOYER_TARGET_DIR") {
        let p = PathBuf::from(dir).join(sub).join(&file);
        assert!(
            p.exists(),
            "{} is missing: run `cargo xtask build-plugins`",
            p.display()
        );
        return p;
    }
    let exe = std::env::current_exe().expect("current_exe");
    for dir in exe.ancestors().skip(1) {
        let p = dir.join(sub).join(&file);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{sub}/{file} not found in any parent of {}: run `cargo xtask build-plugins` first \
         (with the same CARGO_TARGET_DIR as the tests)",
        exe.display()
    );
}

pub fn plugin_dir() -> PathBuf {
    component("plugins", "mock").parent().unwrap().to_path_buf()
}

pub fn mock_wasm() -> Vec<u8> {
    std::fs::read(component("plugins", "mock")).unwrap()
}

pub fn faulty_wasm() -> Vec<u8> {
    std::fs::read(component("test-plugins", "faulty")).unwrap()
}

pub fn deploy_item(type_: &str, config: Value, phase: &str) -> Invocation {
    Invocation::for_item(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": "item", "namespace": "ns", "generation": 1},
        "spec": {"type": type_, "config": config},
        "status": {"phase": phase}
    }))
}

pub fn mock_item(extra: Value, phase: &str) -> Invocation {
    let mut config = json!({
        "apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
        "kind": "ProviderConfiguration"
    });
    config
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    deploy_item("landscaper.gardener.cloud/mock", config, phase)
}

pub fn faulty_item(action: &str) -> Invocation {
    deploy_item(
        "test.wasm-deployer.dev/faulty",
        json!({"apiVersion": "faulty.test/v1", "kind": "ProviderConfiguration", "action": action}),
        "Init",
    )
}

/// A HostServices fake: records Kubernetes operations, answers from a fixed script, and
/// times out checkpoints when `timed_out` is set.
#[derive(Default)]
pub struct FakeHost {
    pub ops: Mutex<Vec<KubeOp>>,
    pub checkpoints: Mutex<Vec<String>>,
    pub timed_out: bool,
}

#[async_trait::async_trait]
impl HostServices for FakeHost {
    fn checkpoint(&self, name: &str) -> Result<(), DeployerError> {
        self.checkpoints.lock().unwrap().push(name.to_string());
        if self.timed_out {
            Err(DeployerError::progressing_timeout(name))
        } else {
            Ok(())
        }
    }

    fn remaining(&self) -> Option<Duration> {
        (!self.timed_out).then(|| Duration::from_secs(42))
    }

    async fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.ops.lock().unwrap().push(op.clone());
        Ok(match op {
            KubeOp::Get(r) if r.name == "probe" => Some(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}).to_string(),
            ),
            KubeOp::Get(_) => None,
            KubeOp::Create { object_json } | KubeOp::Update { object_json } => Some(object_json),
            KubeOp::Delete(_) => None,
            // 0.2 (`cluster`) operations: not used by the runtime tests.
            KubeOp::List { .. } | KubeOp::Patch { .. } | KubeOp::Discover { .. } => None,
            KubeOp::ServerVersion | KubeOp::ApiVersions => None,
        })
    }
}

/// `cfg` with the on-disk cache in `<target-dir>/test-plugin-cache`, so the (slow, debug
/// build) Cranelift compile happens once per component across all tests.
pub fn shared_cache(cfg: plugin_runtime::RuntimeConfig) -> plugin_runtime::RuntimeConfig {
    plugin_runtime::RuntimeConfig {
        cache_dir: Some(plugin_dir().parent().unwrap().join("test-plugin-cache")),
        ..cfg
    }
}
