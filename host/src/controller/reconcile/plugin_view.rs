//! Items and objects as plugins and hooks see them: without `metadata.managedFields`.
//!
//! Owns: the two encodings ([`item_json_for_plugins`], [`for_plugins`]). Must not touch: the
//! items themselves (a copy is encoded, the watch store's object is left as it is).

use crate::landscaper::DeployItem;

/// A DeployItem as hooks see it, as [`for_plugins`] makes it, but encoded straight to JSON text
/// (no `serde_json::Value` in between: this runs for every version of every item a hook sees).
pub(crate) fn item_json_for_plugins(item: &DeployItem) -> serde_json::Result<String> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct View<'a> {
        api_version: &'a str,
        kind: &'a str,
        metadata: &'a ObjectMeta,
        spec: &'a crate::landscaper::DeployItemSpec,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: &'a Option<crate::landscaper::DeployItemStatus>,
    }
    serde_json::to_string(&View {
        api_version: &item.api_version,
        kind: &item.kind,
        // Read without managedFields (`landscaper_model::meta`).
        metadata: &item.metadata,
        spec: &item.spec,
        status: &item.status,
    })
}

/// An object as plugins and hooks see it: without `metadata.managedFields`, which only the API
/// server and field managers read, and which would otherwise be most of every encoded item.
pub(crate) fn for_plugins(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        m.remove("managedFields");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct encoding and the `Value` route give the same JSON, minus managedFields.
    #[test]
    fn item_json_for_plugins_is_the_item_without_managed_fields() {
        let item: DeployItem = serde_json::from_value(serde_json::json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1",
            "kind": "DeployItem",
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "generation": 2, "creationTimestamp": "2026-11-26T00:00:00Z",
                "labels": {"l": "1"}, "annotations": {"a": "b"},
                "finalizers": ["finalizer.landscaper.gardener.cloud"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u-0"}],
                "managedFields": [{"manager": "landscaper", "operation": "Update",
                                   "apiVersion": "landscaper.gardener.cloud/v1alpha1",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {"type": "landscaper.gardener.cloud/mock", "config": {"phase": "Succeeded"}},
            "status": {"phase": "Succeeded", "jobID": "j", "jobIDFinished": "j"}
        }))
        .unwrap();
        let direct: serde_json::Value =
            serde_json::from_str(&item_json_for_plugins(&item).unwrap()).unwrap();
        let via_value = for_plugins(serde_json::to_value(&item).unwrap());
        assert_eq!(direct, via_value);
        assert!(direct["metadata"].get("managedFields").is_none());
        assert_eq!(direct["metadata"]["ownerReferences"][0]["name"], "o");
    }
}
