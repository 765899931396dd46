//! HTTP layer: parses Kubernetes API paths and query strings (including the
//! leading `?&`), content negotiation (JSON/YAML bodies, patch types,
//! `as=PartialObjectMetadata[List]`, aggregated discovery), counts requests,
//! injects faults, records audit entries, and turns every failure into a
//! `Status` body. A panic in a handler becomes a 500 Status, never a crash.

use crate::auth;
use crate::ops::{DeleteOpts, Deleted, PatchKind, WriteOpts};
use crate::rbac::{self, Attributes, UserInfo};
use crate::registry::ResourceType;
use crate::selectors::Selector;
use crate::status::{ApiError, bytes_response, json_response, page_not_found, success};
use crate::store::{Obj, partial_metadata, rv_of, uid_of};
use crate::views::View;
use crate::watch::{self, WatchParams};
use crate::{ApiServer, AuditEntry, discovery, openapi, reviews};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use http::{HeaderMap, Method, header};
use serde::Deserialize;
use serde_json::{Value, json};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

/// Decoded query parameters, in order.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 3 <= b.len() && hex(b[i + 1]).is_some() && hex(b[i + 2]).is_some() => {
                out.push((hex(b[i + 1]).unwrap_or(0) * 16 + hex(b[i + 2]).unwrap_or(0)) as u8);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Query {
    pub fn parse(q: &str) -> Self {
        Query(
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (percent_decode(k), percent_decode(v)),
                    None => (percent_decode(p), String::new()),
                })
                .collect(),
        )
    }
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }
    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1") | Some(""))
    }
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn media_type(ct: &str) -> String {
    ct.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

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

/// Authenticates a request (in-process client: the administrator; a bearer token: whoever it
/// names, else 401; no credentials: `system:anonymous`), applies impersonation headers, and
/// authorizes what the URL asks with RBAC (403 in the server's words).
fn authorize_request(
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

/// A create-only resource (reviews, TokenRequest): POST a body, get 201 and the answer.
async fn create_only(
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
async fn review(
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

/// Kubernetes' escalation prevention for writes of roles and bindings: a Role or ClusterRole
/// may only grant what the writer holds (or the writer may `escalate`), a binding may only
/// bind a role whose permissions the writer holds (or the writer may `bind` it).
fn confirm_no_escalation(
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

/// A real kube-apiserver's request body limit (3 MiB).
pub(crate) const MAX_REQUEST_BYTES: usize = 3 << 20;

async fn read_body(body: axum::body::Body) -> Result<bytes::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_REQUEST_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {MAX_REQUEST_BYTES}"),
            )
        })
}

/// Flow collections (`[`, `{`) nested deeper than this are refused before parsing: the YAML
/// parser takes time quadratic in that depth (100,000 levels held a request for minutes,
/// found by `tests/fuzz.rs`), and nothing deeper than 128 levels decodes anyway.
const MAX_YAML_FLOW_DEPTH: usize = 1000;

/// YAML to JSON, refusing absurd flow nesting first (as go-yaml refuses depths over 10,000).
fn parse_yaml(bytes: &[u8]) -> Result<Value, String> {
    // Brackets inside quoted or plain scalars count too: tracking quotes would let a stray
    // apostrophe hide the nesting after it, and no real manifest has 1,000 open brackets.
    let mut depth = 0usize;
    for &b in bytes {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_YAML_FLOW_DEPTH {
                    return Err(format!(
                        "exceeded max depth of {MAX_YAML_FLOW_DEPTH} nested flow collections"
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    serde_yaml::from_slice(bytes).map_err(|e| e.to_string())
}

fn decode_object(ct: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    let v: Value = match media_type(ct).as_str() {
        "application/json" => serde_json::from_slice(bytes).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/yaml" => parse_yaml(bytes).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; yaml parse error: {e}"))
        })?,
        "application/vnd.kubernetes.protobuf" => crate::proto::decode_object(bytes)?,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; the body is not a JSON object",
        ));
    }
    Ok(v)
}

