//! Bad requests get a proper `Status`, never a panic.

use crate::*;

async fn expect_status(
    s: &embedded_apiserver::ApiServer,
    method: &str,
    uri: &str,
    ct: Option<&str>,
    body: &str,
    code: u16,
    reason: &str,
) {
    let (c, v) = raw(s, method, uri, ct, body).await;
    assert_eq!(c, code, "{method} {uri}: {v}");
    assert_eq!(
        (v["kind"].as_str(), v["code"].as_u64(), v["reason"].as_str()),
        (Some("Status"), Some(code as u64), Some(reason)),
        "{v}"
    );
}

#[tokio::test]
async fn malformed_json_is_400() {
    let s = server();
    expect_status(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        "{not json",
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        "[1,2]",
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        r#"{"metadata": "nope"}"#,
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        r#"{"metadata": {"name": "x", "labels": {"a": 1}}}"#,
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        r#"{"kind": "Secret", "metadata": {"name": "x"}}"#,
        400,
        "BadRequest",
    )
    .await;
    s.install_object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
        .unwrap();
    expect_status(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        Some("application/merge-patch+json"),
        "{oops",
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        Some("application/json-patch+json"),
        r#"{"op":"add"}"#,
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        Some("application/merge-patch+json"),
        r#"{"metadata": null}"#,
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/x",
        Some("application/json"),
        "{bad",
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "GET",
        "/api/v1/namespaces/default/configmaps?labelSelector=a+in+b",
        None,
        "",
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=abc",
        None,
        "",
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "PUT",
        "/api/v1/namespaces/default/configmaps/x",
        Some("application/json"),
        r#"{"metadata": {"name": "y"}}"#,
        400,
        "BadRequest",
    )
    .await;
    expect_status(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        r#"{"metadata": {"name": "Bad_Name"}}"#,
        422,
        "Invalid",
    )
    .await;
    expect_status(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        r#"{"metadata": {}}"#,
        422,
        "Invalid",
    )
    .await;
}

#[tokio::test]
async fn unknown_resources_and_paths_are_404() {
    let s = server();
    // A built-in group/version without the resource: a JSON Status.
    expect_status(
        &s,
        "GET",
        "/api/v1/namespaces/default/nothings",
        None,
        "",
        404,
        "NotFound",
    )
    .await;
    // Nothing serves the path (unknown group or version, unknown path): Go's plain-text 404,
    // as a real kube-apiserver answers.
    for uri in [
        "/apis/nope.io/v1/things",
        "/apis/nope.io/v1/namespaces/default/things/x",
        "/apis/nope.io",
        "/apis/nope.io/v1",
        "/whatever/else",
    ] {
        expect_page_not_found(&s, uri).await;
    }
    expect_status(
        &s,
        "GET",
        "/api/v1/namespaces/default/configmaps/x/status",
        None,
        "",
        404,
        "NotFound",
    )
    .await;
    expect_status(
        &s,
        "GET",
        "/api/v1/namespaces/default/configmaps/a/b/c/d",
        None,
        "",
        404,
        "NotFound",
    )
    .await;
}

async fn expect_page_not_found(s: &embedded_apiserver::ApiServer, uri: &str) {
    let (c, v) = raw(s, "GET", uri, None, "").await;
    assert_eq!(
        (c, v.as_str()),
        (404, Some("404 page not found\n")),
        "GET {uri}"
    );
}

#[tokio::test]
async fn a_resource_of_a_crd_group_without_its_crd_is_a_plain_text_404() {
    // Landscaper's group is served (DeployItems), but the Context CRD is not installed: a real
    // server's CRD handler falls through to Go's 404, it does not answer a Status.
    let s = server();
    s.install_yaml_documents(&landscaper_crd("deployitems"))
        .unwrap();
    let (c, _) = raw(
        &s,
        "GET",
        "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/default/deployitems",
        None,
        "",
    )
    .await;
    assert_eq!(c, 200);
    expect_page_not_found(
        &s,
        "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/default/contexts/default",
    )
    .await;
}

#[tokio::test]
async fn wrong_content_types_are_415_and_wrong_methods_405() {
    let s = server();
    expect_status(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("text/plain"),
        "{}",
        415,
        "UnsupportedMediaType",
    )
    .await;
    expect_status(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        None,
        "{}",
        415,
        "UnsupportedMediaType",
    )
    .await;
    s.install_object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
        .unwrap();
    expect_status(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        Some("application/json"),
        "{}",
        415,
        "UnsupportedMediaType",
    )
    .await;
    expect_status(
        &s,
        "PUT",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        "{}",
        405,
        "MethodNotAllowed",
    )
    .await;
    expect_status(
        &s,
        "POST",
        "/version",
        Some("application/json"),
        "{}",
        405,
        "MethodNotAllowed",
    )
    .await;
    // YAML bodies are accepted.
    let (c, v) = raw(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/yaml"),
        "metadata:\n  name: y\ndata:\n  k: v\n",
    )
    .await;
    assert_eq!((c, v["data"]["k"].as_str()), (201, Some("v")));
}

#[tokio::test]
async fn size_limits_are_a_real_servers() {
    let s = server();
    // More than 1 MiB of ConfigMap or Secret values: 422, field TooLong.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "default"}, "data": {"a": "x".repeat(1_100_000)}});
    let (c, v) = raw(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        &cm.to_string(),
    )
    .await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "ConfigMap \"big\" is invalid: []: Too long: must have at most 1048576 bytes"
    );
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "big", "namespace": "default"}, "stringData": {"a": "x".repeat(1_100_000)}});
    let (c, v) = raw(
        &s,
        "POST",
        "/api/v1/namespaces/default/secrets",
        Some("application/json"),
        &secret.to_string(),
    )
    .await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "Secret \"big\" is invalid: data: Too long: must have at most 1048576 bytes"
    );
    // An object over etcd's 1.5 MiB: 500 from etcd.
    let other = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "big", "namespace": "default",
            "annotations": {"a": "x".repeat(1_700_000)}}});
    let (c, v) = raw(
        &s,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        Some("application/json"),
        &other.to_string(),
    )
    .await;
    assert_eq!(c, 500, "{v}");
    assert_eq!(v["message"], "etcdserver: request is too large");
    // A request body over 3 MiB: 413.
    let huge = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "huge", "namespace": "default"}, "data": {"a": "x".repeat(3_200_000)}});
    let (c, v) = raw(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        &huge.to_string(),
    )
    .await;
    assert_eq!(c, 413, "{v}");
    assert_eq!(v["message"], "Request entity too large: limit is 3145728");
}
