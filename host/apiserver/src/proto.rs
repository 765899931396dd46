//! Minimal decoding of Kubernetes protobuf request bodies
//! (`application/vnd.kubernetes.protobuf`). kubectl's typed generators
//! (`kubectl create namespace|configmap|secret`) send these; everything else
//! kubectl and kube-rs send is JSON. Supported: the `k8s\0` + `runtime.Unknown`
//! envelope, `ObjectMeta` (names, labels, annotations, finalizers), Namespace,
//! ConfigMap, Secret, DeleteOptions, the RBAC kinds `kubectl create
//! role|clusterrole|rolebinding|clusterrolebinding` sends, the specs of what `kubectl auth` and
//! `kubectl create token` send (SelfSubjectAccessReview, SelfSubjectRulesReview,
//! SelfSubjectReview, TokenRequest), and Validating/MutatingWebhookConfigurations (what
//! controller-runtime clients such as Landscaper's webhook server send). Other kinds get 415.

use crate::status::ApiError;
use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\0";

/// The webhook configuration kinds (a pattern).
macro_rules! WEBHOOK_CONFIGS {
    () => {
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"
    };
}

#[derive(Debug)]
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let c = *b.get(*i)?;
        *i += 1;
        v |= ((c & 0x7f) as u64) << shift;
        if c & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn fields(b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i)?;
        let f = match key & 7 {
            0 => Field::Varint(varint(b, &mut i)?),
            1 => {
                i += 8;
                Field::Fixed
            }
            2 => {
                let len = varint(b, &mut i)? as usize;
                let end = i.checked_add(len)?;
                let s = b.get(i..end)?;
                i = end;
                Field::Bytes(s)
            }
            5 => {
                i += 4;
                Field::Fixed
            }
            _ => return None,
        };
        if i > b.len() {
            return None;
        }
        out.push((key >> 3, f));
    }
    Some(out)
}

fn s(f: &Field<'_>) -> Option<String> {
    match f {
        Field::Bytes(b) => std::str::from_utf8(b).ok().map(str::to_string),
        _ => None,
    }
}

fn map_entry(f: &Field<'_>, base64_values: bool) -> Option<(String, Value)> {
    let Field::Bytes(b) = f else { return None };
    let mut k = None;
    let mut v = Value::String(String::new());
    for (n, x) in fields(b)? {
        match n {
            1 => k = s(&x),
            2 => {
                if let Field::Bytes(raw) = x {
                    v = if base64_values {
                        json!(base64(raw))
                    } else {
                        json!(String::from_utf8_lossy(raw))
                    };
                }
            }
            _ => {}
        }
    }
    Some((k?, v))
}

fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut finalizers = Vec::new();
    for (n, f) in fields(b)? {
        match n {
            // Go's protobuf writes empty strings too; its JSON leaves them out.
            1 | 2 | 3 | 6 => {
                let key = match n {
                    1 => "name",
                    2 => "generateName",
                    3 => "namespace",
                    _ => "resourceVersion",
                };
                let v = s(&f)?;
                if !v.is_empty() {
                    m.insert(key.into(), json!(v));
                }
            }
            11 => {
                let (k, v) = map_entry(&f, false)?;
                labels.insert(k, v);
            }
            12 => {
                let (k, v) = map_entry(&f, false)?;
                annotations.insert(k, v);
            }
            14 => finalizers.push(json!(s(&f)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(m))
}

fn unsupported(what: &str) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "protobuf bodies are only supported for Namespace, ConfigMap, Secret, RBAC kinds, webhook configurations and DeleteOptions (got {what}); send application/json"
        ),
    )
}