fn render(obj: &Obj, rt: &ResourceType, version: &str) -> Value {
    let av = rt.api_version(version);
    if obj.get("apiVersion").and_then(Value::as_str) == Some(av.as_str()) {
        return (**obj).clone();
    }
    let mut o = (**obj).clone();
    o["apiVersion"] = json!(av);
    o
}

fn obj_response(code: u16, obj: &Obj, rt: &ResourceType, version: &str) -> Response {
    let av = rt.api_version(version);
    if obj.get("apiVersion").and_then(Value::as_str) == Some(av.as_str()) {
        return json_response(code, obj);
    }
    json_response(code, &render(obj, rt, version))
}

struct Ctx<'a> {
    api: &'a ApiServer,
    /// The resource whose storage serves the request (for a view: the viewed one).
    rt: Arc<ResourceType>,
    version: &'a str,
    /// The resource and version the client asked for (`rt`/`version` unless it is a view).
    out_rt: Arc<ResourceType>,
    out_version: &'a str,
    view: Option<View>,
    ns: &'a str,
    q: &'a Query,
    headers: &'a HeaderMap,
}

impl Ctx<'_> {
    /// A stored object as the client asked for it.
    fn present(&self, obj: &Obj) -> Value {
        match self.view {
            Some(v) => v.from_storage(obj, &self.out_rt.api_version(self.out_version)),
            None => render(obj, &self.rt, self.version),
        }
    }

    fn respond(&self, code: u16, obj: &Obj) -> Response {
        match self.view {
            Some(_) => json_response(code, &self.present(obj)),
            None => obj_response(code, obj, &self.rt, self.version),
        }
    }

    /// A request body in the storage resource's terms.
    fn incoming(&self, body: Value) -> Value {
        match self.view {
            Some(v) => v.to_storage(&body),
            None => body,
        }
    }

    fn selector(&self) -> Result<Selector, ApiError> {
        match self.view {
            Some(v) => Selector::parse(
                self.q.get("labelSelector"),
                self.q
                    .get("fieldSelector")
                    .map(|f| v.field_selector_to_storage(f))
                    .as_deref(),
            ),
            None => selector(self.q),
        }
    }

    fn write_opts(&self) -> WriteOpts {
        WriteOpts {
            dry_run: self.q.get("dryRun").is_some_and(|v| !v.is_empty()),
            field_manager: self.q.get("fieldManager").map(str::to_string),
            force: self.q.flag("force"),
            strict_fields: self.q.get("fieldValidation") == Some("Strict"),
        }
    }

    fn audit(&self, verb: &str, name: &str, sub: Option<&str>, obj: &Value, changed: bool) {
        let s = &self.api.shared;
        if !s.audit_on.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let ua = header_str(self.headers, header::USER_AGENT);
        let e = AuditEntry {
            verb: verb.to_string(),
            resource: self.rt.qualified(),
            namespace: self.ns.to_string(),
            name: name.to_string(),
            subresource: sub.map(str::to_string),
            user_agent: (!ua.is_empty()).then(|| ua.to_string()),
            field_manager: self.q.get("fieldManager").map(str::to_string),
            resource_version: obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            changed,
        };
        s.audit.lock().unwrap_or_else(|e| e.into_inner()).push(e);
    }
}

