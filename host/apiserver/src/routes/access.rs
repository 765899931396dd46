//! Who asks and whether they may: authentication, impersonation, RBAC on what the URL asks,
//! and Kubernetes' escalation prevention for writes of roles and bindings.
//!
//! Owns: [`authorize_request`] and [`confirm_no_escalation`]. Must not touch: the RBAC
//! evaluator itself (that is `rbac`) or the store.

use super::query::Query;
use crate::ApiServer;
use crate::auth;
use crate::rbac::{self, Attributes, UserInfo};
use crate::registry::ResourceType;
use crate::status::ApiError;
use http::{HeaderMap, Method};
use serde_json::Value;

/// Authenticates a request (in-process client: the administrator; a bearer token: whoever it
/// names, else 401; no credentials: `system:anonymous`), applies impersonation headers, and
/// authorizes what the URL asks with RBAC (403 in the server's words).
pub(super) fn authorize_request(
    api: &ApiServer,
    ext: &http::Extensions,
    headers: &HeaderMap,
    method: &Method,
    path: &str,
    q: &Query,
) -> Result<UserInfo, ApiError> {
    let mut user = if ext.get::<auth::InProcessAdmin>().is_some() {
        UserInfo::admin()
    } else {
        match auth::bearer(headers) {
            Some(token) => api.user_for_token(token).ok_or_else(auth::unauthorized)?,
            None => UserInfo::anonymous(),
        }
    };
    if let Some(imp) = auth::impersonation(&user, headers)? {
        for check in &imp.checks {
            let d = api.decide(check);
            if !d.allowed {
                return Err(rbac::forbidden(check, &d.reason));
            }
        }
        user = imp.user;
    }
    let a = Attributes::from_request(
        &user,
        method.as_str(),
        path,
        q.flag("watch"),
        q.get("fieldSelector"),
    );
    let d = api.decide(&a);
    if !d.allowed {
        return Err(rbac::forbidden(&a, &d.reason));
    }
    Ok(user)
}

/// Kubernetes' escalation prevention for writes of roles and bindings: a Role or ClusterRole
/// may only grant what the writer holds (or the writer may `escalate`), a binding may only
/// bind a role whose permissions the writer holds (or the writer may `bind` it).
pub(super) fn confirm_no_escalation(
    api: &ApiServer,
    user: &UserInfo,
    rt: &ResourceType,
    ns: &str,
    body: &Value,
) -> Result<(), ApiError> {
    const RBAC: &str = "rbac.authorization.k8s.io";
    if !api.shared.opts.rbac || rt.group != RBAC || user.in_group(rbac::SYSTEM_MASTERS) {
        return Ok(());
    }
    let name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let policy = api.policy(ns);
    let (rules, bypass) = match rt.plural.as_str() {
        "roles" | "clusterroles" => (
            rbac::PolicyRule::of_role(body),
            Attributes::resource(user, "escalate", RBAC, &rt.plural, "", ns, name),
        ),
        "rolebindings" | "clusterrolebindings" => {
            let role_ref = body.get("roleRef").cloned().unwrap_or(Value::Null);
            let kind = role_ref.get("kind").and_then(Value::as_str).unwrap_or("");
            let role = role_ref.get("name").and_then(Value::as_str).unwrap_or("");
            let plural = if kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            let bind = Attributes::resource(user, "bind", RBAC, plural, "", ns, role);
            if api.decide(&bind).allowed {
                return Ok(());
            }
            let rules = policy
                .role_ref_rules(&role_ref, ns)
                .map_err(|_| ApiError::not_found(RBAC, &kind.to_ascii_lowercase(), role))?;
            (rules, bind)
        }
        _ => return Ok(()),
    };
    if api.decide(&bypass).allowed {
        return Ok(());
    }
    policy
        .confirm_no_escalation(user, ns, &rules)
        .map_err(|e| rbac::forbidden_status(RBAC, &rt.plural, name, &e))
}
