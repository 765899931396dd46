//! The progressing timeout (`spec.timeout`, counted from `transitionTimes.initTime`) fires at
//! checkpoints — the host's own before every plugin call and the ones a plugin reports through
//! the `progress` import — and ends the job `Failed` with `ERR_TIMEOUT`.

use deployer_host::contract::CheckpointMode;
use deployer_host::landscaper::{Phase, codes};
use test_support::{Harness, Options};

fn item(name: &str, ty: &str, config: &str, timeout: Option<&str>) -> String {
    let timeout = timeout
        .map(|t| format!("  timeout: {t}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  type: {ty}\n{timeout}  config:\n{config}"
    )
}

const MOCK_PROGRESSING: &str = "    apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1\n    kind: ProviderConfiguration\n    phase: Progressing\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_job_that_never_finishes_when_spec_timeout_passes_then_it_fails_with_err_timeout() {
    let h = Harness::start().await;
    h.create_item(&item(
        "slow",
        "landscaper.gardener.cloud/mock",
        MOCK_PROGRESSING,
        Some("1s"),
    ))
    .await;
    let s = h.wait_finished("default", "slow").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.reason, "ProgressingTimeout");
    assert_eq!(
        err.message,
        "timeout at: \"mock deployer: start reconcile\""
    );
    assert_eq!(err.codes, vec![codes::TIMEOUT.to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_checkpoint_test_hook_then_the_job_times_out_exactly_at_that_checkpoint() {
    let h = Harness::start_with(Options {
        checkpoint_mode: CheckpointMode::FailAt("mock deployer: start reconcile".into()),
        ..Options::default()
    })
    .await;
    h.create_item(&item(
        "hooked",
        "landscaper.gardener.cloud/mock",
        "    apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1\n    kind: ProviderConfiguration\n    phase: Succeeded\n",
        None,
    ))
    .await;
    let s = h.wait_finished("default", "hooked").await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(
        s.last_error.unwrap().message,
        "timeout at: \"mock deployer: start reconcile\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_plugin_reported_checkpoint_past_the_timeout_then_the_plugin_error_fails_the_job() {
    let h = Harness::start_with(Options {
        checkpoint_mode: CheckpointMode::FailAt("faulty: checkpoint".into()),
        test_plugins: true,
        ..Options::default()
    })
    .await;
    h.create_item(&item(
        "reported",
        "test.wasm-deployer.dev/faulty",
        "    apiVersion: faulty.test/v1\n    kind: ProviderConfiguration\n    action: checkpoint\n",
        None,
    ))
    .await;
    let s = h.wait_finished("default", "reported").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.message, "timeout at: \"faulty: checkpoint\"");
    assert!(err.codes.contains(&codes::TIMEOUT.to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_spec_timeout_none_then_there_is_no_progressing_timeout() {
    let h = Harness::start().await;
    h.create_item(&item(
        "forever",
        "landscaper.gardener.cloud/mock",
        MOCK_PROGRESSING,
        Some("none"),
    ))
    .await;
    let item = h
        .wait_for(
            "default",
            "forever",
            std::time::Duration::from_secs(10),
            |i| i.status().phase == Phase::Progressing,
        )
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let now = h.items("default").get("forever").await.unwrap().status();
    assert_eq!(
        now.phase,
        Phase::Progressing,
        "still running: {:?}",
        now.last_error
    );
    assert_ne!(now.job_id, now.job_id_finished);
    assert_eq!(item.status().job_id, now.job_id);
}