#[allow(clippy::too_many_arguments)]
async fn resource(
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
        _ => return ApiError::no_resource().into_response(),
    };
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
    let Some(rt) = rt else {
        // A built-in group/version answers a JSON Status; anything else (an unknown group, or a
        // CRD group without this CRD) falls through to Go's plain-text 404, as in a real server.
        return if builtin_group_version {
            ApiError::no_resource().into_response()
        } else {
            page_not_found()
        };
    };
    if (rt.namespaced && ns.is_none() && name.is_some()) || (!rt.namespaced && ns.is_some()) {
        return ApiError::no_resource().into_response();
    }
    let status_sub = match sub {
        None => false,
        Some("status") if rt.status => true,
        Some("finalize") if rt.plural == "namespaces" && rt.group.is_empty() => false,
        Some(_) => return ApiError::no_resource().into_response(),
    };
    let sub_name = sub.map(|s| {
        if s == "finalize" {
            "finalize"
        } else {
            "status"
        }
    });
    let verb = match (method.as_str(), name) {
        ("GET", Some(_)) => "get",
        ("GET", None) if q.flag("watch") => "watch",
        ("GET", None) => "list",
        ("POST", None) => "create",
        ("PUT", Some(_)) => "update",
        ("PATCH", Some(_)) => "patch",
        ("DELETE", Some(_)) => "delete",
        ("DELETE", None) => "deletecollection",
        _ => {
            return ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            ))
            .into_response();
        }
    };
    let stat_res = match sub_name {
        Some(s) => format!("{}/{s}", rt.qualified()),
        None => rt.qualified(),
    };
    api.count(verb, &stat_res);
    if verb != "watch"
        && let Some(delay) = api.injected_delay(&rt.qualified())
    {
        tokio::time::sleep(delay).await;
    }
    // A view (events.k8s.io Events) is served from the storage of the resource it views.
    let view = View::of(&rt);
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
                return ApiError::no_resource().into_response();
            };
            (srt, ver)
        }
        None => (rt.clone(), version),
    };
    let ctx = Ctx {
        api,
        rt: storage_rt,
        version: storage_version,
        out_rt: rt.clone(),
        out_version: version,
        view,
        ns: ns.unwrap_or(""),
        q,
        headers,
    };
    if verb != "watch"
        && let Some(e) = api.injected_unavailable()
    {
        return e.into_response();
    }
    let accept = header_str(headers, header::ACCEPT);
    let result = match verb {
        "get" => do_get(&ctx, name.unwrap_or(""), accept),
        "list" => do_list(&ctx, ns, accept),
        "watch" => do_watch(&ctx, ns, accept),
        _ => {
            if let Some(e) = api.injected_write_fault(&rt, name.unwrap_or("")) {
                return e.into_response();
            }
            let bytes = match read_body(body).await {
                Ok(b) => b,
                Err(e) => return e.into_response(),
            };
            let ct = header_str(headers, header::CONTENT_TYPE);
            if matches!(verb, "create" | "update")
                && api.shared.opts.rbac
                && let Ok(obj) = decode_object(ct, &bytes)
                && let Err(e) = confirm_no_escalation(api, user, &rt, ns.unwrap_or(""), &obj)
            {
                return e.into_response();
            }
            if verb == "patch"
                && !status_sub
                && api.shared.opts.rbac
                && let Err(e) =
                    confirm_no_escalation_on_patch(&ctx, user, name.unwrap_or(""), ct, &bytes)
            {
                return e.into_response();
            }
            match verb {
                "create" => do_create(&ctx, ct, &bytes),
                "update" => do_update(&ctx, name.unwrap_or(""), status_sub, ct, &bytes),
                "patch" => do_patch(&ctx, name.unwrap_or(""), status_sub, ct, &bytes),
                "delete" => do_delete(&ctx, name.unwrap_or(""), &bytes),
                _ => do_delete_collection(&ctx, ns, &bytes),
            }
        }
    };
    if verb != "watch"
        && let Some(e) = api.injected_timeout()
    {
        // Handled (a write took effect), but the client never hears so.
        return e.into_response();
    }
    result.unwrap_or_else(|e| e.into_response())
}

fn wants_meta(accept: &str, what: &str) -> bool {
    accept.split(',').any(|mt| {
        mt.split(';')
            .map(str::trim)
            .any(|p| p == format!("as={what}"))
            && mt.contains("g=meta.k8s.io")
    })
}

/// `includeObject` of a Table request: `Metadata` (default), `Object` or `None`.
fn include_object(q: &Query) -> &str {
    match q.get("includeObject") {
        Some(v @ ("Object" | "None" | "Metadata")) => v,
        _ => "Metadata",
    }
}

