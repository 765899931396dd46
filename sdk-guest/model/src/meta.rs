//! `metadata` read without `managedFields`.
//!
//! A kube-apiserver sends every object with its field managers, a tree per manager that is most
//! of a small object's bytes; building them took ~7 % of the host's CPU per job on
//! kube-apiserver 1.20 (watch events, GETs and the answers to status writes all carry them).
//! Nothing in the host or a plugin reads them, and a write that leaves them out keeps the
//! server's, so Landscaper's resources skip them when they are read: serde steps over the text
//! without building anything.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

/// Reads an `ObjectMeta` whose `managedFields` is always `None`
/// (`#[serde(deserialize_with = "landscaper_model::meta::without_managed_fields")]`).
pub fn without_managed_fields<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    /// Every field of `ObjectMeta` but managedFields, which serde skips as an unknown key.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Slim {
        annotations: Option<BTreeMap<String, String>>,
        creation_timestamp: Option<Time>,
        deletion_grace_period_seconds: Option<i64>,
        deletion_timestamp: Option<Time>,
        finalizers: Option<Vec<String>>,
        generate_name: Option<String>,
        generation: Option<i64>,
        labels: Option<BTreeMap<String, String>>,
        name: Option<String>,
        namespace: Option<String>,
        owner_references: Option<Vec<OwnerReference>>,
        resource_version: Option<String>,
        self_link: Option<String>,
        uid: Option<String>,
    }
    // `null` reads as empty metadata, as an absent one does.
    let Some(m) = Option::<Slim>::deserialize(d)? else {
        return Ok(ObjectMeta::default());
    };
    // Listed in full, so a new field of `ObjectMeta` fails to compile here.
    Ok(ObjectMeta {
        annotations: m.annotations,
        creation_timestamp: m.creation_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        deletion_timestamp: m.deletion_timestamp,
        finalizers: m.finalizers,
        generate_name: m.generate_name,
        generation: m.generation,
        labels: m.labels,
        managed_fields: None,
        name: m.name,
        namespace: m.namespace,
        owner_references: m.owner_references,
        resource_version: m.resource_version,
        self_link: m.self_link,
        uid: m.uid,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Deserialize)]
    struct Object {
        #[serde(default, deserialize_with = "without_managed_fields")]
        metadata: ObjectMeta,
    }

    #[test]
    fn every_field_but_managed_fields_reads_as_object_meta_reads_it() {
        let meta = json!({
            "name": "a", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
            "generation": 3, "generateName": "a-", "selfLink": "/x",
            "creationTimestamp": "2026-11-27T03:00:00Z", "deletionTimestamp": "2026-11-27T03:01:00Z",
            "deletionGracePeriodSeconds": 0,
            "labels": {"l": "1"}, "annotations": {"a": "2"}, "finalizers": ["f"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u-2"}],
            "managedFields": [{"manager": "landscaper", "operation": "Update", "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:phase": {}}}}]
        });
        let slim = serde_json::from_value::<Object>(json!({"metadata": meta.clone()}))
            .unwrap()
            .metadata;
        let mut full: ObjectMeta = serde_json::from_value(meta).unwrap();
        assert!(full.managed_fields.is_some());
        full.managed_fields = None;
        assert_eq!(slim, full);
    }

    #[test]
    fn absent_or_null_metadata_is_empty() {
        for object in [json!({}), json!({"metadata": null})] {
            let o: Object = serde_json::from_value(object).unwrap();
            assert_eq!(o.metadata, ObjectMeta::default());
        }
    }

    #[test]
    fn a_wrong_type_is_still_an_error() {
        let e = serde_json::from_value::<Object>(json!({"metadata": {"name": 1}}));
        assert!(e.is_err());
    }
}
