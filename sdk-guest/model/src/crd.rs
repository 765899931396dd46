//! Landscaper's CRDs for the kinds of [`crate::resources`] — `DeployItem`, `Target`, `Context`,
//! `SyncObject`, `LsHealthCheck` — generated from those very types (feature `schema`).
//!
//! The schemas come from the types' `schemars` derive, their doc comments becoming the
//! descriptions `kubectl explain` shows; this module adds what a type cannot say (names, scope,
//! printer columns, the status subresource) and keeps the schema structural, as
//! `apiextensions.k8s.io/v1` requires, and free of what kube-apiserver 1.20 refuses (`default`).
//! Fields a type keeps in `extra` are not in the schema: the API server prunes them, as it
//! prunes what Landscaper's own CRDs do not name.
//!
//! Owns: the CRD objects. Must not touch: files (the host writes the chart's copies and checks
//! them, `deployer-host crds`), clusters.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresources,
    CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::resources::{Context, DeployItem, GROUP, LsHealthCheck, SyncObject, Target, VERSION};

/// Schemas for fields whose Rust type says too little (`schema_with` in the derives).
pub mod schemas {
    use schemars::{Schema, SchemaGenerator, json_schema};

    /// `metadata`: the API server validates it itself; a CRD only says it is an object.
    pub fn object(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object"})
    }

    /// An RFC 3339 timestamp.
    pub fn date_time(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "format": "date-time"})
    }

    /// A Kubernetes-style object (`apiVersion`, `kind`) of any content: provider configurations
    /// and provider status.
    pub fn embedded_object(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true,
        })
    }

    /// An object of any content.
    pub fn any_object(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    }

    /// Any JSON value.
    pub fn any(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"x-kubernetes-preserve-unknown-fields": true})
    }
}

/// One generated CRD and the file name the chart keeps it under.
#[derive(Clone, Debug)]
pub struct GeneratedCrd {
    /// `landscaper.gardener.cloud_<plural>.yaml`, as the chart's `crds/` directory names it.
    pub file_name: String,
    pub crd: CustomResourceDefinition,
}

/// What a CRD says beyond its schema.
struct Kind {
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    status_subresource: bool,
    /// `(name, type, jsonPath)` of each printer column.
    columns: &'static [Column],
}

type Column = (&'static str, &'static str, &'static str);

/// Every kind's last column, as kubectl shows for built-in kinds.
const AGE: Column = ("Age", "date", ".metadata.creationTimestamp");

/// The five CRDs, in the order dev mode installs them.
pub fn definitions() -> Vec<GeneratedCrd> {
    vec![
        generate::<DeployItem>(Kind {
            kind: "DeployItem",
            plural: "deployitems",
            short_names: &["di"],
            status_subresource: true,
            columns: &[
                ("Type", "string", ".spec.type"),
                ("Phase", "string", ".status.phase"),
                ("ExportRef", "string", ".status.exportRef.name"),
                AGE,
            ],
        }),
        generate::<Target>(Kind {
            kind: "Target",
            plural: "targets",
            short_names: &["tgt", "tg"],
            status_subresource: false,
            columns: &[
                ("Type", "string", ".spec.type"),
                (
                    "Context",
                    "string",
                    ".metadata.labels['data\\.landscaper\\.gardener\\.cloud\\/context']",
                ),
                (
                    "Key",
                    "string",
                    ".metadata.labels['data\\.landscaper\\.gardener\\.cloud\\/key']",
                ),
                (
                    "Idx",
                    "string",
                    ".metadata.labels['data\\.landscaper\\.gardener\\.cloud\\/index']",
                ),
                (
                    "TMKey",
                    "string",
                    ".metadata.labels['data\\.landscaper\\.gardener\\.cloud\\/targetmapkey']",
                ),
                AGE,
            ],
        }),
        generate::<Context>(Kind {
            kind: "Context",
            plural: "contexts",
            short_names: &["ctx"],
            status_subresource: false,
            columns: &[AGE],
        }),
        generate::<SyncObject>(Kind {
            kind: "SyncObject",
            plural: "syncobjects",
            short_names: &["so"],
            // Landscaper's SyncObjects have an (empty) status subresource: writes of the object
            // ignore `status`, as Landscaper's own controllers expect.
            status_subresource: true,
            columns: &[
                ("PodName", "string", ".spec.podName"),
                ("Kind", "string", ".spec.kind"),
                ("Name", "string", ".spec.name"),
            ],
        }),
        generate::<LsHealthCheck>(Kind {
            kind: "LsHealthCheck",
            plural: "lshealthchecks",
            short_names: &["lshc"],
            status_subresource: false,
            columns: &[
                ("Status", "string", ".status"),
                ("LastUpdateTime", "date", ".lastUpdateTime"),
            ],
        }),
    ]
}

/// The openAPIV3Schema of `T`: every subschema inline (CRDs have no `$ref`), and required as
/// the serialized form has it (a field is optional exactly when it may be left out).
pub fn schema_of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .for_serialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    structural(&mut schema);
    if let Some(root) = schema.as_object_mut() {
        root.remove("title");
        // At the root, `metadata` may say nothing but its type (kube-apiserver refuses even a
        // description: "must not specify anything other than name and generateName").
        if let Some(metadata) = root
            .get_mut("properties")
            .and_then(|p| p.get_mut("metadata"))
        {
            *metadata = json!({"type": "object"});
        }
        // The API server fills these in; requiring them says nothing.
        if let Some(required) = root.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| !matches!(r.as_str(), Some("apiVersion" | "kind" | "metadata")));
            if required.is_empty() {
                root.remove("required");
            }
        }
    }
    schema
}

