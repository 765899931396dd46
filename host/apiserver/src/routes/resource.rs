//! A request for a resource URL (`/api/v1/...`, `/apis/{group}/{version}/...`): which type,
//! namespace, name and subresource it names, which verb it is, request counting and injected
//! faults, then the verb's handler.
//!
//! Owns: [`resource`] and the steps that resolve a URL to a [`Target`]. Must not touch: what a
//! verb does (`read`, `write`, `delete`).

use super::access::confirm_no_escalation;
use super::admitted::Admission;
use super::body::{decode_object, read_body};
use super::context::Ctx;
use super::delete::{do_delete, do_delete_collection};
use super::query::{Query, header_str};
use super::read::{do_get, do_list, do_watch};
use super::write::{confirm_no_escalation_on_patch, do_create, do_patch, do_update};
use crate::ApiServer;
use crate::rbac::UserInfo;
use crate::registry::ResourceType;
use crate::status::{ApiError, page_not_found};
use crate::views::View;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, header};
use std::sync::Arc;

/// What a resource URL names, once its type and verb are known.
struct Target<'a> {
    /// The resource the client asked for (for a view: the view, not its storage).
    rt: Arc<ResourceType>,
    ns: Option<&'a str>,
    name: Option<&'a str>,
    /// `/status` (a `/finalize` request writes the main resource).
    status_sub: bool,
    /// The subresource as counted: `status` or `finalize`.
    sub_name: Option<&'static str>,
    verb: &'static str,
}

/// Why a URL names no resource: a JSON Status (`NotFound`, `MethodNotAllowed`), or Go's
/// plain-text 404 for a group/version nothing serves.
enum NoTarget {
    Status(ApiError),
    PageNotFound,
}

impl From<ApiError> for NoTarget {
    fn from(e: ApiError) -> Self {
        NoTarget::Status(e)
    }
}

/// Serves a resource URL; `rest` is the path after the group version.
#[allow(clippy::too_many_arguments)]
pub(super) async fn resource(
    api: &ApiServer,
    user: &UserInfo,
    method: &Method,
    group: &str,
    version: &str,
    rest: &[&str],
    q: &Query,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Response {
    let t = match target(api, method, group, version, rest, q) {
        Ok(t) => t,
        Err(NoTarget::Status(e)) => return e.into_response(),
        Err(NoTarget::PageNotFound) => return page_not_found(),
    };
    let stat_res = match t.sub_name {
        Some(s) => format!("{}/{s}", t.rt.qualified()),
        None => t.rt.qualified(),
    };
    api.count(t.verb, &stat_res);
    if t.verb != "watch"
        && let Some(delay) = api.injected_delay(&t.rt.qualified())
    {
        tokio::time::sleep(delay).await;
    }
    let ctx = match context(api, &t.rt, version, t.ns, q, headers) {
        Ok(ctx) => ctx,
        Err(e) => return e.into_response(),
    };
    if t.verb != "watch"
        && let Some(e) = api.injected_unavailable()
    {
        return e.into_response();
    }
    let accept = header_str(headers, header::ACCEPT);
    let result = match t.verb {
        "get" => do_get(&ctx, t.name.unwrap_or(""), accept),
        "list" => do_list(&ctx, t.ns, accept),
        "watch" => do_watch(&ctx, t.ns, accept),
        _ => match write(&ctx, user, &t, body).await {
            Ok(result) => result,
            Err(refused) => return refused.into_response(),
        },
    };
    if t.verb != "watch"
        && let Some(e) = api.injected_timeout()
    {
        // Handled (a write took effect), but the client never hears so.
        return e.into_response();
    }
    result.unwrap_or_else(|e| e.into_response())
}

/// The type, scope, subresource and verb a resource URL names.
fn target<'a>(
    api: &ApiServer,
    method: &Method,
    group: &str,
    version: &str,
    rest: &[&'a str],
    q: &Query,
) -> Result<Target<'a>, NoTarget> {
    let no_resource = || NoTarget::Status(ApiError::no_resource());
    let (ns, rest) = if rest.len() >= 3
        && rest[0] == "namespaces"
        && !matches!(rest[2], "status" | "finalize")
    {
        (Some(rest[1]), &rest[2..])
    } else {
        (None, rest)
    };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(*n), None),
        [p, n, s] => (*p, Some(*n), Some(*s)),
        _ => return Err(no_resource()),
    };
    let rt = resource_type(api, group, version, plural)?;
    if (rt.namespaced && ns.is_none() && name.is_some()) || (!rt.namespaced && ns.is_some()) {
        return Err(no_resource());
    }
    let status_sub = match sub {
        None => false,
        Some("status") if rt.status => true,
        Some("finalize") if rt.plural == "namespaces" && rt.group.is_empty() => false,
        Some(_) => return Err(no_resource()),
    };
    let sub_name = sub.map(|s| {
        if s == "finalize" {
            "finalize"
        } else {
            "status"
        }
    });
    let verb = verb_of(method, name, q)?;
    Ok(Target {
        rt,
        ns,
        name,
        status_sub,
        sub_name,
        verb,
    })
}

