//! Extension hooks, as stories: each hook type runs at its point of the flow, and what it
//! answers changes the flow as `docs/hooks.md` says. The hooks are the test-only plugin
//! `test-hooks` (a real wasm component exporting `hooks` and `deployer`), scripted per item
//! through the annotation `hooks.test.wasm-deployer.dev/script`; the harness records every
//! call the host makes.

use std::time::Duration;

use deployer_host::config::{HookRegistration, HostConfig};
use deployer_host::contract::CheckpointMode;
use deployer_host::landscaper::{DeployItem, Phase};
use deployer_host::targetselector::{Requirement, TargetSelector};
use kube::api::{DeleteParams, Patch, PatchParams};
use plugin_runtime::{HookType, codes};
use serde_json::json;
use test_support::{Harness, Options};

use HookType::*;

const HOOKED: &str = "test.wasm-deployer.dev/hooked";

/// A DeployItem of the test-hooks deployer with the default Target, its hooks scripted.
fn hooked_item(name: &str, script: serde_json::Value) -> String {
    format!(
        "apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata:
  name: {name}
  namespace: default
  annotations:
    hooks.test.wasm-deployer.dev/script: '{script}'
spec:
  type: {HOOKED}
  target: {{name: default, namespace: default}}
  config:
    apiVersion: test.wasm-deployer.dev/v1
    kind: ProviderConfiguration
"
    )
}

fn hooks_for(types: &[&str]) -> HostConfig {
    HostConfig {
        requeue_interval: Some("200ms".into()),
        hooks: Some(vec![HookRegistration {
            plugin: "test-hooks".into(),
            deploy_item_types: types.iter().map(|t| t.to_string()).collect(),
            hook_types: Vec::new(),
        }]),
        ..HostConfig::default()
    }
}

async fn harness_with(config: HostConfig) -> Harness {
    Harness::start_with(Options {
        config,
        test_plugins: true,
        record_hooks: true,
        ..Options::default()
    })
    .await
}

async fn harness() -> Harness {
    harness_with(hooks_for(&[HOOKED])).await
}

fn calls_of_provider(item: &deployer_host::landscaper::DeployItem) -> u64 {
    item.status()
        .provider_status
        .as_ref()
        .and_then(|p| p["calls"].as_u64())
        .unwrap_or(0)
}

/// Waits until the host has called `hook_type` for `name` (End runs just after the status
/// write a `wait_finished` sees).
async fn wait_hook(h: &Harness, name: &str, hook_type: HookType) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !h.hook_types_for(name).contains(&hook_type) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {hook_type} call for {name}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `name` has a job from the simulated Landscaper, gives the host time to act,
/// and returns the item as it is then (for stories where the host must *not* act) together
/// with the item as first seen with its job.
async fn after_a_while(h: &Harness, name: &str) -> (DeployItem, DeployItem) {
    let first = h
        .wait_for("default", name, Duration::from_secs(10), |i| {
            !i.status().job_id.is_empty()
        })
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    (first, h.items("default").get(name).await.unwrap())
}

