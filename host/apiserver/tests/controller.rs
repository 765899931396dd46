//! A kube-runtime `Controller` with `finalizer()` and a `patch_status` loop
//! over a Landscaper CRD (DeployItem), registered by POSTing the CRD.

use embedded_apiserver::{ApiServer, Options};
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{self, Event as Finalizer, finalizer};
use kube::runtime::watcher;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const FINALIZER: &str = "test.example.com/cleanup";

struct Ctx {
    api: Api<DynamicObject>,
    reconciles: AtomicUsize,
    cleanups: AtomicUsize,
}

#[derive(Debug)]
struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Error {}

async fn reconcile(
    obj: Arc<DynamicObject>,
    ctx: Arc<Ctx>,
) -> Result<Action, finalizer::Error<Error>> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let c = ctx.clone();
    finalizer(&ctx.api, FINALIZER, obj, |ev| async move {
        match ev {
            Finalizer::Apply(o) => {
                let status = json!({"status": {"observedGeneration": o.metadata.generation, "phase": "Succeeded"}});
                c.api.patch_status(o.metadata.name.as_deref().unwrap(), &PatchParams::default(), &Patch::Merge(status)).await.map_err(|e| Error(e.to_string()))?;
                Ok(Action::await_change())
            }
            Finalizer::Cleanup(_) => {
                c.cleanups.fetch_add(1, Ordering::SeqCst);
                Ok(Action::await_change())
            }
        }
    })
    .await
}

fn error_policy(_: Arc<DynamicObject>, _: &finalizer::Error<Error>, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

async fn wait_for(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn controller_with_finalizer_and_status_patch_against_a_landscaper_crd() {
    let s = ApiServer::new(Options::default()).unwrap();
    let client = s.client();
    let yaml = std::fs::read_to_string(
        "../../charts/wasm-deployer/charts/landscaper-crds/crds/landscaper.gardener.cloud_deployitems.yaml",
    )
    .unwrap();
    let crd: CustomResourceDefinition = serde_yaml::from_str(&yaml).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();

    let ar = ApiResource {
        group: "landscaper.gardener.cloud".into(),
        version: "v1alpha1".into(),
        api_version: "landscaper.gardener.cloud/v1alpha1".into(),
        kind: "DeployItem".into(),
        plural: "deployitems".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        reconciles: AtomicUsize::new(0),
        cleanups: AtomicUsize::new(0),
    });
    let controller = Controller::new_with(api.clone(), watcher::Config::default(), ar.clone())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| async {});
    let handle = tokio::spawn(controller);

    let di: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": "di"}, "spec": {"type": "landscaper.gardener.cloud/mock", "config": {"apiVersion": "mock.landscaper.gardener.cloud/v1alpha1", "kind": "ProviderConfiguration", "v": 1}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &di).await.unwrap();

    let observed = |g: i64| {
        let api = api.clone();
        async move || {
            let o = api.get("di").await.unwrap();
            o.data["status"]["observedGeneration"] == g
                && o.metadata.finalizers.unwrap_or_default() == [FINALIZER]
        }
    };
    wait_for("finalizer + observedGeneration 1", observed(1)).await;
    let settled = ctx.reconciles.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = ctx.reconciles.load(Ordering::SeqCst);
    assert!(
        later <= settled + 1,
        "no hot loop: {settled} then {later} reconciles"
    );
    assert!(later <= 5, "a handful of reconciles, got {later}");

    api.patch(
        "di",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"config": {"v": 2}}})),
    )
    .await
    .unwrap();
    wait_for("observedGeneration 2", observed(2)).await;

    let r = api.delete("di", &DeleteParams::default()).await.unwrap();
    assert!(
        r.left().unwrap().metadata.deletion_timestamp.is_some(),
        "kept by the finalizer"
    );
    wait_for("object gone", async || {
        api.get_opt("di").await.unwrap().is_none()
    })
    .await;
    assert_eq!(ctx.cleanups.load(Ordering::SeqCst), 1);
    handle.abort();
}

/// Given items listed page by page, when an item of the first page changes while later pages
/// are read, then a client that watches from the list's resourceVersion (as kube-rs' watcher and
/// client-go's reflector do: the last page's) still hears of that change. Before the fix every
/// page reported the store's current version, and a controller started during a burst of
/// writes never reconciled such items.
#[tokio::test]
async fn a_change_during_a_paginated_list_reaches_the_watch_that_follows_it() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{ListParams, WatchEvent, WatchParams};
    let server = ApiServer::new(Options::default()).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for name in ["a", "b", "c"] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": "1"}}))
                .unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let list_rv = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().expect("a second page");
    // `a` (on the first page) changes between the pages.
    let patch = json!({"data": {"v": "2"}});
    cms.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let second = cms
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(second.items.len(), 1);
    assert_eq!(
        second.metadata.resource_version.as_deref(),
        Some(list_rv.as_str()),
        "every page reports the first page's resourceVersion"
    );
    let mut events = cms
        .watch(&WatchParams::default().timeout(5), &list_rv)
        .await
        .unwrap()
        .boxed();
    let event = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("an event")
        .expect("stream open")
        .unwrap();
    match event {
        WatchEvent::Modified(cm) => {
            assert_eq!(cm.metadata.name.as_deref(), Some("a"));
            assert_eq!(cm.data.unwrap()["v"], "2");
        }
        other => panic!("expected a's modification, got {other:?}"),
    }
    // A token this server did not write is refused, not read as a name.
    let err = cms
        .list(&ListParams::default().limit(2).continue_token("default/a"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("continue"), "{err}");
}
