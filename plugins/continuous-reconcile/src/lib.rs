//! Landscaper's continuous reconcile extension (contract section 4.4), revived as a
//! `ShouldReconcile` hook plugin: `continuous-reconcile.wasm`.
//!
//! Owns: reading `spec.config.continuousReconcile` (`cron` or `every`) of the DeployItem,
//! validating it as Landscaper's `ValidateContinuousReconcileSpec` does, and answering
//! whether a reconcile is due, from `status.lastReconcileTime` and the host's clock
//! (`Ctx::now_unix_millis`, never std time).
//! Must not touch: Kubernetes, the item's status (the host writes `lastReconcileTime`),
//! the aggregation of hook results or the flow (the host owns both).
//!
//! Semantics, with `next` = the schedule's first activation strictly after a time:
//! 1. Annotation `continuousreconcile.extensions.landscaper.gardener.cloud/active: "false"`,
//!    an empty/absent config or no `lastReconcileTime` → no opinion (`None`).
//! 2. `next(lastReconcileTime) > now` (both truncated to seconds) → not due:
//!    `abort_reconcile: true, requeue_after: next − now` (come back then, don't force).
//! 3. Otherwise due: `abort_reconcile: false` (forces a reconcile) with
//!    `requeue_after: next(now) − now`, or no requeue if the schedule has no next activation.
//!
//! Decisions where Landscaper left room:
//! * Both `cron` and `every` set is a configuration error, exactly as Landscaper's
//!   validation says ("exactly one of [Cron, Every] must be set"); Landscaper's evaluation
//!   (where `cron` would win) is never reached with such a config.
//! * `cron` is robfig/cron v3 `ParseStandard`: 5 fields, the descriptors `@yearly`,
//!   `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`, and
//!   `@every <Go duration>` (a constant delay like `every`). Patterns are matched by
//!   `croner`, with croner's extensions robfig does not know rejected (see `schedule`);
//!   croner still reads `7` as Sunday, where robfig stops at `6`.
//! * Everything is evaluated in UTC (what Landscaper did in its containers); a `TZ=`/
//!   `CRON_TZ=` prefix is accepted only for UTC. Timestamps are parsed by hand (`time`):
//!   `jiff` would double the component's size.
//! * `every` (and `@every`) follow robfig's `Every`: sub-second parts are truncated, with a
//!   one second minimum, and `next(t) = t truncated to seconds + every`.
//! * A cron pattern that never matches (`0 0 30 2 *`) has no next activation: no opinion.

mod duration;
mod schedule;
mod time;

pub use duration::parse_go_duration;
pub use schedule::{Schedule, parse_cron};
pub use time::parse_rfc3339;

use sdk_guest::{
    Ctx, DeployerError, HookInput, HookResult, HookSetup, HookType, Hooks, export_hooks,
};
use serde_json::Value;
use std::time::Duration;

/// Setting this annotation to `"false"` switches continuous reconcile off for an item.
pub const ACTIVE_ANNOTATION: &str =
    "continuousreconcile.extensions.landscaper.gardener.cloud/active";
/// Where the configuration lives in the DeployItem.
pub const FIELD_PATH: &str = "spec.config.continuousReconcile";
/// Reason of every configuration error.
pub const REASON_VALIDATE: &str = "ValidateContinuousReconcile";

/// The continuous reconcile hook.
pub struct ContinuousReconcile;

export_hooks!(ContinuousReconcile);

impl Hooks for ContinuousReconcile {
    fn describe() -> HookSetup {
        HookSetup {
            name: "continuous-reconcile".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            hook_types: vec![HookType::ShouldReconcile],
        }
    }

    fn run(ctx: &Ctx, input: HookInput) -> Result<Option<HookResult>, DeployerError> {
        let Some(item) = input.deploy_item.as_ref() else {
            return Ok(None);
        };
        if item
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(ACTIVE_ANNOTATION))
            .and_then(Value::as_str)
            == Some("false")
        {
            ctx.debug("continuous reconcile disabled by annotation");
            return Ok(None);
        }
        let Some(schedule) = schedule_of(item)? else {
            return Ok(None);
        };
        let Some(last) = last_reconcile_time(item)? else {
            ctx.debug("continuous reconcile: no status.lastReconcileTime yet");
            return Ok(None);
        };
        let now = (ctx.now_unix_millis() / 1000) as i64;
        let result = evaluate(&schedule, last, now);
        if let Some(r) = &result {
            ctx.debug(&format!(
                "continuous reconcile: {} (requeue after {:?})",
                if r.abort_reconcile { "not due" } else { "due" },
                r.requeue_after
            ));
        }
        Ok(result)
    }
}

