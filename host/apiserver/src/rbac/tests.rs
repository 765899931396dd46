use super::*;
use serde_json::{Value, json};

fn sa() -> UserInfo {
    UserInfo::service_account("ns", "sa")
}

fn policy() -> Policy {
    let mut objs = bootstrap_objects();
    objs.extend([
        json!({"kind": "Role", "metadata": {"name": "cm-reader", "namespace": "ns"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "sa-reads", "namespace": "ns"},
            "roleRef": {"kind": "Role", "name": "cm-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
        json!({"kind": "ClusterRole", "metadata": {"name": "items"},
            "rules": [
                {"apiGroups": ["landscaper.gardener.cloud"], "resources": ["deployitems"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": ["landscaper.gardener.cloud"], "resources": ["deployitems/status"], "verbs": ["update"]},
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["one"], "verbs": ["get"]},
                {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["update"]},
                {"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "sa-items"},
            "roleRef": {"kind": "ClusterRole", "name": "items"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "team-edit", "namespace": "other"},
            "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "Group", "name": "team"}, {"kind": "User", "name": "alice"}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "dangling", "namespace": "gone"},
            "roleRef": {"kind": "Role", "name": "missing"},
            "subjects": [{"kind": "User", "name": "bob"}]}),
    ]);
    Policy::from_objects(objs)
}

fn req(user: &UserInfo, method: &str, path: &str) -> Attributes {
    let (p, q) = path.split_once('?').unwrap_or((path, ""));
    let watch = q.split('&').any(|kv| kv == "watch=true");
    let fs = q
        .split('&')
        .find_map(|kv| kv.strip_prefix("fieldSelector="));
    Attributes::from_request(user, method, p, watch, fs)
}

/// method, url, verb, group, resource, subresource, namespace, name
type UrlCase = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

#[test]
fn attributes_are_derived_from_the_url_as_kubernetes_does() {
    let u = sa();
    let cases: &[UrlCase] = &[
        // method, url, verb, group, resource, subresource, namespace, name
        (
            "GET",
            "/api/v1/namespaces/d/configmaps",
            "list",
            "",
            "configmaps",
            "",
            "d",
            "",
        ),
        (
            "GET",
            "/api/v1/namespaces/d/configmaps?watch=true",
            "watch",
            "",
            "configmaps",
            "",
            "d",
            "",
        ),
        (
            "GET",
            "/api/v1/namespaces/d/configmaps?fieldSelector=metadata.name%3Dx",
            "list",
            "",
            "configmaps",
            "",
            "d",
            "",
        ),
        (
            "GET",
            "/api/v1/namespaces/d/configmaps?fieldSelector=metadata.name=x",
            "list",
            "",
            "configmaps",
            "",
            "d",
            "x",
        ),
        (
            "GET",
            "/api/v1/namespaces/d/configmaps/x",
            "get",
            "",
            "configmaps",
            "",
            "d",
            "x",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/d/configmaps",
            "deletecollection",
            "",
            "configmaps",
            "",
            "d",
            "",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/d/configmaps/x",
            "delete",
            "",
            "configmaps",
            "",
            "d",
            "x",
        ),
        (
            "POST",
            "/api/v1/namespaces/d/serviceaccounts/sa/token",
            "create",
            "",
            "serviceaccounts",
            "token",
            "d",
            "sa",
        ),
        (
            "PUT",
            "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/d/deployitems/i/status",
            "update",
            "landscaper.gardener.cloud",
            "deployitems",
            "status",
            "d",
            "i",
        ),
        ("GET", "/api/v1/pods", "list", "", "pods", "", "", ""),
        (
            "GET",
            "/api/v1/namespaces/d",
            "get",
            "",
            "namespaces",
            "",
            "d",
            "d",
        ),
        (
            "PUT",
            "/api/v1/namespaces/d/finalize",
            "update",
            "",
            "namespaces",
            "finalize",
            "d",
            "d",
        ),
        (
            "GET",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/x",
            "get",
            "rbac.authorization.k8s.io",
            "clusterroles",
            "",
            "",
            "x",
        ),
        (
            "GET",
            "/api/v1/watch/namespaces/d/configmaps",
            "watch",
            "",
            "configmaps",
            "",
            "d",
            "",
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/d/deployments/x/scale",
            "patch",
            "apps",
            "deployments",
            "scale",
            "d",
            "x",
        ),
    ];
    for (method, url, verb, group, resource, sub, ns, name) in cases {
        let a = req(&u, method, url);
        assert!(a.resource_request, "{url}");
        assert_eq!(
            (
                a.verb.as_str(),
                a.api_group.as_str(),
                a.resource.as_str(),
                a.subresource.as_str(),
                a.namespace.as_str(),
                a.name.as_str()
            ),
            (*verb, *group, *resource, *sub, *ns, *name),
            "{method} {url}"
        );
    }
    for (method, url, verb) in [
        ("GET", "/api", "get"),
        ("GET", "/apis/apps", "get"),
        ("GET", "/api/v1", "get"),
        ("GET", "/healthz", "get"),
        ("POST", "/openapi/v3", "post"),
        ("GET", "/apis/apps/v1", "get"),
    ] {
        let a = req(&u, method, url);
        assert!(!a.resource_request, "{url}");
        assert_eq!((a.verb.as_str(), a.path.as_str()), (verb, url));
    }
}

#[test]
fn the_evaluator_answers_as_rbac_does() {
    let p = policy();
    let sa = sa();
    let alice = UserInfo::new("alice", &[ALL_AUTHENTICATED]);
    let teammate = UserInfo::new("carol", &["team", ALL_AUTHENTICATED]);
    let anon = UserInfo::anonymous();
    let admin = UserInfo::admin();
    let r = |u: &UserInfo, verb: &str, group: &str, res: &str, sub: &str, ns: &str, name: &str| {
        Attributes::resource(u, verb, group, res, sub, ns, name)
    };
    let n = |u: &UserInfo, verb: &str, path: &str| Attributes::non_resource(u, verb, path);
    let ls = "landscaper.gardener.cloud";
    let cases: Vec<(Attributes, bool)> = vec![
        // RoleBinding to a Role: only in its namespace, only its verbs.
        (r(&sa, "list", "", "configmaps", "", "ns", ""), true),
        (r(&sa, "watch", "", "configmaps", "", "ns", ""), true),
        (r(&sa, "get", "", "configmaps", "", "ns", "x"), true),
        (r(&sa, "create", "", "configmaps", "", "ns", ""), false),
        (r(&sa, "list", "", "configmaps", "", "default", ""), false),
        (r(&sa, "list", "", "configmaps", "", "", ""), false),
        // ClusterRoleBinding: everywhere; subresources are separate resources.
        (r(&sa, "patch", ls, "deployitems", "", "any", "i"), true),
        (r(&sa, "list", ls, "deployitems", "", "", ""), true),
        (r(&sa, "update", ls, "deployitems", "", "any", "i"), false),
        (
            r(&sa, "update", ls, "deployitems", "status", "any", "i"),
            true,
        ),
        (
            r(&sa, "patch", ls, "deployitems", "status", "any", "i"),
            false,
        ),
        (
            r(&sa, "get", "other.group", "deployitems", "", "any", "i"),
            false,
        ),
        // resourceNames: only that object; never a list.
        (r(&sa, "get", "", "secrets", "", "ns", "one"), true),
        (r(&sa, "get", "", "secrets", "", "ns", "two"), false),
        (r(&sa, "list", "", "secrets", "", "ns", ""), false),
        // */subresource
        (
            r(&sa, "update", "apps", "deployments", "scale", "ns", "d"),
            true,
        ),
        (
            r(&sa, "update", "apps", "deployments", "", "ns", "d"),
            false,
        ),
        (
            r(&sa, "update", "apps", "deployments", "status", "ns", "d"),
            false,
        ),
        // non-resource URLs, exact and prefix; the bootstrap discovery roles.
        (n(&sa, "get", "/metrics"), true),
        (n(&sa, "get", "/logs/kube.log"), true),
        (n(&sa, "post", "/metrics"), false),
        (n(&sa, "get", "/api/v1"), true),
        (n(&sa, "get", "/openapi/v3/apis/apps/v1"), true),
        (n(&sa, "get", "/version"), true),
        (
            r(
                &sa,
                "create",
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                "",
                "",
                "",
            ),
            true,
        ),
        (
            r(
                &sa,
                "create",
                "authorization.k8s.io",
                "subjectaccessreviews",
                "",
                "",
                "",
            ),
            false,
        ),
        (n(&anon, "get", "/healthz"), true),
        (n(&anon, "get", "/api"), false),
        (r(&anon, "list", "", "configmaps", "", "ns", ""), false),
        // A RoleBinding to a ClusterRole grants it in the binding's namespace only; groups.
        (
            r(&alice, "delete", "apps", "deployments", "", "other", "x"),
            true,
        ),
        (
            r(&alice, "delete", "apps", "deployments", "", "ns", "x"),
            false,
        ),
        (r(&alice, "list", "", "namespaces", "", "", ""), false),
        (r(&teammate, "create", "", "secrets", "", "other", ""), true),
        (
            r(&teammate, "create", "", "secrets", "", "default", ""),
            false,
        ),
        // system:masters, and `*` verbs.
        (
            r(
                &admin,
                "escalate",
                "rbac.authorization.k8s.io",
                "clusterroles",
                "",
                "",
                "",
            ),
            true,
        ),
        (n(&admin, "delete", "/anything"), true),
        (r(&sa, "*", "", "configmaps", "", "ns", ""), false),
    ];
    for (a, want) in cases {
        assert_eq!(p.authorize(&a).allowed, want, "{a:?}");
    }
}

#[test]
fn reasons_name_the_binding_or_the_missing_role() {
    let p = policy();
    let d = p.authorize(&Attributes::resource(
        &sa(),
        "list",
        "",
        "configmaps",
        "",
        "ns",
        "",
    ));
    assert_eq!(
        d.reason,
        r#"RBAC: allowed by RoleBinding "sa-reads/ns" of Role "cm-reader" to ServiceAccount "sa/ns""#
    );
    let bob = UserInfo::new("bob", &[ALL_AUTHENTICATED]);
    let d = p.authorize(&Attributes::resource(
        &bob, "get", "", "pods", "", "gone", "p",
    ));
    assert!(!d.allowed);
    assert_eq!(
        d.reason,
        r#"RBAC: role.rbac.authorization.k8s.io "missing" not found"#
    );
}

#[test]
fn forbidden_messages_are_the_api_servers() {
    let u = sa();
    let e = forbidden(
        &Attributes::resource(&u, "list", "", "configmaps", "", "default", ""),
        "",
    );
    assert_eq!(e.code, 403);
    assert_eq!(e.reason, "Forbidden");
    assert_eq!(
        e.message,
        r#"configmaps is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "configmaps" in API group "" in the namespace "default""#
    );
    assert_eq!(e.details, Some(json!({"kind": "configmaps"})));
    let e = forbidden(
        &Attributes::resource(
            &u,
            "get",
            "rbac.authorization.k8s.io",
            "clusterroles",
            "",
            "",
            "x",
        ),
        "",
    );
    assert_eq!(
        e.message,
        r#"clusterroles.rbac.authorization.k8s.io "x" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope"#
    );
    assert_eq!(
        e.details,
        Some(json!({"name": "x", "group": "rbac.authorization.k8s.io", "kind": "clusterroles"}))
    );
    let e = forbidden(
        &Attributes::resource(&u, "create", "", "serviceaccounts", "token", "ns", "sa"),
        "",
    );
    assert_eq!(
        e.message,
        r#"serviceaccounts "sa" is forbidden: User "system:serviceaccount:ns:sa" cannot create resource "serviceaccounts/token" in API group "" in the namespace "ns""#
    );
    let e = forbidden(&Attributes::non_resource(&u, "get", "/metrics"), "");
    assert_eq!(
        e.message,
        r#"forbidden: User "system:serviceaccount:ns:sa" cannot get path "/metrics""#
    );
}

#[test]
fn escalation_needs_the_permissions_granted() {
    let p = policy();
    let held = vec![PolicyRule::from_json(
        &json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}),
    )];
    assert!(p.confirm_no_escalation(&sa(), "ns", &held).is_ok());
    let more = vec![PolicyRule::from_json(
        &json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "delete"]}),
    )];
    let e = p.confirm_no_escalation(&sa(), "ns", &more).unwrap_err();
    assert!(
        e.contains(r#"{APIGroups:[""], Resources:["configmaps"], Verbs:["delete"]}"#),
        "{e}"
    );
    let named = vec![PolicyRule::from_json(
        &json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["one"], "verbs": ["get"]}),
    )];
    assert!(p.confirm_no_escalation(&sa(), "ns", &named).is_ok());
    assert!(
        p.confirm_no_escalation(&UserInfo::admin(), "ns", &more)
            .is_ok()
    );
}

