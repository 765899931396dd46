//! Fault injection: off by default; 409/500 on writes; 503/504 on any request (a 504'd write
//! is applied); dropped watch streams.

use crate::*;
use embedded_apiserver::FaultConfig;
use kube::api::{Api, PostParams};
use std::time::Duration;

#[tokio::test]
async fn faults_are_off_by_default_and_can_fail_every_write() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    for i in 0..50 {
        cms.create(&PostParams::default(), &cm(&format!("ok{i}"), &[]))
            .await
            .unwrap();
    }
    s.set_faults(FaultConfig {
        write_conflict_probability: 1.0,
        ..Default::default()
    });
    let e = api_err(
        cms.create(&PostParams::default(), &cm("c", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        api_err(cms.get("c").await.unwrap_err()).code,
        404,
        "the faulted write was not applied"
    );
    assert!(cms.get("ok1").await.is_ok(), "reads are unaffected");
    s.set_faults(FaultConfig {
        write_error_probability: 1.0,
        ..Default::default()
    });
    let e = api_err(cms.delete("ok1", &Default::default()).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));
    s.set_faults(FaultConfig {
        write_conflict_probability: 0.5,
        ..Default::default()
    });
    let mut failures = 0;
    for i in 0..200 {
        if cms
            .create(&PostParams::default(), &cm(&format!("p{i}"), &[]))
            .await
            .is_err()
        {
            failures += 1;
        }
    }
    assert!((50..150).contains(&failures), "about half fail: {failures}");
}

#[tokio::test]
async fn unavailable_answers_handle_nothing_and_timed_out_writes_take_effect() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    s.set_faults(FaultConfig {
        unavailable_probability: 1.0,
        ..Default::default()
    });
    let e = api_err(
        cms.create(&PostParams::default(), &cm("u", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (503, "ServiceUnavailable"));
    assert_eq!(
        api_err(cms.get("u").await.unwrap_err()).code,
        503,
        "reads too"
    );
    s.set_faults(FaultConfig {
        timeout_probability: 1.0,
        ..Default::default()
    });
    let e = api_err(
        cms.create(&PostParams::default(), &cm("t", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
    s.set_faults(FaultConfig::default());
    assert!(
        cms.get("t").await.is_ok(),
        "the timed-out create was applied"
    );
    assert_eq!(
        api_err(cms.get("u").await.unwrap_err()).code,
        404,
        "the 503'd create was not"
    );
}

#[tokio::test]
async fn watch_streams_can_be_dropped_midway() {
    let s = embedded_apiserver::ApiServer::new(embedded_apiserver::Options {
        faults: FaultConfig {
            watch_drop_probability: 1.0,
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let start = s.resource_version();
    for i in 0..5 {
        cms.create(&PostParams::default(), &cm(&format!("w{i}"), &[]))
            .await
            .unwrap();
    }
    let (_, lines, ended) = watch_lines(&s, &format!("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30&resourceVersion={start}"), None, 100, Duration::from_secs(5)).await;
    // History replay is sent in one go; the live part drops at the first event.
    assert_eq!(lines.len(), 5);
    let h = tokio::spawn({
        let s = s.clone();
        async move {
            watch_lines(&s, &format!("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30&resourceVersion={}", s.resource_version()), None, 100, Duration::from_secs(5)).await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..5 {
        cms.create(&PostParams::default(), &cm(&format!("live{i}"), &[]))
            .await
            .unwrap();
    }
    let (_, live, live_ended) = h.await.unwrap();
    assert!(live_ended, "the stream was dropped long before its timeout");
    assert_eq!(
        live.len(),
        1,
        "dropped right after the first live event: {live:?}"
    );
    let _ = ended;
}

#[tokio::test]
async fn requests_for_chosen_resources_can_be_delayed() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("slow", &[]))
        .await
        .unwrap();
    s.set_faults(FaultConfig {
        response_delay: Duration::from_secs(60),
        delayed_resources: vec!["configmaps".into()],
        ..Default::default()
    });
    // A ConfigMap read hangs (here: longer than the caller waits) ...
    let hung = tokio::time::timeout(Duration::from_millis(300), cms.get("slow")).await;
    assert!(hung.is_err(), "the read was answered: {hung:?}");
    // ... while other resources answer at once.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(s.client());
    tokio::time::timeout(Duration::from_secs(5), secrets.list(&Default::default()))
        .await
        .expect("secrets are not delayed")
        .unwrap();
    s.set_faults(FaultConfig::default());
    assert!(cms.get("slow").await.is_ok());
}
