//! Part 2, item 1: custom resources are validated, pruned and defaulted
//! against the CRD's `openAPIV3Schema` on create, update, patch and
//! `/status`, with the apiserver's messages (422 `Invalid`, `details.causes`).

use super::*;

const DI: &str = "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/default/deployitems";

fn with_landscaper() -> ApiServer {
    let s = server();
    for f in ["deployitems", "targets", "contexts", "syncobjects"] {
        s.install_yaml_documents(&landscaper_crd(f)).unwrap();
    }
    s
}

fn di(name: &str, spec: Value) -> String {
    json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
           "metadata": {"name": name}, "spec": spec})
    .to_string()
}

#[tokio::test]
async fn wrong_type_is_422_with_the_field_path() {
    let s = with_landscaper();
    let (code, st) = raw(
        &s,
        "POST",
        DI,
        Some("application/json"),
        &di("x", json!({"type": 5})),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(
        st["message"],
        "DeployItem.landscaper.gardener.cloud \"x\" is invalid: spec.type: Invalid value: \"integer\": spec.type in body must be of type string: \"integer\""
    );
    assert_eq!(st["details"]["kind"], "DeployItem");
    assert_eq!(st["details"]["group"], "landscaper.gardener.cloud");
    assert_eq!(st["details"]["name"], "x");
    assert_eq!(
        st["details"]["causes"],
        json!([{"reason": "FieldValueTypeInvalid", "field": "spec.type",
                "message": "Invalid value: \"integer\": spec.type in body must be of type string: \"integer\""}])
    );
    // a missing required field
    let (code, st) = raw(
        &s,
        "POST",
        DI,
        Some("application/json"),
        &di("x", json!({})),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "DeployItem.landscaper.gardener.cloud \"x\" is invalid: spec.type: Required value"
    );
    // several errors: "[a, b]" in the message, one cause each
    let (code, st) = raw(
        &s,
        "POST",
        DI,
        Some("application/json"),
        &di(
            "x",
            json!({"type": "t", "target": {"namespace": 1}, "updateOnChangeOnly": "yes"}),
        ),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(st["details"]["causes"].as_array().unwrap().len(), 3, "{st}");
    let msg = st["message"].as_str().unwrap();
    assert!(
        msg.starts_with("DeployItem.landscaper.gardener.cloud \"x\" is invalid: ["),
        "{msg}"
    );
    assert!(msg.contains("spec.target.name: Required value"), "{msg}");
    assert!(msg.contains("spec.target.namespace: Invalid value: \"integer\": spec.target.namespace in body must be of type string: \"integer\""), "{msg}");
    assert!(msg.contains("spec.updateOnChangeOnly: Invalid value: \"string\": spec.updateOnChangeOnly in body must be of type boolean: \"string\""), "{msg}");
}

#[tokio::test]
async fn status_without_observed_generation_is_rejected_on_the_status_subresource() {
    let s = with_landscaper();
    let (code, _) = raw(
        &s,
        "POST",
        DI,
        Some("application/json"),
        &di("x", json!({"type": "t"})),
    )
    .await;
    assert_eq!(code, 201);
    for (ct, body) in [(
        "application/merge-patch+json",
        json!({"status": {"phase": "Succeeded"}}).to_string(),
    )] {
        let (code, st) = raw(&s, "PATCH", &format!("{DI}/x/status"), Some(ct), &body).await;
        assert_eq!(code, 422, "{st}");
        assert_eq!(
            st["message"],
            "DeployItem.landscaper.gardener.cloud \"x\" is invalid: status.observedGeneration: Required value"
        );
        assert_eq!(
            st["details"]["causes"],
            json!([{"reason": "FieldValueRequired", "message": "Required value", "field": "status.observedGeneration"}])
        );
    }
    // PUT /status through kube (what the host's replace_status does)
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        s.client(),
        "default",
        &kube::api::ApiResource {
            group: "landscaper.gardener.cloud".into(),
            version: "v1alpha1".into(),
            api_version: "landscaper.gardener.cloud/v1alpha1".into(),
            kind: "DeployItem".into(),
            plural: "deployitems".into(),
        },
    );
    let mut o = api.get("x").await.unwrap();
    o.data["status"] = json!({"phase": "Init"});
    let e = api_err(
        api.replace_status("x", &Default::default(), &o)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(e.reason, "Invalid");
    // with observedGeneration it is accepted; a bad timestamp format is not
    o.data["status"] = json!({"phase": "Init", "observedGeneration": 1});
    api.replace_status("x", &Default::default(), &o)
        .await
        .unwrap();
    let (code, st) = raw(
        &s,
        "PATCH",
        &format!("{DI}/x/status"),
        Some("application/merge-patch+json"),
        &json!({"status": {"lastReconcileTime": "yesterday"}}).to_string(),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["details"]["causes"][0]["message"],
        "Invalid value: \"yesterday\": status.lastReconcileTime in body must be of type date-time: \"yesterday\""
    );
    // the main resource: update and patch are validated too
    let (code, st) = raw(
        &s,
        "PATCH",
        &format!("{DI}/x"),
        Some("application/merge-patch+json"),
        &json!({"spec": {"type": 5}}).to_string(),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(st["details"]["causes"][0]["field"], "spec.type");
    let (code, _) = raw(
        &s,
        "PATCH",
        &format!("{DI}/x"),
        Some("application/json-patch+json"),
        &json!([{"op": "remove", "path": "/spec/type"}]).to_string(),
    )
    .await;
    assert_eq!(code, 422);
    let mut cur = api.get("x").await.unwrap();
    cur.data["spec"]["type"] = json!(true);
    let e = api_err(
        api.replace("x", &Default::default(), &cur)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(e.details.unwrap().causes[0].field, "spec.type");
}

#[tokio::test]
async fn unknown_fields_are_pruned_unless_preserved() {
    let s = with_landscaper();
    let body = json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": "x"}, "extra": 1,
        "spec": {"type": "t", "unknown": "dropped", "onDelete": {"nope": 1},
                 "config": {"apiVersion": "a/v1", "kind": "C", "anything": {"kept": true}}}});
    let (code, o) = raw(&s, "POST", DI, Some("application/json"), &body.to_string()).await;
    assert_eq!(code, 201, "{o}");
    assert!(o.get("extra").is_none());
    assert_eq!(
        o["spec"],
        json!({"type": "t", "onDelete": {}, "config": {"apiVersion": "a/v1", "kind": "C", "anything": {"kept": true}}})
    );
    // the stored object is the pruned one
    let (_, got) = raw(&s, "GET", &format!("{DI}/x"), None, "").await;
    assert_eq!(got["spec"], o["spec"]);
    // a write that only adds unknown fields is a no-op (same rv)
    let (_, p) = raw(
        &s,
        "PATCH",
        &format!("{DI}/x"),
        Some("application/merge-patch+json"),
        &json!({"spec": {"unknown": 2}}).to_string(),
    )
    .await;
    assert_eq!(
        p["metadata"]["resourceVersion"],
        got["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn embedded_resources_need_api_version_and_kind() {
    let s = with_landscaper();
    let (code, st) = raw(
        &s,
        "POST",
        DI,
        Some("application/json"),
        &di("x", json!({"type": "t", "config": {"v": 1}})),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "DeployItem.landscaper.gardener.cloud \"x\" is invalid: [spec.config.apiVersion: Required value: must not be empty, spec.config.kind: Required value: must not be empty]"
    );
    assert_eq!(st["details"]["causes"][0]["reason"], "FieldValueRequired");
    assert_eq!(
        st["details"]["causes"][0]["message"],
        "Required value: must not be empty"
    );
}

fn gadget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                        "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0},
                        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "slow"},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                        "port": {"x-kubernetes-int-or-string": true,
                                 "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "note": {"type": "string", "nullable": true},
                        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                        "limits": {"type": "object", "default": {},
                                   "properties": {"cpu": {"type": "string", "default": "100m"}}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "id": {"type": "string", "format": "uuid"}
                    }},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                }}}}]}
    })
}

