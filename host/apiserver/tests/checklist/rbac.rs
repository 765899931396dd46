//! Authentication and RBAC (`Options::rbac`), at the HTTP level: 401 for unknown tokens,
//! `system:anonymous` without credentials, 403 in the API server's words, what RoleBindings,
//! ClusterRoleBindings, resourceNames, subresources and the watch verb allow, discovery for
//! authenticated users, TokenRequest, access reviews, impersonation and escalation prevention.

use super::*;
use embedded_apiserver::auth::ADMIN_TOKEN;

const ADMIN: &str = ADMIN_TOKEN;

fn rbac_server() -> ApiServer {
    server_with(|o| o.rbac = true)
}

/// ServiceAccount `ns/name` (created by the admin) and a token minted by TokenRequest.
async fn service_account(s: &ApiServer, ns: &str, name: &str) -> String {
    if ns != "default" {
        let (code, _) = call(
            s,
            ADMIN,
            "POST",
            "/api/v1/namespaces",
            json!({"metadata": {"name": ns}}),
        )
        .await;
        assert!(code == 201 || code == 409, "{code}");
    }
    let (code, body) = call(
        s,
        ADMIN,
        "POST",
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        json!({"metadata": {"name": name}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = call(
        s,
        ADMIN,
        "POST",
        &format!("/api/v1/namespaces/{ns}/serviceaccounts/{name}/token"),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    body["status"]["token"].as_str().expect("token").to_string()
}

async fn grant(s: &ApiServer, objects: Value) {
    for o in objects.as_array().unwrap() {
        let kind = o["kind"].as_str().unwrap();
        let plural = format!("{}s", kind.to_lowercase());
        let uri = match o["metadata"]["namespace"].as_str() {
            Some(ns) => format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{plural}"),
            None => format!("/apis/rbac.authorization.k8s.io/v1/{plural}"),
        };
        let (code, body) = call(s, ADMIN, "POST", &uri, o.clone()).await;
        assert_eq!(code, 201, "{body}");
    }
}

fn role(ns: &str, name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": ns}, "rules": rules})
}

fn binding(ns: Option<&str>, name: &str, role_kind: &str, role: &str, subject: Value) -> Value {
    let mut md = json!({"name": name});
    if let Some(ns) = ns {
        md["namespace"] = json!(ns);
    }
    json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": if ns.is_some() { "RoleBinding" } else { "ClusterRoleBinding" },
        "metadata": md,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [subject]})
}

fn sa_subject(ns: &str, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": ns})
}

#[tokio::test]
async fn with_rbac_off_any_token_may_do_anything() {
    let s = server();
    let (code, _) = call(
        &s,
        "made-up",
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = call(
        &s,
        "",
        "DELETE",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    // No bootstrap roles either: the store is as it always was.
    let (_, list) = call(
        &s,
        "",
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        Value::Null,
    )
    .await;
    assert_eq!(list["items"], json!([]));
}

#[tokio::test]
async fn an_unknown_token_is_401_and_no_token_is_anonymous() {
    let s = rbac_server();
    let (code, body) = call(
        &s,
        "made-up",
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
    )
    .await;
    assert_eq!(code, 401);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    // Without credentials: system:anonymous, who may read health and version only.
    let (code, _) = call(&s, "", "GET", "/healthz", Value::Null).await;
    assert_eq!(code, 200);
    let (code, _) = call(&s, "", "GET", "/version", Value::Null).await;
    assert_eq!(code, 200);
    let (code, body) = call(&s, "", "GET", "/api", Value::Null).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        r#"forbidden: User "system:anonymous" cannot get path "/api""#
    );
    let (code, body) = call(
        &s,
        "",
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        r#"configmaps is forbidden: User "system:anonymous" cannot list resource "configmaps" in API group "" in the namespace "default""#
    );
    // The admin token of the kubeconfig, and the in-process client, may do anything.
    let (code, _) = call(
        &s,
        ADMIN,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(s.client(), "default");
    cms.create(&Default::default(), &cm("in-process", &[]))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_service_account_may_do_what_its_role_binding_allows_and_nothing_else() {
    let s = rbac_server();
    let token = service_account(&s, "ns", "sa").await;
    let uri = "/api/v1/namespaces/default/configmaps";
    let (code, body) = call(&s, &token, "GET", uri, Value::Null).await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": r#"configmaps is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "configmaps" in API group "" in the namespace "default""#,
            "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403})
    );
    let (code, body) = call(&s, &token, "GET", &format!("{uri}/x"), Value::Null).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        r#"configmaps "x" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource "configmaps" in API group "" in the namespace "default""#
    );
    assert_eq!(body["details"], json!({"name": "x", "kind": "configmaps"}));

    grant(
        &s,
        json!([
            role(
                "default",
                "cm-reader",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])
            ),
            binding(
                Some("default"),
                "sa-reads",
                "Role",
                "cm-reader",
                sa_subject("ns", "sa")
            )
        ]),
    )
    .await;
    let (code, _) = call(&s, &token, "GET", uri, Value::Null).await;
    assert_eq!(code, 200);
    let (code, body) = call(&s, &token, "GET", &format!("{uri}/x"), Value::Null).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (404, Some("NotFound")),
        "allowed, then not found"
    );
    let (code, body) = call(&s, &token, "POST", uri, json!({"metadata": {"name": "x"}})).await;
    assert_eq!(code, 403);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("cannot create resource \"configmaps\"")
    );
    let (code, _) = call(
        &s,
        &token,
        "GET",
        "/api/v1/namespaces/kube-system/configmaps",
        Value::Null,
    )
    .await;
    assert_eq!(code, 403, "a RoleBinding grants only in its namespace");
    let (code, body) = call(&s, &token, "GET", "/api/v1/configmaps", Value::Null).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        r#"configmaps is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "configmaps" in API group "" at the cluster scope"#
    );
}

