//! API semantics on top of the store (all under the store lock): create,
//! update (main and `/status`), patch, delete (finalizers, preconditions,
//! propagation, ownerReference GC, namespace termination), list and get.
//! Enforces: no-op writes are not written, `generation` bumps only on spec
//! changes, status/spec separation, optimistic concurrency.

use crate::apply::{self, Scope};
use crate::builtin;
use crate::patch::{self, PatchError};
use crate::registry::{self, CRD_KEY, NAMESPACE_KEY, ResourceType};
use crate::schema::CrdSchemas;
use crate::selectors::Selector;
use crate::status::ApiError;
use crate::store::{Inner, Obj, now, rv_of, uid_of};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// The largest object etcd stores (its default `--max-request-bytes`, 1.5 MiB).
pub(crate) const MAX_STORED_BYTES: usize = 3 << 19;

/// Request options shared by all writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    /// `fieldValidation=Strict`: a field the schema does not know is an error, not pruned
    /// silently (kubectl sends it by default).
    pub strict_fields: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

/// DeleteOptions (body and query).
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    pub propagation: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

/// Outcome of a DELETE.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// Removed; the last state (with the deletion's rv).
    Gone(Obj),
    /// Kept because of finalizers; `deletionTimestamp` is set.
    Terminating(Obj),
}

fn meta(v: &Value) -> Option<&Map<String, Value>> {
    v.get("metadata").and_then(Value::as_object)
}

fn finalizers(v: &Value) -> Vec<String> {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

use crate::builtin::validate_name;

/// Reject metadata of the wrong shape (what Go's decoder would refuse) and
/// drop empty lists/maps (Go omits them, and kube's finalizer `test` relies on it).
fn normalize_meta(obj: &mut Value) -> Result<(), ApiError> {
    let m = obj
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    for k in ["labels", "annotations"] {
        match m.get(k) {
            None => {}
            Some(Value::Null) => {
                m.remove(k);
            }
            Some(Value::Object(o)) => {
                if o.values().any(|v| !v.is_string()) {
                    return Err(ApiError::bad_request(format!(
                        "metadata.{k}: values must be strings"
                    )));
                }
                if o.is_empty() {
                    m.remove(k);
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "metadata.{k} must be a map of strings"
                )));
            }
        }
    }
    for k in ["finalizers", "ownerReferences"] {
        match m.get(k) {
            None => {}
            Some(Value::Null) => {
                m.remove(k);
            }
            Some(Value::Array(a)) => {
                if k == "finalizers" && a.iter().any(|v| !v.is_string()) {
                    return Err(ApiError::bad_request(
                        "metadata.finalizers: values must be strings",
                    ));
                }
                if a.is_empty() {
                    m.remove(k);
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "metadata.{k} must be a list"
                )));
            }
        }
    }
    Ok(())
}

/// Fields the server owns for some kinds (namespace phase, CRD conditions).
fn server_defaults(rt: &ResourceType, obj: &mut Value, old: Option<&Value>) {
    match rt.key().as_str() {
        NAMESPACE_KEY => {
            let phase = if obj.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating"
            } else {
                "Active"
            };
            if !obj.get("status").is_some_and(Value::is_object) {
                obj["status"] = json!({});
            }
            obj["status"]["phase"] = json!(phase);
            if phase == "Active"
                && let Some(st) = obj["status"].as_object_mut()
            {
                st.remove("conditions");
            }
        }
        CRD_KEY => {
            let t = |ty: &str| {
                old.and_then(|o| o.pointer("/status/conditions"))
                    .and_then(Value::as_array)
                    .and_then(|cs| cs.iter().find(|c| c["type"] == ty))
                    .and_then(|c| c.get("lastTransitionTime").cloned())
                    .unwrap_or_else(|| json!(now()))
            };
            let storage: Vec<Value> = obj
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter(|v| v["storage"] == true)
                        .map(|v| v["name"].clone())
                        .collect()
                })
                .unwrap_or_default();
            obj["status"] = json!({
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": t("NamesAccepted")},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": t("Established")},
                ],
                "acceptedNames": obj.pointer("/spec/names").cloned().unwrap_or(json!({})),
                "storedVersions": storage,
            });
        }
        _ => {}
    }
}

