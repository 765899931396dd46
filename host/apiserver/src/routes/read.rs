//! GET, LIST (pagination, tables, partial metadata) and WATCH of a resource.
//!
//! Owns: continue tokens and list encoding. Must not touch: writes.

use super::context::Ctx;
use super::query::Query;
use crate::status::{ApiError, bytes_response, json_response};
use crate::store::partial_metadata;
use crate::watch::{self, WatchParams};
use axum::response::Response;
use serde_json::{Value, json};
use std::time::Duration;

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

pub(super) fn do_get(c: &Ctx<'_>, name: &str, accept: &str) -> Result<Response, ApiError> {
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

pub(super) fn do_list(c: &Ctx<'_>, ns: Option<&str>, accept: &str) -> Result<Response, ApiError> {
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

pub(super) fn do_watch(c: &Ctx<'_>, ns: Option<&str>, accept: &str) -> Result<Response, ApiError> {
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
