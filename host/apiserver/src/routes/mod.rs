//! HTTP layer: parses Kubernetes API paths and query strings (including the
//! leading `?&`), content negotiation (JSON/YAML bodies, patch types,
//! `as=PartialObjectMetadata[List]`, aggregated discovery), counts requests,
//! injects faults, records audit entries, and turns every failure into a
//! `Status` body. A panic in a handler becomes a 500 Status, never a crash.
//!
//! One file per step: `query` (query strings, headers), `access` (authentication, RBAC,
//! escalation prevention), `body` (request bodies, rendering), `create_only` (reviews,
//! TokenRequest), `resource` (a resource URL: type, verb, faults), `context` (what a resource
//! handler knows), `read` (get, list, watch), `write` (create, update, patch), `delete`, and
//! `admitted` (writes validating admission webhooks admit: dry run, calls, commit).
//!
//! Must not touch: API semantics (that is `ops`, under the store lock).

mod access;
mod admitted;
mod body;
mod context;
mod create_only;
mod delete;
mod query;
mod read;
mod resource;
mod write;

use crate::rbac::UserInfo;
use crate::status::{ApiError, bytes_response, json_response, page_not_found};
use crate::{ApiServer, discovery, openapi, reviews};
use access::authorize_request;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use create_only::{create_only, review};
use futures::FutureExt;
use http::{Method, header};
use query::{Query, header_str};
use resource::resource;
use serde_json::Value;
use std::panic::AssertUnwindSafe;

/// The axum fallback handler: the whole API.
pub(crate) async fn handle(State(api): State<ApiServer>, req: Request) -> Response {
    match AssertUnwindSafe(dispatch(api, req)).catch_unwind().await {
        Ok(r) => r,
        Err(_) => {
            ApiError::internal("internal error: the request handler panicked").into_response()
        }
    }
}

async fn dispatch(api: ApiServer, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let q = Query::parse(parts.uri.query().unwrap_or(""));
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let method = parts.method.clone();
    let headers = parts.headers;
    // With RBAC on: who asks, and may they? (Off: everyone is the administrator.)
    let user = if api.shared.opts.rbac {
        match authorize_request(&api, &parts.extensions, &headers, &method, &path, &q) {
            Ok(u) => u,
            Err(e) => return e.into_response(),
        }
    } else {
        UserInfo::admin()
    };
    let is_get = method == Method::GET;
    let reg = api.shared.store.lock().registry.clone();
    let accept = header_str(&headers, header::ACCEPT).to_string();
    let get_only = |v: Value| {
        if is_get {
            json_response(200, &v)
        } else {
            ApiError::method_not_allowed(format!("{method} is not supported here")).into_response()
        }
    };
    match segs.as_slice() {
        ["version"] => get_only(discovery::version()),
        ["healthz"] | ["readyz"] | ["livez"] => bytes_response(200, "text/plain", b"ok".to_vec()),
        ["api"] | ["apis"] if is_get => {
            let core = segs[0] == "api";
            match discovery::wants_aggregated(&accept) {
                Some(v) => {
                    let body =
                        discovery::aggregated(&reg, core, &format!("apidiscovery.k8s.io/{v}"));
                    let ct = format!(
                        "application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"
                    );
                    bytes_response(200, &ct, serde_json::to_vec(&body).unwrap_or_default())
                }
                None if core => json_response(200, &discovery::api_versions()),
                None => json_response(200, &discovery::api_group_list(&reg)),
            }
        }
        ["api", v] => match discovery::resource_list(&reg, "", v) {
            Some(d) => get_only(d),
            None => page_not_found(),
        },
        ["apis", g] => match discovery::api_group(&reg, g) {
            Some(d) => get_only(d),
            None => page_not_found(),
        },
        ["apis", g, v] => match discovery::resource_list(&reg, g, v) {
            Some(d) => get_only(d),
            None => page_not_found(),
        },
        ["openapi", "v3"] => get_only(openapi::index(&reg)),
        ["openapi", "v3", rest @ ..] => {
            let crds: Vec<Value> = api
                .shared
                .store
                .lock()
                .objects_of("apiextensions.k8s.io/customresourcedefinitions", None)
                .iter()
                .map(|o| (**o).clone())
                .collect();
            match openapi::group_version_doc(&reg, &rest.join("/"), &crds) {
                Some(d) => get_only(d),
                None => ApiError::no_resource().into_response(),
            }
        }
        ["openapi", "v2"] if is_get => {
            let (ct, body) = openapi::v2_document(&accept);
            bytes_response(200, ct, body)
        }
        [
            "api",
            "v1",
            "namespaces",
            ns,
            "serviceaccounts",
            name,
            "token",
        ] => {
            create_only(&method, &headers, body, |b| {
                reviews::token_request(&api, ns, name, &b)
            })
            .await
        }
        ["apis", g, "v1", rest @ ..] if reviews::is_review_group(g) => {
            review(&api, &user, g, rest, &method, &headers, body).await
        }
        ["api", v, rest @ ..] => {
            resource(&api, &user, &method, "", v, rest, &q, &headers, body).await
        }
        ["apis", g, v, rest @ ..] => {
            resource(&api, &user, &method, g, v, rest, &q, &headers, body).await
        }
        _ => page_not_found(),
    }
}