/// Keeps a generated schema within what CRDs accept: no `$schema`/`$defs`/`title`, no `nullable`
/// (an absent field is left out, never null), no `default` (refused by 1.20 where the
/// property's type and default disagree, and server-side defaults are not what these types mean).
fn structural(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for key in [
                "$schema",
                "$defs",
                "definitions",
                "title",
                "default",
                "nullable",
            ] {
                map.remove(key);
            }
            // Doc comments are wrapped at 100 columns; `kubectl explain` wraps for its terminal.
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = unwrap_lines(text);
            }
            for value in map.values_mut() {
                structural(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(structural),
        _ => {}
    }
}

/// Joins the lines of each paragraph (paragraphs stay apart).
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn generate<T: JsonSchema>(kind: Kind) -> GeneratedCrd {
    let schema: JSONSchemaProps =
        serde_json::from_value(schema_of::<T>()).expect("a generated schema is a JSONSchemaProps");
    let name = format!("{}.{GROUP}", kind.plural);
    let crd = CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(name),
            annotations: Some(BTreeMap::from([(
                // Kept when the wasm-deployer Helm release is uninstalled (DeployItems must survive).
                "helm.sh/resource-policy".to_string(),
                "keep".to_string(),
            )])),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.to_string(),
            names: CustomResourceDefinitionNames {
                kind: kind.kind.to_string(),
                list_kind: Some(format!("{}List", kind.kind)),
                plural: kind.plural.to_string(),
                singular: Some(kind.kind.to_lowercase()),
                short_names: Some(kind.short_names.iter().map(|s| s.to_string()).collect()),
                categories: None,
            },
            scope: "Namespaced".to_string(),
            versions: vec![CustomResourceDefinitionVersion {
                name: VERSION.to_string(),
                served: true,
                storage: true,
                additional_printer_columns: Some(
                    kind.columns
                        .iter()
                        .map(|(name, type_, path)| CustomResourceColumnDefinition {
                            name: name.to_string(),
                            type_: type_.to_string(),
                            json_path: path.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources: kind.status_subresource.then(|| CustomResourceSubresources {
                    status: Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceSubresourceStatus(json!({}))),
                    scale: None,
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    };
    GeneratedCrd {
        file_name: format!("{GROUP}_{}.yaml", kind.plural),
        crd,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at<'a>(schema: &'a Value, path: &[&str]) -> &'a Value {
        path.iter().fold(schema, |s, p| &s["properties"][p])
    }

    #[test]
    fn deploy_item_schema_names_what_landscaper_writes_and_requires_what_it_requires() {
        let s = schema_of::<DeployItem>();
        assert_eq!(s["required"], json!(["spec"]));
        assert_eq!(at(&s, &["spec"])["required"], json!(["type"]));
        let status = at(&s, &["status"]);
        assert_eq!(status["required"], json!(["observedGeneration"]));
        for field in [
            "phase",
            "jobID",
            "jobIDFinished",
            "jobIDGenerationTime",
            "lastReconcileTime",
            "transitionTimes",
            "exportRef",
            "deployer",
            "lastError",
            "lastErrors",
            "firstError",
            "conditions",
            "providerStatus",
            "deployItemPhase",
        ] {
            assert!(status["properties"].get(field).is_some(), "status.{field}");
        }
        assert_eq!(
            at(&s, &["status", "jobIDGenerationTime"])["format"],
            "date-time"
        );
        assert_eq!(
            at(&s, &["spec", "config"])["x-kubernetes-embedded-resource"],
            true
        );
        // What `kubectl explain` shows comes from the doc comments.
        assert!(
            at(&s, &["spec", "type"])["description"]
                .as_str()
                .is_some_and(|d| d.contains("deployer type"))
        );
        // Unknown fields (`extra`) are not part of the schema.
        assert!(at(&s, &["spec"])["properties"].get("extra").is_none());
        assert!(at(&s, &["spec"]).get("additionalProperties").is_none());
    }

    #[test]
    fn a_sync_object_names_its_status_as_landscaper_does() {
        // Landscaper's SyncObject CRD: `status: {type: object}` beside its status subresource,
        // and only `spec` required. Without `status` in the schema, status writes are pruned.
        let s = schema_of::<SyncObject>();
        assert_eq!(s["properties"]["status"]["type"], json!("object"));
        assert_eq!(s["required"], json!(["spec"]));
    }

    #[test]
    fn generated_schemas_are_free_of_what_a_crd_refuses() {
        for generated in definitions() {
            let version = &generated.crd.spec.versions[0];
            let root = serde_json::to_value(&version.schema).unwrap();
            assert_eq!(
                root["openAPIV3Schema"]["properties"]["metadata"],
                json!({"type": "object"}),
                "{}: a root metadata schema may only say its type",
                generated.file_name
            );
        }
        fn walk(v: &Value, path: &str) {
            if let Value::Object(m) = v {
                for key in [
                    "$ref", "$schema", "$defs", "default", "nullable", "anyOf", "oneOf",
                ] {
                    assert!(!m.contains_key(key), "{key} at {path}");
                }
                for (k, v) in m {
                    walk(v, &format!("{path}.{k}"));
                }
            }
        }
        for generated in definitions() {
            let schema = serde_json::to_value(&generated.crd).unwrap();
            walk(&schema, &generated.file_name);
        }
    }

    #[test]
    fn a_status_written_by_the_host_keeps_every_field_through_the_schema() {
        // Every property a full status serializes to is in the schema (nothing would be pruned).
        let status = crate::DeployItemStatus {
            phase: crate::Phase::Succeeded,
            last_error: Some(Default::default()),
            last_errors: vec![Default::default()],
            first_error: Some(Default::default()),
            last_reconcile_time: Some("2026-01-01T00:00:00Z".into()),
            deployer: Some(Default::default()),
            provider_status: Some(json!({"apiVersion": "a/v1", "kind": "S"})),
            export_ref: Some(Default::default()),
            job_id: "1".into(),
            job_id_finished: "1".into(),
            job_id_generation_time: Some("x".into()),
            transition_times: Some(Default::default()),
            conditions: vec![crate::Condition::default()],
            deploy_item_phase: Some("Succeeded".into()),
            ..Default::default()
        };
        let schema = schema_of::<DeployItem>();
        let props = &at(&schema, &["status"])["properties"];
        for key in serde_json::to_value(&status)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
        {
            assert!(
                props.get(key).is_some(),
                "status.{key} is not in the schema"
            );
        }
    }
}
