//! Create, update (main and `/status`) and patch: no-op writes are not written, `generation`
//! bumps only on spec changes, status/spec separation, optimistic concurrency.
//!
//! Owns: [`Inner::create`], [`Inner::update`], [`Inner::patch`], and their last steps
//! ([`Inner::commit_created`], [`Inner::commit_updated`]), which a write admitted by validating
//! webhooks calls on its own (see [`crate::webhooks`]). Must not touch: deletion
//! (that is `delete`, which an update that drops the last finalizer hands over to).

use super::admission::{
    check_type, finalizers, meta, normalize_meta, patch_err, random_suffix, server_defaults,
    spec_changed, uid_precondition, validate_crd,
};
use super::options::{PatchKind, WriteOpts};
use crate::apply::{self, Scope};
use crate::builtin::validate_name;
use crate::patch;
use crate::registry::{CRD_KEY, NAMESPACE_KEY, ResourceType};
use crate::status::ApiError;
use crate::store::{Inner, Obj, now, rv_of};
use serde_json::{Map, Value, json};
use std::sync::Arc;

impl Inner {
    pub fn create(
        &mut self,
        rt: &Arc<ResourceType>,
        version: &str,
        ns: &str,
        mut body: Value,
        o: &WriteOpts,
    ) -> Result<Obj, ApiError> {
        let obj = body
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("the request body must be a JSON object"))?;
        check_type(rt, version, obj)?;
        let m = obj.entry("metadata").or_insert_with(|| json!({}));
        let m = m
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        if rt.namespaced {
            match m.get("namespace").and_then(Value::as_str) {
                Some(n) if !n.is_empty() && n != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(ns));
                }
            }
        } else {
            m.remove("namespace");
        }
        if m.get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
        {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let name = self.name_for_create(rt, ns, m)?;
        validate_name(rt, &name)?;
        m.insert("name".into(), json!(name));
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(now()));
        m.insert("generation".into(), json!(1));
        for k in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "resourceVersion",
        ] {
            m.remove(k);
        }
        if rt.status {
            obj.remove("status");
        }
        normalize_meta(&mut body)?;
        self.admit(rt, &mut body, None, o.strict_fields)?;
        self.namespace_accepts_new_content(rt, ns, &name)?;
        if self.lookup(&rt.key(), ns, &name).is_some() {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
        }
        if rt.key() == CRD_KEY {
            validate_crd(rt, &name, &body)?;
        }
        server_defaults(rt, &mut body, None);
        if o.dry_run {
            return Ok(Arc::new(body));
        }
        self.commit_created(rt, ns, &name, body)
    }

    /// Stores an object a create computed (and admitted) earlier: what may have changed since
    /// is checked again (the namespace still takes new content, the name is still free), then
    /// it is committed and what follows a create runs. [`Inner::create`] ends here; so does a
    /// create that validating webhooks admitted while the store was unlocked
    /// ([`crate::webhooks`]).
    pub(crate) fn commit_created(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        body: Value,
    ) -> Result<Obj, ApiError> {
        self.namespace_accepts_new_content(rt, ns, name)?;
        if self.lookup(&rt.key(), ns, name).is_some() {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, name));
        }
        let obj = self.commit(rt, ns, name, Some(body));
        self.simulate_after(rt, ns, name);
        self.service_account_tokens_after(rt, ns, name);
        Ok(obj)
    }

    /// `metadata.name`, or `generateName` with a random suffix no object of the type has yet.
    fn name_for_create(
        &self,
        rt: &ResourceType,
        ns: &str,
        m: &Map<String, Value>,
    ) -> Result<String, ApiError> {
        Ok(match m.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => match m.get("generateName").and_then(Value::as_str) {
                Some(g) if !g.is_empty() => loop {
                    let n = format!("{g}{}", random_suffix());
                    if self.lookup(&rt.key(), ns, &n).is_none() {
                        break n;
                    }
                },
                _ => {
                    return Err(ApiError::invalid(
                        &rt.group,
                        &rt.kind,
                        "",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    ));
                }
            },
        })
    }

    /// A namespaced object may only be created in a namespace that exists and is not
    /// terminating.
    fn namespace_accepts_new_content(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if rt.namespaced {
            match self.lookup(NAMESPACE_KEY, "", ns) {
                None => return Err(ApiError::namespace_not_found(ns)),
                Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => {
                    return Err(ApiError::new(
                        403,
                        "Forbidden",
                        format!(
                            "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                            rt.qualified()
                        ),
                    )
                    .with_details(json!({
                        "name": name,
                        "group": rt.group,
                        "kind": rt.plural,
                        "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}],
                    })));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// PUT (main resource or `/status`). Returns the object and whether anything was written.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        rt: &Arc<ResourceType>,
        version: &str,
        ns: &str,
        name: &str,
        mut body: Value,
        status: bool,
        o: &WriteOpts,
    ) -> Result<(Obj, bool), ApiError> {
        let obj = body
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("the request body must be a JSON object"))?;
        check_type(rt, version, obj)?;
        let m = obj
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        if let Some(n) = m.get("name").and_then(Value::as_str)
            && n != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        if rt.namespaced
            && let Some(n) = m.get("namespace").and_then(Value::as_str)
            && !n.is_empty()
            && n != ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let old = self.get(rt, ns, name)?;
        if let Some(rv) = m
            .get("resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            && rv.parse::<u64>().ok() != Some(rv_of(&old))
        {
            return Err(ApiError::modified(&rt.group, &rt.plural, name));
        }
        self.finish_update(rt, ns, name, &old, body, status, o)
    }

    /// PATCH. Returns the object, whether anything was written, and whether it was created (apply).
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        rt: &Arc<ResourceType>,
        version: &str,
        ns: &str,
        name: &str,
        kind: PatchKind,
        body: &Value,
        status: bool,
        o: &WriteOpts,
    ) -> Result<(Obj, bool, bool), ApiError> {
        let manager = || {
            o.field_manager.clone().filter(|m| !m.is_empty()).ok_or_else(|| ApiError::bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"))
        };
        if kind != PatchKind::Json && !body.is_object() {
            return Err(ApiError::bad_request("the patch must be a JSON object"));
        }
        let scope = if status {
            Scope::Status
        } else {
            Scope::Main {
                ignore_status: rt.status,
            }
        };
        let Some(old) = self.lookup(&rt.key(), ns, name).cloned() else {
            if kind == PatchKind::Apply && !status {
                let mut obj = apply::apply(None, body, &manager()?, scope, true, &now())
                    .map_err(|m| ApiError::new(409, "Conflict", m))?;
                if let Some(n) = obj.pointer("/metadata/name").and_then(Value::as_str)
                    && n != name
                {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                obj["metadata"]["name"] = json!(name);
                let created = self.create(rt, version, ns, obj, o)?;
                return Ok((created, true, true));
            }
            return Err(ApiError::not_found(&rt.group, &rt.plural, name));
        };
        let mut cand = (*old).clone();
        match kind {
            PatchKind::Merge => patch::merge(&mut cand, body),
            PatchKind::Json => {
                patch::json_patch(&mut cand, body).map_err(|e| patch_err(e, rt, name))?
            }
            PatchKind::Strategic => {
                patch::strategic(&mut cand, body).map_err(|e| patch_err(e, rt, name))?
            }
            PatchKind::Apply => {
                cand = apply::apply(Some(&old), body, &manager()?, scope, o.force, &now()).map_err(
                    |m| {
                        ApiError::new(409, "Conflict", m).with_details(
                            json!({"name": name, "group": rt.group, "kind": rt.plural}),
                        )
                    },
                )?
            }
        }
        if !cand.is_object() || !cand.get("metadata").is_some_and(Value::is_object) {
            return Err(ApiError::bad_request(
                "the patch removed the object's metadata",
            ));
        }
        if let Some(rv) = cand
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            && rv.parse::<u64>().ok() != Some(rv_of(&old))
        {
            return Err(ApiError::modified(&rt.group, &rt.plural, name));
        }
        let wanted_uid = cand.pointer("/metadata/uid").and_then(Value::as_str);
        uid_precondition(rt, name, wanted_uid, &old)?;
        let (obj, changed) = self.finish_update(rt, ns, name, &old, cand, status, o)?;
        Ok((obj, changed, false))
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_update(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        old: &Obj,
        cand: Value,
        status: bool,
        o: &WriteOpts,
    ) -> Result<(Obj, bool), ApiError> {
        let mut new = take_request_part(rt, old, cand, status);
        keep_server_metadata(old, &mut new)?;
        normalize_meta(&mut new)?;
        no_new_finalizers_while_deleting(rt, name, old, &new)?;
        self.admit(rt, &mut new, Some(old), o.strict_fields)?;
        if rt.key() == CRD_KEY {
            validate_crd(rt, name, &new)?;
        }
        server_defaults(rt, &mut new, Some(old));
        if spec_changed(old, &new, rt.status) {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            new["metadata"]["generation"] = json!(g + 1);
        }
        if new == **old {
            return Ok((old.clone(), false));
        }
        if o.dry_run {
            return Ok((Arc::new(new), true));
        }
        Ok((self.commit_updated(rt, ns, name, new, status), true))
    }

    /// Stores the new state an update computed (and admitted) from the object as it is stored
    /// now (the caller makes sure of that), then runs what follows an update: the simulator,
    /// the token controller, or removal once the last finalizer of a deleted object is gone.
    /// [`Inner::update`] and [`Inner::patch`] end here; so does an update that validating
    /// webhooks admitted while the store was unlocked ([`crate::webhooks`]).
    pub(crate) fn commit_updated(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        new: Value,
        status: bool,
    ) -> Obj {
        let terminating_done =
            new.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&new).is_empty();
        let obj = self.commit(rt, ns, name, Some(new));
        if !status && !terminating_done {
            self.simulate_after(rt, ns, name);
            self.service_account_tokens_after(rt, ns, name);
        }
        if terminating_done {
            if rt.key() == NAMESPACE_KEY && !self.namespace_is_empty(name) {
                return obj;
            }
            self.remove(rt, ns, name);
        }
        obj
    }
}

/// The object an update stores before metadata is fixed up: for `/status` the old object with
/// the request's status (and managedFields); for the main resource the request with the old
/// status when the kind has a status subresource.
fn take_request_part(rt: &ResourceType, old: &Obj, cand: Value, status: bool) -> Value {
    if status {
        let mut n = (**old).clone();
        match cand.get("status") {
            Some(s) => n["status"] = s.clone(),
            None => {
                n.as_object_mut().expect("object").remove("status");
            }
        }
        if let Some(mf) = cand.pointer("/metadata/managedFields") {
            n["metadata"]["managedFields"] = mf.clone();
        }
        n
    } else {
        let mut n = cand;
        if rt.status {
            match old.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    n.as_object_mut().expect("object").remove("status");
                }
            }
        }
        n
    }
}

/// The identity, lifecycle and version fields an update may not change come from the old
/// object; `apiVersion` and `kind` too; `selfLink` goes; managedFields stay unless sent.
fn keep_server_metadata(old: &Obj, new: &mut Value) -> Result<(), ApiError> {
    let om = meta(old).cloned().unwrap_or_default();
    let obj = new
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body must be a JSON object"))?;
    obj.insert(
        "apiVersion".into(),
        old.get("apiVersion").cloned().unwrap_or(Value::Null),
    );
    obj.insert(
        "kind".into(),
        old.get("kind").cloned().unwrap_or(Value::Null),
    );
    let m = obj.entry("metadata").or_insert_with(|| json!({}));
    let m = m
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    for k in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
    ] {
        match om.get(k) {
            Some(v) => m.insert(k.into(), v.clone()),
            None => m.remove(k),
        };
    }
    m.remove("selfLink");
    if !m.contains_key("managedFields")
        && let Some(mf) = om.get("managedFields")
    {
        m.insert("managedFields".into(), mf.clone());
    }
    Ok(())
}

/// Kubernetes refuses new finalizers on an object that is being deleted.
fn no_new_finalizers_while_deleting(
    rt: &ResourceType,
    name: &str,
    old: &Obj,
    new: &Value,
) -> Result<(), ApiError> {
    if old.pointer("/metadata/deletionTimestamp").is_some() {
        let before = finalizers(old);
        let added: Vec<String> = finalizers(new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            let list = added
                .iter()
                .map(|f| format!("{f:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(ApiError::invalid(
                &rt.group,
                &rt.kind,
                name,
                "metadata.finalizers",
                &format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
                ),
            ));
        }
    }
    Ok(())
}
