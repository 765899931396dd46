//! The rules of one deployer step, around the plugin call: what a job's start and its
//! shortcuts write, what must hold before a plugin runs, and how the plugin's answer changes the
//! status (contract sections 3.4–3.6).
//!
//! Pure functions over [`DeployItemStatus`] and the plugin protocol's types; the caller supplies
//! `now`. The controller's stages call these and perform the writes they imply.

use landscaper_model::{ConditionReport, DeployerError, Response};

use super::status::{self, StepError};
use crate::landscaper::{DeployItem, DeployItemStatus, DeployerInformation, Phase, codes};

/// Which plugin call a step makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `reconcile` within a job.
    Reconcile,
    /// `delete` within a deletion job.
    Delete,
    /// A hook-forced re-apply of a finished item (`reconcile`, outside any job).
    Reapply,
}

impl Call {
    /// The operation errors of this call are attributed to (`reconcile` / `delete`).
    pub fn operation(self) -> &'static str {
        match self {
            Call::Delete => "delete",
            Call::Reconcile | Call::Reapply => "reconcile",
        }
    }
}

/// `status.deployer` for `item`: the host's identity and version, and the deployer's name as
/// Landscaper writes it — the group of the provider configuration's `apiVersion` when it is a
/// `*.deployer.landscaper.gardener.cloud` group (`mock.deployer.landscaper.gardener.cloud`,
/// `manifest.deployer…`), else the host's configured name.
pub fn deployer_for(host: &DeployerInformation, item: &DeployItem) -> DeployerInformation {
    let group = item
        .provider_config()
        .and_then(|c| c.get("apiVersion"))
        .and_then(|v| v.as_str())
        .and_then(|v| v.rsplit_once('/'))
        .map(|(group, _)| group)
        .filter(|g| g.ends_with(".deployer.landscaper.gardener.cloud"));
    DeployerInformation {
        name: group.map_or_else(|| host.name.clone(), str::to_string),
        ..host.clone()
    }
}

/// A job starts (the pickup write): `Init`, or `InitDelete` for a deletion, with the pickup
/// fields of `initStatus`.
pub fn start_job(
    s: &mut DeployItemStatus,
    generation: i64,
    deployer: &DeployerInformation,
    deleting: bool,
    now: &str,
) {
    let phase = if deleting {
        Phase::InitDelete
    } else {
        Phase::Init
    };
    status::init_status(s, generation, deployer, phase, now);
}

/// The item names a Target that does not exist: the job ends at once as `Failed` /
/// `DeleteFailed` with reason `NoTargetFound`, without the pickup fields. Returns the error
/// recorded, for the Event.
pub fn fail_missing_target(s: &mut DeployItemStatus, deleting: bool, now: &str) -> StepError {
    s.phase = if deleting {
        Phase::DeleteFailed
    } else {
        Phase::Failed
    };
    let err = StepError::new(
        "reconcilePrivate",
        "NoTargetFound",
        "setting deploy item to failed due to missing target",
    );
    status::handle_step_result(s, Some(&err), deleting, now);
    err
}

/// `updateOnChangeOnly` on an unchanged, `Succeeded` item: the job finishes `Succeeded` in one
/// write without calling the plugin.
pub fn finish_unchanged(
    s: &mut DeployItemStatus,
    generation: i64,
    deployer: &DeployerInformation,
    now: &str,
) {
    status::init_status(s, generation, deployer, Phase::Succeeded, now);
    status::handle_step_result(s, None, false, now);
}

/// A reconcile needs a provider configuration (`spec.config` present and not empty); a delete
/// does not.
pub fn require_provider_config(item: &DeployItem) -> Result<(), StepError> {
    match item.provider_config() {
        Some(_) => Ok(()),
        None => Err(StepError::from_plugin(
            DeployerError::provider_config_missing(),
            "reconcile",
        )),
    }
}

/// `status.providerStatus` is an embedded resource: a real API server rejects it without
/// `apiVersion` and `kind`. Caught before the write, so the item fails with a message instead
/// of its status write being rejected on every retry.
pub fn check_response(response: &Response, call: Call) -> Result<(), StepError> {
    let Some(ps) = response.provider_status.as_ref() else {
        return Ok(());
    };
    let has = |k: &str| {
        ps.get(k)
            .and_then(|v| v.as_str())
            .is_some_and(|v| !v.is_empty())
    };
    if ps.is_object() && has("apiVersion") && has("kind") {
        return Ok(());
    }
    Err(StepError::new(
        call.operation(),
        "InvalidProviderStatus",
        "the plugin returned a providerStatus without apiVersion and kind; status.providerStatus is an embedded Kubernetes object and needs both",
    )
    .with_code(codes::INTERNAL_PROBLEM))
}

