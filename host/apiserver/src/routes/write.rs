//! POST, PUT and PATCH of a resource (admitted by webhooks: `admitted`), and escalation
//! prevention for a PATCH.
//!
//! Owns: patch media types and decoding. Must not touch: DELETE (`delete`).

use super::access::confirm_no_escalation;
use super::admitted::Admission;
use super::body::{decode_object, parse_yaml};
use super::context::Ctx;
use super::query::media_type;
use crate::ops::{PatchKind, WriteOpts};
use crate::rbac::{self, UserInfo};
use crate::status::ApiError;
use crate::store::Obj;
use axum::response::Response;
use serde_json::Value;

pub(super) async fn do_create(
    c: &Ctx<'_>,
    adm: &Admission<'_>,
    ct: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let body = c.incoming(decode_object(ct, bytes)?);
    let o = c.write_opts();
    let obj = adm.create(body, &o).await?;
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !o.dry_run {
        c.audit("create", name, None, &obj, true);
    }
    Ok(c.respond(201, &obj))
}

pub(super) async fn do_update(
    c: &Ctx<'_>,
    adm: &Admission<'_>,
    name: &str,
    status: bool,
    ct: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let mut body = Some(c.incoming(decode_object(ct, bytes)?));
    let o = c.write_opts();
    let (obj, changed, _) = adm
        .update(name, status, "UpdateOptions", false, &o, |g, o, keep| {
            let body = match keep {
                true => body.clone(),
                false => body.take(),
            };
            g.update(
                &c.rt,
                c.version,
                c.ns,
                name,
                body.unwrap_or_default(),
                status,
                o,
            )
            .map(|(obj, changed)| (obj, changed, false))
        })
        .await?;
    if !o.dry_run {
        c.audit("update", name, status.then_some("status"), &obj, changed);
    }
    Ok(c.respond(200, &obj))
}

/// Escalation prevention for a PATCH of a Role, ClusterRole or binding, as kube-apiserver's
/// RBAC storage checks the object an update (a patch is one) would store: the patch is
/// applied as a dry run and the result must pass [`confirm_no_escalation`], unless the patch
/// changes nothing or only what garbage collection changes (ownerReferences, finalizers).
pub(super) fn confirm_no_escalation_on_patch(
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

pub(super) async fn do_patch(
    c: &Ctx<'_>,
    adm: &Admission<'_>,
    name: &str,
    status: bool,
    ct: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let o = c.write_opts();
    let (kind, body) = patch_request(c, ct, bytes)?;
    let may_create = kind == PatchKind::Apply && !status;
    let (obj, changed, created) = adm
        .update(name, status, "PatchOptions", may_create, &o, |g, o, _| {
            g.patch(&c.rt, c.version, c.ns, name, kind, &body, status, o)
        })
        .await?;
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

/// Applies a patch request with `o` and without webhooks — what escalation prevention does,
/// as a dry run, to see what a patch would store: (object, changed, created).
fn patched(
    c: &Ctx<'_>,
    name: &str,
    status: bool,
    ct: &str,
    bytes: &[u8],
    o: &WriteOpts,
) -> Result<(Obj, bool, bool), ApiError> {
    let (kind, body) = patch_request(c, ct, bytes)?;
    c.api
        .shared
        .store
        .lock()
        .patch(&c.rt, c.version, c.ns, name, kind, &body, status, o)
}

/// The patch type a content type names, and the patch in the storage resource's terms.
fn patch_request(c: &Ctx<'_>, ct: &str, bytes: &[u8]) -> Result<(PatchKind, Value), ApiError> {
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
    Ok((kind, body))
}
