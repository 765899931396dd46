//! Checklist 2: optimistic concurrency, one global rv, Status bodies with `code`.

use crate::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};

#[tokio::test]
async fn one_global_strictly_increasing_resource_version_across_kinds() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let secrets: Api<Secret> = Api::default_namespaced(s.client());
    let a = cms
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let b = secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "b"}})).unwrap(),
        )
        .await
        .unwrap();
    let a2 = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "2"}})),
        )
        .await
        .unwrap();
    assert!(
        rv(&a) < rv(&b) && rv(&b) < rv(&a2),
        "{} {} {}",
        rv(&a),
        rv(&b),
        rv(&a2)
    );
    let list = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        list.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        rv(&a2),
        "list rv is the current counter"
    );
    assert_eq!(s.resource_version(), rv(&a2));
}

#[tokio::test]
async fn creating_an_existing_name_is_409_already_exists() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("dup", &[]))
        .await
        .unwrap();
    let e = api_err(
        cms.create(&PostParams::default(), &cm("dup", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "configmaps \"dup\" already exists");
}

#[tokio::test]
async fn replace_with_a_stale_resource_version_is_409_conflict_and_without_one_is_unconditional() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let v1 = cms
        .create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    let mut newer = v1.clone();
    newer.data.as_mut().unwrap().insert("k".into(), "2".into());
    cms.replace("x", &PostParams::default(), &newer)
        .await
        .unwrap();
    let mut stale = v1.clone();
    stale.data.as_mut().unwrap().insert("k".into(), "3".into());
    let e = api_err(
        cms.replace("x", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
    );
    stale.metadata.resource_version = None;
    let r = cms
        .replace("x", &PostParams::default(), &stale)
        .await
        .unwrap();
    assert_eq!(r.data.unwrap()["k"], "3");
}

#[tokio::test]
async fn resource_version_inside_a_merge_patch_is_a_precondition() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let v1 = cms
        .create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    let stale = Patch::Merge(
        json!({"metadata": {"resourceVersion": v1.metadata.resource_version}, "data": {"k": "3"}}),
    );
    let e = api_err(
        cms.patch("x", &PatchParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
}

#[tokio::test]
async fn failed_json_patch_test_is_422_invalid_and_changes_nothing() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let v1 = cms
        .create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    let p: json_patch_ops::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/k", "value": "other"},
        {"op": "replace", "path": "/data/k", "value": "new"}
    ]))
    .unwrap();
    let e = api_err(
        cms.patch("x", &PatchParams::default(), &Patch::Json::<()>(p))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(rv(&cms.get("x").await.unwrap()), rv(&v1));
}

mod json_patch_ops {
    pub type Patch = json_patch::Patch;
}

#[tokio::test]
async fn post_with_a_resource_version_is_rejected_like_the_real_server() {
    let s = server();
    let (code, body) = raw(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        r#"{"metadata":{"name":"x","resourceVersion":"5"}}"#,
    )
    .await;
    assert_eq!(code, 500);
    assert_eq!(
        body["message"],
        "resourceVersion should not be set on objects to be created"
    );
}

#[tokio::test]
async fn delete_preconditions_on_uid_and_resource_version_are_409() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let c = cms
        .create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    let bad_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(
        api_err(cms.delete("x", &bad_uid).await.unwrap_err()).code,
        409
    );
    let bad_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..Default::default()
    };
    assert_eq!(
        api_err(cms.delete("x", &bad_rv).await.unwrap_err()).code,
        409
    );
    let good = DeleteParams {
        preconditions: Some(Preconditions {
            uid: c.metadata.uid.clone(),
            resource_version: c.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    assert!(
        cms.delete("x", &good).await.unwrap().is_right(),
        "gone: a Status is returned"
    );
}

#[tokio::test]
async fn errors_are_status_bodies_with_code_reason_and_details() {
    let s = server();
    let (code, body) = raw(
        &s,
        "GET",
        "/api/v1/namespaces/default/configmaps/missing",
        None,
        "",
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["apiVersion"], "v1");
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["code"], 404);
    assert_eq!(body["reason"], "NotFound");
    assert_eq!(body["message"], "configmaps \"missing\" not found");
    assert_eq!(
        body["details"],
        json!({"name": "missing", "kind": "configmaps"})
    );
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let e = api_err(cms.get("missing").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
}

#[tokio::test]
async fn generate_name_creates_unique_names() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let mut c = cm("", &[]);
    c.metadata.name = None;
    c.metadata.generate_name = Some("gen-".into());
    let a = cms.create(&PostParams::default(), &c).await.unwrap();
    let b = cms.create(&PostParams::default(), &c).await.unwrap();
    let (na, nb) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(
        na.starts_with("gen-") && na.len() == 9 && na != nb,
        "{na} {nb}"
    );
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());
    assert_eq!(a.metadata.generation, Some(1));
}