/// Unwrap the `k8s\0` envelope: (apiVersion, kind, raw message).
fn envelope(body: &[u8]) -> Result<(String, String, &[u8]), ApiError> {
    let bad = || ApiError::bad_request("malformed protobuf body");
    let rest = body.strip_prefix(MAGIC).ok_or_else(bad)?;
    let (mut av, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(rest).ok_or_else(bad)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm).ok_or_else(bad)? {
                    match n {
                        1 => av = s(&f).unwrap_or_default(),
                        2 => kind = s(&f).unwrap_or_default(),
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    Ok((av, kind, raw))
}

/// Decode a protobuf object body into its JSON form.
pub fn decode_object(body: &[u8]) -> Result<Value, ApiError> {
    let (av, kind, raw) = envelope(body)?;
    let bad = || ApiError::bad_request(format!("malformed protobuf {kind}"));
    let mut obj = json!({ "apiVersion": av, "kind": kind });
    let top = fields(raw).ok_or_else(bad)?;
    let mut data = Map::new();
    let mut binary = Map::new();
    for (n, f) in top {
        match (kind.as_str(), n, &f) {
            (_, 1, Field::Bytes(b)) => obj["metadata"] = object_meta(b).ok_or_else(bad)?,
            ("Namespace", 2, Field::Bytes(b)) => {
                let fins: Vec<Value> = fields(b)
                    .ok_or_else(bad)?
                    .iter()
                    .filter(|(n, _)| *n == 1)
                    .filter_map(|(_, f)| s(f))
                    .map(Value::String)
                    .collect();
                if !fins.is_empty() {
                    obj["spec"] = json!({ "finalizers": fins });
                }
            }
            ("Namespace", _, _) => {}
            ("ConfigMap", 2, _) => {
                let (k, v) = map_entry(&f, false).ok_or_else(bad)?;
                data.insert(k, v);
            }
            ("ConfigMap", 3, _) => {
                let (k, v) = map_entry(&f, true).ok_or_else(bad)?;
                binary.insert(k, v);
            }
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                obj["immutable"] = json!(*v != 0)
            }
            ("Secret", 2, _) => {
                let (k, v) = map_entry(&f, true).ok_or_else(bad)?;
                data.insert(k, v);
            }
            ("Secret", 3, _) => obj["type"] = json!(s(&f).ok_or_else(bad)?),
            ("Secret", 4, _) => {
                let (k, v) = map_entry(&f, true).ok_or_else(bad)?;
                data.insert(k, v);
            }
            ("ConfigMap" | "Secret", _, _) => {}
            ("Role" | "ClusterRole", 2, Field::Bytes(b)) => {
                push(&mut obj, "rules", policy_rule(b).ok_or_else(bad)?);
            }
            ("ClusterRole", 3, Field::Bytes(b)) => {
                let mut selectors = Vec::new();
                for (n, f) in fields(b).ok_or_else(bad)? {
                    if let (1, Field::Bytes(sel)) = (n, f) {
                        selectors.push(label_selector(sel).ok_or_else(bad)?);
                    }
                }
                obj["aggregationRule"] = json!({ "clusterRoleSelectors": selectors });
            }
            ("RoleBinding" | "ClusterRoleBinding", 2, Field::Bytes(b)) => {
                let names = [(1, "kind"), (2, "apiGroup"), (3, "name"), (4, "namespace")];
                push(
                    &mut obj,
                    "subjects",
                    string_fields(b, &names).ok_or_else(bad)?,
                );
            }
            ("RoleBinding" | "ClusterRoleBinding", 3, Field::Bytes(b)) => {
                let names = [(1, "apiGroup"), (2, "kind"), (3, "name")];
                obj["roleRef"] = string_fields(b, &names).ok_or_else(bad)?;
            }
            ("Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding", _, _) => {}
            (WEBHOOK_CONFIGS!(), 2, Field::Bytes(b)) => {
                push(&mut obj, "webhooks", webhook(&kind, b).ok_or_else(bad)?);
            }
            (WEBHOOK_CONFIGS!(), _, _) => {}
            (
                "SelfSubjectAccessReview" | "SelfSubjectRulesReview" | "TokenRequest",
                2,
                Field::Bytes(b),
            ) => {
                obj["spec"] = review_spec(&kind, b).ok_or_else(bad)?;
            }
            (
                "SelfSubjectAccessReview"
                | "SelfSubjectRulesReview"
                | "TokenRequest"
                | "SelfSubjectReview",
                _,
                _,
            ) => {}
            (other, _, _) => return Err(unsupported(other)),
        }
    }
    if !data.is_empty() {
        obj["data"] = Value::Object(data);
    }
    if !binary.is_empty() {
        obj["binaryData"] = Value::Object(binary);
    }
    Ok(obj)
}

/// An `admissionregistration/v1` ValidatingWebhook or MutatingWebhook, as controller-runtime's
/// clients send them (Landscaper's webhook server registers itself so); `matchConditions` are
/// left out.
fn webhook(kind: &str, b: &[u8]) -> Option<Value> {
    let mutating = kind == "MutatingWebhookConfiguration";
    let mut w = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (1, _) => w["name"] = json!(s(&f)?),
            (2, Field::Bytes(c)) => w["clientConfig"] = client_config(c)?,
            (3, Field::Bytes(r)) => push(&mut w, "rules", rule_with_operations(r)?),
            (4, _) => w["failurePolicy"] = json!(s(&f)?),
            (5, Field::Bytes(sel)) => w["namespaceSelector"] = label_selector(sel)?,
            (6, _) => w["sideEffects"] = json!(s(&f)?),
            (7, Field::Varint(v)) => w["timeoutSeconds"] = json!(*v as i32),
            (8, _) => push(&mut w, "admissionReviewVersions", json!(s(&f)?)),
            (9, _) => w["matchPolicy"] = json!(s(&f)?),
            (10, _) if mutating => w["reinvocationPolicy"] = json!(s(&f)?),
            (10, Field::Bytes(sel)) | (11, Field::Bytes(sel)) if (n == 11) == mutating => {
                w["objectSelector"] = label_selector(sel)?
            }
            _ => {}
        }
    }
    Some(w)
}

