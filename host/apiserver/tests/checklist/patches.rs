//! Checklist 7: merge, JSON, strategic merge and server-side apply patches.

use crate::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};

#[tokio::test]
async fn json_merge_patch_with_null_deletes() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("x", &[("a", "1"), ("b", "2")]))
        .await
        .unwrap();
    let r = cms
        .patch(
            "x",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": null, "c": "3"}}})),
        )
        .await
        .unwrap();
    let labels = r.metadata.labels.unwrap();
    assert_eq!(
        labels.into_iter().collect::<Vec<_>>(),
        vec![
            ("b".to_string(), "2".to_string()),
            ("c".to_string(), "3".to_string())
        ]
    );
}

#[tokio::test]
async fn json_patch_with_test_add_remove_and_escapes() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    let p: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["a/b"]},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "c"},
        {"op": "add", "path": "/metadata/annotations", "value": {"x.io/y": "1"}},
        {"op": "replace", "path": "/metadata/annotations/x.io~1y", "value": "2"},
        {"op": "remove", "path": "/data/k"}
    ]))
    .unwrap();
    let r = cms
        .patch("x", &PatchParams::default(), &Patch::Json::<()>(p))
        .await
        .unwrap();
    assert_eq!(r.metadata.finalizers.unwrap(), ["a/b", "c"]);
    assert_eq!(r.metadata.annotations.unwrap()["x.io/y"], "2");
    assert!(r.data.is_none_or(|d| d.is_empty()));
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let s = server();
    let deps: Api<Deployment> = Api::default_namespaced(s.client());
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [
            {"name": "main", "image": "main:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "side:1"}
        ]}}}
    }))
    .unwrap();
    deps.create(&PostParams::default(), &d).await.unwrap();
    let p = Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "main:2", "env": [{"name": "B", "value": "2"}]},
        {"name": "side", "$patch": "delete"}
    ]}}}}));
    let r = deps.patch("d", &PatchParams::default(), &p).await.unwrap();
    let cs = r.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0].image.as_deref(), Some("main:2"));
    let env: Vec<_> = cs[0]
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(env, ["A", "B"]);
    assert_eq!(r.metadata.generation, Some(2));
}

#[tokio::test]
async fn server_side_apply_creates_then_reapplying_without_a_field_removes_it() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let pp = PatchParams::apply("tester");
    let cfg = |data: serde_json::Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": data}),
        )
    };
    let created = cms
        .patch("x", &pp, &cfg(json!({"a": "1", "b": "2"})))
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap().len(), 2);
    let mf = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(
        (mf[0].manager.as_deref(), mf[0].operation.as_deref()),
        (Some("tester"), Some("Apply"))
    );

    // Another manager adds a field with a merge patch; it survives our re-apply.
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"other": "o"}})),
    )
    .await
    .unwrap();
    let r = cms.patch("x", &pp, &cfg(json!({"a": "1"}))).await.unwrap();
    let data = r.data.unwrap();
    assert_eq!(
        data.keys().cloned().collect::<Vec<_>>(),
        ["a", "other"],
        "b was removed, other kept"
    );

    // A second applier conflicts unless it forces.
    let e = api_err(
        cms.patch(
            "x",
            &PatchParams::apply("intruder"),
            &cfg(json!({"a": "changed"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert!(
        e.message.contains("conflict with \"tester\""),
        "{}",
        e.message
    );
    let r = cms
        .patch(
            "x",
            &PatchParams::apply("intruder").force(),
            &cfg(json!({"a": "changed"})),
        )
        .await
        .unwrap();
    assert_eq!(r.data.unwrap()["a"], "changed");
}

#[tokio::test]
async fn apply_without_field_manager_is_400_and_status_apply_only_touches_status() {
    let s = server();
    let (code, body) = raw(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        Some("application/apply-patch+yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
    )
    .await;
    assert_eq!(code, 400, "{body}");
    let (_s, api) = with_widgets().await;
    api.create(&PostParams::default(), &widget("w", json!({"size": 1})))
        .await
        .unwrap();
    let cfg = Patch::Apply(
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 5}, "status": {"phase": "Ok"}}),
    );
    let r = api
        .patch_status("w", &PatchParams::apply("ctl").force(), &cfg)
        .await
        .unwrap();
    assert_eq!(
        (
            r.data["spec"]["size"].as_i64(),
            r.data["status"]["phase"].as_str()
        ),
        (Some(1), Some("Ok"))
    );
}
