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
    expect_status(
        &s,
        "GET",
        "/apis/nope.io/v1/things",
        None,
        "",
        404,
        "NotFound",
    )
    .await;
    expect_status(&s, "GET", "/apis/nope.io", None, "", 404, "NotFound").await;
    expect_status(&s, "GET", "/whatever/else", None, "", 404, "NotFound").await;
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
