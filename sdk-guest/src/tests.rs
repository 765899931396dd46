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

mod http {
    use crate::http::{
        HttpRequest, HttpResponse, InvocationHttp, TransportError, check_relative_path, join,
        status_error,
    };
    use crate::{Ctx, Invocation, NativeHost, NullHost, ResolvedTarget, codes};
    use serde_json::json;

    #[test]
    fn join_puts_exactly_one_slash_between() {
        for base in ["https://h/v1", "https://h/v1/"] {
            for path in ["things/a", "/things/a"] {
                assert_eq!(join(base, path), "https://h/v1/things/a", "{base} + {path}");
            }
        }
        assert_eq!(join("https://h/v1/", ""), "https://h/v1/");
        assert_eq!(join("https://h", "a?b=1"), "https://h/a?b=1");
    }

    #[test]
    fn paths_must_stay_under_the_target() {
        assert!(check_relative_path("things/a").is_ok());
        assert!(check_relative_path("/things/a..b?x=..").is_ok());
        for bad in [
            "https://evil/x",
            "//evil/x",
            "../x",
            "a/../../x",
            "a/%2E%2e/x",
        ] {
            assert!(check_relative_path(bad).is_err(), "{bad}");
        }
        assert!(
            check_relative_path("http://x")
                .unwrap_err()
                .contains("absolute URL")
        );
        assert!(check_relative_path("a/../b").unwrap_err().contains(".."));
    }

    fn with_target(type_: &str, content: serde_json::Value) -> Invocation {
        let mut inv = Invocation::for_item(json!({"spec": {"type": "x"}}));
        let mut target = crate::Target::default();
        target.metadata.name = Some("api".into());
        target.spec.type_ = type_.into();
        inv.target = Some(ResolvedTarget {
            target,
            content: content.to_string(),
        });
        inv
    }

    #[test]
    fn the_target_url_comes_from_an_http_api_target() {
        let inv = with_target(
            "wasm-deployer.dev/http-api",
            json!({"url": "https://api.example.com/v1/", "auth": {"bearer": {"secretRef": {"name": "t"}}}}),
        );
        assert_eq!(
            inv.http_target_url().unwrap(),
            "https://api.example.com/v1/"
        );
        assert_eq!(
            inv.http_url("/things/a").unwrap(),
            "https://api.example.com/v1/things/a"
        );
        let e = inv.http_url("../admin").unwrap_err();
        assert_eq!(e.reason, "InvalidPath");
        assert!(e.has_code(codes::CONFIGURATION_PROBLEM));

        let problems = [
            (Invocation::for_item(json!({})), "NoTarget"),
            (
                with_target(
                    "landscaper.gardener.cloud/kubernetes-cluster",
                    json!({"kubeconfig": "x"}),
                ),
                "TargetType",
            ),
            (
                with_target("wasm-deployer.dev/http-api", json!({})),
                "TargetUrl",
            ),
            (
                with_target("wasm-deployer.dev/http-api", json!({"url": 3})),
                "TargetUrl",
            ),
            (
                with_target("wasm-deployer.dev/http-api", json!({"url": "ftp://x"})),
                "TargetUrl",
            ),
            (
                with_target("wasm-deployer.dev/http-api", json!({"url": "https://"})),
                "TargetUrl",
            ),
        ];
        for (inv, reason) in problems {
            let e = inv.http_target_url().unwrap_err();
            assert_eq!(e.reason, reason, "{e}");
            assert!(e.has_code(codes::CONFIGURATION_PROBLEM), "{e}");
        }
    }

