//! Part 2, item 3: namespace lifecycle as a cluster shows it — DELETE answers
//! 200 with the namespace `Terminating`, its content is deleted, then the
//! namespace is finalized and removed.

use super::*;

#[tokio::test]
async fn deleting_a_namespace_marks_it_terminating_deletes_content_then_removes_it() {
    let s = server();
    let (code, ns) = raw(
        &s,
        "POST",
        "/api/v1/namespaces",
        Some("application/json"),
        &json!({"metadata": {"name": "team"}}).to_string(),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );
    for n in ["a", "b"] {
        let (code, _) = raw(
            &s,
            "POST",
            "/api/v1/namespaces/team/configmaps",
            Some("application/json"),
            &json!({"metadata": {"name": n}}).to_string(),
        )
        .await;
        assert_eq!(code, 201);
    }
    // one object with a finalizer keeps the namespace Terminating
    let (code, _) = raw(
        &s,
        "POST",
        "/api/v1/namespaces/team/secrets",
        Some("application/json"),
        &json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}).to_string(),
    )
    .await;
    assert_eq!(code, 201);
    let from = s.resource_version();

    let (code, d) = raw(&s, "DELETE", "/api/v1/namespaces/team", None, "").await;
    assert_eq!(code, 200, "{d}");
    assert_eq!(d["kind"], "Namespace");
    assert_eq!(d["status"]["phase"], "Terminating");
    assert!(d["metadata"]["deletionTimestamp"].is_string());
    // content without finalizers is gone; the held secret is being deleted
    let (code, _) = raw(&s, "GET", "/api/v1/namespaces/team/configmaps/a", None, "").await;
    assert_eq!(code, 404);
    let (_, held) = raw(&s, "GET", "/api/v1/namespaces/team/secrets/held", None, "").await;
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    let (_, ns) = raw(&s, "GET", "/api/v1/namespaces/team", None, "").await;
    assert_eq!(ns["status"]["phase"], "Terminating");
    let conds = ns["status"]["conditions"].as_array().unwrap();
    let remaining = conds
        .iter()
        .find(|c| c["type"] == "NamespaceFinalizersRemaining")
        .unwrap();
    assert_eq!(remaining["status"], "True");
    assert_eq!(
        remaining["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    // creating in a terminating namespace: 403 Forbidden
    let (code, st) = raw(
        &s,
        "POST",
        "/api/v1/namespaces/team/configmaps",
        Some("application/json"),
        &json!({"metadata": {"name": "late"}}).to_string(),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(st["reason"], "Forbidden");
    assert_eq!(
        st["message"],
        "configmaps \"late\" is forbidden: unable to create new content in namespace team because it is being terminated"
    );
    assert_eq!(st["details"]["causes"][0]["reason"], "NamespaceTerminating");
    // the last finalizer goes: the secret, then the namespace are removed
    let (code, _) = raw(
        &s,
        "PATCH",
        "/api/v1/namespaces/team/secrets/held",
        Some("application/merge-patch+json"),
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = raw(&s, "GET", "/api/v1/namespaces/team", None, "").await;
    assert_eq!(code, 404);

    // the watch shows the sequence a cluster shows
    let (_, lines, _) = watch_lines(
        &s,
        &format!("/api/v1/namespaces?watch=true&resourceVersion={from}"),
        None,
        10,
        Duration::from_millis(300),
    )
    .await;
    let seq: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap().to_string(),
                l["object"]["status"]["phase"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        seq.first().unwrap(),
        &("MODIFIED".to_string(), "Terminating".to_string())
    );
    assert_eq!(seq.last().unwrap().0, "DELETED");
    let fin = &lines[lines.len() - 2]["object"];
    assert_eq!(
        fin["spec"]["finalizers"],
        json!([]),
        "finalized before removal"
    );
}

#[tokio::test]
async fn an_empty_namespace_goes_at_once_and_system_namespaces_cannot_be_deleted() {
    let s = server();
    s.install_object(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "empty"}}),
    )
    .unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(s.client());
    let r = api.delete("empty", &Default::default()).await.unwrap();
    let ns = r
        .left()
        .expect("the namespace object, as a cluster answers");
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    assert_eq!(api_err(api.get("empty").await.unwrap_err()).code, 404);
    let e = api_err(
        api.delete("default", &Default::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    assert_eq!(
        e.message,
        "namespaces \"default\" is forbidden: this namespace may not be deleted"
    );
}

/// Given a server serving on a port, then the Service `default/kubernetes` and its Endpoints say
/// where (the port clients such as Landscaper's integration tests put into
/// `https://kubernetes.default:<port>`), and serving again on another port moves both.
#[tokio::test]
async fn serving_publishes_the_kubernetes_service_with_the_port_it_listens_on() {
    let s = server();
    let (code, _) = raw(
        &s,
        "GET",
        "/api/v1/namespaces/default/services/kubernetes",
        None,
        "",
    )
    .await;
    assert_eq!(code, 404, "nothing is published before the server serves");
    for port in [31443u16, 31444] {
        s.publish_kubernetes_service(([127, 0, 0, 1], port).into())
            .expect("publish");
        let (code, svc) = raw(
            &s,
            "GET",
            "/api/v1/namespaces/default/services/kubernetes",
            None,
            "",
        )
        .await;
        assert_eq!(code, 200, "{svc}");
        assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
        assert_eq!(svc["spec"]["ports"].as_array().map(Vec::len), Some(1));
        assert_eq!(svc["spec"]["ports"][0]["port"], port);
        assert_eq!(svc["spec"]["ports"][0]["name"], "https");
        let (code, ep) = raw(
            &s,
            "GET",
            "/api/v1/namespaces/default/endpoints/kubernetes",
            None,
            "",
        )
        .await;
        assert_eq!(code, 200, "{ep}");
        assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "127.0.0.1");
        assert_eq!(ep["subsets"][0]["ports"][0]["port"], port);
    }
    // the same port again is no write
    let rv = s.resource_version();
    s.publish_kubernetes_service(([127, 0, 0, 1], 31444).into())
        .expect("publish");
    assert_eq!(s.resource_version(), rv);
}

/// With `namespace_finalize_delay` (dev mode), as on a cluster with a namespace controller: the
/// emptied namespace stays `Terminating` until the controller's turn, a repeated DELETE answers
/// 200 (kube-apiserver 1.20 does the same), and then the namespace is gone.
#[tokio::test]
async fn with_a_finalize_delay_a_deleted_namespace_stays_terminating_until_the_controller_removes_it()
 {
    let s = embedded_apiserver::ApiServer::new(embedded_apiserver::Options {
        namespace_finalize_delay: Some(std::time::Duration::from_millis(300)),
        ..Default::default()
    })
    .unwrap();
    let (code, _) = raw(
        &s,
        "POST",
        "/api/v1/namespaces",
        Some("application/json"),
        &json!({"metadata": {"name": "twice"}}).to_string(),
    )
    .await;
    assert_eq!(code, 201);
    let (code, _) = raw(
        &s,
        "POST",
        "/api/v1/namespaces/twice/configmaps",
        Some("application/json"),
        &json!({"metadata": {"name": "c"}}).to_string(),
    )
    .await;
    assert_eq!(code, 201);
    let (code, first) = raw(&s, "DELETE", "/api/v1/namespaces/twice", None, "").await;
    assert_eq!(code, 200, "{first}");
    // The content goes at once; the namespace waits for the controller.
    let (code, _) = raw(&s, "GET", "/api/v1/namespaces/twice/configmaps/c", None, "").await;
    assert_eq!(code, 404);
    let (code, again) = raw(&s, "DELETE", "/api/v1/namespaces/twice", None, "").await;
    assert_eq!(code, 200, "a repeated DELETE while Terminating: {again}");
    assert_eq!(again["status"]["phase"], "Terminating");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let (code, _) = raw(&s, "GET", "/api/v1/namespaces/twice", None, "").await;
        if code == 404 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the namespace stays");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