#[tokio::test]
async fn cluster_role_bindings_resource_names_subresources_and_watch() {
    let s = rbac_server();
    let token = service_account(&s, "ns", "sa").await;
    grant(
        &s,
        json!([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
             "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["one"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]},
                {"apiGroups": [""], "resources": ["namespaces/status"], "verbs": ["get"]}]},
            binding(None, "sa-r", "ClusterRole", "r", sa_subject("ns", "sa"))
        ]),
    )
    .await;
    // resourceNames: that one object only, never a list.
    let (code, _) = call(
        &s,
        &token,
        "GET",
        "/api/v1/namespaces/kube-system/secrets/one",
        Value::Null,
    )
    .await;
    assert_eq!(code, 404, "allowed (and absent)");
    let (code, _) = call(
        &s,
        &token,
        "GET",
        "/api/v1/namespaces/kube-system/secrets/two",
        Value::Null,
    )
    .await;
    assert_eq!(code, 403);
    let (code, _) = call(
        &s,
        &token,
        "GET",
        "/api/v1/namespaces/kube-system/secrets",
        Value::Null,
    )
    .await;
    assert_eq!(code, 403);
    // Cluster-wide, in every namespace and across them; the watch verb is separate.
    for uri in [
        "/api/v1/configmaps",
        "/api/v1/namespaces/kube-public/configmaps",
    ] {
        let (code, _) = call(&s, &token, "GET", uri, Value::Null).await;
        assert_eq!(code, 200, "{uri}");
    }
    let (code, body) = call(
        &s,
        &token,
        "GET",
        "/api/v1/configmaps?watch=true",
        Value::Null,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        r#"configmaps is forbidden: User "system:serviceaccount:ns:sa" cannot watch resource "configmaps" in API group "" at the cluster scope"#
    );
    // Subresources are resources of their own.
    let (code, _) = call(
        &s,
        &token,
        "GET",
        "/api/v1/namespaces/default/status",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = call(&s, &token, "GET", "/api/v1/namespaces/default", Value::Null).await;
    assert_eq!(code, 403);
    let (code, body) = call(
        &s,
        &token,
        "POST",
        "/api/v1/namespaces/ns/serviceaccounts/sa/token",
        json!({"spec": {}}),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        r#"serviceaccounts "sa" is forbidden: User "system:serviceaccount:ns:sa" cannot create resource "serviceaccounts/token" in API group "" in the namespace "ns""#
    );
    // A watch allowed by a later grant streams.
    grant(
        &s,
        json!([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "w"},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["watch"]}]},
            binding(None, "sa-w", "ClusterRole", "w", json!({"kind": "Group", "name": "system:serviceaccounts:ns"}))
        ]),
    )
    .await;
    let (code, _) = call(
        &s,
        &token,
        "GET",
        "/api/v1/configmaps?watch=true&timeoutSeconds=1",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn a_binding_to_a_missing_role_says_so() {
    let s = rbac_server();
    let token = service_account(&s, "ns", "sa").await;
    grant(
        &s,
        json!([binding(
            None,
            "dangling",
            "ClusterRole",
            "nope",
            sa_subject("ns", "sa")
        )]),
    )
    .await;
    let (code, body) = call(&s, &token, "GET", "/api/v1/pods", Value::Null).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        r#"pods is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "pods" in API group "" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "nope" not found"#
    );
}