/// `needle` appears in `haystack` as a contiguous run.
fn contains_run(haystack: &[HookType], needle: &[HookType]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_hooks_with_no_opinion_then_every_type_runs_at_its_point_in_flow_order() {
    let h = harness().await;
    h.create_item(&hooked_item("plain", json!({}))).await;
    // A mock item: its type is not in the registration, so no hook ever sees it.
    h.create_item(&test_support::mock_item("unhooked")).await;
    h.wait_finished("default", "unhooked").await;
    let item = h.wait_finished("default", "plain").await;
    assert_eq!(item.status().phase, Phase::Succeeded);
    assert_eq!(calls_of_provider(&item), 1);
    wait_hook(&h, "plain", End).await;
    let types = h.hook_types_for("plain");
    assert!(
        contains_run(
            &types,
            &[
                DuringResponsibilityCheck,
                AfterResponsibilityCheck,
                ShouldReconcile,
                BeforeAnyReconcile,
                BeforeReconcile,
                End
            ]
        ),
        "flow order: {types:?}"
    );
    for never in [BeforeAbort, BeforeForceReconcile, BeforeDelete] {
        assert!(!types.contains(&never), "{never} must not run: {types:?}");
    }
    assert!(
        h.hook_calls_for("unhooked").is_empty(),
        "hooks run only for their types"
    );
    // Hooks see the item and its Target object, but never the Target's credentials.
    let call = h.hook_calls_for("plain").pop().unwrap();
    let target = call.target.expect("the Target object");
    assert_eq!(target["metadata"]["name"], "default");
    assert!(
        target["spec"].get("config").is_none(),
        "no kubeconfig: {target}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_registration_for_every_type_then_start_runs_first_without_an_item() {
    let h = harness_with(hooks_for(&["*"])).await;
    h.create_item(&hooked_item("started", json!({}))).await;
    h.wait_finished("default", "started").await;
    let calls = h.hook_calls.lock().unwrap().clone();
    let start = calls
        .iter()
        .position(|c| c.hook_type == Start)
        .expect("a Start call");
    assert!(calls[start].item.is_none() && calls[start].target.is_none());
    assert_eq!(calls[0].hook_type, Start, "Start is the very first step");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_during_responsibility_check_then_its_result_overrides_the_target_check() {
    // This host only takes Targets annotated `team=a`; the default Target is not.
    let mut config = hooks_for(&[HOOKED]);
    config.target_selectors = vec![TargetSelector {
        annotations: vec![Requirement {
            key: "team".into(),
            operator: "=".into(),
            values: vec!["a".into()],
        }],
        ..Default::default()
    }];
    let h = harness_with(config).await;
    h.create_item(&hooked_item(
        "taken",
        json!({"DuringResponsibilityCheck": {"abortReconcile": false}}),
    ))
    .await;
    h.create_item(&hooked_item("left", json!({}))).await;
    let taken = h.wait_finished("default", "taken").await;
    assert_eq!(
        taken.status().phase,
        Phase::Succeeded,
        "the hook made us responsible"
    );
    let (left, left_now) = after_a_while(&h, "left").await;
    assert_eq!(
        left_now.status().job_id_finished,
        "",
        "not ours without the hook"
    );
    assert_eq!(
        left_now.metadata.resource_version,
        left.metadata.resource_version
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_during_responsibility_check_aborts_then_an_item_we_would_take_is_left_alone() {
    let h = harness().await;
    h.create_item(&hooked_item(
        "refused",
        json!({"DuringResponsibilityCheck": {"abortReconcile": true}}),
    ))
    .await;
    let (_, item) = after_a_while(&h, "refused").await;
    assert_eq!(item.status().phase, Phase::default(), "never picked up");
    assert!(
        !h.hook_types_for("refused")
            .contains(&AfterResponsibilityCheck)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_after_responsibility_check_aborts_then_no_job_is_picked_up() {
    let h = harness().await;
    h.create_item(&hooked_item(
        "stopped",
        json!({"AfterResponsibilityCheck": {"abortReconcile": true}}),
    ))
    .await;
    after_a_while(&h, "stopped").await;
    // The hook runs once the host sees the job; on a real API server that can take longer than
    // `after_a_while` waits: wait for the call itself, then give the flow time to go wrong.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !h
        .hook_types_for("stopped")
        .contains(&AfterResponsibilityCheck)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "AfterResponsibilityCheck was never called: {:?}",
            h.hook_types_for("stopped")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let item = h.items("default").get("stopped").await.unwrap();
    assert_eq!(item.status().phase, Phase::default());
    let types = h.hook_types_for("stopped");
    assert!(
        !types.contains(&ShouldReconcile),
        "the flow stopped: {types:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_should_reconcile_aborts_then_a_job_the_default_logic_requires_still_runs() {
    let h = harness().await;
    h.create_item(&hooked_item(
        "required",
        json!({"ShouldReconcile": {"abortReconcile": true}}),
    ))
    .await;
    let item = h.wait_finished("default", "required").await;
    assert_eq!(item.status().phase, Phase::Succeeded);
    assert_eq!(calls_of_provider(&item), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_should_reconcile_forces_then_a_finished_item_is_reapplied_without_a_new_job() {
    let h = harness().await;
    h.create_item(&hooked_item(
        "forced",
        json!({"ShouldReconcile": {"abortReconcile": false, "requeueAfterMs": 300}}),
    ))
    .await;
    let first = h.wait_finished("default", "forced").await;
    let job = first.status().job_id.clone();
    let first_time = first.status().last_reconcile_time.clone();
    let again = h
        .wait_for("default", "forced", Duration::from_secs(10), |i| {
            calls_of_provider(i) >= 3 && i.status().last_reconcile_time != first_time
        })
        .await;
    let s = again.status();
    assert_eq!(s.phase, Phase::Succeeded, "the phase is never touched");
    assert_eq!(
        (s.job_id.as_str(), s.job_id_finished.as_str()),
        (job.as_str(), job.as_str())
    );
    assert!(h.hook_types_for("forced").contains(&BeforeForceReconcile));
    assert!(
        h.deployer
            .stats
            .reapplies
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_before_any_reconcile_aborts_then_the_plugin_is_not_called_and_the_job_stays_open() {
    let h = harness().await;
    h.create_item(&hooked_item(
        "held",
        json!({"BeforeAnyReconcile": {"abortReconcile": true, "requeueAfterMs": 100}}),
    ))
    .await;
    let item = h
        .wait_for("default", "held", Duration::from_secs(10), |i| {
            i.status().phase == Phase::Init
        })
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let now = h.items("default").get("held").await.unwrap();
    assert_eq!(now.status().phase, Phase::Init);
    assert_eq!(now.status().job_id_finished, item.status().job_id_finished);
    assert_eq!(calls_of_provider(&now), 0, "the plugin was never called");
    let types = h.hook_types_for("held");
    assert!(
        types.iter().filter(|t| **t == BeforeAnyReconcile).count() >= 2,
        "requeued: {types:?}"
    );
    assert!(!types.contains(&BeforeReconcile));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_before_reconcile_aborts_then_the_plugin_is_not_called() {
    let h = harness().await;
    h.create_item(&hooked_item(
        "paused",
        json!({"BeforeReconcile": {"abortReconcile": true}}),
    ))
    .await;
    h.wait_for("default", "paused", Duration::from_secs(10), |i| {
        i.status().phase == Phase::Init
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let now = h.items("default").get("paused").await.unwrap();
    assert_eq!(calls_of_provider(&now), 0);
    assert!(!h.hook_types_for("paused").contains(&End));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_finished_step_then_end_runs_after_its_status_write() {
    let h = harness().await;
    h.create_item(&hooked_item("ended", json!({}))).await;
    h.wait_finished("default", "ended").await;
    wait_hook(&h, "ended", End).await;
    let end = h
        .hook_calls_for("ended")
        .into_iter()
        .find(|c| c.hook_type == End)
        .unwrap();
    let seen = end.item_json.unwrap();
    assert_eq!(
        seen["status"]["phase"], "Succeeded",
        "End sees the written status"
    );
    assert_eq!(seen["status"]["jobID"], seen["status"]["jobIDFinished"]);
    assert_eq!(seen["status"]["providerStatus"]["calls"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_deleted_item_then_before_delete_runs_and_can_hold_the_deletion() {
    let h = harness().await;
    h.create_item(&hooked_item("removed", json!({}))).await;
    h.create_item(&hooked_item(
        "held-back",
        json!({"BeforeDelete": {"abortReconcile": true}}),
    ))
    .await;
    for name in ["removed", "held-back"] {
        h.wait_finished("default", name).await;
        h.items("default")
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    h.wait_gone("default", "removed", Duration::from_secs(10))
        .await;
    let types = h.hook_types_for("removed");
    assert!(
        contains_run(&types, &[BeforeAnyReconcile, BeforeDelete]),
        "{types:?}"
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    let held = h.items("default").get("held-back").await.unwrap();
    assert_eq!(
        held.status().phase,
        Phase::InitDelete,
        "the finalizer stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_progressing_timeout_then_before_abort_runs_instead_of_before_reconcile() {
    let h = Harness::start_with(Options {
        config: hooks_for(&[HOOKED]),
        test_plugins: true,
        record_hooks: true,
        checkpoint_mode: CheckpointMode::FailAt("test-hooks deployer: start reconcile".into()),
        ..Options::default()
    })
    .await;
    h.create_item(&hooked_item("late", json!({}))).await;
    let item = h.wait_finished("default", "late").await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Failed);
    assert!(
        s.last_error
            .unwrap()
            .codes
            .contains(&codes::TIMEOUT.to_string())
    );
    wait_hook(&h, "late", End).await;
    let types = h.hook_types_for("late");
    assert!(
        contains_run(&types, &[BeforeAnyReconcile, BeforeAbort, End]),
        "{types:?}"
    );
    assert!(!types.contains(&BeforeReconcile));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_test_reconcile_operation_then_before_force_reconcile_runs() {
    let h = harness().await;
    h.create_item(&hooked_item("retested", json!({}))).await;
    h.wait_finished("default", "retested").await;
    let patch = json!({"metadata": {"annotations": {"landscaper.gardener.cloud/operation": "test-reconcile"}}});
    h.items("default")
        .patch("retested", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    h.wait_for("default", "retested", Duration::from_secs(10), |i| {
        calls_of_provider(i) == 2
    })
    .await;
    assert!(h.hook_types_for("retested").contains(&BeforeForceReconcile));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_trapping_hook_then_only_its_item_fails() {
    let h = harness().await;
    h.create_item(&hooked_item("trapped", json!({"BeforeReconcile": "trap"})))
        .await;
    h.create_item(&hooked_item(
        "trapped-early",
        json!({"ShouldReconcile": "trap"}),
    ))
    .await;
    h.create_item(&hooked_item("healthy", json!({}))).await;
    for name in ["trapped", "trapped-early"] {
        let item = h.wait_finished("default", name).await;
        let s = item.status();
        assert_eq!(s.phase, Phase::Failed, "{name}");
        let err = s.last_error.unwrap();
        assert_eq!(err.operation, "ExecuteHooks");
        assert!(err.codes.contains(&codes::INTERNAL_PROBLEM.to_string()));
        assert!(err.message.contains("trapped"), "{}", err.message);
        assert!(
            err.message.contains("extension hook 0 of type"),
            "{}",
            err.message
        );
        assert_eq!(calls_of_provider(&item), 0, "the deployer never ran");
    }
    let healthy = h.wait_finished("default", "healthy").await;
    assert_eq!(healthy.status().phase, Phase::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_hook_error_without_a_code_then_the_job_is_retried_not_failed() {
    let h = harness().await;
    h.create_item(&hooked_item("flaky", json!({"BeforeReconcile": "error"})))
        .await;
    let item = h
        .wait_for("default", "flaky", Duration::from_secs(10), |i| {
            i.status().last_error.is_some()
        })
        .await;
    let s = item.status();
    assert_ne!(s.phase, Phase::Failed);
    assert_eq!(s.job_id_finished, "", "still open");
    assert!(
        s.last_error
            .unwrap()
            .message
            .contains("scripted error at BeforeReconcile")
    );
}