fn do_get(c: &Ctx<'_>, name: &str, accept: &str) -> Result<Response, ApiError> {
    let obj = c.api.shared.store.lock().get(&c.rt, c.ns, name)?;
    if crate::table::wanted(accept) {
        let o = c.present(&obj);
        let md = json!({ "resourceVersion": crate::store::rv_of(&obj).to_string() });
        return Ok(json_response(
            200,
            &crate::table::table(&c.rt, c.version, &[&o], include_object(c.q), md),
        ));
    }
    if wants_meta(accept, "PartialObjectMetadata") {
        return Ok(json_response(200, &partial_metadata(&obj)));
    }
    Ok(c.respond(200, &obj))
}

/// A continue token: `<resourceVersion of the first page>:<namespace>/<name of the last item
/// served>`. Opaque to clients, as in Kubernetes.
fn parse_continue(token: Option<&str>) -> Result<(Option<u64>, Option<&str>), ApiError> {
    match token.filter(|t| !t.is_empty()) {
        None => Ok((None, None)),
        Some(t) => {
            let (rv, start) = t
                .split_once(':')
                .and_then(|(rv, start)| Some((rv.parse::<u64>().ok()?, start)))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "continue: Invalid value: {t:?}: not a continue token of this server"
                    ))
                })?;
            Ok((Some(rv), Some(start)))
        }
    }
}

fn selector(q: &Query) -> Result<Selector, ApiError> {
    Selector::parse(q.get("labelSelector"), q.get("fieldSelector"))
}

fn do_list(c: &Ctx<'_>, ns: Option<&str>, accept: &str) -> Result<Response, ApiError> {
    let sel = c.selector()?;
    let limit = match c.q.get("limit") {
        Some(l) if !l.is_empty() => Some(
            l.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("limit: Invalid value: {l:?}")))?,
        ),
        _ => None,
    };
    // A paginated list reports one resourceVersion on every page: the first page's, carried
    // in the continue token. A client watches from the last page's resourceVersion (kube-rs'
    // watcher, client-go's reflector); were it the store's current one, a change made to an
    // item of an earlier page while later pages were read would be in neither the list nor
    // the watch, and that client would never hear of it. Later pages hold the items as they
    // are now (not a snapshot): the watch from the first page's version replays what changed
    // since, so the client ends up current either way.
    let (list_rv, start) = parse_continue(c.q.get("continue"))?;
    let (items, next, rv) = {
        let g = c.api.shared.store.lock();
        let (items, next) = g.list(&c.rt, ns, &sel, limit, start);
        (items, next, list_rv.unwrap_or(g.rv))
    };
    let next = next.map(|start| format!("{rv}:{start}"));
    let meta_only = wants_meta(accept, "PartialObjectMetadataList");
    let mut md = json!({ "resourceVersion": rv.to_string() });
    if let Some(n) = next {
        md["continue"] = json!(n);
    }
    if crate::table::wanted(accept) {
        let rendered: Vec<Value> = items.iter().map(|o| c.present(o)).collect();
        let refs: Vec<&Value> = rendered.iter().collect();
        return Ok(json_response(
            200,
            &crate::table::table(&c.rt, c.version, &refs, include_object(c.q), md),
        ));
    }
    let (kind, av) = if meta_only {
        (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        )
    } else {
        (
            c.out_rt.list_kind.clone(),
            c.out_rt.api_version(c.out_version),
        )
    };
    let mut out = Vec::with_capacity(256 + items.len() * 512);
    out.extend_from_slice(
        format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
            json!(kind),
            json!(av),
            md
        )
        .as_bytes(),
    );
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let r = if meta_only {
            serde_json::to_writer(&mut out, &partial_metadata(o))
        } else if o.get("apiVersion").and_then(Value::as_str) == Some(av.as_str()) {
            serde_json::to_writer(&mut out, &**o)
        } else {
            serde_json::to_writer(&mut out, &c.present(o))
        };
        r.map_err(|e| ApiError::internal(e.to_string()))?;
    }
    out.extend_from_slice(b"]}");
    Ok(bytes_response(200, "application/json", out))
}

