//! Checklist 5: finalizers and deletion.

use crate::*;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};

fn with_finalizer(name: &str) -> ConfigMap {
    let mut c = cm(name, &[]);
    c.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    c
}

#[tokio::test]
async fn delete_with_finalizers_sets_deletion_timestamp_and_keeps_the_object_until_the_last_finalizer_goes()
 {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let created = cms
        .create(&PostParams::default(), &with_finalizer("x"))
        .await
        .unwrap();
    let start = created.metadata.resource_version.clone().unwrap();

    let r = cms.delete("x", &DeleteParams::background()).await.unwrap();
    let terminating = r.left().expect("the object is returned, not a Status");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert!(
        cms.get("x")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some(),
        "still there"
    );

    // A second DELETE is idempotent.
    let again = cms
        .delete("x", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        terminating.metadata.resource_version
    );

    // Removing the last finalizer removes the object.
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_err(cms.get("x").await.unwrap_err()).code, 404);

    let evs: Vec<_> = cms
        .watch(&WatchParams::default().timeout(1), &start)
        .await
        .unwrap()
        .take(3)
        .try_collect()
        .await
        .unwrap();
    let kinds: Vec<&str> = evs
        .iter()
        .map(|e| match e {
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["MODIFIED", "MODIFIED", "DELETED"],
        "deletionTimestamp set, finalizer removed, gone"
    );
}

#[tokio::test]
async fn adding_a_finalizer_during_deletion_is_422() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &with_finalizer("x"))
        .await
        .unwrap();
    cms.delete("x", &DeleteParams::default()).await.unwrap();
    let p =
        Patch::Merge(json!({"metadata": {"finalizers": ["example.com/keep", "example.com/new"]}}));
    let e = api_err(
        cms.patch("x", &PatchParams::default(), &p)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn delete_without_finalizers_returns_a_success_status_and_emits_deleted() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let c = cms
        .create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    let st = cms
        .delete("x", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a Status");
    assert_eq!(
        st.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    let mut w = cms
        .watch(
            &WatchParams::default().timeout(1),
            c.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    match w.next().await.unwrap().unwrap() {
        WatchEvent::Deleted(o) => assert!(
            rv(&o) > rv(&c),
            "the DELETED object carries the deletion's rv"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn owner_reference_garbage_collection_in_the_background() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let owner = cms
        .create(&PostParams::default(), &cm("owner", &[]))
        .await
        .unwrap();
    let mut dep = cm("dep", &[]);
    dep.metadata.owner_references = Some(vec![serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid})).unwrap()]);
    cms.create(&PostParams::default(), &dep).await.unwrap();
    let mut orphan = cm("orphan", &[]);
    orphan.metadata.owner_references = dep.metadata.owner_references.clone();
    cms.create(&PostParams::default(), &orphan).await.unwrap();
    // Orphan the second dependent first (it loses its ownerReference), then delete the owner.
    cms.patch(
        "orphan",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"ownerReferences": null}})),
    )
    .await
    .unwrap();
    cms.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    assert_eq!(
        api_err(cms.get("dep").await.unwrap_err()).code,
        404,
        "dependent collected"
    );
    assert!(cms.get("orphan").await.is_ok());
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents() {
    let s = server();
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(s.client());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "tmp"}})).unwrap(),
    )
    .await
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(s.client(), "tmp");
    cms.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &with_finalizer("held"))
        .await
        .unwrap();
    let r = nss.delete("tmp", &DeleteParams::default()).await.unwrap();
    let ns = r
        .left()
        .expect("terminating while content with finalizers remains");
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    assert_eq!(api_err(cms.get("a").await.unwrap_err()).code, 404);
    let e = api_err(
        cms.create(&PostParams::default(), &cm("b", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403, "no new content in a terminating namespace");
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        api_err(nss.get("tmp").await.unwrap_err()).code,
        404,
        "namespace gone once empty"
    );
}
