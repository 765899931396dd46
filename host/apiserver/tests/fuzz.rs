//! Fuzzing the request parsing (the reliability suite, `docs/reliability.md`): arbitrary
//! bodies — JSON of any shape, YAML, garbage bytes, huge and deeply nested documents, valid
//! objects with a field swapped for a wrong type — sent with every content type to writes of
//! built-in kinds, CRDs and Landscaper's custom resources. The server must answer every one
//! (never panic) with a client error or a success, never a 5xx, and go on serving.
//!
//! `PROPTEST_CASES` (default 256 here) makes the run longer by hand.

use axum::body::Body;
use embedded_apiserver::{ApiServer, Options};
use http::Request;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use tower::ServiceExt;

const PATHS: &[(&str, &str)] = &[
    ("POST", "/api/v1/namespaces/default/configmaps"),
    ("PUT", "/api/v1/namespaces/default/configmaps/fuzz"),
    ("PATCH", "/api/v1/namespaces/default/configmaps/fuzz"),
    ("POST", "/api/v1/namespaces/default/secrets"),
    ("POST", "/api/v1/namespaces/default/pods"),
    ("POST", "/api/v1/namespaces"),
    ("DELETE", "/api/v1/namespaces/default/configmaps/fuzz"),
    ("POST", "/apis/apps/v1/namespaces/default/deployments"),
    (
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    ),
    (
        "POST",
        "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/default/deployitems",
    ),
    (
        "PUT",
        "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/default/deployitems/fuzz",
    ),
    (
        "PUT",
        "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/default/deployitems/fuzz/status",
    ),
    (
        "PATCH",
        "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/default/deployitems/fuzz",
    ),
    (
        "POST",
        "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/default/targets",
    ),
];

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
    "",
];

/// Any JSON value, up to a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("apiVersion".to_string()),
                    Just("kind".to_string()),
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                    Just("status".to_string()),
                    Just("data".to_string()),
                    Just("name".to_string()),
                    "[a-z]{1,8}",
                ],
                inner,
                0..8
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Valid objects of the kinds above, to be mutated.
fn valid_objects() -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fuzz", "namespace": "default"}, "data": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fuzz"}, "stringData": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fuzz"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "fuzz"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem", "metadata": {"name": "fuzz"},
            "spec": {"type": "landscaper.gardener.cloud/mock", "config": {"apiVersion": "mock/v1", "kind": "ProviderConfiguration"}},
            "status": {"phase": "Init", "jobID": "1"}}),
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target", "metadata": {"name": "fuzz"},
            "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster", "config": {"kubeconfig": "x"}}}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "fuzzes.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "fuzzes", "kind": "Fuzz"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
    ]
}

/// Replaces the value at a pseudo-random path of `v` (chosen by `pick`) with `with`.
fn mutate(v: &mut Value, pick: u64, with: Value) {
    let descend = !pick.is_multiple_of(3);
    let i = (pick / 3) as usize;
    match v {
        Value::Object(m) if descend && !m.is_empty() => {
            let key = m.keys().nth(i % m.len()).cloned().unwrap();
            mutate(m.get_mut(&key).unwrap(), pick / 7, with)
        }
        Value::Array(a) if descend && !a.is_empty() => {
            let n = a.len();
            mutate(&mut a[i % n], pick / 7, with)
        }
        _ => *v = with,
    }
}

#[derive(Debug, Clone)]
enum Body_ {
    Json(Value),
    Mutated(usize, u64, Value),
    Yaml(Value),
    Bytes(Vec<u8>),
}

fn body() -> impl Strategy<Value = Body_> {
    prop_oneof![
        any_json().prop_map(Body_::Json),
        (0..valid_objects().len(), any::<u64>(), any_json())
            .prop_map(|(i, p, v)| Body_::Mutated(i, p, v)),
        any_json().prop_map(Body_::Yaml),
        prop::collection::vec(any::<u8>(), 0..256).prop_map(Body_::Bytes),
    ]
}