#[test]
fn aggregated_cluster_roles_get_the_rules_of_the_roles_their_selectors_match() {
    let role = |name: &str, labels: Value, rules: Value| {
        json!({"kind": "ClusterRole", "metadata": {"name": name, "labels": labels},
            "rules": rules})
    };
    let pods = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
    let cms = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]});
    let mut monitoring = role("monitoring", json!({}), json!([]));
    monitoring["aggregationRule"] = json!({"clusterRoleSelectors": [
        {"matchLabels": {"agg": "monitoring"}},
        {"matchExpressions": [{"key": "extra", "operator": "Exists"}]}]});
    let b = role("b", json!({"agg": "monitoring"}), json!([pods.clone()]));
    // Matched by both selectors and carrying a rule `b` has: each rule once, by name.
    let a = role(
        "a",
        json!({"agg": "monitoring", "extra": "1"}),
        json!([cms.clone(), pods.clone()]),
    );
    let other = role("other", json!({"agg": "else"}), json!([{"verbs": ["*"]}]));
    let all = [&monitoring, &b, &a, &other];
    let rules = aggregated_rules(&monitoring, all).unwrap();
    assert_eq!(
        rules,
        [cms.clone(), pods.clone()],
        "a's rules, then b's new ones"
    );
    // Written once, nothing more to do; a role without an aggregationRule is left alone.
    let mut done = monitoring.clone();
    done["rules"] = json!(rules);
    assert_eq!(aggregated_rules(&done, [&done, &b, &a, &other]), None);
    assert_eq!(aggregated_rules(&b, all), None);
    // A matching role that goes takes its rules along; none left is `[]`.
    assert_eq!(aggregated_rules(&done, [&done, &b]).unwrap(), [pods]);
    assert_eq!(
        aggregated_rules(&done, [&done]).unwrap(),
        Vec::<Value>::new()
    );
    assert_eq!(
        aggregated_rules(&monitoring, [&monitoring]),
        None,
        "[] == no rules"
    );
}

#[test]
fn the_bootstrap_aggregates_admin_edit_view() {
    let objs = bootstrap_objects();
    let named = |n: &str| {
        objs.iter()
            .find(|o| o["metadata"]["name"] == n && o["kind"] == "ClusterRole")
            .unwrap()
    };
    assert_eq!(
        named("edit")["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    assert_eq!(
        named("view")["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
        "true"
    );
    let roles: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "ClusterRole").collect();
    let view = aggregated_rules(named("view"), roles.iter().copied()).unwrap();
    assert!(!view.is_empty());
    assert!(
        view.iter()
            .all(|r| r["verbs"] == json!(["get", "list", "watch"])),
        "view only reads"
    );
}

#[test]
fn service_account_user_names_split() {
    assert_eq!(
        split_service_account_user("system:serviceaccount:a:b"),
        Some(("a", "b"))
    );
    assert_eq!(split_service_account_user("system:serviceaccount:a"), None);
    assert_eq!(split_service_account_user("alice"), None);
}
