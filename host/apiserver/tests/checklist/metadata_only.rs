//! Checklist 6: metadata-only get/list/watch (`as=PartialObjectMetadata[List]`).

use crate::*;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};

#[tokio::test]
async fn metadata_only_get_list_and_watch() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let c = cms
        .create(&PostParams::default(), &cm("x", &[("a", "b")]))
        .await
        .unwrap();

    let m = cms.get_metadata("x").await.unwrap();
    assert_eq!(m.metadata.labels.unwrap()["a"], "b");
    let l = cms.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(l.items.len(), 1);

    let accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
    let (code, body) = raw_with(
        &s,
        "GET",
        "/api/v1/namespaces/default/configmaps/x",
        &[("accept", accept)],
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        (body["kind"].as_str(), body["apiVersion"].as_str()),
        (Some("PartialObjectMetadata"), Some("meta.k8s.io/v1"))
    );
    assert!(
        body.get("data").is_none(),
        "no data in a metadata-only answer"
    );
    let accept =
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let (_, body) = raw_with(
        &s,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[("accept", accept)],
        "",
    )
    .await;
    assert_eq!(body["kind"], "PartialObjectMetadataList");
    assert_eq!(body["items"][0]["kind"], "PartialObjectMetadata");

    cms.delete("x", &Default::default()).await.unwrap();
    let evs: Vec<_> = cms
        .watch_metadata(
            &WatchParams::default().timeout(1),
            c.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .take(1)
        .try_collect()
        .await
        .unwrap();
    assert!(
        matches!(&evs[0], WatchEvent::Deleted(m) if m.metadata.name.as_deref() == Some("x")),
        "{evs:?}"
    );
    let (_, lines, _) = watch_lines(
        &s,
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1&resourceVersion={}",
            c.metadata.resource_version.unwrap()
        ),
        Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
        1,
        std::time::Duration::from_secs(3),
    )
    .await;
    assert_eq!(
        (
            lines[0]["type"].as_str(),
            lines[0]["object"]["kind"].as_str()
        ),
        (Some("DELETED"), Some("PartialObjectMetadata"))
    );
    let _ = cms
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed()
        .next()
        .await;
}
