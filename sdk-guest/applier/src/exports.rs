//! Exports (contract 6.7): values read by jsonPath from `fromResource`, optionally following
//! `fromObjectRef`, placed under a dotted `key` and deep-merged into one map.
//!
//! Owns: one evaluation round; a value that is not there yet is "call again", never a sleep.
//! Must not touch: the export Secret (the host writes it).

use crate::cluster::Cluster;
use crate::jsonpath::JsonPath;
use crate::spec::Export;
use crate::strategies::deep_merge;
use crate::wait::{Pending, ends_wait};
use sdk_guest::{Ctx, DeployerError, ObjectRef};
use serde_json::{Map, Value};

/// Reads `path` of `object`: `Ok(Err(why))` when the object or the value is not there (yet).
fn read(
    ctx: &Ctx,
    cluster: Cluster,
    object: &ObjectRef,
    path: &str,
) -> Result<Result<Value, String>, DeployerError> {
    let what = format!(
        "{} {}{}{}",
        object.kind,
        object
            .namespace
            .as_deref()
            .map(|n| format!("{n}/"))
            .unwrap_or_default(),
        object.name,
        cluster.suffix()
    );
    let obj = match cluster.get(ctx, object) {
        Ok(Some(obj)) => obj,
        Ok(None) => return Ok(Err(format!("{what} does not exist"))),
        Err(e) if ends_wait(&e) => return Err(e),
        Err(e) => return Ok(Err(format!("{what}: {}", e.message))),
    };
    let parsed = match JsonPath::parse(path) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    Ok(parsed
        .eval(&obj)
        .first()
        .map(|v| (*v).clone())
        .ok_or_else(|| format!("{what} has no value at {path}")))
}

/// One export: `Ok(Err(why))` while its value is not there (yet).
fn one(ctx: &Ctx, e: &Export) -> Result<Result<Value, String>, DeployerError> {
    let Some(from) = &e.from_resource else {
        return Ok(Err("no fromResource".into()));
    };
    let object = ObjectRef {
        api_version: from.api_version.clone(),
        kind: from.kind.clone(),
        namespace: (!from.namespace.is_empty()).then(|| from.namespace.clone()),
        name: from.name.clone(),
    };
    let cluster = Cluster::of(e.target_name.as_deref());
    let value = match read(ctx, cluster, &object, &e.json_path)? {
        Ok(v) => v,
        Err(why) => return Ok(Err(why)),
    };
    let Some(r) = &e.from_object_ref else {
        return Ok(Ok(value));
    };
    let Some(name) = value.get("name").and_then(Value::as_str) else {
        return Ok(Err(format!(
            "{}: not an object reference with a name: {value}",
            e.json_path
        )));
    };
    let namespace = value
        .get("namespace")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| object.namespace.clone());
    let referenced = ObjectRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace,
        name: name.to_string(),
    };
    Ok(read(ctx, cluster, &referenced, &r.json_path)?.map_err(|m| format!("fromObjectRef: {m}")))
}

/// `a.b` → `{"a": {"b": value}}`.
fn nest(key: &str, value: Value) -> Value {
    key.rsplit('.').fold(value, |acc, k| {
        let mut m = Map::new();
        m.insert(k.to_string(), acc);
        Value::Object(m)
    })
}

/// Reads every export. `Ok(Ok(map))` all there, `Ok(Err(pending))` not yet (at the
/// checkpoint of the first export that is missing).
pub fn read_all(ctx: &Ctx, exports: &[Export]) -> Result<Result<Value, Pending>, DeployerError> {
    let mut out = Value::Object(Map::new());
    for e in exports.iter().filter(|e| e.from_resource.is_some()) {
        let checkpoint = format!("deployer: during export - key: {}", e.key);
        ctx.checkpoint(&checkpoint)
            .map_err(|err| err.with_operation("Export"))?;
        match one(ctx, e)? {
            Ok(v) => deep_merge(&mut out, &nest(&e.key, v)),
            Err(why) => {
                return Ok(Err(Pending::new(
                    checkpoint,
                    format!("export {:?}: {why}", e.key),
                )));
            }
        }
    }
    Ok(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dotted_keys_nest() {
        assert_eq!(nest("a.b", json!(1)), json!({"a": {"b": 1}}));
        assert_eq!(nest("k", json!("v")), json!({"k": "v"}));
    }
}