fn do_watch(c: &Ctx<'_>, ns: Option<&str>, accept: &str) -> Result<Response, ApiError> {
    let timeout = match c.q.get("timeoutSeconds") {
        Some(t) if !t.is_empty() => Some(Duration::from_secs(t.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("timeoutSeconds: Invalid value: {t:?}"))
        })?)),
        _ => None,
    };
    let p = WatchParams {
        resource_version: c.q.get("resourceVersion").map(str::to_string),
        timeout,
        bookmarks: c.q.flag("allowWatchBookmarks"),
        send_initial_events: c.q.get("sendInitialEvents") == Some("true"),
        meta_only: wants_meta(accept, "PartialObjectMetadata"),
        table: crate::table::wanted(accept).then(|| include_object(c.q).to_string()),
        ns: ns.map(str::to_string),
        selector: c.selector()?,
        view: c.view.map(|v| (v, c.out_rt.api_version(c.out_version))),
    };
    Ok(watch::start(c.api, &c.rt, c.version, p))
}

fn do_create(c: &Ctx<'_>, ct: &str, bytes: &[u8]) -> Result<Response, ApiError> {
    let body = c.incoming(decode_object(ct, bytes)?);
    let o = c.write_opts();
    let obj = c
        .api
        .shared
        .store
        .lock()
        .create(&c.rt, c.version, c.ns, body, &o)?;
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !o.dry_run {
        c.audit("create", name, None, &obj, true);
    }
    Ok(c.respond(201, &obj))
}

fn do_update(
    c: &Ctx<'_>,
    name: &str,
    status: bool,
    ct: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let body = c.incoming(decode_object(ct, bytes)?);
    let o = c.write_opts();
    let (obj, changed) = c
        .api
        .shared
        .store
        .lock()
        .update(&c.rt, c.version, c.ns, name, body, status, &o)?;
    if !o.dry_run {
        c.audit("update", name, status.then_some("status"), &obj, changed);
    }
    Ok(c.respond(200, &obj))
}

/// Escalation prevention for a PATCH of a Role, ClusterRole or binding, as kube-apiserver's
/// RBAC storage checks the object an update (a patch is one) would store: the patch is
/// applied as a dry run and the result must pass [`confirm_no_escalation`], unless the patch
/// changes nothing or only what garbage collection changes (ownerReferences, finalizers).
fn confirm_no_escalation_on_patch(
    c: &Ctx<'_>,
    user: &UserInfo,
    name: &str,
    ct: &str,
    bytes: &[u8],
) -> Result<(), ApiError> {
    if c.rt.group != "rbac.authorization.k8s.io" || user.in_group(rbac::SYSTEM_MASTERS) {
        return Ok(());
    }
    let Ok(old) = c.api.shared.store.lock().get(&c.rt, c.ns, name) else {
        return Ok(()); // the patch itself answers NotFound (or creates, for apply)
    };
    let mut o = c.write_opts();
    o.dry_run = true;
    let (new, changed, _) = patched(c, name, false, ct, bytes, &o)?;
    let without_gc_fields = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in [
                "ownerReferences",
                "finalizers",
                "resourceVersion",
                "managedFields",
                "generation",
            ] {
                m.remove(f);
            }
        }
        v
    };
    if !changed || without_gc_fields(&new) == without_gc_fields(&old) {
        return Ok(());
    }
    confirm_no_escalation(c.api, user, &c.rt, c.ns, &new)
}

fn do_patch(
    c: &Ctx<'_>,
    name: &str,
    status: bool,
    ct: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let o = c.write_opts();
    let (obj, changed, created) = patched(c, name, status, ct, bytes, &o)?;
    if !o.dry_run {
        c.audit(
            if created { "create" } else { "patch" },
            name,
            status.then_some("status"),
            &obj,
            changed,
        );
    }
    Ok(c.respond(if created { 201 } else { 200 }, &obj))
}

