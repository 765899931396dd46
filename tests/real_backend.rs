//! The real backend's servers, as the stories get them: a kube-apiserver 1.20 is prepared once and,
//! after its story, put back as it was prepared (every etcd key restored, the watch caches caught
//! up) to serve a later story (test_support's `real_apiserver`). These stories hold the pool to
//! what a story relies on: a recycled server shows nothing of the story before it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use deployer_host::landscaper::{DeployItem, Target};
use test_support::{RealApiServer, mock_item, skip_on_embedded};

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("pool.example.com", "v1", "Widget"),
        "widgets",
    )
}

/// What a story might leave behind: an item, a namespace with a ConfigMap, a CRD with a custom
/// resource, the `default` Target changed and the `default` ServiceAccount deleted.
async fn leave_everything_changed(client: &Client) {
    let items: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    let item: DeployItem = serde_yaml::from_str(&mock_item("leftover")).unwrap();
    items.create(&PostParams::default(), &item).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "leftover"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "leftover");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cm"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.pool.example.com"},
        "spec": {"group": "pool.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "pool.example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"}
    }))
    .unwrap();
    let widget_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widgets());
    // The CRD's API is served a moment after it is created.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while let Err(e) = widget_api.create(&PostParams::default(), &widget).await {
        assert!(tokio::time::Instant::now() < deadline, "widget: {e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let targets: Api<Target> = Api::namespaced(client.clone(), "default");
    targets
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"config": {"kubeconfig": "changed"}}})),
        )
        .await
        .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    sas.delete("default", &DeleteParams::default())
        .await
        .unwrap();
}

/// Takes servers until `url`'s comes back (the others are ended when the story ends).
fn the_same_server_again(url: &str) -> (RealApiServer, Vec<RealApiServer>) {
    let mut others = Vec::new();
    loop {
        let server = RealApiServer::prepared();
        if server.url == url {
            return (server, others);
        }
        others.push(server);
        assert!(
            others.len() < 4,
            "the recycled server {url} never came back"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_story_that_changed_everything_when_its_server_serves_another_story_then_it_is_as_prepared()
 {
    skip_on_embedded!("only the real backend recycles its servers");
    // Given a story that changed everything it could, on a prepared server …
    let first = RealApiServer::prepared();
    let url = first.url.clone();
    let client = first.client().await;
    let targets: Api<Target> = Api::namespaced(client.clone(), "default");
    let prepared_target = targets.get("default").await.unwrap().spec;
    leave_everything_changed(&client).await;
    drop(client);
    // … when the story ends and later stories ask for servers until they get that one …
    drop(first);
    let (second, _others) = tokio::task::block_in_place(|| the_same_server_again(&url));
    let client = second.client().await;
    // … then what the story wrote is gone, from etcd and from the watch caches alike …
    let items: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    for params in [ListParams::default(), ListParams::default().match_any()] {
        assert!(items.list(&params).await.unwrap().items.is_empty());
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(namespaces.get_opt("leftover").await.unwrap().is_none());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "leftover");
    assert!(
        cms.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(
        crds.get_opt("widgets.pool.example.com")
            .await
            .unwrap()
            .is_none()
    );
    // (the custom resource's API goes with its definition)
    let widget_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widgets());
    let gone = || async { widget_api.list(&ListParams::default()).await.is_err() };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !gone().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Widget API is still served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // … and what it changed or deleted is back as prepared.
    let targets: Api<Target> = Api::namespaced(client.clone(), "default");
    let target = targets.get("default").await.unwrap();
    assert_eq!(
        serde_json::to_value(&target.spec).unwrap(),
        serde_json::to_value(&prepared_target).unwrap()
    );
    let cached = targets
        .list(&ListParams::default().match_any())
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&cached.items[0].spec).unwrap(),
        serde_json::to_value(&prepared_target).unwrap(),
        "the Target's watch cache is as prepared"
    );
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    assert!(sas.get_opt("default").await.unwrap().is_some());
    // A recycled server is still a working one: an item created now is there.
    let item: DeployItem = serde_yaml::from_str(&mock_item("fresh")).unwrap();
    items.create(&PostParams::default(), &item).await.unwrap();
    assert_eq!(
        items
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}