/// Applies plugin-reported conditions with the host's timestamps.
pub fn apply_conditions(s: &mut DeployItemStatus, conditions: &[ConditionReport], now: &str) {
    status::update_conditions(&mut s.conditions, conditions, now);
}

/// Folds a plugin's successful answer into the status:
/// - a phase it names is taken; otherwise "call again" moves `Init` to `Progressing` and
///   (deleting) `InitDelete` to `Deleting`;
/// - a reconcile that is done and names no phase has succeeded;
/// - `providerStatus` is replaced when given; conditions are merged.
pub fn apply_response(s: &mut DeployItemStatus, response: &Response, call: Call, now: &str) {
    let again = response.retry_after.is_some();
    match &response.phase {
        Some(phase) => s.phase = phase.clone(),
        None if again && s.phase == Phase::Init => s.phase = Phase::Progressing,
        None if !again && call != Call::Delete && !s.phase.is_final() => s.phase = Phase::Succeeded,
        None => {}
    }
    if again && call == Call::Delete && s.phase == Phase::InitDelete {
        s.phase = Phase::Deleting;
    }
    if let Some(ps) = &response.provider_status {
        s.provider_status = Some(ps.clone());
    }
    apply_conditions(s, &response.conditions, now);
}

impl StepError {
    /// A plugin's error as the step's error; an empty operation or reason gets the contract's
    /// default (`default_operation`, `Reconcile`). Its conditions are applied separately.
    pub fn from_plugin(e: DeployerError, default_operation: &str) -> Self {
        StepError {
            operation: if e.operation.is_empty() {
                default_operation.to_string()
            } else {
                e.operation
            },
            reason: if e.reason.is_empty() {
                "Reconcile".to_string()
            } else {
                e.reason
            },
            message: e.message,
            codes: e.codes,
        }
    }

