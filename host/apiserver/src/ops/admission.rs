//! What a write must pass before it is stored: metadata shape, type checks, server-owned
//! defaults, built-in or CRD-schema admission (webhook configurations' defaults and checks
//! included), and CRD validation.
//!
//! Owns: [`Inner::admit`] and the helpers the write paths share. Must not touch: the store's
//! contents (admission reads allocations, never writes).

use super::options::MAX_STORED_BYTES;
use crate::builtin;
use crate::patch::PatchError;
use crate::registry::{self, CRD_KEY, NAMESPACE_KEY, ResourceType};
use crate::schema::CrdSchemas;
use crate::status::ApiError;
use crate::store::{Inner, now, uid_of};
use crate::webhooks;
use serde_json::{Map, Value, json};

pub(super) fn meta(v: &Value) -> Option<&Map<String, Value>> {
    v.get("metadata").and_then(Value::as_object)
}

pub(super) fn finalizers(v: &Value) -> Vec<String> {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Reject metadata of the wrong shape (what Go's decoder would refuse) and
/// drop empty lists/maps (Go omits them, and kube's finalizer `test` relies on it).
pub(super) fn normalize_meta(obj: &mut Value) -> Result<(), ApiError> {
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
pub(super) fn server_defaults(rt: &ResourceType, obj: &mut Value, old: Option<&Value>) {
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
pub(super) fn spec_changed(a: &Value, b: &Value, ignore_status: bool) -> bool {
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

pub(super) fn check_type(
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

pub(super) fn patch_err(e: PatchError, rt: &ResourceType, name: &str) -> ApiError {
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

pub(super) fn random_suffix() -> String {
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
            if webhooks::is_webhook_configuration(rt) {
                webhooks::admit_configuration(rt, obj)?;
            }
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
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        ApiError::unless_invalid(&rt.group, &rt.kind, name, &errs)
    }
}

pub(super) fn validate_crd(rt: &ResourceType, name: &str, crd: &Value) -> Result<(), ApiError> {
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

/// A UID precondition (a delete's `preconditions.uid`, an update's `metadata.uid`): empty or
/// absent holds; any other UID must be the stored object's, else 409 as kube-apiserver words it.
pub(super) fn uid_precondition(
    rt: &ResourceType,
    name: &str,
    wanted: Option<&str>,
    old: &Value,
) -> Result<(), ApiError> {
    match wanted.filter(|s| !s.is_empty()) {
        Some(uid) if uid != uid_of(old) => Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                uid_of(old)
            ),
        )),
        _ => Ok(()),
    }
}