#[tokio::test]
async fn authenticated_users_may_discover_the_api() {
    let s = rbac_server();
    let token = service_account(&s, "ns", "sa").await;
    for uri in [
        "/api",
        "/apis",
        "/api/v1",
        "/apis/apps/v1",
        "/version",
        "/openapi/v3",
        "/healthz",
    ] {
        let (code, _) = call(&s, &token, "GET", uri, Value::Null).await;
        assert_eq!(code, 200, "{uri}");
    }
    let (_, v1) = call(&s, &token, "GET", "/api/v1", Value::Null).await;
    assert!(
        v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "serviceaccounts/token"),
        "{v1}"
    );
    let (_, authz) = call(
        &s,
        &token,
        "GET",
        "/apis/authorization.k8s.io/v1",
        Value::Null,
    )
    .await;
    let names: Vec<&str> = authz["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"selfsubjectaccessreviews"), "{names:?}");
    // The bootstrap policy is there, as on a fresh cluster.
    let (_, roles) = call(
        &s,
        ADMIN,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        Value::Null,
    )
    .await;
    let names: Vec<&str> = roles["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    for want in [
        "cluster-admin",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        assert!(names.contains(&want), "{names:?}");
    }
}

#[tokio::test]
async fn token_requests_answer_as_the_api_server_and_tokens_die_with_their_account() {
    let s = rbac_server();
    let (code, body) = call(
        &s,
        ADMIN,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/none/token",
        json!({"spec": {}}),
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (404, Some(r#"serviceaccounts "none" not found"#))
    );
    call(
        &s,
        ADMIN,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "sa"}}),
    )
    .await;
    let (code, body) = call(
        &s,
        ADMIN,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/sa/token",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "TokenRequest");
    assert_eq!(body["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(body["spec"]["expirationSeconds"], 600);
    assert_eq!(
        body["spec"]["audiences"],
        json!(["https://kubernetes.default.svc"])
    );
    assert!(
        body["status"]["expirationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    let token = body["status"]["token"].as_str().unwrap().to_string();
    let (code, body) = call(
        &s,
        ADMIN,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/sa/token",
        json!({"spec": {"expirationSeconds": 60}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    // Who am I (SelfSubjectReview), and TokenReview.
    let (code, me) = who_am_i(&s, &token).await;
    assert_eq!(code, 201, "{me}");
    assert_eq!(
        me["status"]["userInfo"]["username"],
        "system:serviceaccount:default:sa"
    );
    let (_, review) = call(
        &s,
        ADMIN,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"spec": {"token": token}}),
    )
    .await;
    assert_eq!(review["status"]["authenticated"], true);
    assert_eq!(
        review["status"]["user"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    // The ServiceAccount goes: so does its token.
    call(
        &s,
        ADMIN,
        "DELETE",
        "/api/v1/namespaces/default/serviceaccounts/sa",
        Value::Null,
    )
    .await;
    let (code, _) = call(&s, &token, "GET", "/api", Value::Null).await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn access_reviews_answer_can_i() {
    let s = rbac_server();
    let token = service_account(&s, "ns", "sa").await;
    grant(
        &s,
        json!([
            role(
                "ns",
                "cm",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}])
            ),
            binding(Some("ns"), "cm", "Role", "cm", sa_subject("ns", "sa"))
        ]),
    )
    .await;
    let ssar = |ns: &str, verb: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": ns, "verb": verb, "resource": "configmaps"}}})
    };
    let uri = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, yes) = call(&s, &token, "POST", uri, ssar("ns", "list")).await;
    assert_eq!(code, 201, "{yes}");
    assert_eq!(yes["status"]["allowed"], true);
    assert_eq!(
        yes["status"]["reason"],
        r#"RBAC: allowed by RoleBinding "cm/ns" of Role "cm" to ServiceAccount "sa/ns""#
    );
    let (_, no) = call(&s, &token, "POST", uri, ssar("default", "list")).await;
    assert_eq!(no["status"]["allowed"], false);
    // SubjectAccessReview: for someone else; only who may create them (the admin).
    let sar = json!({"spec": {"user": "system:serviceaccount:ns:sa", "groups": ["system:authenticated"],
        "resourceAttributes": {"namespace": "ns", "verb": "list", "resource": "configmaps"}}});
    let (code, _) = call(
        &s,
        &token,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar.clone(),
    )
    .await;
    assert_eq!(code, 403);
    let (_, answer) = call(
        &s,
        ADMIN,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar,
    )
    .await;
    assert_eq!(answer["status"]["allowed"], true);
    // SelfSubjectRulesReview: what `kubectl auth can-i --list` shows.
    let (code, rules) = call(
        &s,
        &token,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        json!({"spec": {"namespace": "ns"}}),
    )
    .await;
    assert_eq!(code, 201, "{rules}");
    assert!(
        rules["status"]["resourceRules"]
            .as_array()
            .unwrap()
            .contains(&json!({"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]})),
        "{rules}"
    );
    assert_eq!(rules["status"]["incomplete"], false);
}

#[tokio::test]
async fn admins_may_impersonate_and_others_may_not() {
    let s = rbac_server();
    let token = service_account(&s, "ns", "sa").await;
    let as_sa = |token: &str, uri: &str| {
        let auth = format!("Bearer {token}");
        let uri = uri.to_string();
        let s = s.clone();
        async move {
            raw_with(
                &s,
                "GET",
                &uri,
                &[
                    ("authorization", &auth),
                    ("impersonate-user", "system:serviceaccount:ns:sa"),
                ],
                "",
            )
            .await
        }
    };
    let (code, body) = as_sa(ADMIN, "/api/v1/namespaces/ns/configmaps").await;
    assert_eq!(code, 403);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(r#"User "system:serviceaccount:ns:sa" cannot list"#)
    );
    let (code, _) = as_sa(ADMIN, "/apis").await;
    assert_eq!(code, 200);
    // The ServiceAccount itself may not impersonate anyone.
    let (code, body) = raw_with(
        &s,
        "GET",
        "/apis",
        &[
            ("authorization", &format!("Bearer {token}")),
            ("impersonate-user", "alice"),
        ],
        "",
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        r#"users "alice" is forbidden: User "system:serviceaccount:ns:sa" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
}

#[tokio::test]
async fn registered_tokens_name_users_and_groups() {
    let s = rbac_server();
    s.add_token("alice-token", "alice", &["team"]);
    let (code, _) = call(
        &s,
        "alice-token",
        "GET",
        "/api/v1/namespaces/default/pods",
        Value::Null,
    )
    .await;
    assert_eq!(code, 403);
    grant(
        &s,
        json!([binding(
            Some("default"),
            "team-admin",
            "ClusterRole",
            "cluster-admin",
            json!({"kind": "Group", "name": "team"})
        )]),
    )
    .await;
    let (code, _) = call(
        &s,
        "alice-token",
        "GET",
        "/api/v1/namespaces/default/pods",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = call(
        &s,
        "alice-token",
        "GET",
        "/api/v1/namespaces/kube-system/pods",
        Value::Null,
    )
    .await;
    assert_eq!(code, 403);
    // An in-process client with that token is alice too.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(s.client_with_token("alice-token"), "kube-system");
    let err = pods.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 403),
        "{err}"
    );
}

#[tokio::test]
async fn roles_may_only_grant_what_their_writer_holds() {
    let s = rbac_server();
    let token = service_account(&s, "ns", "sa").await;
    grant(
        &s,
        json!([role("ns", "rbac-writer", json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])),
            binding(Some("ns"), "rbac-writer", "Role", "rbac-writer", sa_subject("ns", "sa"))]),
    )
    .await;
    let uri = "/apis/rbac.authorization.k8s.io/v1/namespaces/ns/roles";
    let held = role(
        "ns",
        "held",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
    );
    let (code, body) = call(&s, &token, "POST", uri, held).await;
    assert_eq!(code, 201, "{body}");
    let more = role(
        "ns",
        "more",
        json!([{"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "delete"]}]),
    );
    let (code, body) = call(&s, &token, "POST", uri, more).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "roles.rbac.authorization.k8s.io \"more\" is forbidden: user \"system:serviceaccount:ns:sa\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:ns\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}"
    );
    // Binding a role: only one whose permissions the writer holds.
    let uri = "/apis/rbac.authorization.k8s.io/v1/namespaces/ns/rolebindings";
    let ok = binding(
        Some("ns"),
        "b1",
        "Role",
        "held",
        json!({"kind": "User", "name": "bob"}),
    );
    let (code, body) = call(&s, &token, "POST", uri, ok).await;
    assert_eq!(code, 201, "{body}");
    let too_much = binding(
        Some("ns"),
        "b2",
        "ClusterRole",
        "cluster-admin",
        json!({"kind": "User", "name": "bob"}),
    );
    let (code, _) = call(&s, &token, "POST", uri, too_much).await;
    assert_eq!(code, 403);
}

/// A PATCH is an update: the object it would store must not grant (or bind) more than the
/// writer holds, as kube-apiserver's RBAC storage checks, unless it changes only what
/// garbage collection changes.
#[tokio::test]
async fn patches_of_roles_and_bindings_may_not_escalate_either() {
    let s = rbac_server();
    let token = service_account(&s, "ns", "sa").await;
    grant(
        &s,
        json!([role("ns", "rbac-patcher", json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "patch"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])),
            binding(Some("ns"), "rbac-patcher", "Role", "rbac-patcher", sa_subject("ns", "sa")),
            role("ns", "wide", json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}])),
            binding(Some("ns"), "bob-admin", "ClusterRole", "cluster-admin",
                json!({"kind": "User", "name": "bob"}))]),
    )
    .await;
    let (code, body) = call(
        &s,
        &token,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/ns/roles",
        role(
            "ns",
            "held",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
        ),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let patch = |uri: &'static str, ct: &'static str, body: Value| {
        let s = s.clone();
        let auth = format!("Bearer {token}");
        async move {
            raw_with(
                &s,
                "PATCH",
                uri,
                &[("authorization", &auth), ("content-type", ct)],
                &body.to_string(),
            )
            .await
        }
    };
    const HELD: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/ns/roles/held";
    const MERGE: &str = "application/merge-patch+json";
    // Granting what the writer does not hold: refused, in the server's words, nothing stored.
    let (code, body) = patch(
        HELD,
        MERGE,
        json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "delete"]}]}),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        "roles.rbac.authorization.k8s.io \"held\" is forbidden: user \"system:serviceaccount:ns:sa\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:ns\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}"
    );
    let (_, stored) = call(&s, ADMIN, "GET", HELD, Value::Null).await;
    assert_eq!(stored["rules"][0]["verbs"], json!(["get"]));
    // The same with a JSON patch.
    let (code, _) = patch(
        HELD,
        "application/json-patch+json",
        json!([{"op": "add", "path": "/rules/0/verbs/-", "value": "delete"}]),
    )
    .await;
    assert_eq!(code, 403);
    // What the writer holds: allowed; a label: allowed (the rules are held).
    let (code, body) = patch(
        HELD,
        MERGE,
        json!({"metadata": {"labels": {"a": "b"}}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // A role with more than the writer holds: only GC fields may change.
    const WIDE: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/ns/roles/wide";
    let (code, body) = patch(
        WIDE,
        MERGE,
        json!({"metadata": {"finalizers": ["example.dev/hold"]}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, _) = patch(WIDE, MERGE, json!({"metadata": {"labels": {"a": "b"}}})).await;
    assert_eq!(code, 403);
    // Bindings: adding oneself to a binding of cluster-admin is binding cluster-admin.
    let (code, body) = patch(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/ns/rolebindings/bob-admin",
        "application/strategic-merge-patch+json",
        json!({"subjects": [{"kind": "User", "name": "bob"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("rolebindings.rbac.authorization.k8s.io \"bob-admin\" is forbidden: user \"system:serviceaccount:ns:sa\""),
        "{body}"
    );
}