fn render(b: &Body_) -> Vec<u8> {
    match b {
        Body_::Json(v) => serde_json::to_vec(v).unwrap(),
        Body_::Mutated(i, pick, with) => {
            let mut obj = valid_objects()[*i].clone();
            mutate(&mut obj, *pick, with.clone());
            serde_json::to_vec(&obj).unwrap()
        }
        Body_::Yaml(v) => serde_yaml::to_string(v).unwrap().into_bytes(),
        Body_::Bytes(b) => b.clone(),
    }
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn fuzz_server() -> ApiServer {
    let server = ApiServer::new(Options::default()).expect("server");
    for kind in ["deployitems", "targets", "contexts"] {
        let crd = std::fs::read_to_string(format!(
            "../../charts/wasm-deployer/charts/landscaper-crds/crds/landscaper.gardener.cloud_{kind}.yaml"
        ))
        .expect("CRD");
        server.install_yaml_documents(&crd).expect("install CRD");
    }
    server
}

async fn send(server: &ApiServer, method: &str, path: &str, ct: &str, body: Vec<u8>) -> u16 {
    let mut req = Request::builder().method(method).uri(path);
    if !ct.is_empty() {
        req = req.header("content-type", ct);
    }
    let resp = server
        .router()
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .expect("the router answers");
    let code = resp.status().as_u16();
    // Read the whole answer: a body that fails to serialise must show up here too.
    axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("the body is readable");
    code
}

fn check(
    server: &ApiServer,
    rt: &tokio::runtime::Runtime,
    method: &str,
    path: &str,
    ct: &str,
    body: Vec<u8>,
) {
    let shown = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    let code = rt.block_on(send(server, method, path, ct, body));
    assert!(
        (200..500).contains(&code),
        "{method} {path} ({ct}) answered {code} for {shown}"
    );
}

#[test]
fn arbitrary_request_bodies_get_an_answer_and_never_a_server_error() {
    let rt = tokio_runtime();
    let server = fuzz_server();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (0..PATHS.len(), 0..CONTENT_TYPES.len(), body());
    runner
        .run(&strategy, |(p, c, b)| {
            let (method, path) = PATHS[p];
            check(&server, &rt, method, path, CONTENT_TYPES[c], render(&b));
            Ok(())
        })
        .unwrap();
    // Still serving.
    assert_eq!(
        rt.block_on(send(
            &server,
            "GET",
            "/api/v1/namespaces/default/configmaps",
            "",
            vec![]
        )),
        200
    );
}

#[test]
fn huge_and_deeply_nested_bodies_are_refused_cleanly() {
    let rt = tokio_runtime();
    let server = fuzz_server();
    let cm_path = "/api/v1/namespaces/default/configmaps";
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes();
    let deep_object = |n: usize| {
        let inner = format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep"}},"x":{inner}}}"#
        )
        .into_bytes()
    };
    for body in [deep(100_000), deep_object(100_000), deep(129)] {
        check(
            &server,
            &rt,
            "POST",
            cm_path,
            "application/json",
            body.clone(),
        );
        check(&server, &rt, "POST", cm_path, "application/yaml", body);
    }
    // 4 MiB: over the request limit.
    let huge = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"},
        "data": {"k": "x".repeat(4 << 20)}});
    let code = rt.block_on(send(
        &server,
        "POST",
        cm_path,
        "application/json",
        serde_json::to_vec(&huge).unwrap(),
    ));
    assert_eq!(code, 413);
    // A YAML bomb (billion laughs) is refused, not expanded.
    let bomb = "a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
    check(
        &server,
        &rt,
        "POST",
        cm_path,
        "application/yaml",
        bomb.as_bytes().to_vec(),
    );
    assert_eq!(rt.block_on(send(&server, "GET", cm_path, "", vec![])), 200);
}
