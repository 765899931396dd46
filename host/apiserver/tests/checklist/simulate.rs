//! Part 2, item 4: the dev-mode workload simulator (off by default).

use super::*;

fn deployment(replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}})
}

#[tokio::test]
async fn off_by_default() {
    let s = server();
    s.install_object(deployment(2)).unwrap();
    let (_, d) = raw(
        &s,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/web",
        None,
        "",
    )
    .await;
    assert!(d.get("status").is_none());
}

#[tokio::test]
async fn workloads_get_the_status_readiness_checks_look_for() {
    let s = server_with(|o| o.simulate_workloads = true);
    let (code, _) = raw(
        &s,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some("application/json"),
        &deployment(3).to_string(),
    )
    .await;
    assert_eq!(code, 201);
    let (_, d) = raw(
        &s,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/web",
        None,
        "",
    )
    .await;
    let st = &d["status"];
    assert_eq!(st["observedGeneration"], d["metadata"]["generation"]);
    for k in [
        "replicas",
        "readyReplicas",
        "updatedReplicas",
        "availableReplicas",
    ] {
        assert_eq!(st[k], 3, "{k}");
    }
    let avail = st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Available")
        .unwrap();
    assert_eq!(avail["status"], "True");
    // a spec change: new generation, observed again; re-simulating the same state is a no-op
    let (_, d2) = raw(
        &s,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web",
        Some("application/merge-patch+json"),
        r#"{"spec":{"replicas":1}}"#,
    )
    .await;
    assert_eq!(d2["metadata"]["generation"], 2);
    let (_, d3) = raw(
        &s,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/web",
        None,
        "",
    )
    .await;
    assert_eq!(d3["status"]["observedGeneration"], 2);
    assert_eq!(d3["status"]["readyReplicas"], 1);
    let rv = s.resource_version();
    let (_, _) = raw(
        &s,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web",
        Some("application/merge-patch+json"),
        r#"{"spec":{"replicas":1}}"#,
    )
    .await;
    assert_eq!(s.resource_version(), rv, "no-op stays a no-op");

    let sel = |app: &str| json!({"selector": {"matchLabels": {"app": app}}, "template": {"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}});
    let mut sts = sel("db");
    sts["replicas"] = json!(2);
    s.install_object(json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": sts})).unwrap();
    s.install_object(json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"}, "spec": sel("agent")})).unwrap();
    s.install_object(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"}, "spec": sel("rs")})).unwrap();
    s.install_object(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}})).unwrap();
    let get = async |path: &str| raw(&s, "GET", path, None, "").await.1["status"].clone();
    let st = get("/apis/apps/v1/namespaces/default/statefulsets/db").await;
    assert_eq!(
        (
            st["readyReplicas"].clone(),
            st["currentReplicas"].clone(),
            st["updatedReplicas"].clone()
        ),
        (json!(2), json!(2), json!(2))
    );
    assert_eq!(st["currentRevision"], st["updateRevision"]);
    assert_eq!(st["observedGeneration"], 1);
    let st = get("/apis/apps/v1/namespaces/default/daemonsets/agent").await;
    for k in [
        "desiredNumberScheduled",
        "numberReady",
        "updatedNumberScheduled",
        "numberAvailable",
    ] {
        assert_eq!(st[k], 1, "{k}");
    }
    let st = get("/apis/apps/v1/namespaces/default/replicasets/rs").await;
    assert_eq!(
        (st["readyReplicas"].clone(), st["availableReplicas"].clone()),
        (json!(1), json!(1))
    );
    let st = get("/api/v1/namespaces/default/pods/p").await;
    assert_eq!(st["phase"], "Running");
    let ready = st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["status"], "True");
    assert_eq!(st["containerStatuses"][0]["ready"], true);
    assert!(st["containerStatuses"][0]["state"]["running"].is_object());

    // through kube-runtime's readiness-style check on a typed client
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::default_namespaced(s.client());
    let p = pods.get("p").await.unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));

    // switchable at runtime
    s.set_simulate_workloads(false);
    s.install_object(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}})).unwrap();
    assert_eq!(
        get("/api/v1/namespaces/default/pods/q").await["phase"],
        "Pending"
    );
}