    /// The host's error as the plugin sees it (a checkpoint answered inside a plugin call).
    pub fn to_plugin(&self) -> DeployerError {
        DeployerError {
            codes: self.codes.clone(),
            operation: self.operation.clone(),
            reason: self.reason.clone(),
            message: self.message.clone(),
            conditions: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landscaper_model::ConditionStatus;
    use serde_json::json;
    use std::time::Duration;

    const T0: &str = "2026-01-01T00:00:00Z";

    fn status(phase: Phase) -> DeployItemStatus {
        DeployItemStatus {
            phase,
            job_id: "2".into(),
            job_id_finished: "1".into(),
            ..Default::default()
        }
    }

    fn deployer() -> DeployerInformation {
        DeployerInformation {
            identity: "id".into(),
            name: "wasm-deployer".into(),
            version: "0".into(),
        }
    }

    #[test]
    fn the_deployer_is_named_per_type_and_keeps_the_hosts_identity() {
        let mut item = DeployItem::default();
        item.spec.config = Some(json!({
            "apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha2",
            "kind": "ProviderConfiguration"}));
        let d = deployer_for(&deployer(), &item);
        assert_eq!(d.name, "manifest.deployer.landscaper.gardener.cloud");
        assert_eq!((d.identity.as_str(), d.version.as_str()), ("id", "0"));
        // A plugin of its own group, or no configuration: the host's name.
        item.spec.config = Some(json!({"apiVersion": "faulty.test/v1", "kind": "P"}));
        assert_eq!(deployer_for(&deployer(), &item).name, "wasm-deployer");
        item.spec.config = None;
        assert_eq!(deployer_for(&deployer(), &item).name, "wasm-deployer");
    }

    #[test]
    fn a_job_starts_in_init_or_init_delete() {
        for (deleting, phase) in [(false, Phase::Init), (true, Phase::InitDelete)] {
            let mut s = status(Phase::Succeeded);
            start_job(&mut s, 4, &deployer(), deleting, T0);
            assert_eq!(s.phase, phase);
            assert_eq!(s.observed_generation, 4);
            assert_eq!(s.job_id_finished, "1", "a start never finishes the job");
        }
    }

    #[test]
    fn a_missing_target_fails_the_job_in_one_status() {
        for (deleting, phase) in [(false, Phase::Failed), (true, Phase::DeleteFailed)] {
            let mut s = status(Phase::Succeeded);
            let err = fail_missing_target(&mut s, deleting, T0);
            assert_eq!(err.reason, "NoTargetFound");
            assert_eq!(s.phase, phase);
            assert_eq!(s.job_id_finished, "2");
            assert_eq!(s.last_error.unwrap().reason, "NoTargetFound");
            assert!(s.deployer.is_none(), "no pickup fields");
        }
    }

    #[test]
    fn an_unchanged_item_finishes_succeeded_without_the_plugin() {
        let mut s = status(Phase::Succeeded);
        finish_unchanged(&mut s, 2, &deployer(), T0);
        assert_eq!(
            (s.phase, s.job_id_finished.as_str()),
            (Phase::Succeeded, "2")
        );
        assert_eq!(s.last_reconcile_time.as_deref(), Some(T0));
    }

    #[test]
    fn a_reconcile_needs_a_provider_configuration() {
        let mut item = DeployItem::default();
        for config in [None, Some(json!(null)), Some(json!({}))] {
            item.spec.config = config;
            let err = require_provider_config(&item).unwrap_err();
            assert_eq!(err.reason, "ProviderConfigurationMissing");
            assert_eq!(err.operation, "reconcile");
            assert!(
                err.is_unrecoverable(),
                "ERR_CONFIGURATION_PROBLEM ends the job"
            );
        }
        item.spec.config = Some(json!({"kind": "ProviderConfiguration"}));
        assert!(require_provider_config(&item).is_ok());
    }

    #[test]
    fn a_provider_status_needs_api_version_and_kind() {
        let with = |ps| Response {
            provider_status: Some(ps),
            ..Default::default()
        };
        assert!(check_response(&Response::default(), Call::Reconcile).is_ok());
        assert!(
            check_response(
                &with(json!({"apiVersion": "a/v1", "kind": "S"})),
                Call::Reconcile
            )
            .is_ok()
        );
        for bad in [
            json!({"kind": "S"}),
            json!({"apiVersion": "a/v1", "kind": ""}),
            json!("x"),
        ] {
            let err = check_response(&with(bad), Call::Delete).unwrap_err();
            assert_eq!(
                (err.operation.as_str(), err.reason.as_str()),
                ("delete", "InvalidProviderStatus")
            );
            assert!(err.is_unrecoverable());
        }
    }

    #[test]
    fn a_done_reconcile_without_phase_succeeds() {
        let mut s = status(Phase::Init);
        apply_response(&mut s, &Response::default(), Call::Reconcile, T0);
        assert_eq!(s.phase, Phase::Succeeded);
        // A final phase the plugin set earlier is kept.
        let mut s = status(Phase::Failed);
        apply_response(&mut s, &Response::default(), Call::Reconcile, T0);
        assert_eq!(s.phase, Phase::Failed);
        // A delete that is done names its own end: the finalizer goes, the phase stays.
        let mut s = status(Phase::InitDelete);
        apply_response(&mut s, &Response::default(), Call::Delete, T0);
        assert_eq!(s.phase, Phase::InitDelete);
    }

    #[test]
    fn call_again_moves_init_to_progressing_and_init_delete_to_deleting() {
        let again = Response::retry_after(Duration::from_secs(1));
        let mut s = status(Phase::Init);
        apply_response(&mut s, &again, Call::Reconcile, T0);
        assert_eq!(s.phase, Phase::Progressing);
        let mut s = status(Phase::InitDelete);
        apply_response(&mut s, &again, Call::Delete, T0);
        assert_eq!(s.phase, Phase::Deleting);
        let mut s = status(Phase::Progressing);
        apply_response(&mut s, &again, Call::Reconcile, T0);
        assert_eq!(s.phase, Phase::Progressing);
    }

    #[test]
    fn a_named_phase_provider_status_and_conditions_are_taken() {
        let mut s = status(Phase::Init);
        let r = Response {
            phase: Some(Phase::Failed),
            provider_status: Some(json!({"apiVersion": "a/v1", "kind": "S"})),
            conditions: vec![ConditionReport::new("C", ConditionStatus::True, "R", "m")],
            ..Default::default()
        };
        apply_response(&mut s, &r, Call::Reconcile, T0);
        assert_eq!(s.phase, Phase::Failed);
        assert_eq!(s.provider_status.unwrap()["kind"], "S");
        assert_eq!(s.conditions[0].status, "True");
        assert_eq!(s.conditions[0].last_transition_time, T0);
    }

    #[test]
    fn plugin_errors_get_the_contract_defaults_and_keep_their_codes() {
        let e = StepError::from_plugin(DeployerError::retryable("", "not yet"), "delete");
        assert_eq!(
            (e.operation.as_str(), e.reason.as_str()),
            ("delete", "Reconcile")
        );
        let e = StepError::from_plugin(
            DeployerError::timeout("Slow", "m").with_operation("apply"),
            "reconcile",
        );
        assert_eq!(e.operation, "apply");
        assert!(e.is_unrecoverable());
        assert_eq!(e.to_plugin().codes, vec![codes::TIMEOUT]);
    }
}