/// True if anything outside metadata (and status, for kinds with a status subresource) differs.
fn spec_changed(a: &Value, b: &Value, ignore_status: bool) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a != b;
    };
    let skip = |k: &str| {
        k == "metadata" || k == "apiVersion" || k == "kind" || (ignore_status && k == "status")
    };
    a.iter()
        .filter(|(k, _)| !skip(k))
        .any(|(k, v)| b.get(k) != Some(v))
        || b.keys().filter(|k| !skip(k)).any(|k| !a.contains_key(k))
}

fn check_type(
    rt: &ResourceType,
    version: &str,
    obj: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    if let Some(k) = obj.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the body ({k}) does not match the kind of the resource ({})",
            rt.kind
        )));
    }
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str)
        && !av.is_empty()
    {
        let (g, v) = registry::split_api_version(av);
        if g != rt.group || !rt.versions.iter().any(|x| x == v) {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                rt.api_version(version)
            )));
        }
    }
    obj.insert("apiVersion".into(), json!(rt.api_version(version)));
    obj.insert("kind".into(), json!(rt.kind));
    Ok(())
}

fn patch_err(e: PatchError, rt: &ResourceType, name: &str) -> ApiError {
    match e {
        PatchError::BadRequest(m) => ApiError::bad_request(m),
        PatchError::Invalid(m) => ApiError::new(
            422,
            "Invalid",
            format!("the server rejected our request due to an error in our request: {m}"),
        )
        .with_details(json!({"name": name, "group": rt.group, "kind": rt.plural})),
    }
}

fn random_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let u = uuid::Uuid::new_v4();
    u.as_bytes()[..5]
        .iter()
        .map(|b| ALPHA[*b as usize % ALPHA.len()] as char)
        .collect()
}

struct StoreAllocations<'a>(&'a Inner);

impl builtin::Allocations for StoreAllocations<'_> {
    fn cluster_ip_taken(&self, ip: &str) -> bool {
        self.0
            .objects_of("/services", None)
            .iter()
            .any(|s| s.pointer("/spec/clusterIP").and_then(Value::as_str) == Some(ip))
    }
    fn node_port_taken(&self, port: u64) -> bool {
        self.0.objects_of("/services", None).iter().any(|s| {
            s.pointer("/spec/ports")
                .and_then(Value::as_array)
                .is_some_and(|ps| {
                    ps.iter()
                        .any(|p| p.get("nodePort").and_then(Value::as_u64) == Some(port))
                })
        })
    }
}

impl Inner {
    /// What a real apiserver does to a write between decoding and storage:
    /// built-in decode checks, defaults and validation ([`builtin`]), or, for
    /// custom resources, pruning, defaulting and schema validation
    /// ([`crate::schema`], compiled once per CRD). `obj` is the complete new object.
    pub(crate) fn admit(
        &self,
        rt: &ResourceType,
        obj: &mut Value,
        old: Option<&Value>,
        strict_fields: bool,
    ) -> Result<(), ApiError> {
        self.admit_kind(rt, obj, old, strict_fields)?;
        // etcd's value limit (1.5 MiB): a real server answers this as a 500 from etcd.
        let size = serde_json::to_vec(obj).map(|b| b.len()).unwrap_or(0);
        if size > MAX_STORED_BYTES {
            return Err(ApiError::internal("etcdserver: request is too large"));
        }
        Ok(())
    }

