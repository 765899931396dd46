//! The hook end to end through `Hooks::run`, with a host clock fixed at [`NOW`].

use super::*;
use sdk_guest::{KubeOp, LogLevel, NativeHost, codes};
use serde_json::json;

/// The host's clock in every test: 2026-03-10T12:02:30.600Z (a Tuesday), deliberately
/// not on a whole second.
const NOW: &str = "2026-03-10T12:02:30.600Z";

struct FixedClock(u64);

impl FixedClock {
    fn at(rfc3339: &str) -> Self {
        let t: jiff::Timestamp = rfc3339.parse().unwrap();
        FixedClock(u64::try_from(t.as_millisecond()).unwrap())
    }
}

impl NativeHost for FixedClock {
    fn log(&self, _level: LogLevel, _message: &str) {}
    fn now_unix_millis(&self) -> u64 {
        self.0
    }
    fn checkpoint(&self, _name: &str) -> Result<(), DeployerError> {
        Ok(())
    }
    fn remaining(&self) -> Option<Duration> {
        None
    }
    fn kube(&self, _op: KubeOp) -> Result<Option<String>, DeployerError> {
        panic!("the hook must not touch Kubernetes")
    }
}

/// A mock DeployItem with `config` as its `continuousReconcile` block (`None` = no block)
/// and `last` as `status.lastReconcileTime`.
fn item(continuous_reconcile: Option<Value>, last: Option<&str>) -> Value {
    let mut config = json!({
        "apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
        "kind": "ProviderConfiguration",
    });
    if let Some(cr) = continuous_reconcile {
        config["continuousReconcile"] = cr;
    }
    let mut item = json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": "my-item", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/mock", "config": config},
        "status": {"phase": "Succeeded"},
    });
    if let Some(last) = last {
        item["status"]["lastReconcileTime"] = json!(last);
    }
    item
}

fn run_at(now: &str, deploy_item: Option<Value>) -> Result<Option<HookResult>, DeployerError> {
    let host = FixedClock::at(now);
    ContinuousReconcile::run(
        &Ctx::native(&host),
        HookInput {
            hook_type: HookType::ShouldReconcile,
            deploy_item,
            target: None,
        },
    )
}

fn run(deploy_item: Value) -> Result<Option<HookResult>, DeployerError> {
    run_at(NOW, Some(deploy_item))
}

/// Not due: hold the reconcile back, come back in `remaining_secs`.
fn not_due(remaining_secs: u64) -> Result<Option<HookResult>, DeployerError> {
    Ok(Some(HookResult {
        abort_reconcile: true,
        requeue: false,
        requeue_after: Some(Duration::from_secs(remaining_secs)),
    }))
}

/// Due: force the reconcile, come back for the next activation in `next_in_secs`.
fn due(next_in_secs: u64) -> Result<Option<HookResult>, DeployerError> {
    Ok(Some(HookResult {
        abort_reconcile: false,
        requeue: false,
        requeue_after: Some(Duration::from_secs(next_in_secs)),
    }))
}

/// Runs the hook expecting a configuration error and returns its message.
fn config_problem(deploy_item: Value) -> String {
    let err = run(deploy_item).expect_err("a configuration error");
    assert_eq!(err.codes, vec![codes::CONFIGURATION_PROBLEM.to_string()]);
    assert_eq!(err.reason, REASON_VALIDATE);
    assert!(err.is_unrecoverable());
    err.message
}

