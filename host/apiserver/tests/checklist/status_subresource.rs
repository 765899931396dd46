//! Checklist 4: status subresource and generation.

use crate::*;
use kube::api::{Patch, PatchParams, PostParams};

#[tokio::test]
async fn create_drops_status_and_main_resource_writes_ignore_status() {
    let (_s, api) = with_widgets().await;
    let mut w = widget("w", json!({"size": 1}));
    w.data["status"] = json!({"phase": "Injected"});
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );
    assert_eq!(created.metadata.generation, Some(1));

    let p = Patch::Merge(json!({"status": {"phase": "ViaMain"}}));
    let same = api.patch("w", &PatchParams::default(), &p).await.unwrap();
    assert!(same.data.get("status").is_none());
    assert_eq!(
        same.metadata.resource_version, created.metadata.resource_version,
        "ignored status = no-op"
    );
}

#[tokio::test]
async fn status_writes_ignore_spec_and_never_bump_generation() {
    let (_s, api) = with_widgets().await;
    api.create(&PostParams::default(), &widget("w", json!({"size": 1})))
        .await
        .unwrap();
    let p = Patch::Merge(
        json!({"spec": {"size": 99}, "status": {"observedGeneration": 1, "phase": "Ready"}}),
    );
    let st = api
        .patch_status("w", &PatchParams::default(), &p)
        .await
        .unwrap();
    assert_eq!(
        st.data["spec"]["size"], 1,
        "spec in a status write is ignored"
    );
    assert_eq!(st.data["status"]["phase"], "Ready");
    assert_eq!(st.metadata.generation, Some(1));

    let mut full = api.get_status("w").await.unwrap();
    full.data["status"]["phase"] = json!("Replaced");
    full.data["spec"]["size"] = json!(7);
    let r = api
        .replace_status("w", &PostParams::default(), &full)
        .await
        .unwrap();
    assert_eq!(
        (
            r.data["status"]["phase"].as_str(),
            r.data["spec"]["size"].as_i64(),
            r.metadata.generation
        ),
        (Some("Replaced"), Some(1), Some(1))
    );
}

#[tokio::test]
async fn generation_bumps_only_on_spec_changes() {
    let (_s, api) = with_widgets().await;
    api.create(&PostParams::default(), &widget("w", json!({"size": 1})))
        .await
        .unwrap();
    let labels = api.patch("w", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}, "finalizers": ["f"]}}))).await.unwrap();
    assert_eq!(
        labels.metadata.generation,
        Some(1),
        "metadata-only writes keep generation"
    );
    let spec = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(spec.metadata.generation, Some(2));
    let status = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "x"}})),
        )
        .await
        .unwrap();
    assert_eq!(status.metadata.generation, Some(2));
}