const G: &str = "/apis/example.com/v1/namespaces/default/gadgets";

async fn gadget(s: &ApiServer, spec: Value) -> (u16, Value) {
    let body = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"generateName": "g-"}, "spec": spec});
    raw(s, "POST", G, Some("application/json"), &body.to_string()).await
}

fn cause(st: &Value) -> String {
    format!(
        "{}: {}",
        st["details"]["causes"][0]["field"].as_str().unwrap_or("?"),
        st["details"]["causes"][0]["message"]
            .as_str()
            .unwrap_or("?")
    )
}

#[tokio::test]
async fn schema_keywords_enum_pattern_bounds_format_int_or_string_nullable_defaults() {
    let s = server();
    s.install_object(gadget_crd()).unwrap();
    // defaults (nested too), int-or-string, nullable, additionalProperties, preserve
    let (code, o) = gadget(
        &s,
        json!({"size": 3, "port": "http", "note": null, "labels": {"a": "b"},
        "free": {"x": {"y": 1}}, "id": "0b6f1f4e-8a9c-4a3e-9d7e-0d2c1f5e6a7b"}),
    )
    .await;
    assert_eq!(code, 201, "{o}");
    assert_eq!(o["spec"]["mode"], "slow");
    assert_eq!(o["spec"]["limits"], json!({"cpu": "100m"}));
    assert_eq!(o["spec"]["note"], Value::Null, "nullable keeps null");
    assert_eq!(o["spec"]["free"], json!({"x": {"y": 1}}));
    let (code, _) = gadget(&s, json!({"size": 3, "port": 8080})).await;
    assert_eq!(code, 201);
    // a non-nullable null is dropped (then defaulted)
    let (code, o) = gadget(&s, json!({"size": 3, "mode": null, "name": null})).await;
    assert_eq!(code, 201);
    assert_eq!(o["spec"]["mode"], "slow");
    assert!(o["spec"].get("name").is_none());

    let cases: &[(Value, &str)] = &[
        (
            json!({"size": 0}),
            "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
        ),
        (
            json!({"size": 11}),
            "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
        ),
        (
            json!({"size": 1.5}),
            "spec.size: Invalid value: \"number\": spec.size in body must be of type integer: \"number\"",
        ),
        (
            json!({"size": 1, "ratio": 0}),
            "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0",
        ),
        (
            json!({"size": 1, "mode": "medium"}),
            "spec.mode: Unsupported value: \"medium\": supported values: \"fast\", \"slow\"",
        ),
        (
            json!({"size": 1, "name": "Abc"}),
            "spec.name: Invalid value: \"Abc\": spec.name in body should match '^[a-z]+$'",
        ),
        (
            json!({"size": 1, "name": "abcdefghij"}),
            "spec.name: Invalid value: \"abcdefghij\": spec.name in body should be at most 8 chars long",
        ),
        (
            json!({"size": 1, "port": true}),
            "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
        ),
        (
            json!({"size": 1, "tags": ["a", 1]}),
            "spec.tags[1]: Invalid value: \"integer\": spec.tags[1] in body must be of type string: \"integer\"",
        ),
        (
            json!({"size": 1, "tags": ["a", "b", "c"]}),
            "spec.tags: Invalid value: \"\": spec.tags in body should have at most 2 items",
        ),
        (
            json!({"size": 1, "labels": {"a": 1}}),
            "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
        ),
        (
            json!({"size": 1, "id": "nope"}),
            "spec.id: Invalid value: \"nope\": spec.id in body must be of type uuid: \"nope\"",
        ),
        (json!({"mode": "fast"}), "spec.size: Required value"),
    ];
    for (spec, want) in cases {
        let (code, st) = gadget(&s, spec.clone()).await;
        assert_eq!(code, 422, "{spec} → {st}");
        assert_eq!(cause(&st), *want, "{spec}");
        assert_eq!(st["reason"], "Invalid");
    }
}

#[tokio::test]
async fn landscaper_crds_accept_what_landscaper_writes() {
    let s = with_landscaper();
    let t = json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster", "config": {"kubeconfig": "x"}}});
    s.install_object(t).expect("target");
    let c = json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Context",
        "metadata": {"name": "c", "namespace": "default"}, "repositoryContext": {"type": "ociRegistry", "baseUrl": "r"}});
    s.install_object(c).expect("context");
    let bad = json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "SyncObject",
        "metadata": {"name": "so", "namespace": "default"}, "spec": {"podName": 1}});
    let e = s.install_object(bad).unwrap_err().to_string();
    assert!(e.contains("422") && e.contains("is invalid"), "{e}");
}