    fn admit_kind(
        &self,
        rt: &ResourceType,
        obj: &mut Value,
        old: Option<&Value>,
        strict_fields: bool,
    ) -> Result<(), ApiError> {
        if !rt.crd {
            return builtin::admit(rt, obj, old, &StoreAllocations(self));
        }
        let Some(schemas) = self.schemas.get(&rt.key()) else {
            return Ok(());
        };
        let version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .map(|av| registry::split_api_version(av).1)
            .unwrap_or("");
        let Some(schema) = schemas.for_version(version) else {
            return Ok(());
        };
        let pruned = schema.prune_and_default(obj);
        if strict_fields && !pruned.is_empty() {
            // A real server's words (kubectl shows them as they are).
            let fields: Vec<String> = pruned
                .iter()
                .map(|p| format!("unknown field \"{p}\""))
                .collect();
            return Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                fields.join(", ")
            )));
        }
        let errs = schema.validate_object(obj);
        if errs.is_empty() {
            return Ok(());
        }
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        Err(ApiError::invalid_fields(&rt.group, &rt.kind, name, &errs))
    }

    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Obj, ApiError> {
        self.lookup(&rt.key(), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    /// Matching objects and the continue token of the next page.
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        sel: &Selector,
        limit: Option<usize>,
        cont: Option<&str>,
    ) -> (Vec<Obj>, Option<String>) {
        let all = self.objects_of(&rt.key(), ns);
        let start = match cont {
            Some(c) if !c.is_empty() => {
                let (cns, cname) = c.split_once('/').unwrap_or(("", c));
                all.partition_point(|o| {
                    let m = meta(o);
                    let ons = m
                        .and_then(|m| m.get("namespace"))
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let oname = m
                        .and_then(|m| m.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    (ons, oname) <= (cns, cname)
                })
            }
            _ => 0,
        };
        let mut out = Vec::new();
        let mut next = None;
        for o in &all[start..] {
            if !sel.matches(o) {
                continue;
            }
            if let Some(l) = limit
                && l > 0
                && out.len() == l
            {
                let last: &Obj = out.last().expect("non-empty");
                let m = meta(last);
                next = Some(format!(
                    "{}/{}",
                    m.and_then(|m| m.get("namespace"))
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    m.and_then(|m| m.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                ));
                break;
            }
            out.push(o.clone());
        }
        (out, next)
    }

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
        let name = match m.get("name").and_then(Value::as_str) {
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
        };
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
        let obj = self.commit(rt, ns, &name, Some(body));
        self.simulate_after(rt, ns, &name);
        Ok(obj)
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
        if let Some(uid) = cand
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            && uid != uid_of(&old)
        {
            return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    uid_of(&old)
                ),
            ));
        }
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
        let mut new = if status {
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
        };
        {
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
        }
        normalize_meta(&mut new)?;
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            let before = finalizers(old);
            let added: Vec<String> = finalizers(&new)
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
        let terminating_done =
            new.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&new).is_empty();
        let obj = self.commit(rt, ns, name, Some(new));
        if !status && !terminating_done {
            self.simulate_after(rt, ns, name);
        }
        if terminating_done {
            if rt.key() == NAMESPACE_KEY && !self.namespace_is_empty(name) {
                return Ok((obj, true));
            }
            self.remove(rt, ns, name);
        }
        Ok((obj, true))
    }

    /// DELETE one object.
    pub fn delete(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        d: &DeleteOpts,
    ) -> Result<Deleted, ApiError> {
        let old = self.get(rt, ns, name)?;
        if let Some(uid) = d.uid.as_deref().filter(|s| !s.is_empty())
            && uid != uid_of(&old)
        {
            return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    uid_of(&old)
                ),
            ));
        }
        if let Some(rv) = d.resource_version.as_deref().filter(|s| !s.is_empty())
            && rv.parse::<u64>().ok() != Some(rv_of(&old))
        {
            return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    rv_of(&old)
                ),
            ));
        }
        let is_ns = rt.key() == NAMESPACE_KEY;
        if is_ns && ["default", "kube-system", "kube-public"].contains(&name) {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
            )
            .with_details(json!({"name": name, "kind": "namespaces"})));
        }
        let fins = finalizers(&old);
        if d.dry_run {
            return Ok(if fins.is_empty() && !is_ns {
                Deleted::Gone(old)
            } else {
                Deleted::Terminating(old)
            });
        }
        if d.propagation.as_deref() == Some("Orphan") {
            self.orphan_dependents(uid_of(&old).to_string());
        }
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(Deleted::Terminating(old));
        }
        if fins.is_empty() && !is_ns {
            return Ok(Deleted::Gone(self.remove(rt, ns, name)));
        }
        let mut n = (*old).clone();
        n["metadata"]["deletionTimestamp"] = json!(now());
        n["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        server_defaults(rt, &mut n, Some(&old));
        let obj = self.commit(rt, ns, name, Some(n));
        if is_ns {
            // As a cluster shows it: the DELETE answers 200 with the namespace
            // in phase Terminating; its content is deleted, then (once empty)
            // spec.finalizers is emptied and the namespace removed.
            self.delete_namespace_contents(name);
            if self.lookup(NAMESPACE_KEY, "", name).is_some() && !self.namespace_is_empty(name) {
                self.namespace_conditions(name);
            }
            self.maybe_finish_namespace(name);
            return Ok(Deleted::Terminating(obj));
        }
        Ok(Deleted::Terminating(obj))
    }

    /// Remove an object now (no finalizer check), then collect its dependents
    /// (ownerReference GC, background) and finish a terminating namespace.
    fn remove(&mut self, rt: &Arc<ResourceType>, ns: &str, name: &str) -> Obj {
        if self.lookup(&rt.key(), ns, name).is_none() {
            return Arc::new(json!({"metadata": {"name": name, "namespace": ns}}));
        }
        let gone = self.commit(rt, ns, name, None);
        let uid = uid_of(&gone).to_string();
        if let Some(deps) = self.dependents.remove(&uid) {
            let mut deps: Vec<_> = deps.into_iter().collect();
            deps.sort();
            for (res, dns, dname) in deps {
                let Some(drt) = self.registry.by_key(&res).cloned() else {
                    continue;
                };
                let Some(dep) = self.lookup(&res, &dns, &dname).cloned() else {
                    continue;
                };
                let other_owner_alive = dep
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|refs| {
                        refs.iter()
                            .filter_map(|r| r.get("uid").and_then(Value::as_str))
                            .any(|u| u != uid && self.uids.contains_key(u))
                    });
                if !other_owner_alive {
                    let _ = self.delete(&drt, &dns, &dname, &DeleteOpts::default());
                }
            }
        }
        if !ns.is_empty() {
            self.maybe_finish_namespace(ns);
        }
        gone
    }

    fn orphan_dependents(&mut self, uid: String) {
        let Some(deps) = self.dependents.get(&uid).cloned() else {
            return;
        };
        for (res, dns, dname) in deps {
            let (Some(drt), Some(dep)) = (
                self.registry.by_key(&res).cloned(),
                self.lookup(&res, &dns, &dname).cloned(),
            ) else {
                continue;
            };
            let mut n = (*dep).clone();
            if let Some(refs) = n
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&uid));
            }
            if normalize_meta(&mut n).is_ok() {
                self.commit(&drt, &dns, &dname, Some(n));
            }
        }
    }

    fn delete_namespace_contents(&mut self, ns: &str) {
        let mut items = Vec::new();
        for (res, m) in &self.objects {
            if let Some(n) = m.get(ns) {
                items.extend(n.keys().map(|name| (res.clone(), name.clone())));
            }
        }
        for (res, name) in items {
            if let Some(rt) = self.registry.by_key(&res).cloned() {
                let _ = self.delete(&rt, ns, &name, &DeleteOpts::default());
            }
        }
    }

    fn maybe_finish_namespace(&mut self, ns: &str) {
        if let Some(delay) = self.namespace_finalize_delay {
            // Later, from the namespace controller's task (finalize_due_namespaces).
            if self
                .lookup(NAMESPACE_KEY, "", ns)
                .is_some_and(|n| n.pointer("/metadata/deletionTimestamp").is_some())
            {
                self.namespaces_due
                    .entry(ns.to_string())
                    .or_insert_with(|| std::time::Instant::now() + delay);
            }
            return;
        }
        self.finish_namespace(ns);
    }

    /// Hands every terminating namespace to the namespace controller (a server loaded from
    /// disk may hold some).
    pub(crate) fn schedule_terminating_namespaces(&mut self) {
        let terminating: Vec<String> = self
            .objects_of(NAMESPACE_KEY, None)
            .iter()
            .filter(|n| n.pointer("/metadata/deletionTimestamp").is_some())
            .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        for ns in terminating {
            self.maybe_finish_namespace(&ns);
        }
    }

    /// The namespace controller's pass: finalizes and removes every terminating namespace whose
    /// time has come and which is empty (one that is not is looked at again when its last
    /// object goes).
    pub(crate) fn finalize_due_namespaces(&mut self, now: std::time::Instant) {
        let due: Vec<String> = self
            .namespaces_due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(ns, _)| ns.clone())
            .collect();
        for ns in due {
            self.namespaces_due.remove(&ns);
            self.finish_namespace(&ns);
        }
    }

    fn finish_namespace(&mut self, ns: &str) {
        let Some(n) = self.lookup(NAMESPACE_KEY, "", ns) else {
            return;
        };
        if n.pointer("/metadata/deletionTimestamp").is_some()
            && finalizers(n).is_empty()
            && self.namespace_is_empty(ns)
            && let Some(rt) = self.registry.by_key(NAMESPACE_KEY).cloned()
        {
            // The namespace controller's `/finalize` (spec.finalizers emptied), then removal.
            if n.pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty())
            {
                let mut fin = (**n).clone();
                fin["spec"]["finalizers"] = json!([]);
                if let Some(st) = fin.get_mut("status").and_then(Value::as_object_mut) {
                    st.remove("conditions");
                }
                self.commit(&rt, "", ns, Some(fin));
            }
            self.remove(&rt, "", ns);
        }
    }

    /// The conditions a terminating namespace shows while content remains.
    fn namespace_conditions(&mut self, ns: &str) {
        let Some(n) = self.lookup(NAMESPACE_KEY, "", ns).cloned() else {
            return;
        };
        let mut counts: Vec<(String, usize)> = Vec::new();
        let mut fins: std::collections::BTreeMap<String, usize> = Default::default();
        for (res, m) in &self.objects {
            if let Some(objs) = m.get(ns)
                && !objs.is_empty()
            {
                let plural = res
                    .split_once('/')
                    .map(|(g, p)| {
                        if g.is_empty() {
                            p.to_string()
                        } else {
                            format!("{p}.{g}")
                        }
                    })
                    .unwrap_or_default();
                counts.push((plural, objs.len()));
                for o in objs.values() {
                    for f in finalizers(o) {
                        *fins.entry(f).or_default() += 1;
                    }
                }
            }
        }
        counts.sort();
        let t = now();
        let cond = |ty: &str, status: &str, reason: &str, msg: String| json!({"type": ty, "status": status, "lastTransitionTime": t, "reason": reason, "message": msg});
        let mut conds = vec![
            cond(
                "NamespaceDeletionDiscoveryFailure",
                "False",
                "ResourcesDiscovered",
                "All resources successfully discovered".into(),
            ),
            cond(
                "NamespaceDeletionGroupVersionParsingFailure",
                "False",
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed".into(),
            ),
            cond(
                "NamespaceDeletionContentFailure",
                "False",
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization".into(),
            ),
        ];
        if counts.is_empty() {
            conds.push(cond(
                "NamespaceContentRemaining",
                "False",
                "ContentRemoved",
                "All content successfully removed".into(),
            ));
        } else {
            let list = counts
                .iter()
                .map(|(r, c)| format!("{r} has {c} resource instances"))
                .collect::<Vec<_>>()
                .join(", ");
            conds.push(cond(
                "NamespaceContentRemaining",
                "True",
                "SomeResourcesRemain",
                format!("Some resources are remaining: {list}"),
            ));
        }
        if fins.is_empty() {
            conds.push(cond(
                "NamespaceFinalizersRemaining",
                "False",
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished".into(),
            ));
        } else {
            let list = fins
                .iter()
                .map(|(f, c)| format!("{f} in {c} resource instances"))
                .collect::<Vec<_>>()
                .join(", ");
            conds.push(cond(
                "NamespaceFinalizersRemaining",
                "True",
                "SomeFinalizersRemain",
                format!("Some content in the namespace has finalizers remaining: {list}"),
            ));
        }
        let mut next = (*n).clone();
        next["status"]["conditions"] = json!(conds);
        if let Some(rt) = self.registry.by_key(NAMESPACE_KEY).cloned() {
            self.commit(&rt, "", ns, Some(next));
        }
    }

    /// DELETE on a collection: every matching object, as if deleted one by one.
    pub fn delete_collection(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: Option<&str>,
        sel: &Selector,
        d: &DeleteOpts,
    ) -> Result<Vec<Obj>, ApiError> {
        let (items, _) = self.list(rt, ns, sel, None, None);
        let mut out = Vec::new();
        for it in items {
            let m = meta(&it);
            let ins = m
                .and_then(|m| m.get("namespace"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let iname = m
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            match self.delete(rt, &ins, &iname, d)? {
                Deleted::Gone(o) | Deleted::Terminating(o) => out.push(o),
            }
        }
        Ok(out)
    }
}

fn validate_crd(rt: &ResourceType, name: &str, crd: &Value) -> Result<(), ApiError> {
    let r = registry::from_crd(crd)
        .map_err(|m| ApiError::invalid(&rt.group, &rt.kind, name, "spec", &m))?;
    if let Err(e) = CrdSchemas::compile(crd) {
        return Err(ApiError::invalid_fields(&rt.group, &rt.kind, name, &[e]));
    }
    let want = format!("{}.{}", r.plural, r.group);
    if name != want {
        return Err(ApiError::invalid(
            &rt.group,
            &rt.kind,
            name,
            "metadata.name",
            &format!(
                "Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group ({want})"
            ),
        ));
    }
    Ok(())
}
