//! One deployer abstraction: native code compiled into the host (as the container deployer will
//! be) implements the same `DeployerPlugin` trait as a wasm component, and the contract drives
//! both the same way — pickup, checkpoints, final phase with `jobIDFinished`, exports, errors,
//! deletion with the finalizer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use deployer_host::landscaper::{Phase, codes};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};
use plugin_runtime::{
    DeployerError, DeployerPlugin, Description, HostServices, Invocation, Response,
};
use serde_json::json;
use test_support::{Harness, Options};

const TYPE: &str = "test.wasm-deployer.dev/native-echo";

/// A native deployer: async Rust in the host process. It checks a checkpoint, answers "call
/// again" once per job (so the contract's Progressing path runs), then exports its config's
/// `echo`; `fail: true` is a configuration problem.
#[derive(Default)]
struct NativeEcho {
    description: Description,
    deletes: AtomicUsize,
}

impl NativeEcho {
    fn new() -> Self {
        NativeEcho {
            description: Description {
                name: "native-echo".into(),
                version: "0.1.0".into(),
                deploy_item_types: vec![TYPE.into()],
                hook_types: vec![],
            },
            deletes: AtomicUsize::new(0),
        }
    }
}

#[async_trait::async_trait]
impl DeployerPlugin for NativeEcho {
    fn description(&self) -> &Description {
        &self.description
    }

    fn origin(&self) -> String {
        "native (test NativeEcho)".into()
    }

    async fn reconcile(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        host.checkpoint("native-echo: start")?;
        let config = inv.provider_config_present()?;
        if config["fail"] == json!(true) {
            return Err(DeployerError::configuration(
                "EchoRefused",
                "spec.config.fail is true",
            ));
        }
        if inv.current_phase() == Phase::Init {
            return Ok(Response::retry_after(Duration::from_millis(50)));
        }
        Ok(Response {
            exports: Some(json!({ "echo": config["echo"] })),
            ..Default::default()
        })
    }

    async fn delete(
        &self,
        _inv: Invocation,
        _host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        self.deletes.fetch_add(1, Ordering::Relaxed);
        Ok(Response::default())
    }
}

fn echo_item(name: &str, config: &str) -> String {
    format!(
        "apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {{name: {name}, namespace: default}}
spec:
  type: {TYPE}
  config: {config}
"
    )
}

async fn harness(native: Arc<NativeEcho>) -> Harness {
    Harness::start_with(Options {
        native_deployers: vec![native],
        ..Options::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_native_and_a_wasm_deployer_then_the_contract_finishes_both_the_same_way() {
    let native = Arc::new(NativeEcho::new());
    let h = harness(native.clone()).await;
    h.create_item(&echo_item(
        "echo",
        "{apiVersion: echo/v1, kind: Echo, echo: hello}",
    ))
    .await;
    h.create_item(&test_support::mock_item("wasm")).await;

    for name in ["echo", "wasm"] {
        let item = h.wait_finished("default", name).await;
        let s = item.status();
        assert_eq!(s.phase, Phase::Succeeded, "{name}: {s:?}");
        assert_eq!(s.job_id, s.job_id_finished, "{name}");
        assert!(
            item.has_finalizer(deployer_host::landscaper::FINALIZER),
            "{name}"
        );
    }
    // The native deployer's exports went into the host-written export Secret.
    let item = h.wait_finished("default", "echo").await;
    let export_ref = item.status().export_ref.expect("exportRef");
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "default");
    let secret = secrets.get(&export_ref.name).await.unwrap();
    let config = &secret.data.unwrap()["config"].0;
    let exported: serde_json::Value = serde_yaml::from_slice(config).unwrap();
    assert_eq!(exported["echo"], "hello");

    // Deletion calls the native delete, then the finalizer goes and the item is gone.
    h.items("default")
        .delete("echo", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("default", "echo", Duration::from_secs(20))
        .await;
    assert_eq!(native.deletes.load(Ordering::Relaxed), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_native_deployer_that_refuses_its_config_then_the_item_fails_with_its_code() {
    let h = harness(Arc::new(NativeEcho::new())).await;
    h.create_item(&echo_item(
        "refused",
        "{apiVersion: echo/v1, kind: Echo, fail: true}",
    ))
    .await;
    let s = h.wait_finished("default", "refused").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.expect("lastError");
    assert_eq!(
        (err.operation.as_str(), err.reason.as_str()),
        ("reconcile", "EchoRefused")
    );
    assert_eq!(err.codes, vec![codes::CONFIGURATION_PROBLEM.to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_native_deployer_claiming_a_wasm_plugins_type_then_loading_fails() {
    let mut clash = NativeEcho::new();
    clash.description.deploy_item_types = vec!["landscaper.gardener.cloud/mock".into()];
    let config = deployer_host::config::HostConfig {
        plugins: deployer_host::config::PluginsConfig {
            dir: Some(test_support::plugins_dir()),
            cache_dir: Some(test_support::plugins_dir().join("../plugin-cache")),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = deployer_host::plugins::load_all(
        &config,
        &[test_support::plugins_dir()],
        vec![Arc::new(clash)],
    )
    .await
    .expect_err("two deployers for one type are refused");
    assert!(
        err.to_string().contains("landscaper.gardener.cloud/mock"),
        "{err:#}"
    );
}
