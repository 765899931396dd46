//! Checklist 8 + 9: discovery, CRD registration, scope and namespaces.

use crate::*;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::{Discovery, Scope};

#[tokio::test]
async fn legacy_discovery_documents() {
    let s = server();
    let (code, v) = raw(&s, "GET", "/version", None, "").await;
    assert_eq!((code, v["major"].as_str()), (200, Some("1")));
    let info = s.client().apiserver_version().await.unwrap();
    assert_eq!(info.minor, "33");
    let (_, api) = raw(&s, "GET", "/api", None, "").await;
    assert_eq!(api["versions"], json!(["v1"]));
    let (_, core) = raw(&s, "GET", "/api/v1", None, "").await;
    let find = |list: &serde_json::Value, name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in discovery"))
    };
    assert_eq!(find(&core, "configmaps")["namespaced"], true);
    assert_eq!(find(&core, "configmaps")["shortNames"], json!(["cm"]));
    assert_eq!(find(&core, "namespaces")["namespaced"], false);
    assert_eq!(
        find(&core, "pods/status")["verbs"],
        json!(["get", "patch", "update"])
    );
    let (_, groups) = raw(&s, "GET", "/apis", None, "").await;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for g in [
        "apps",
        "batch",
        "rbac.authorization.k8s.io",
        "apiextensions.k8s.io",
        "coordination.k8s.io",
    ] {
        assert!(names.contains(&g), "{g} in {names:?}");
    }
    let (_, rbac) = raw(&s, "GET", "/apis/rbac.authorization.k8s.io/v1", None, "").await;
    assert_eq!(find(&rbac, "clusterroles")["namespaced"], false);
    assert_eq!(find(&rbac, "roles")["namespaced"], true);
    let (code, g) = raw(&s, "GET", "/apis/apps", None, "").await;
    assert_eq!(
        (
            code,
            g["kind"].as_str(),
            g["preferredVersion"]["version"].as_str()
        ),
        (200, Some("APIGroup"), Some("v1"))
    );
}

#[tokio::test]
async fn aggregated_discovery_when_asked_for() {
    let s = server();
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let resp = tower::ServiceExt::oneshot(
        s.router(),
        http::Request::get("/apis")
            .header("accept", accept)
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let body: serde_json::Value = serde_json::from_slice(
        &axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(body["kind"], "APIGroupDiscoveryList");
    let apps = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "apps")
        .unwrap();
    let deploy = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .unwrap();
    assert_eq!(deploy["scope"], "Namespaced");
    assert_eq!(deploy["subresources"][0]["subresource"], "status");
    let (_, core) = raw_with(&s, "GET", "/api", &[("accept", accept)], "").await;
    assert_eq!(core["items"][0]["versions"][0]["version"], "v1");
}

#[tokio::test]
async fn kube_discovery_sees_built_ins_and_new_crds() {
    let s = server();
    let d = Discovery::new(s.client()).run().await.unwrap();
    let (cm, caps) = d
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(r, _)| r.kind == "ConfigMap")
        .unwrap();
    assert_eq!(
        (cm.plural.as_str(), caps.scope.clone()),
        ("configmaps", Scope::Namespaced)
    );
    assert!(!d.has_group("example.com"));
    s.install_object(widget_crd()).unwrap();
    let d = Discovery::new(s.client()).run().await.unwrap();
    let (w, caps) = d
        .get("example.com")
        .unwrap()
        .recommended_kind("Widget")
        .unwrap();
    assert_eq!(w.plural, "widgets");
    assert!(
        caps.subresources
            .iter()
            .any(|(r, _)| r.plural == "widgets/status" || r.plural == "status"),
        "{:?}",
        caps.subresources
    );
}