#[test]
fn describe_declares_a_should_reconcile_hook_named_continuous_reconcile() {
    let setup = ContinuousReconcile::describe();
    assert_eq!(setup.name, "continuous-reconcile");
    assert_eq!(setup.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(setup.hook_types, vec![HookType::ShouldReconcile]);
}

#[test]
fn without_a_deploy_item_the_hook_has_no_opinion() {
    assert_eq!(run_at(NOW, None), Ok(None));
}

#[test]
fn annotation_active_false_switches_continuous_reconcile_off() {
    // Overdue by hours, but switched off.
    let mut di = item(Some(json!({"every": "1h"})), Some("2026-03-10T06:00:00Z"));
    di["metadata"]["annotations"] = json!({ACTIVE_ANNOTATION: "false"});
    assert_eq!(run(di.clone()), Ok(None));

    // Any other value leaves it on.
    di["metadata"]["annotations"] = json!({ACTIVE_ANNOTATION: "true"});
    assert_eq!(run(di), due(3600));
}

#[test]
fn without_a_continuous_reconcile_block_the_hook_has_no_opinion() {
    assert_eq!(run(item(None, Some("2026-03-10T06:00:00Z"))), Ok(None));
    assert_eq!(
        run(item(Some(Value::Null), Some("2026-03-10T06:00:00Z"))),
        Ok(None)
    );
    let mut no_config = item(None, Some("2026-03-10T06:00:00Z"));
    no_config["spec"].as_object_mut().unwrap().remove("config");
    assert_eq!(run(no_config), Ok(None));
}

#[test]
fn an_empty_block_is_valid_and_means_no_continuous_reconcile() {
    for empty in [
        json!({}),
        json!({"cron": ""}),
        json!({"cron": null, "every": null}),
        json!({"every": "0s"}),
        json!({"every": "none"}),
        json!({"cron": "", "every": "0"}),
    ] {
        assert_eq!(
            run(item(Some(empty.clone()), Some("2026-03-10T06:00:00Z"))),
            Ok(None),
            "{empty}"
        );
    }
}

#[test]
fn without_last_reconcile_time_the_hook_has_no_opinion() {
    assert_eq!(run(item(Some(json!({"every": "1h"})), None)), Ok(None));
    assert_eq!(run(item(Some(json!({"cron": "@daily"})), None)), Ok(None));
}

#[test]
fn every_not_yet_due_holds_the_reconcile_back_and_comes_back_when_due() {
    // Reconciled 10 minutes ago, every hour: 50 minutes to go.
    let di = item(Some(json!({"every": "1h"})), Some("2026-03-10T11:52:30Z"));
    assert_eq!(run(di), not_due(50 * 60));
}

#[test]
fn every_overdue_forces_a_reconcile_and_requeues_after_one_interval() {
    let di = item(Some(json!({"every": "1h"})), Some("2026-03-10T09:00:00Z"));
    assert_eq!(run(di), due(3600));
}

#[test]
fn every_exactly_at_the_boundary_is_due_because_both_times_are_truncated_to_seconds() {
    // next = 11:02:30(.999 truncated) + 1h = 12:02:30; now 12:02:30.600 → 12:02:30: due.
    let di = item(
        Some(json!({"every": "1h"})),
        Some("2026-03-10T11:02:30.999Z"),
    );
    assert_eq!(run(di), due(3600));
    // One second later it is not due yet, by exactly one second.
    let di = item(Some(json!({"every": "1h"})), Some("2026-03-10T11:02:31Z"));
    assert_eq!(run(di), not_due(1));
}

#[test]
fn every_with_a_sub_second_part_is_truncated_to_whole_seconds() {
    // 2.9s acts as 2s: reconciled 2s ago → due, next in 2s.
    let di = item(Some(json!({"every": "2.9s"})), Some("2026-03-10T12:02:28Z"));
    assert_eq!(run(di), due(2));
    // 300ms acts as robfig's minimum of one second.
    let di = item(
        Some(json!({"every": "300ms"})),
        Some("2026-03-10T12:02:30Z"),
    );
    assert_eq!(run(di), not_due(1));
}

#[test]
fn cron_every_five_minutes_not_yet_due_waits_for_the_next_slot() {
    // Last run 12:00:10 → next slot 12:05:00; now 12:02:30 → 150s to go.
    let di = item(
        Some(json!({"cron": "*/5 * * * *"})),
        Some("2026-03-10T12:00:10Z"),
    );
    assert_eq!(run(di), not_due(150));
}

#[test]
fn cron_every_five_minutes_with_a_missed_slot_reconciles_now_and_requeues_for_the_next() {
    // Last run 11:54:00 → slot 11:55:00 passed; the following slot is 12:05:00.
    let di = item(
        Some(json!({"cron": "*/5 * * * *"})),
        Some("2026-03-10T11:54:00Z"),
    );
    assert_eq!(run(di), due(150));
}

#[test]
fn cron_daily_descriptor_runs_at_midnight_utc() {
    // Reconciled yesterday at 08:00 → midnight passed → due; next midnight in 11:57:30.
    let di = item(
        Some(json!({"cron": "@daily"})),
        Some("2026-03-09T08:00:00Z"),
    );
    assert_eq!(run(di), due(11 * 3600 + 57 * 60 + 30));
    // Reconciled this morning → wait for tonight.
    let di = item(
        Some(json!({"cron": "@daily"})),
        Some("2026-03-10T00:00:05Z"),
    );
    assert_eq!(run(di), not_due(11 * 3600 + 57 * 60 + 30));
}

#[test]
fn cron_every_descriptor_acts_as_a_constant_delay() {
    let di = item(
        Some(json!({"cron": "@every 90s"})),
        Some("2026-03-10T12:01:30Z"),
    );
    assert_eq!(run(di), not_due(30));
    let di = item(
        Some(json!({"cron": "@every 90s"})),
        Some("2026-03-10T12:00:00Z"),
    );
    assert_eq!(run(di), due(90));
}

#[test]
fn a_cron_pattern_that_never_matches_has_no_opinion() {
    let di = item(
        Some(json!({"cron": "0 0 30 2 *"})),
        Some("2026-03-10T12:00:00Z"),
    );
    assert_eq!(run(di), Ok(None));
}

#[test]
fn an_invalid_cron_is_a_configuration_problem_naming_the_cron_field() {
    let msg = config_problem(item(
        Some(json!({"cron": "every morning"})),
        Some("2026-03-10T12:00:00Z"),
    ));
    assert!(
        msg.starts_with(
            r#"spec.config.continuousReconcile.cron: Invalid value: "every morning": "#
        ),
        "{msg}"
    );
    // Six fields (with seconds) is not `ParseStandard`.
    let msg = config_problem(item(Some(json!({"cron": "0 */5 * * * *"})), None));
    assert!(msg.contains("expected exactly 5 fields, found 6"), "{msg}");
}

#[test]
fn a_negative_every_is_a_configuration_problem_naming_the_every_field() {
    let msg = config_problem(item(Some(json!({"every": "-5m"})), None));
    assert_eq!(
        msg,
        r#"spec.config.continuousReconcile.every: Invalid value: "-5m": specified duration has to be greater than zero"#
    );
}

#[test]
fn an_unparsable_every_is_a_configuration_problem_naming_the_every_field() {
    let msg = config_problem(item(Some(json!({"every": "5 minutes"})), None));
    assert!(
        msg.starts_with(
            r#"spec.config.continuousReconcile.every: Invalid value: "5 minutes": unable to parse string into a duration: time: "#
        ),
        "{msg}"
    );
    let msg = config_problem(item(Some(json!({"every": 300})), None));
    assert!(
        msg.starts_with("spec.config.continuousReconcile.every: "),
        "{msg}"
    );
}

#[test]
fn both_cron_and_every_set_is_a_configuration_problem_as_in_landscapers_validation() {
    let msg = config_problem(item(
        Some(json!({"cron": "@daily", "every": "1h"})),
        Some("2026-03-10T12:00:00Z"),
    ));
    assert_eq!(
        msg,
        r#"spec.config.continuousReconcile: Invalid value: {Cron: "@daily", Every: "1h"}: exactly one of [Cron, Every] must be set (currently set: [Cron, Every])"#
    );
}

#[test]
fn a_zero_every_next_to_a_cron_counts_as_set_and_is_reported_with_every_problem() {
    // Landscaper's pointer semantics: `every: 0s` is "set", so both rules fire.
    let msg = config_problem(item(Some(json!({"cron": "bad", "every": "0s"})), None));
    assert!(msg.starts_with('[') && msg.ends_with(']'), "{msg}");
    assert!(msg.contains("exactly one of [Cron, Every]"), "{msg}");
    assert!(
        msg.contains("spec.config.continuousReconcile.cron: "),
        "{msg}"
    );
    assert!(
        msg.contains("spec.config.continuousReconcile.every: Invalid value: \"0s\": specified duration has to be greater than zero"),
        "{msg}"
    );
}

#[test]
fn a_non_object_block_is_a_configuration_problem() {
    let msg = config_problem(item(Some(json!("@daily")), None));
    assert!(
        msg.starts_with("spec.config.continuousReconcile: "),
        "{msg}"
    );
}

#[test]
fn a_garbled_last_reconcile_time_is_an_internal_problem() {
    let err = run(item(Some(json!({"every": "1h"})), Some("yesterday"))).unwrap_err();
    assert!(err.has_code(codes::INTERNAL_PROBLEM), "{err}");
    assert!(err.message.contains("status.lastReconcileTime"), "{err}");
}
