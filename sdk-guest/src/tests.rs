//! Unit tests of the data model and error helpers.

use super::*;
use serde_json::json;

#[test]
fn error_helpers_set_codes() {
    let e = DeployerError::configuration("Bad", "bad config");
    assert_eq!(e.codes, vec!["ERR_CONFIGURATION_PROBLEM"]);
    assert!(e.is_unrecoverable());
    assert_eq!(e.operation, "");
    assert_eq!(e.clone().or_operation("reconcile").operation, "reconcile");
    assert_eq!(
        e.with_operation("x").or_operation("reconcile").operation,
        "x"
    );

    assert_eq!(
        DeployerError::internal("a", "b").codes,
        vec![codes::INTERNAL_PROBLEM]
    );
    assert_eq!(DeployerError::timeout("a", "b").codes, vec![codes::TIMEOUT]);
    let r = DeployerError::retryable("Wait", "not yet");
    assert!(r.codes.is_empty());
    assert!(!r.is_unrecoverable());
    let r = r
        .with_code(codes::FOR_INFO_ONLY)
        .with_code(codes::FOR_INFO_ONLY);
    assert_eq!(r.codes, vec![codes::FOR_INFO_ONLY]);
    assert!(!r.is_unrecoverable());
}

#[test]
fn progressing_timeout_matches_landscaper() {
    let e = DeployerError::progressing_timeout("mock: start");
    assert_eq!(e.operation, "StandardTimeoutChecker.TimeoutExceeded");
    assert_eq!(e.reason, "ProgressingTimeout");
    assert_eq!(e.message, "timeout at: \"mock: start\"");
    assert_eq!(e.codes, vec![codes::TIMEOUT]);
}

#[test]
fn error_display() {
    let e = DeployerError::configuration("Parse", "broken").with_operation("reconcile");
    assert_eq!(
        e.to_string(),
        "reconcile: Parse: broken [ERR_CONFIGURATION_PROBLEM]"
    );
}

#[derive(serde::Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Cfg {
    #[allow(dead_code)]
    kind: String,
    count: u32,
}

#[test]
fn provider_config_errors_say_what_is_wrong() {
    let missing = Invocation::for_item(json!({"spec": {"type": "t"}}));
    let e = missing.provider_config::<Cfg>().unwrap_err();
    assert_eq!(e.reason, "ProviderConfigurationMissing");
    assert!(e.has_code(codes::CONFIGURATION_PROBLEM));

    let empty = Invocation::for_item(json!({"spec": {"type": "t", "config": {}}}));
    assert_eq!(
        empty.provider_config::<Cfg>().unwrap_err().reason,
        "ProviderConfigurationMissing"
    );

    let wrong =
        Invocation::for_item(json!({"spec": {"type": "t", "config": {"kind": "K", "count": "x"}}}));
    let e = wrong.provider_config::<Cfg>().unwrap_err();
    assert_eq!(e.reason, "ParseProviderConfiguration");
    assert!(e.message.contains("invalid type"), "{}", e.message);

    let ok =
        Invocation::for_item(json!({"spec": {"type": "t", "config": {"kind": "K", "count": 3}}}));
    assert_eq!(ok.provider_config::<Cfg>().unwrap().count, 3);
}

#[test]
fn for_item_takes_provider_status_and_phase() {
    let inv = Invocation::for_item(json!({
        "spec": {"type": "t"},
        "status": {"phase": "Init", "providerStatus": {"apiVersion": "a/v1", "kind": "S"}}
    }));
    assert_eq!(inv.current_phase(), Phase::Init);
    assert_eq!(
        inv.previous_provider_status,
        Some(json!({"apiVersion": "a/v1", "kind": "S"}))
    );
    assert_eq!(
        Invocation::for_item(json!({})).current_phase(),
        Phase::Empty
    );
}

#[test]
fn typed_models_roundtrip_and_keep_unknown_fields() {
    let raw = json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": "di", "namespace": "ns", "generation": 2, "finalizers": ["x"]},
        "spec": {"type": "landscaper.gardener.cloud/mock", "config": {"phase": "Failed"},
                 "timeout": "5m", "onDelete": {"skipUninstallIfClusterRemoved": true}},
        "status": {"phase": "Init", "observedGeneration": 2, "jobID": "j1", "jobIDFinished": "j0",
                   "exportRef": {"name": "mock-export-abc", "namespace": "ns"},
                   "lastError": {"operation": "o", "reason": "r", "message": "m",
                                 "lastTransitionTime": "t", "lastUpdateTime": "t"},
                   "somethingNew": {"x": 1}}
    });
    let di: DeployItem = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(di.spec.type_, "landscaper.gardener.cloud/mock");
    let status = di.status.clone().unwrap();
    assert_eq!(status.phase, Phase::Init);
    assert_eq!(status.job_id, "j1");
    assert_eq!(status.export_ref.as_ref().unwrap().name, "mock-export-abc");
    assert!(status.extra.contains_key("somethingNew"));
    assert_eq!(di.metadata.finalizers, Some(vec!["x".to_string()]));
    assert_eq!(
        di.spec
            .on_delete
            .as_ref()
            .unwrap()
            .skip_uninstall_if_cluster_removed,
        Some(true)
    );
    assert_eq!(serde_json::to_value(&di).unwrap(), raw);

    let target: Target = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
        "metadata": {"name": "t"},
        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster", "config": {"kubeconfig": "x"}}
    }))
    .unwrap();
    assert_eq!(
        target.spec.type_,
        "landscaper.gardener.cloud/kubernetes-cluster"
    );

    let ctx: Context = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
        "metadata": {"name": "default"}, "registryPullSecrets": [{"name": "s"}],
        "configurations": {"helmChartRepoCredentials": {}}
    }))
    .unwrap();
    assert_eq!(ctx.registry_pull_secrets.len(), 1);
    assert_eq!(ctx.api_version, "landscaper.gardener.cloud/v1alpha1");
    assert!(
        ctx.configurations
            .unwrap()
            .contains_key("helmChartRepoCredentials")
    );
}

#[test]
fn response_and_condition_serde() {
    let r = Response {
        phase: Some(phase::SUCCEEDED),
        conditions: vec![ConditionReport::new(
            "DeployItemValidation",
            ConditionStatus::True,
            "SuccessfullValidation",
            "ok",
        )],
        ..Default::default()
    };
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["conditions"][0]["type"], "DeployItemValidation");
    assert_eq!(v["conditions"][0]["status"], "True");
    let back: Response = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
    assert_eq!(ConditionStatus::Progressing.as_str(), "Progressing");
}

#[test]
fn null_host_ctx() {
    let host = NullHost;
    let ctx = Ctx::native(&host);
    assert!(ctx.checkpoint("x").is_ok());
    assert!(ctx.remaining().is_none());
    let e = ctx
        .kube_get(&ObjectRef::namespaced("v1", "ConfigMap", "ns", "n"))
        .unwrap_err();
    assert!(e.has_code(codes::INTERNAL_PROBLEM));
    assert!(ctx.now_rfc3339().ends_with('Z'));
}