#[tokio::test]
async fn posting_a_crd_serves_its_resource_and_deleting_it_removes_it() {
    let s = server();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(s.client());
    let (code, _) = raw(
        &s,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        None,
        "",
    )
    .await;
    assert_eq!(code, 404);
    let created = crds
        .create(
            &PostParams::default(),
            &serde_json::from_value(widget_crd()).unwrap(),
        )
        .await
        .unwrap();
    let conds = created.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    let (_, list) = raw(&s, "GET", "/apis/example.com/v1", None, "").await;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["widgets", "widgets/status"]);

    let api: Api<DynamicObject> = Api::namespaced_with(s.client(), "default", &widget_resource());
    api.create(&PostParams::default(), &widget("w", json!({"size": 1})))
        .await
        .unwrap();
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    crds.delete("widgets.example.com", &Default::default())
        .await
        .unwrap();
    let (code, _) = raw(
        &s,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        None,
        "",
    )
    .await;
    assert_eq!(code, 404, "resource gone with its CRD");
    let bad = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "wrong.example.com"}, "spec": widget_crd()["spec"]});
    let e = api_err(
        crds.create(
            &PostParams::default(),
            &serde_json::from_value(bad).unwrap(),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
}

#[tokio::test]
async fn deleting_a_crd_ends_the_watches_of_its_resource_so_clients_relist_and_see_it_gone() {
    let s = server();
    s.install_object(widget_crd()).unwrap();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(s.client());
    let watching = tokio::spawn({
        let s = s.clone();
        async move {
            watch_lines(
                &s,
                "/apis/example.com/v1/namespaces/default/widgets?watch=true&timeoutSeconds=60",
                None,
                100,
                Duration::from_secs(10),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    crds.delete("widgets.example.com", &Default::default())
        .await
        .unwrap();
    let (code, _, ended) = watching.await.unwrap();
    assert_eq!(code, 200);
    assert!(
        ended,
        "the watch ends with its CRD, long before its timeout"
    );
}

#[tokio::test]
async fn landscaper_crds_install_and_serve_with_status() {
    let s = server();
    for f in [
        "contexts",
        "deployitems",
        "lshealthchecks",
        "syncobjects",
        "targets",
    ] {
        s.install_yaml_documents(&landscaper_crd(f)).unwrap();
    }
    let (_, list) = raw(
        &s,
        "GET",
        "/apis/landscaper.gardener.cloud/v1alpha1",
        None,
        "",
    )
    .await;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for r in [
        "contexts",
        "deployitems",
        "deployitems/status",
        "lshealthchecks",
        "syncobjects",
        "syncobjects/status",
        "targets",
    ] {
        assert!(names.contains(&r), "{r} in {names:?}");
    }
    let ar = kube::api::ApiResource {
        group: "landscaper.gardener.cloud".into(),
        version: "v1alpha1".into(),
        api_version: "landscaper.gardener.cloud/v1alpha1".into(),
        kind: "DeployItem".into(),
        plural: "deployitems".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(s.client(), "default", &ar);
    let di: DynamicObject = serde_json::from_value(json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem", "metadata": {"name": "di"}, "spec": {"type": "landscaper.gardener.cloud/mock"}})).unwrap();
    api.create(&PostParams::default(), &di).await.unwrap();
    let st = api
        .patch_status(
            "di",
            &Default::default(),
            &kube::api::Patch::Merge(
                json!({"status": {"phase": "Succeeded", "observedGeneration": 1}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["phase"], "Succeeded");
    let e = api_err(api.get("missing").await.unwrap_err());
    assert_eq!(
        e.message,
        "deployitems.landscaper.gardener.cloud \"missing\" not found"
    );
}

#[tokio::test]
async fn scope_cluster_wide_lists_and_missing_namespaces() {
    let s = server();
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(s.client());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    for n in ["default", "kube-system", "kube-public"] {
        assert!(names.contains(&n.to_string()), "{n} exists from the start");
    }
    let in_missing: Api<ConfigMap> = Api::namespaced(s.client(), "nonexist");
    let e = api_err(
        in_missing
            .create(&PostParams::default(), &cm("x", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"nonexist\" not found")
    );
    Api::<ConfigMap>::namespaced(s.client(), "kube-system")
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(s.client(), "default")
        .create(&PostParams::default(), &cm("b", &[]))
        .await
        .unwrap();
    let all = Api::<ConfigMap>::all(s.client())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(all.items.len(), 2, "cluster-wide list of a namespaced kind");
    let (code, _) = raw(
        &s,
        "GET",
        "/api/v1/namespaces/default/namespaces/x",
        None,
        "",
    )
    .await;
    assert_eq!(code, 404, "cluster-scoped kind under a namespace path");
    let (code, _) = raw(&s, "GET", "/api/v1/configmaps/b", None, "").await;
    assert_eq!(code, 404, "namespaced object without a namespace");
    let cr: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(s.client());
    cr.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "system:test"}})).unwrap(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn openapi_lists_patch_operations_with_field_validation_crd_schemas_and_an_empty_v2() {
    let s = server();
    s.install_object(widget_crd()).unwrap();
    let (_, idx) = raw(&s, "GET", "/openapi/v3", None, "").await;
    let url = idx["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(idx["paths"]["api/v1"].is_object());
    let (code, doc) = raw(&s, "GET", &url, None, "").await;
    assert_eq!(code, 200);
    let patch =
        &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Widget");
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
    // The CRD's schema is a component, found by its group-version-kind (kubectl explain).
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let widget = &schemas["com.example.v1.Widget"];
    assert_eq!(
        widget["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "version": "v1", "kind": "Widget"}])
    );
    assert_eq!(widget["type"], "object");
    // v2: an empty Swagger 2.0 document, as JSON or as the gnostic protobuf kubectl asks for.
    let (code, v2) = raw(&s, "GET", "/openapi/v2", None, "").await;
    assert_eq!(code, 200);
    assert_eq!(v2["swagger"], "2.0");
    let (code, _) = raw_with(
        &s,
        "GET",
        "/openapi/v2",
        &[(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )],
        "",
    )
    .await;
    assert_eq!(code, 200);
}
