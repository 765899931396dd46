//! Landscaper's mock deployer (contract section 8) as a wasm-deployer plugin.
//!
//! Owns: the mock's decision logic — validate the ProviderConfiguration, compute the next
//! phase from `phase` / `initialPhase`, return `providerStatus` and `export` verbatim and the
//! `DeployItemValidation` condition. The same code is built to `mock.wasm` (wasm32-wasip2)
//! and used natively (`mock::Mock` through the runtime's `NativePlugin`) for benchmarks and
//! the differential test.
//! Must not touch: Kubernetes. The host writes the status, the export Secret
//! (`mock-export-*`, key `config`, `status.exportRef`) and deletes it on delete.
//!
//! Deliberate deviation from Landscaper: an undecodable configuration is returned as
//! `ERR_CONFIGURATION_PROBLEM` (reason `FailedUnmarshal`, message naming the problem), so the
//! item ends in `Failed` with a useful `lastError` instead of being retried forever.

use sdk_guest::{
    ConditionReport, ConditionStatus, Ctx, Deployer, DeployerError, Description, Invocation, Phase,
    Response, export_deployer, phase,
};
use serde::Deserialize;
use serde_json::Value;

/// DeployItem type handled by the mock.
pub const DEPLOY_ITEM_TYPE: &str = "landscaper.gardener.cloud/mock";
/// `apiVersion` of the mock ProviderConfiguration.
pub const API_VERSION: &str = "mock.deployer.landscaper.gardener.cloud/v1alpha1";
/// Condition type set by the mock.
pub const CONDITION_VALIDATION: &str = "DeployItemValidation";

/// `mock.deployer.landscaper.gardener.cloud/v1alpha1` `ProviderConfiguration`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfiguration {
    /// Must be [`API_VERSION`].
    pub api_version: Option<String>,
    /// Must be `ProviderConfiguration`.
    pub kind: Option<String>,
    /// Phase written after every step (overrides everything).
    pub phase: Option<Phase>,
    /// Phase written while the current phase is empty or `Init`; suppresses `Succeeded`.
    pub initial_phase: Option<Phase>,
    /// Copied into `status.providerStatus`.
    pub provider_status: Option<Value>,
    /// Written as the export (Secret data key `config`).
    pub export: Option<Value>,
    /// Parsed, no effect (as in Landscaper).
    pub continuous_reconcile: Option<Value>,
}

/// The mock deployer.
pub struct Mock;

fn validation_failed(message: String) -> DeployerError {
    DeployerError::configuration("FailedUnmarshal", message.clone()).with_condition(
        ConditionReport::new(
            CONDITION_VALIDATION,
            ConditionStatus::False,
            "FailedUnmarshal",
            message,
        ),
    )
}

/// Decode and check the configuration of `inv`.
pub fn parse_config(inv: &Invocation) -> Result<ProviderConfiguration, DeployerError> {
    let raw = inv.provider_config_present()?;
    let config: ProviderConfiguration = sdk_guest::decode_at(raw, "spec.config").map_err(|e| {
        validation_failed(format!("unable to decode mock provider configuration: {e}"))
    })?;
    if config.api_version.as_deref() != Some(API_VERSION)
        || config.kind.as_deref() != Some("ProviderConfiguration")
    {
        return Err(validation_failed(format!(
            "unable to decode mock provider configuration (spec.config): expected apiVersion \
             {API_VERSION:?} and kind \"ProviderConfiguration\", got apiVersion {:?} and kind {:?}",
            config.api_version.as_deref().unwrap_or(""),
            config.kind.as_deref().unwrap_or("")
        )));
    }
    Ok(config)
}

impl Deployer for Mock {
    fn describe() -> Description {
        Description {
            name: "mock".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            deploy_item_types: vec![DEPLOY_ITEM_TYPE.into()],
            hook_types: vec![],
        }
    }

    fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        let config = parse_config(&inv)?;
        let current = inv.current_phase();
        let mut next = match &config.initial_phase {
            // Landscaper's mock: the initial phase while the item is empty or Init, and no
            // automatic Succeeded after that — it stays where it is until told otherwise.
            Some(initial) if current.is_empty() || current == phase::INIT => initial.clone(),
            Some(_) => current.clone(),
            None => phase::SUCCEEDED,
        };
        if let Some(p) = &config.phase {
            next = p.clone();
        }
        ctx.debug(&format!("mock: phase {current:?} -> {next:?}"));
        Ok(Response {
            phase: Some(next),
            provider_status: config.provider_status,
            exports: config.export,
            conditions: vec![ConditionReport::new(
                CONDITION_VALIDATION,
                ConditionStatus::True,
                "SuccessfullValidation",
                "Successfully validated configuration",
            )],
            retry_after: None,
        })
    }

    fn delete(ctx: &Ctx, _inv: Invocation) -> Result<Response, DeployerError> {
        // The host deletes the export Secret referenced by status.exportRef.
        ctx.debug("mock: delete");
        Ok(Response::default())
    }
}

export_deployer!(Mock);

#[cfg(test)]
mod tests {
    use super::*;
    use sdk_guest::{NullHost, codes};
    use serde_json::json;

    fn item(config: Value, phase: &str) -> Invocation {
        Invocation::for_item(json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
            "metadata": {"name": "di", "namespace": "ns"},
            "spec": {"type": DEPLOY_ITEM_TYPE, "config": config},
            "status": {"phase": phase}
        }))
    }

    fn cfg(extra: Value) -> Value {
        let mut c = json!({"apiVersion": API_VERSION, "kind": "ProviderConfiguration"});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    }

    fn run(config: Value, phase: &str) -> Result<Response, DeployerError> {
        Mock::reconcile(&Ctx::native(&NullHost), item(config, phase))
    }

    #[test]
    fn default_is_succeeded() {
        let r = run(cfg(json!({})), "Init").unwrap();
        assert_eq!(r.phase.as_ref().map(Phase::as_str), Some("Succeeded"));
        assert_eq!(r.conditions[0].status, ConditionStatus::True);
        assert_eq!(r.conditions[0].reason, "SuccessfullValidation");
    }

    #[test]
    fn phase_overrides_and_initial_phase_only_from_init() {
        assert_eq!(
            run(
                cfg(json!({"phase": "Failed", "initialPhase": "Progressing"})),
                "Init"
            )
            .unwrap()
            .phase
            .as_ref()
            .map(Phase::as_str),
            Some("Failed")
        );
        assert_eq!(
            run(cfg(json!({"initialPhase": "Progressing"})), "Init")
                .unwrap()
                .phase
                .as_ref()
                .map(Phase::as_str),
            Some("Progressing")
        );
        assert_eq!(
            run(cfg(json!({"initialPhase": "Progressing"})), "")
                .unwrap()
                .phase
                .as_ref()
                .map(Phase::as_str),
            Some("Progressing")
        );
        assert_eq!(
            run(cfg(json!({"initialPhase": "Progressing"})), "Progressing")
                .unwrap()
                .phase
                .as_ref()
                .map(Phase::as_str),
            Some("Progressing"),
            "stays in its phase: no automatic Succeeded"
        );
    }

    #[test]
    fn export_and_provider_status_verbatim() {
        let ps = json!({"apiVersion": "x/v1", "kind": "S", "n": 1});
        let r = run(
            cfg(json!({"export": {"a": [1, 2]}, "providerStatus": ps})),
            "Init",
        )
        .unwrap();
        assert_eq!(r.exports, Some(json!({"a": [1, 2]})));
        assert_eq!(r.provider_status, Some(ps));
    }

    #[test]
    fn bad_config_is_configuration_problem() {
        let e = run(cfg(json!({"phase": 5})), "Init").unwrap_err();
        assert!(e.has_code(codes::CONFIGURATION_PROBLEM));
        assert_eq!(e.reason, "FailedUnmarshal");
        assert!(
            e.message.contains("phase") || e.message.contains("invalid type"),
            "{}",
            e.message
        );
        assert_eq!(e.conditions[0].status, ConditionStatus::False);

        let e = run(
            json!({"apiVersion": "other/v1", "kind": "ProviderConfiguration"}),
            "Init",
        )
        .unwrap_err();
        assert!(e.message.contains("other/v1"), "{}", e.message);

        let e = Mock::reconcile(
            &Ctx::native(&NullHost),
            Invocation::for_item(json!({"spec": {"type": DEPLOY_ITEM_TYPE}})),
        )
        .unwrap_err();
        assert_eq!(e.reason, "ProviderConfigurationMissing");
    }
}