    #[test]
    fn statuses_map_onto_the_shared_errors() {
        let url = "https://h/v1/things/a";
        for ok in [200, 201, 204, 302] {
            assert!(status_error("PUT", url, ok, b"").is_none(), "{ok}");
        }
        for status in [401, 403] {
            let e = status_error("put", url, status, b"  denied \n").unwrap();
            assert_eq!(e.codes, vec![codes::UNAUTHORIZED]);
            assert_eq!(e.reason, "Unauthorized");
            assert_eq!(e.message, format!("PUT {url}: {status} denied"));
        }
        let e = status_error("PUT", url, 422, b"{\"error\":\"size\"}").unwrap();
        assert_eq!(e.codes, vec![codes::CONFIGURATION_PROBLEM]);
        assert_eq!(e.reason, "HttpClientError");
        assert_eq!(e.message, format!("PUT {url}: 422 {{\"error\":\"size\"}}"));
        let e = status_error("DELETE", url, 503, b"").unwrap();
        assert!(e.codes.is_empty());
        assert_eq!(e.reason, "HttpServerError");
        assert_eq!(e.message, format!("DELETE {url}: 503"));

        let long = "é".repeat(600);
        let e = status_error("GET", url, 500, long.as_bytes()).unwrap();
        assert_eq!(e.message, format!("GET {url}: 500 {}...", "é".repeat(500)));

        let ok = HttpResponse {
            status: 200,
            body: b"{\"id\":1}".to_vec(),
            ..Default::default()
        };
        assert_eq!(ok.clone().error_for_status("GET", url).unwrap(), ok);
        assert_eq!(ok.json_or_null(), json!({"id": 1}));
        let not_json = HttpResponse {
            status: 404,
            body: b"gone".to_vec(),
            ..Default::default()
        };
        assert_eq!(not_json.json_or_null(), serde_json::Value::Null);
        assert_eq!(
            not_json.error_for_status("GET", url).unwrap_err().reason,
            "HttpClientError"
        );
    }

    #[test]
    fn transport_failures_are_retried_and_denials_are_configuration_problems() {
        let url = "https://h/v1/x";
        let e = TransportError::new("connection-refused", None).to_error("PUT", url);
        assert!(e.codes.is_empty());
        assert_eq!(e.reason, "HttpRequestFailed");
        assert_eq!(
            e.message,
            format!("PUT {url}: wasi:http error connection-refused")
        );
        let e = TransportError::new("internal-error", Some("reset".into())).to_error("GET", url);
        assert_eq!(
            e.message,
            format!("GET {url}: wasi:http error internal-error (reset)")
        );

        let denied = TransportError::new(TransportError::REQUEST_DENIED, None);
        assert!(denied.is_denied());
        let e = denied.to_error("PUT", url);
        assert_eq!(e.codes, vec![codes::CONFIGURATION_PROBLEM]);
        assert_eq!(e.reason, "HttpNotAllowed");
        assert!(
            e.message.starts_with(&format!("PUT {url}: not allowed")),
            "{}",
            e.message
        );
        assert!(e.message.contains("HTTP-request-denied"), "{}", e.message);
    }

    #[test]
    fn requests_build_and_go_through_the_native_host() {
        let r = HttpRequest::put("https://h/x").json(&json!({"a": 1}));
        assert_eq!(r.method, "PUT");
        assert_eq!(r.body, b"{\"a\":1}");
        assert_eq!(r.header_value("content-type"), Some("application/json"));
        assert_eq!(HttpRequest::new("delete", "u").method, "DELETE");

        // NullHost grants nothing: as the host refuses an URL outside the grant.
        let e = Ctx::native(&NullHost)
            .http(HttpRequest::get("https://h/x"))
            .unwrap_err();
        assert_eq!(e.reason, "HttpNotAllowed");

        struct Echo;
        impl NativeHost for Echo {
            fn log(&self, _: crate::LogLevel, _: &str) {}
            fn checkpoint(&self, _: &str) -> Result<(), crate::DeployerError> {
                Ok(())
            }
            fn remaining(&self) -> Option<std::time::Duration> {
                None
            }
            fn kube(&self, _: crate::KubeOp) -> Result<Option<String>, crate::DeployerError> {
                Ok(None)
            }
            fn http(&self, request: &HttpRequest) -> Result<HttpResponse, TransportError> {
                if request.url.contains("down") {
                    return Err(TransportError::new("connection-timeout", None));
                }
                Ok(HttpResponse {
                    status: 200,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: request.body.clone(),
                })
            }
        }
        let ctx = Ctx::native(&Echo);
        let got = ctx.http(r).unwrap();
        assert_eq!(got.header("Content-Type"), Some("application/json"));
        assert_eq!(got.json_or_null(), json!({"a": 1}));
        let e = ctx.http(HttpRequest::get("https://down/x")).unwrap_err();
        assert_eq!(e.reason, "HttpRequestFailed");
        assert!(
            e.message
                .contains("GET https://down/x: wasi:http error connection-timeout")
        );
    }
}
