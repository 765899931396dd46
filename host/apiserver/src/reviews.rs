//! The create-only, never-stored API objects of authentication and authorization:
//! `TokenRequest` (`serviceaccounts/{name}/token`), `TokenReview`, `SelfSubjectReview`
//! (`kubectl auth whoami`), `SelfSubjectAccessReview` / `SubjectAccessReview` /
//! `LocalSubjectAccessReview` (`kubectl auth can-i`) and `SelfSubjectRulesReview`
//! (`kubectl auth can-i --list`), and their discovery entries.
//!
//! Owns: decoding and answering those objects. Must not touch: the store (beyond reading a
//! ServiceAccount through [`ApiServer`]), the RBAC evaluation itself (`rbac`), or routing.

use crate::ApiServer;
use crate::rbac::{Attributes, PolicyRule, UserInfo};
use crate::status::ApiError;
use serde_json::{Value, json};
use std::time::Duration;

/// The audience tokens are for when a TokenRequest names none (the server's `--api-audiences`).
pub const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc";

/// The resources of `authorization.k8s.io/v1` and `authentication.k8s.io/v1`, for discovery:
/// (group, plural, kind, namespaced).
pub const RESOURCES: &[(&str, &str, &str, bool)] = &[
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "tokenreviews",
        "TokenReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
];

/// Whether `group` is one of the groups served only by this module.
pub fn is_review_group(group: &str) -> bool {
    RESOURCES.iter().any(|(g, ..)| *g == group)
}

fn invalid(kind: &str, group: &str, field: &str, msg: &str) -> ApiError {
    ApiError::invalid(group, kind, "", field, msg)
}

fn answer(kind: &str, group: &str, body: &Value, status: Value) -> Value {
    let mut metadata = body.get("metadata").cloned().unwrap_or(json!({}));
    if metadata.get("creationTimestamp").is_none() {
        metadata["creationTimestamp"] = Value::Null;
    }
    json!({
        "kind": kind,
        "apiVersion": format!("{group}/v1"),
        "metadata": metadata,
        "spec": body.get("spec").cloned().unwrap_or(json!({})),
        "status": status,
    })
}

fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    jiff::Timestamp::from_second(secs)
        .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`.
pub fn token_request(
    api: &ApiServer,
    ns: &str,
    name: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let uid = api
        .service_account_uid(ns, name)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let mut spec = body.get("spec").cloned().unwrap_or(json!({}));
    let seconds = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    let kind = "TokenRequest";
    let group = "authentication.k8s.io";
    if seconds < 600 {
        return Err(invalid(
            kind,
            group,
            "spec.expirationSeconds",
            &format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
        ));
    }
    if seconds > 1 << 32 {
        return Err(invalid(
            kind,
            group,
            "spec.expirationSeconds",
            &format!(
                "Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"
            ),
        ));
    }
    spec["expirationSeconds"] = json!(seconds);
    if spec
        .get("audiences")
        .and_then(Value::as_array)
        .is_none_or(|a| a.is_empty())
    {
        spec["audiences"] = json!([DEFAULT_AUDIENCE]);
    }
    if spec.get("boundObjectRef").is_none() {
        spec["boundObjectRef"] = Value::Null;
    }
    let (token, expires) =
        api.shared
            .tokens
            .mint(ns, name, &uid, Duration::from_secs(seconds as u64));
    Ok(json!({
        "kind": kind,
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
    }))
}

fn user_info_json(u: &UserInfo) -> Value {
    json!({"username": u.name, "groups": u.groups})
}

/// `SelfSubjectReview` (`kubectl auth whoami`).
pub fn self_subject_review(user: &UserInfo, body: &Value) -> Value {
    answer(
        "SelfSubjectReview",
        "authentication.k8s.io",
        body,
        json!({"userInfo": user_info_json(user)}),
    )
}

/// `TokenReview`: who a token stands for.
pub fn token_review(api: &ApiServer, body: &Value) -> Result<Value, ApiError> {
    let token = body
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("");
    if token.is_empty() {
        return Err(invalid(
            "TokenReview",
            "authentication.k8s.io",
            "spec.token",
            "Required value",
        ));
    }
    let status = match api.user_for_token(token) {
        Some(u) => json!({"authenticated": true, "user": user_info_json(&u),
            "audiences": [DEFAULT_AUDIENCE]}),
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    Ok(answer("TokenReview", "authentication.k8s.io", body, status))
}

/// The attributes of an access review's spec, for `user`; `namespace` overrides the spec's
/// (LocalSubjectAccessReview).
fn review_attributes(
    kind: &str,
    user: &UserInfo,
    spec: &Value,
    namespace: Option<&str>,
) -> Result<Attributes, ApiError> {
    let group = "authorization.k8s.io";
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match (
        spec.get("resourceAttributes"),
        spec.get("nonResourceAttributes"),
    ) {
        (Some(r), None) if r.is_object() => {
            let ns = namespace
                .map(str::to_string)
                .unwrap_or_else(|| s(r, "namespace"));
            Ok(Attributes::resource(
                user,
                &s(r, "verb"),
                &s(r, "group"),
                &s(r, "resource"),
                &s(r, "subresource"),
                &ns,
                &s(r, "name"),
            ))
        }
        (None, Some(n)) if n.is_object() && namespace.is_none() => {
            Ok(Attributes::non_resource(user, &s(n, "verb"), &s(n, "path")))
        }
        _ => Err(invalid(
            kind,
            group,
            "spec.resourceAttributes",
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

/// `SelfSubjectAccessReview` (`user` is the requester), `SubjectAccessReview` and
/// `LocalSubjectAccessReview` (`user` = `None`: the spec's user and groups).
pub fn access_review(
    api: &ApiServer,
    kind: &str,
    requester: &UserInfo,
    namespace: Option<&str>,
    body: &Value,
) -> Result<Value, ApiError> {
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let subject = if kind == "SelfSubjectAccessReview" {
        requester.clone()
    } else {
        let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
        let groups: Vec<String> = spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if user.is_empty() && groups.is_empty() {
            return Err(invalid(
                kind,
                "authorization.k8s.io",
                "spec.user",
                "Invalid value: \"\": at least one of user or group must be specified",
            ));
        }
        UserInfo {
            name: user.to_string(),
            groups,
        }
    };
    if let (Some(ns), Some(spec_ns)) = (
        namespace,
        spec.pointer("/resourceAttributes/namespace")
            .and_then(Value::as_str),
    ) && ns != spec_ns
    {
        return Err(invalid(
            kind,
            "authorization.k8s.io",
            "spec.resourceAttributes.namespace",
            &format!("Invalid value: {spec_ns:?}: must match metadata.namespace"),
        ));
    }
    let attrs = review_attributes(kind, &subject, &spec, namespace)?;
    let d = api.decide(&attrs);
    let mut status = json!({"allowed": d.allowed});
    if !d.reason.is_empty() {
        status["reason"] = json!(d.reason);
    }
    Ok(answer(kind, "authorization.k8s.io", body, status))
}

fn rule_json(r: &PolicyRule) -> (bool, Value) {
    if !r.non_resource_urls.is_empty() {
        return (
            false,
            json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}),
        );
    }
    let mut v = json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
    if !r.resource_names.is_empty() {
        v["resourceNames"] = json!(r.resource_names);
    }
    (true, v)
}

/// `SelfSubjectRulesReview`: the rules that apply to the requester in `spec.namespace`.
pub fn rules_review(api: &ApiServer, requester: &UserInfo, body: &Value) -> Value {
    let ns = body
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (rules, errors) = api.rules_for(requester, ns);
    let (mut resource_rules, mut non_resource_rules) = (Vec::new(), Vec::new());
    for r in &rules {
        match rule_json(r) {
            (true, v) => resource_rules.push(v),
            (false, v) => non_resource_rules.push(v),
        }
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
        "incomplete": !errors.is_empty()});
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    answer(
        "SelfSubjectRulesReview",
        "authorization.k8s.io",
        body,
        status,
    )
}
