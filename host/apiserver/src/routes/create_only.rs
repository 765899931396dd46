//! Create-only resources: the review APIs (`authentication.k8s.io/v1`,
//! `authorization.k8s.io/v1`) and TokenRequest. POST a body, get 201 and the answer.
//!
//! Owns: [`create_only`] and [`review`]. Must not touch: what a review answers (`reviews`).

use super::body::{decode_object, read_body};
use super::query::header_str;
use crate::rbac::UserInfo;
use crate::status::{ApiError, json_response};
use crate::{ApiServer, reviews};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, header};
use serde_json::Value;

/// A create-only resource (reviews, TokenRequest): POST a body, get 201 and the answer.
pub(super) async fn create_only(
    method: &Method,
    headers: &HeaderMap,
    body: axum::body::Body,
    answer: impl FnOnce(Value) -> Result<Value, ApiError>,
) -> Response {
    if method != Method::POST {
        return ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({method})"
        ))
        .into_response();
    }
    let result = async {
        let bytes = read_body(body).await?;
        let v = decode_object(header_str(headers, header::CONTENT_TYPE), &bytes)?;
        answer(v)
    }
    .await;
    match result {
        Ok(v) => json_response(201, &v),
        Err(e) => e.into_response(),
    }
}

/// `authentication.k8s.io/v1` and `authorization.k8s.io/v1` (see `reviews`).
pub(super) async fn review(
    api: &ApiServer,
    user: &UserInfo,
    group: &str,
    rest: &[&str],
    method: &Method,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Response {
    let (ns, plural) = match rest {
        [p] => (None, *p),
        ["namespaces", ns, p] => (Some(*ns), *p),
        _ => return ApiError::no_resource().into_response(),
    };
    let Some((_, _, kind, namespaced)) = reviews::RESOURCES
        .iter()
        .find(|(g, p, ..)| *g == group && *p == plural)
    else {
        return ApiError::no_resource().into_response();
    };
    if *namespaced != ns.is_some() {
        return ApiError::no_resource().into_response();
    }
    create_only(method, headers, body, |b| match plural {
        "selfsubjectreviews" => Ok(reviews::self_subject_review(user, &b)),
        "tokenreviews" => reviews::token_review(api, &b),
        "selfsubjectrulesreviews" => Ok(reviews::rules_review(api, user, &b)),
        _ => reviews::access_review(api, kind, user, ns, &b),
    })
    .await
}