/// A WebhookClientConfig: service (1: namespace, name, path, port), caBundle (2), url (3).
fn client_config(b: &[u8]) -> Option<Value> {
    let mut c = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (1, Field::Bytes(svc)) => {
                let mut sv = json!({});
                for (n, f) in fields(svc)? {
                    match (n, &f) {
                        (1, _) => sv["namespace"] = json!(s(&f)?),
                        (2, _) => sv["name"] = json!(s(&f)?),
                        (3, _) => sv["path"] = json!(s(&f)?),
                        (4, Field::Varint(p)) => sv["port"] = json!(*p as i32),
                        _ => {}
                    }
                }
                c["service"] = sv;
            }
            (2, Field::Bytes(ca)) => c["caBundle"] = json!(base64(ca)),
            (3, _) => c["url"] = json!(s(&f)?),
            _ => {}
        }
    }
    Some(c)
}

/// A RuleWithOperations: operations (1), rule (2: apiGroups, apiVersions, resources, scope).
fn rule_with_operations(b: &[u8]) -> Option<Value> {
    let mut r = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (1, _) => push(&mut r, "operations", json!(s(&f)?)),
            (2, Field::Bytes(rule)) => {
                for (n, f) in fields(rule)? {
                    match n {
                        1 => push(&mut r, "apiGroups", json!(s(&f)?)),
                        2 => push(&mut r, "apiVersions", json!(s(&f)?)),
                        3 => push(&mut r, "resources", json!(s(&f)?)),
                        4 => r["scope"] = json!(s(&f)?),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Some(r)
}

/// Appends `v` to the array `obj[key]` (created if missing).
fn push(obj: &mut Value, key: &str, v: Value) {
    if !obj[key].is_array() {
        obj[key] = json!([]);
    }
    if let Some(a) = obj[key].as_array_mut() {
        a.push(v);
    }
}

/// An `rbac/v1` PolicyRule: verbs, apiGroups, resources, resourceNames, nonResourceURLs (1–5).
fn policy_rule(b: &[u8]) -> Option<Value> {
    let names = [
        "verbs",
        "apiGroups",
        "resources",
        "resourceNames",
        "nonResourceURLs",
    ];
    let mut rule = json!({});
    for (n, f) in fields(b)? {
        if let Some(name) = (1..=5).contains(&n).then(|| names[n as usize - 1]) {
            push(&mut rule, name, json!(s(&f)?));
        }
    }
    Some(rule)
}

/// A `meta/v1` LabelSelector: matchLabels (1), matchExpressions (2: key, operator, values).
fn label_selector(b: &[u8]) -> Option<Value> {
    let mut sel = json!({});
    for (n, f) in fields(b)? {
        match (n, &f) {
            (1, _) => {
                let (k, v) = map_entry(&f, false)?;
                if !sel["matchLabels"].is_object() {
                    sel["matchLabels"] = json!({});
                }
                sel["matchLabels"][k] = v;
            }
            (2, Field::Bytes(e)) => {
                let mut req = json!({});
                for (n, f) in fields(e)? {
                    match n {
                        1 => req["key"] = json!(s(&f)?),
                        2 => req["operator"] = json!(s(&f)?),
                        3 => push(&mut req, "values", json!(s(&f)?)),
                        _ => {}
                    }
                }
                push(&mut sel, "matchExpressions", req);
            }
            _ => {}
        }
    }
    Some(sel)
}

/// The string fields of a message, by field number → JSON name.
fn string_fields(b: &[u8], names: &[(u64, &str)]) -> Option<Value> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        if let Some((_, name)) = names.iter().find(|(x, _)| *x == n) {
            m.insert(name.to_string(), json!(s(&f)?));
        }
    }
    Some(Value::Object(m))
}

/// The `spec` of the authentication/authorization objects kubectl sends as protobuf.
fn review_spec(kind: &str, b: &[u8]) -> Option<Value> {
    let mut spec = Map::new();
    for (n, f) in fields(b)? {
        let Field::Bytes(inner) = f else {
            if let (("TokenRequest", 4), Field::Varint(v)) = ((kind, n), &f) {
                spec.insert("expirationSeconds".into(), json!(*v as i64));
            }
            continue;
        };
        match (kind, n) {
            ("SelfSubjectAccessReview", 1) => {
                let names = [
                    (1, "namespace"),
                    (2, "verb"),
                    (3, "group"),
                    (4, "version"),
                    (5, "resource"),
                    (6, "subresource"),
                    (7, "name"),
                ];
                spec.insert("resourceAttributes".into(), string_fields(inner, &names)?);
            }
            ("SelfSubjectAccessReview", 2) => {
                let names = [(1, "path"), (2, "verb")];
                spec.insert(
                    "nonResourceAttributes".into(),
                    string_fields(inner, &names)?,
                );
            }
            ("SelfSubjectRulesReview", 1) => {
                spec.insert("namespace".into(), json!(std::str::from_utf8(inner).ok()?));
            }
            ("TokenRequest", 1) => {
                let a = spec.entry("audiences").or_insert_with(|| json!([]));
                a.as_array_mut()?
                    .push(json!(std::str::from_utf8(inner).ok()?));
            }
            _ => {}
        }
    }
    Some(Value::Object(spec))
}

/// Decode a protobuf DeleteOptions body into its JSON form.
pub fn decode_delete_options(body: &[u8]) -> Result<Value, ApiError> {
    let (_, kind, raw) = envelope(body)?;
    if kind != "DeleteOptions" {
        return Err(unsupported(&kind));
    }
    let bad = || ApiError::bad_request("malformed protobuf DeleteOptions");
    let mut o = json!({});
    for (n, f) in fields(raw).ok_or_else(bad)? {
        match (n, &f) {
            (2, Field::Bytes(b)) => {
                let mut p = json!({});
                for (n, f) in fields(b).ok_or_else(bad)? {
                    match n {
                        1 => p["uid"] = json!(s(&f)),
                        2 => p["resourceVersion"] = json!(s(&f)),
                        _ => {}
                    }
                }
                o["preconditions"] = p;
            }
            (3, Field::Varint(v)) => o["orphanDependents"] = json!(*v != 0),
            (4, _) => o["propagationPolicy"] = json!(s(&f)),
            (5, _) => {
                o["dryRun"] = json!([s(&f)]);
            }
            _ => {}
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A length-delimited field `n` (length as a varint).
    fn ld(n: u64, b: &[u8]) -> Vec<u8> {
        let mut v = vec![(n << 3 | 2) as u8];
        let mut len = b.len();
        while len >= 0x80 {
            v.push((len & 0x7f) as u8 | 0x80);
            len >>= 7;
        }
        v.push(len as u8);
        v.extend_from_slice(b);
        v
    }

    #[test]
    fn decodes_a_namespace_and_a_configmap() {
        let meta = [
            ld(1, b"smoke"),
            ld(11, &[ld(1, b"a"), ld(2, b"b")].concat()),
        ]
        .concat();
        let ns = ld(1, &meta);
        let tm = [ld(1, b"v1"), ld(2, b"Namespace")].concat();
        let body = [MAGIC.to_vec(), ld(1, &tm), ld(2, &ns)].concat();
        assert_eq!(
            decode_object(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "smoke", "labels": {"a": "b"}}})
        );
        let cm = [
            ld(1, &ld(1, b"c")),
            ld(2, &[ld(1, b"k"), ld(2, b"v")].concat()),
        ]
        .concat();
        let tm = [ld(1, b"v1"), ld(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), ld(1, &tm), ld(2, &cm)].concat();
        assert_eq!(decode_object(&body).unwrap()["data"], json!({"k": "v"}));
        assert_eq!(base64(b"hi!?"), "aGkhPw==");
        assert!(decode_object(b"k8s\0\xff\xff").is_err());
        assert!(decode_object(b"nope").is_err());
    }

    #[test]
    fn decodes_a_validating_webhook_configuration() {
        let rule = ld(
            2,
            &[
                ld(1, b"landscaper.gardener.cloud"),
                ld(2, b"v1alpha1"),
                ld(3, b"targets"),
            ]
            .concat(),
        );
        let cc = [ld(3, b"https://127.0.0.1:9443/x"), ld(2, b"hi!?")].concat();
        let hook = [
            ld(1, b"targets.validation.landscaper.gardener.cloud"),
            ld(2, &cc),
            ld(3, &[ld(1, b"CREATE"), ld(1, b"UPDATE"), rule].concat()),
            ld(4, b"Fail"),
            ld(6, b"None"),
            vec![7 << 3, 10],
            ld(8, b"v1"),
            ld(10, &ld(1, &[ld(1, b"a"), ld(2, b"b")].concat())),
        ]
        .concat();
        let vwc = [
            ld(1, &ld(1, b"landscaper-validation-webhook")),
            ld(2, &hook),
        ]
        .concat();
        let tm = [
            ld(1, b"admissionregistration.k8s.io/v1"),
            ld(2, b"ValidatingWebhookConfiguration"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), ld(1, &tm), ld(2, &vwc)].concat();
        assert_eq!(
            decode_object(&body).unwrap()["webhooks"],
            json!([{
                "name": "targets.validation.landscaper.gardener.cloud",
                "clientConfig": {"url": "https://127.0.0.1:9443/x", "caBundle": "aGkhPw=="},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["landscaper.gardener.cloud"],
                    "apiVersions": ["v1alpha1"], "resources": ["targets"]}],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "timeoutSeconds": 10,
                "admissionReviewVersions": ["v1"],
                "objectSelector": {"matchLabels": {"a": "b"}},
            }])
        );
    }

    #[test]
    fn decodes_what_kubectl_create_rolebinding_and_clusterrole_send() {
        let rb = [
            ld(1, &ld(1, b"viewer")),
            ld(
                2,
                &[ld(1, b"ServiceAccount"), ld(3, b"sa"), ld(4, b"team")].concat(),
            ),
            ld(
                3,
                &[
                    ld(1, b"rbac.authorization.k8s.io"),
                    ld(2, b"ClusterRole"),
                    ld(3, b"view"),
                ]
                .concat(),
            ),
        ]
        .concat();
        let tm = [
            ld(1, b"rbac.authorization.k8s.io/v1"),
            ld(2, b"RoleBinding"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), ld(1, &tm), ld(2, &rb)].concat();
        let got = decode_object(&body).unwrap();
        assert_eq!(
            got["subjects"],
            json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "team"}])
        );
        assert_eq!(
            got["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"})
        );
        let cr = [
            ld(1, &ld(1, b"agg")),
            ld(
                2,
                &[ld(1, b"get"), ld(1, b"list"), ld(2, b""), ld(3, b"pods")].concat(),
            ),
            ld(
                3,
                &ld(1, &ld(1, &[ld(1, b"team"), ld(2, b"true")].concat())),
            ),
        ]
        .concat();
        let tm = [
            ld(1, b"rbac.authorization.k8s.io/v1"),
            ld(2, b"ClusterRole"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), ld(1, &tm), ld(2, &cr)].concat();
        let got = decode_object(&body).unwrap();
        assert_eq!(
            got["rules"],
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
        );
        assert_eq!(
            got["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchLabels": {"team": "true"}}]})
        );
    }
}