/// Applies a patch request (committed unless `o.dry_run`): (object, changed, created).
fn patched(
    c: &Ctx<'_>,
    name: &str,
    status: bool,
    ct: &str,
    bytes: &[u8],
    o: &WriteOpts,
) -> Result<(Obj, bool, bool), ApiError> {
    let kind = match media_type(ct).as_str() {
        "application/merge-patch+json" => PatchKind::Merge,
        "application/json-patch+json" => PatchKind::Json,
        "application/strategic-merge-patch+json" => PatchKind::Strategic,
        "application/apply-patch+yaml" | "application/apply-patch+json" => PatchKind::Apply,
        other => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
                ),
            ));
        }
    };
    let body: Value = if kind == PatchKind::Apply {
        match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(_) => parse_yaml(bytes)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
        }
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
    };
    let body = match (c.view, kind) {
        (Some(v), PatchKind::Json) => v.json_patch_to_storage(&body),
        (Some(v), _) => v.to_storage(&body),
        (None, _) => body,
    };
    c.api
        .shared
        .store
        .lock()
        .patch(&c.rt, c.version, c.ns, name, kind, &body, status, o)
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeleteBody {
    propagation_policy: Option<String>,
    preconditions: Option<Preconditions>,
    dry_run: Option<Vec<String>>,
    orphan_dependents: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

fn delete_opts(q: &Query, ct: &str, bytes: &[u8]) -> Result<DeleteOpts, ApiError> {
    let b: DeleteBody = if bytes.iter().all(|c| c.is_ascii_whitespace()) {
        DeleteBody::default()
    } else if media_type(ct) == "application/vnd.kubernetes.protobuf" {
        serde_json::from_value(crate::proto::decode_delete_options(bytes)?)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    let mut propagation = b
        .propagation_policy
        .or_else(|| q.get("propagationPolicy").map(str::to_string));
    if b.orphan_dependents == Some(true) || q.get("orphanDependents") == Some("true") {
        propagation = Some("Orphan".into());
    }
    if let Some(p) = &propagation
        && !["Orphan", "Background", "Foreground"].contains(&p.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "propagationPolicy: Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
        )));
    }
    let pre = b.preconditions.unwrap_or_default();
    Ok(DeleteOpts {
        propagation,
        uid: pre.uid,
        resource_version: pre.resource_version,
        dry_run: b.dry_run.is_some_and(|d| !d.is_empty())
            || q.get("dryRun").is_some_and(|v| !v.is_empty()),
    })
}

fn do_delete(c: &Ctx<'_>, name: &str, bytes: &[u8]) -> Result<Response, ApiError> {
    let d = delete_opts(c.q, header_str(c.headers, header::CONTENT_TYPE), bytes)?;
    let res = c.api.shared.store.lock().delete(&c.rt, c.ns, name, &d)?;
    Ok(match res {
        Deleted::Gone(obj) => {
            if !d.dry_run {
                c.audit("delete", name, None, &obj, true);
            }
            json_response(
                200,
                &success(&c.out_rt.group, &c.out_rt.plural, name, uid_of(&obj)),
            )
        }
        Deleted::Terminating(obj) => {
            if !d.dry_run {
                c.audit("delete", name, None, &obj, true);
            }
            c.respond(200, &obj)
        }
    })
}

fn do_delete_collection(c: &Ctx<'_>, ns: Option<&str>, bytes: &[u8]) -> Result<Response, ApiError> {
    let d = delete_opts(c.q, header_str(c.headers, header::CONTENT_TYPE), bytes)?;
    let sel = c.selector()?;
    let (items, rv) = {
        let mut g = c.api.shared.store.lock();
        let items = g.delete_collection(&c.rt, ns, &sel, &d)?;
        (items, g.rv)
    };
    for o in &items {
        let name = o
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        c.audit("deletecollection", name, None, o, rv_of(o) > 0);
    }
    let items: Vec<Value> = items.iter().map(|o| c.present(o)).collect();
    Ok(json_response(
        200,
        &json!({ "kind": c.out_rt.list_kind, "apiVersion": c.out_rt.api_version(c.out_version), "metadata": {"resourceVersion": rv.to_string()}, "items": items }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        let q = Query::parse("&labelSelector=app+in+%28a%2Cb%29&watch=true&x");
        assert_eq!(q.get("labelSelector"), Some("app in (a,b)"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("x"), Some(""));
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
