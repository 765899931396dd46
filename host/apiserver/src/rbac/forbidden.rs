//! The `Forbidden` Status a denied request gets, in the API server's words.
//!
//! Owns: [`forbidden`] and [`forbidden_status`]. Must not touch: the decision itself.

use super::attributes::Attributes;
use crate::status::ApiError;
use serde_json::json;

/// The 403 a denied request gets, in the API server's words.
pub fn forbidden(a: &Attributes, reason: &str) -> ApiError {
    let msg = if a.resource_request {
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {:?}", a.namespace)
        };
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
            a.user,
            a.verb,
            a.combined_resource(),
            a.api_group
        )
    } else {
        format!("User {:?} cannot {} path {:?}", a.user, a.verb, a.path)
    };
    let err = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    forbidden_status(&a.api_group, &a.resource, &a.name, &err)
}

/// Kubernetes' `NewForbidden(GroupResource{group, resource}, name, err)`.
pub fn forbidden_status(group: &str, resource: &str, name: &str, err: &str) -> ApiError {
    let qualified = crate::status::qualified(group, resource);
    let message = if resource.is_empty() && group.is_empty() {
        format!("forbidden: {err}")
    } else if name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {name:?} is forbidden: {err}")
    };
    let mut d = json!({});
    for (k, v) in [("name", name), ("group", group), ("kind", resource)] {
        if !v.is_empty() {
            d[k] = json!(v);
        }
    }
    ApiError::new(403, "Forbidden", message).with_details(d)
}
