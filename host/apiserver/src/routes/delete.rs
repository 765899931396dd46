//! DELETE of one object and of a collection (admitted by webhooks: `admitted`): DeleteOptions
//! from body and query.
//!
//! Owns: [`delete_opts`]. Must not touch: the deletion semantics (`ops`).

use super::admitted::Admission;
use super::context::Ctx;
use super::query::{Query, header_str, media_type};
use crate::ops::{DeleteOpts, Deleted};
use crate::status::{ApiError, json_response, success};
use crate::store::{rv_of, uid_of};
use axum::response::Response;
use http::header;
use serde::Deserialize;
use serde_json::{Value, json};

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

pub(super) async fn do_delete(
    c: &Ctx<'_>,
    adm: &Admission<'_>,
    name: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let d = delete_opts(c.q, header_str(c.headers, header::CONTENT_TYPE), bytes)?;
    let res = adm.delete(c.ns, name, &d).await?;
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

pub(super) async fn do_delete_collection(
    c: &Ctx<'_>,
    adm: &Admission<'_>,
    ns: Option<&str>,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let d = delete_opts(c.q, header_str(c.headers, header::CONTENT_TYPE), bytes)?;
    let sel = c.selector()?;
    let (items, rv) = adm.delete_collection(ns, &sel, &d).await?;
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
