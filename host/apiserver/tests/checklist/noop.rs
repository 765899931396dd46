//! Checklist 3: no-op writes change nothing and emit no event.

use crate::*;
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};

#[tokio::test]
async fn identical_replace_and_repeated_merge_patch_keep_the_resource_version_and_emit_nothing() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let c = cms
        .create(&PostParams::default(), &cm("x", &[("a", "1")]))
        .await
        .unwrap();
    let start = c.metadata.resource_version.clone().unwrap();

    let same = cms.replace("x", &PostParams::default(), &c).await.unwrap();
    assert_eq!(rv(&same), rv(&c), "identical replace is a no-op");
    let p = Patch::Merge(json!({"metadata": {"labels": {"a": "1"}}, "data": {"k": "v"}}));
    let same = cms.patch("x", &PatchParams::default(), &p).await.unwrap();
    assert_eq!(
        rv(&same),
        rv(&c),
        "merge patch to the same values is a no-op"
    );
    let same = cms.patch("x", &PatchParams::apply("me"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "v"}}))).await.unwrap();
    let again = cms.patch("x", &PatchParams::apply("me"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "v"}}))).await.unwrap();
    assert_eq!(
        rv(&same),
        rv(&again),
        "re-applying the same config is a no-op"
    );
    let writes = s.stats().writes;

    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "real"}})),
    )
    .await
    .unwrap();
    assert_eq!(s.stats().writes, writes + 1);
    let mut w = cms
        .watch(&WatchParams::default().timeout(1), &start)
        .await
        .unwrap()
        .boxed();
    // The first event after `start` is the SSA's managedFields write, then the real change; nothing for the no-ops.
    let mut kinds = Vec::new();
    while let Some(Ok(ev)) = w.next().await {
        if let WatchEvent::Modified(o) = ev {
            kinds.push(o.data.unwrap()["k"].clone());
        }
    }
    assert_eq!(kinds.last().map(String::as_str), Some("real"));
    assert!(
        kinds.len() <= 2,
        "at most the apply's ownership write and the real change: {kinds:?}"
    );
}