/// The registered type of `group/version/plural`.
fn resource_type(
    api: &ApiServer,
    group: &str,
    version: &str,
    plural: &str,
) -> Result<Arc<ResourceType>, NoTarget> {
    let (rt, builtin_group_version) = {
        let store = api.shared.store.lock();
        let rt = store.registry.get(group, version, plural).cloned();
        let builtin = store
            .registry
            .in_group_version(group, version)
            .iter()
            .any(|rt| !rt.crd);
        (rt, builtin)
    };
    rt.ok_or_else(|| {
        // A built-in group/version answers a JSON Status; anything else (an unknown group, or a
        // CRD group without this CRD) falls through to Go's plain-text 404, as in a real server.
        if builtin_group_version {
            NoTarget::Status(ApiError::no_resource())
        } else {
            NoTarget::PageNotFound
        }
    })
}

/// The RBAC verb of a method on an object (`name`) or a collection.
fn verb_of(method: &Method, name: Option<&str>, q: &Query) -> Result<&'static str, ApiError> {
    Ok(match (method.as_str(), name) {
        ("GET", Some(_)) => "get",
        ("GET", None) if q.flag("watch") => "watch",
        ("GET", None) => "list",
        ("POST", None) => "create",
        ("PUT", Some(_)) => "update",
        ("PATCH", Some(_)) => "patch",
        ("DELETE", Some(_)) => "delete",
        ("DELETE", None) => "deletecollection",
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            )));
        }
    })
}

/// The handler context: a view (events.k8s.io Events) is served from the storage of the
/// resource it views.
fn context<'a>(
    api: &'a ApiServer,
    rt: &Arc<ResourceType>,
    version: &'a str,
    ns: Option<&'a str>,
    q: &'a Query,
    headers: &'a HeaderMap,
) -> Result<Ctx<'a>, ApiError> {
    let view = View::of(rt);
    let (storage_rt, storage_version) = match view {
        Some(v) => {
            let (g, ver, plural) = v.storage();
            let Some(srt) = api
                .shared
                .store
                .lock()
                .registry
                .get(g, ver, plural)
                .cloned()
            else {
                return Err(ApiError::no_resource());
            };
            (srt, ver)
        }
        None => (rt.clone(), version),
    };
    Ok(Ctx {
        api,
        rt: storage_rt,
        version: storage_version,
        out_rt: rt.clone(),
        out_version: version,
        view,
        ns: ns.unwrap_or(""),
        q,
        headers,
    })
}

/// A write verb: injected write faults, the body, escalation prevention, then the handler
/// (which validating webhooks may have to admit).
/// The outer `Err` is answered at once (refused before the write, so no injected timeout).
async fn write(
    ctx: &Ctx<'_>,
    user: &UserInfo,
    t: &Target<'_>,
    body: axum::body::Body,
) -> Result<Result<Response, ApiError>, ApiError> {
    let api = ctx.api;
    let name = t.name.unwrap_or("");
    if let Some(e) = api.injected_write_fault(&t.rt, name) {
        return Err(e);
    }
    let bytes = read_body(body).await?;
    let ct = header_str(ctx.headers, header::CONTENT_TYPE);
    if matches!(t.verb, "create" | "update")
        && api.shared.opts.rbac
        && let Ok(obj) = decode_object(ct, &bytes)
    {
        confirm_no_escalation(api, user, &t.rt, t.ns.unwrap_or(""), &obj)?;
    }
    if t.verb == "patch" && !t.status_sub && api.shared.opts.rbac {
        confirm_no_escalation_on_patch(ctx, user, name, ct, &bytes)?;
    }
    let adm = Admission {
        c: ctx,
        user,
        sub: t.sub_name.unwrap_or(""),
    };
    Ok(match t.verb {
        "create" => do_create(ctx, &adm, ct, &bytes).await,
        "update" => do_update(ctx, &adm, name, t.status_sub, ct, &bytes).await,
        "patch" => do_patch(ctx, &adm, name, t.status_sub, ct, &bytes).await,
        "delete" => do_delete(ctx, &adm, name, &bytes).await,
        _ => do_delete_collection(ctx, &adm, t.ns, &bytes).await,
    })
}