/// Steps 2 and 3 of the hook on whole Unix seconds: `last` is `lastReconcileTime`, `now`
/// the current time, both already truncated to seconds.
pub fn evaluate(schedule: &Schedule, last: i64, now: i64) -> Option<HookResult> {
    let next = schedule.next(last)?;
    let after = |t: i64| Duration::from_secs(t.saturating_sub(now).max(0) as u64);
    if next > now {
        return Some(HookResult {
            abort_reconcile: true,
            requeue: false,
            requeue_after: Some(after(next)),
        });
    }
    Some(HookResult {
        abort_reconcile: false,
        requeue: false,
        requeue_after: schedule.next(now).map(after),
    })
}

/// The value at `path` (object keys). `Value::pointer` would do, but it allocates two strings
/// per segment to unescape `~0`/`~1`, on every call of a hook that runs at every decision.
fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(key))
}

/// `status.lastReconcileTime` as Unix seconds (truncated); `None` if absent.
fn last_reconcile_time(item: &Value) -> Result<Option<i64>, DeployerError> {
    match at(item, &["status", "lastReconcileTime"]) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => parse_rfc3339(s)
            .map(Some)
            .map_err(|e| bad_last_reconcile_time(&e)),
        Some(other) => Err(bad_last_reconcile_time(&format!(
            "{other} is not an RFC 3339 timestamp"
        ))),
    }
}

fn bad_last_reconcile_time(detail: &str) -> DeployerError {
    DeployerError::internal(
        "InvalidLastReconcileTime",
        format!("status.lastReconcileTime: {detail}"),
    )
}

/// Reads and validates `spec.config.continuousReconcile` of `item` like Landscaper's
/// `ValidateContinuousReconcileSpec`: absent, `null` or empty (empty `cron`, absent/zero
/// `every`) → `Ok(None)`; otherwise exactly one of `cron`/`every` must be set, `cron` must
/// parse and `every` must be > 0, else `ERR_CONFIGURATION_PROBLEM` with reason
/// [`REASON_VALIDATE`] and a message naming the field path (all problems, like Kubernetes'
/// aggregated field errors).
pub fn schedule_of(item: &Value) -> Result<Option<Schedule>, DeployerError> {
    let spec = match at(item, &["spec", "config", "continuousReconcile"]) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(spec)) => spec,
        Some(other) => {
            return Err(config_error(vec![invalid(
                FIELD_PATH,
                other,
                "must be an object",
            )]));
        }
    };
    let cron_path = format!("{FIELD_PATH}.cron");
    let every_path = format!("{FIELD_PATH}.every");
    let cron = match spec.get("cron") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(config_error(vec![invalid(
                &cron_path,
                other,
                "must be a string",
            )]));
        }
    };
    // `every` as Landscaper's `Duration`: a Go duration string or "none" (= 0).
    let every: Option<(i64, &Value)> = match spec.get("every") {
        None | Some(Value::Null) => None,
        Some(v @ Value::String(s)) if s == "none" => Some((0, v)),
        Some(v @ Value::String(s)) => match parse_go_duration(s) {
            Ok(nanos) => Some((nanos, v)),
            Err(e) => {
                let msg = format!("unable to parse string into a duration: {e}");
                return Err(config_error(vec![invalid(&every_path, v, &msg)]));
            }
        },
        Some(other) => {
            return Err(config_error(vec![invalid(
                &every_path,
                other,
                "must be a duration string",
            )]));
        }
    };
    if cron.is_empty() && every.is_none_or(|(nanos, _)| nanos == 0) {
        return Ok(None);
    }

    let mut errors = Vec::new();
    if let (false, Some((_, every_raw))) = (cron.is_empty(), every) {
        errors.push(format!(
            "{FIELD_PATH}: Invalid value: {{Cron: {cron:?}, Every: {every_raw}}}: exactly one of \
             [Cron, Every] must be set (currently set: [Cron, Every])"
        ));
    }
    let mut schedule = None;
    if !cron.is_empty() {
        match parse_cron(cron) {
            Ok(s) => schedule = Some(s),
            Err(e) => errors.push(invalid(&cron_path, &Value::String(cron.into()), &e)),
        }
    }
    if let Some((nanos, raw)) = every {
        if nanos <= 0 {
            errors.push(invalid(
                &every_path,
                raw,
                "specified duration has to be greater than zero",
            ));
        } else if schedule.is_none() {
            schedule = Some(Schedule::every(nanos));
        }
    }
    match schedule {
        Some(s) if errors.is_empty() => Ok(Some(s)),
        _ => Err(config_error(errors)),
    }
}

/// Kubernetes' `field.Invalid` text: `<path>: Invalid value: <value>: <detail>`.
fn invalid(path: &str, value: &Value, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

/// One error for all field errors, joined like Kubernetes' `ErrorList.ToAggregate()`.
fn config_error(errors: Vec<String>) -> DeployerError {
    let message = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    DeployerError::configuration(REASON_VALIDATE, message)
}

#[cfg(test)]
mod tests;
