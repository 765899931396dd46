//! Stats, audit log and dry-run (used by later benchmarks and reliability work).

use crate::*;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

#[tokio::test]
async fn stats_count_requests_by_verb_and_resource_and_audit_records_successful_writes() {
    let s = server();
    s.enable_audit(true);
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    cms.get("x").await.unwrap();
    cms.list(&Default::default()).await.unwrap();
    let pp = PatchParams {
        field_manager: Some("replica-1".into()),
        ..Default::default()
    };
    cms.patch("x", &pp, &Patch::Merge(json!({"data": {"k": "2"}})))
        .await
        .unwrap();
    cms.patch("x", &pp, &Patch::Merge(json!({"data": {"k": "2"}})))
        .await
        .unwrap(); // no-op
    let _ = cms
        .create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap_err(); // 409: not audited
    cms.delete("x", &DeleteParams::default()).await.unwrap();

    let st = s.stats();
    assert_eq!(
        (
            st.count("create", "configmaps"),
            st.count("get", "configmaps"),
            st.count("list", "configmaps")
        ),
        (2, 1, 1)
    );
    assert_eq!(
        (
            st.count("patch", "configmaps"),
            st.count("delete", "configmaps")
        ),
        (2, 1)
    );
    assert_eq!(st.verb("patch"), 2);
    assert_eq!(st.total_requests, 7);

    let log = s.audit_log();
    let summary: Vec<(&str, &str, bool)> = log
        .iter()
        .map(|e| (e.verb.as_str(), e.name.as_str(), e.changed))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("create", "x", true),
            ("patch", "x", true),
            ("patch", "x", false),
            ("delete", "x", true)
        ]
    );
    assert_eq!(log[1].field_manager.as_deref(), Some("replica-1"));
    // kube::Client::new(router) sends no User-Agent; an HTTP client's is recorded.
    raw_with(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps?fieldManager=kubectl-create",
        &[
            ("content-type", "application/json"),
            ("user-agent", "kubectl/v1.32.4"),
        ],
        r#"{"metadata":{"name":"ua"}}"#,
    )
    .await;
    let last = s.audit_log().pop().unwrap();
    assert_eq!(
        (last.user_agent.as_deref(), last.field_manager.as_deref()),
        (Some("kubectl/v1.32.4"), Some("kubectl-create"))
    );
    assert!(
        log[1].resource_version.parse::<u64>().unwrap()
            > log[0].resource_version.parse::<u64>().unwrap()
    );
    assert_eq!(log[0].resource, "configmaps");
}

#[tokio::test]
async fn dry_run_writes_change_nothing() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let rv0 = s.resource_version();
    cms.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        &cm("x", &[]),
    )
    .await
    .unwrap();
    assert_eq!(s.resource_version(), rv0);
    assert_eq!(api_err(cms.get("x").await.unwrap_err()).code, 404);
}
