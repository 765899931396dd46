//! Built-in kinds: the decoding checks, defaulting and validation a real
//! kube-apiserver applies on write, for the kinds users' manifests contain.
//!
//! * **Names** (in [`validate_name`]): RFC 1123 subdomains, RFC 1123 labels
//!   for Namespaces, RFC 1035 labels for Services, with upstream's messages.
//! * **ConfigMap**: `data` values must be strings and `binaryData` base64
//!   (else 400 BadRequest, the Go decoder's message); keys must be config keys.
//! * **Secret**: `data` values must be base64 (400); `stringData` is merged
//!   into `data` (base64) and dropped; `type` defaults to `Opaque`.
//! * **Pod specs** (Pods and every pod template: Deployment, StatefulSet,
//!   DaemonSet, ReplicaSet, Job, CronJob): `restartPolicy: Always`,
//!   `dnsPolicy: ClusterFirst`, `schedulerName`, `securityContext: {}`,
//!   `terminationGracePeriodSeconds: 30`; per container `imagePullPolicy`
//!   (`Always` for `:latest` or untagged images, else `IfNotPresent`),
//!   `terminationMessagePath`/`Policy`, `resources: {}`, port
//!   `protocol: TCP`, probe defaults, volume `defaultMode: 420`. Pods also get
//!   `enableServiceLinks`, `priority`, `preemptionPolicy`, the default
//!   not-ready/unreachable tolerations and `status: {phase: Pending, qosClass}`.
//! * **Workloads**: Deployment (`replicas: 1`, RollingUpdate 25 %/25 %,
//!   `revisionHistoryLimit: 10`, `progressDeadlineSeconds: 600`), StatefulSet,
//!   DaemonSet, ReplicaSet, Job (`parallelism`/`completions: 1`,
//!   `backoffLimit: 6`, generated selector and labels), CronJob.
//! * **Service**: `type: ClusterIP`, a `clusterIP` allocated from
//!   10.96.0.0/12 (kept on update, immutable), `sessionAffinity: None`, IP
//!   family fields, port `protocol: TCP`, `targetPort` = `port`, node ports
//!   for NodePort/LoadBalancer.
//! * **Validation** (422 `Invalid` with `details.causes`): selectors required
//!   and matching template labels, containers with `name` and `image`,
//!   `restartPolicy` per kind, replicas ≥ 0, Service type/ports/protocols.

use crate::registry::ResourceType;
use crate::status::{ApiError, FieldError, go_quote};
use serde_json::{Map, Value, json};

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64 with padding (Go's `base64.StdEncoding`); `Err(byte offset)` of the first bad input.
pub fn base64_decode_at(s: &str) -> Result<Vec<u8>, usize> {
    let b = s.as_bytes();
    if let Some(i) = b
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/' || *c == b'='))
    {
        return Err(i);
    }
    if !b.len().is_multiple_of(4) {
        return Err(b.len() / 4 * 4);
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (ci, chunk) in b.chunks(4).enumerate() {
        let mut n = 0u32;
        let mut pad = 0;
        for (i, &c) in chunk.iter().enumerate() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                b'=' if i >= 2 && ci == b.len() / 4 - 1 => {
                    pad += 1;
                    0
                }
                _ => return Err(ci * 4 + i),
            };
            if pad > 0 && c != b'=' {
                return Err(ci * 4 + i);
            }
            n = (n << 6) | u32::from(v);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Ok(out)
}

pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    base64_decode_at(s).ok()
}

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

fn is_label_chars(l: &str) -> bool {
    !l.is_empty()
        && l.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !l.starts_with('-')
        && !l.ends_with('-')
}

pub fn is_dns_subdomain(n: &str) -> bool {
    !n.is_empty() && n.len() <= 253 && n.split('.').all(is_label_chars)
}

pub fn is_dns_label(n: &str) -> bool {
    n.len() <= 63 && is_label_chars(n)
}

fn is_dns1035(n: &str) -> bool {
    is_dns_label(n) && n.starts_with(|c: char| c.is_ascii_lowercase())
}

/// Name rules per kind, as `metadata.name` field errors (empty = valid).
pub fn name_errors(rt: &ResourceType, name: &str, field: &str) -> Vec<FieldError> {
    let v = Value::String(name.to_string());
    let mut errs = Vec::new();
    if rt.group == "rbac.authorization.k8s.io" {
        // path segment names: anything but '.', '..', '/' and '%'
        if name == "." || name == ".." {
            errs.push(FieldError::invalid(
                field,
                &v,
                format!("may not be '{name}'"),
            ));
        } else if name.contains('/') || name.contains('%') {
            errs.push(FieldError::invalid(
                field,
                &v,
                "may not contain '/' or '%'".to_string(),
            ));
        }
        return errs;
    }
    let (ok, max, msg) = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces") => (is_dns_label(name), 63, LABEL_MSG),
        ("", "services") => (is_dns1035(name), 63, DNS1035_MSG),
        _ => (is_dns_subdomain(name), 253, SUBDOMAIN_MSG),
    };
    if name.len() > max {
        errs.push(FieldError::invalid(
            field,
            &v,
            format!("must be no more than {max} characters"),
        ));
    }
    if !(ok || name.len() > max && name.split('.').all(is_label_chars)) {
        errs.push(FieldError::invalid(field, &v, msg));
    }
    errs
}

/// 422 for a bad `metadata.name` (or `generateName`).
pub fn validate_name(rt: &ResourceType, name: &str) -> Result<(), ApiError> {
    ApiError::unless_invalid(
        &rt.group,
        &rt.kind,
        name,
        &name_errors(rt, name, "metadata.name"),
    )
}

/// Go's JSON type name, for decode errors.
fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn decode_error(kind: &str, msg: String) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version \"v1\" cannot be handled as a {kind}: {msg}"
    ))
}

/// `map[string]string` fields: every value a string (null becomes "", as Go decodes it).
fn string_map(obj: &mut Value, field: &str, kind: &str) -> Result<(), ApiError> {
    match obj.get_mut(field) {
        None => Ok(()),
        Some(Value::Null) => {
            obj.as_object_mut().map(|m| m.remove(field));
            Ok(())
        }
        Some(Value::Object(m)) => {
            for v in m.values_mut() {
                match v {
                    Value::String(_) => {}
                    Value::Null => *v = json!(""),
                    other => {
                        return Err(decode_error(
                            kind,
                            format!(
                                "json: cannot unmarshal {} into Go struct field {kind}.{field} of type string",
                                go_json_type(other)
                            ),
                        ));
                    }
                }
            }
            Ok(())
        }
        Some(other) => Err(decode_error(
            kind,
            format!(
                "json: cannot unmarshal {} into Go struct field {kind}.{field} of type map[string]string",
                go_json_type(other)
            ),
        )),
    }
}

/// `map[string][]byte` fields: base64 strings.
fn bytes_map(obj: &mut Value, field: &str, kind: &str) -> Result<(), ApiError> {
    string_map(obj, field, kind).map_err(|e| {
        ApiError::bad_request(e.message.replace("of type string", "of type []uint8"))
    })?;
    if let Some(m) = obj.get(field).and_then(Value::as_object) {
        for v in m.values() {
            if let Err(at) = base64_decode_at(v.as_str().unwrap_or("")) {
                return Err(decode_error(
                    kind,
                    format!("illegal base64 data at input byte {at}"),
                ));
            }
        }
    }
    Ok(())
}

fn config_key_errors(obj: &Value, field: &str, errs: &mut Vec<FieldError>) {
    if let Some(m) = obj.get(field).and_then(Value::as_object) {
        for k in m.keys() {
            let ok = !k.is_empty()
                && k.len() <= 253
                && k != "."
                && k != ".."
                && !k.starts_with("..")
                && k.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.');
            if !ok {
                errs.push(FieldError::invalid(
                    format!("{field}[{k}]"),
                    &Value::String(k.clone()),
                    CONFIG_KEY_MSG,
                ));
            }
        }
    }
}

/// ConfigMaps and Secrets hold at most 1 MiB of values (Kubernetes' `MaxSecretSize`).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// The bytes of the values of map `field` (base64-decoded when `base64`).
fn value_bytes(obj: &Value, field: &str, base64: bool) -> usize {
    obj.get(field)
        .and_then(Value::as_object)
        .map(|m| {
            m.values()
                .filter_map(Value::as_str)
                .map(|v| if base64 { v.len() / 4 * 3 } else { v.len() })
                .sum()
        })
        .unwrap_or(0)
}

fn too_big(size: usize, field: &str, errs: &mut Vec<FieldError>) {
    if size > MAX_CONFIG_BYTES {
        errs.push(FieldError {
            ty: crate::status::FieldErrorType::TooLong,
            field: field.into(),
            value: None,
            detail: format!("must have at most {MAX_CONFIG_BYTES} bytes"),
        });
    }
}

fn obj_at<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut cur = v;
    for p in path {
        if !cur.get(*p).is_some_and(Value::is_object) {
            cur[*p] = json!({});
        }
        cur = &mut cur[*p];
    }
    cur.as_object_mut().expect("object")
}

fn default(m: &mut Map<String, Value>, k: &str, v: Value) {
    if m.get(k).is_none_or(Value::is_null) {
        m.insert(k.to_string(), v);
    }
}

fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        None => "Always",
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn probe_defaults(p: &mut Value) {
    let Some(m) = p.as_object_mut() else { return };
    default(m, "timeoutSeconds", json!(1));
    default(m, "periodSeconds", json!(10));
    default(m, "successThreshold", json!(1));
    default(m, "failureThreshold", json!(3));
    if let Some(h) = m.get_mut("httpGet").and_then(Value::as_object_mut) {
        default(h, "scheme", json!("HTTP"));
        default(h, "path", json!("/"));
    }
}

fn container_defaults(c: &mut Value) {
    let Some(m) = c.as_object_mut() else { return };
    let image = m.get("image").and_then(Value::as_str).unwrap_or("");
    if !image.is_empty() {
        let p = pull_policy(image);
        default(m, "imagePullPolicy", json!(p));
    }
    default(m, "terminationMessagePath", json!("/dev/termination-log"));
    default(m, "terminationMessagePolicy", json!("File"));
    default(m, "resources", json!({}));
    if let Some(ports) = m.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(p, "protocol", json!("TCP"));
        }
    }
    for k in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = m.get_mut(k) {
            probe_defaults(p);
        }
    }
}

/// Defaults of a PodSpec (`SetDefaults_PodSpec` and friends).
fn pod_spec_defaults(spec: &mut Map<String, Value>) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
    for k in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(k).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(container_defaults);
        }
    }
    if let Some(vols) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in vols.iter_mut().filter_map(Value::as_object_mut) {
            for k in ["configMap", "secret", "downwardAPI", "projected"] {
                if let Some(src) = v.get_mut(k).and_then(Value::as_object_mut) {
                    default(src, "defaultMode", json!(420));
                }
            }
        }
    }
}

fn container_errors(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match spec.get("containers").and_then(Value::as_array) {
        Some(cs) if !cs.is_empty() => {
            for (k, list) in [
                ("initContainers", spec.get("initContainers")),
                ("containers", Some(&spec["containers"])),
            ] {
                let Some(cs) = list.and_then(Value::as_array) else {
                    continue;
                };
                let mut seen: Vec<&str> = Vec::new();
                for (i, c) in cs.iter().enumerate() {
                    let p = format!("{path}.{k}[{i}]");
                    match c
                        .get("name")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                    {
                        None => errs.push(FieldError::required(format!("{p}.name"), "")),
                        Some(n) => {
                            if !is_dns_label(n) {
                                errs.push(FieldError::invalid(
                                    format!("{p}.name"),
                                    &c["name"],
                                    LABEL_MSG,
                                ));
                            } else if seen.contains(&n) {
                                errs.push(FieldError {
                                    ty: crate::status::FieldErrorType::Duplicate,
                                    field: format!("{p}.name"),
                                    value: Some(go_quote(n)),
                                    detail: String::new(),
                                });
                            }
                            seen.push(n);
                        }
                    }
                    if c.get("image")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        errs.push(FieldError::required(format!("{p}.image"), ""));
                    }
                    if let Some(pol) = c.get("imagePullPolicy")
                        && !matches!(pol.as_str(), Some("Always" | "IfNotPresent" | "Never"))
                    {
                        errs.push(FieldError::not_supported(
                            format!("{p}.imagePullPolicy"),
                            pol,
                            &["Always", "IfNotPresent", "Never"],
                        ));
                    }
                }
            }
        }
        _ => errs.push(FieldError::required(format!("{path}.containers"), "")),
    }
}

fn restart_policy_errors(spec: &Value, path: &str, allowed: &[&str], errs: &mut Vec<FieldError>) {
    let rp = spec.get("restartPolicy").cloned().unwrap_or(json!(""));
    if !rp.as_str().is_some_and(|s| allowed.contains(&s)) {
        errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            &rp,
            allowed,
        ));
    }
}

/// `map[string]string{"a":"b"}` as Go's `%#v` prints it.
fn go_string_map(m: Option<&Value>) -> String {
    let items: Vec<String> = m
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v.as_str().unwrap_or(""))))
                .collect()
        })
        .unwrap_or_default();
    format!("map[string]string{{{}}}", items.join(", "))
}

/// Whether a `LabelSelector` (`matchLabels`, `matchExpressions`) matches `labels`.
pub(crate) fn selector_matches(sel: &Value, labels: Option<&Value>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in ml {
            if get(k) != v.as_str() {
                return false;
            }
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let vals: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let ok = match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => get(key).is_some_and(|v| vals.contains(&v)),
                "NotIn" => !get(key).is_some_and(|v| vals.contains(&v)),
                "Exists" => get(key).is_some(),
                "DoesNotExist" => get(key).is_none(),
                _ => true,
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

/// Workload checks: selector present (unless the kind generates it) and matching the template labels; replicas ≥ 0; template.
fn workload_errors(obj: &Value, kind: &str, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    if let Some(r) = spec.get("replicas")
        && r.as_i64().is_some_and(|n| n < 0)
    {
        errs.push(FieldError::invalid(
            "spec.replicas",
            r,
            "must be greater than or equal to 0",
        ));
    }
    let labels = spec.pointer("/template/metadata/labels");
    match spec.get("selector") {
        None | Some(Value::Null) if kind != "Job" => {
            errs.push(FieldError::required("spec.selector", ""));
        }
        Some(sel) => {
            let empty = sel
                .get("matchLabels")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
                && sel
                    .get("matchExpressions")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty);
            if empty && kind != "Job" {
                errs.push(FieldError::invalid_raw(
                    "spec.selector",
                    "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}",
                    format!("empty selector is invalid for {}", kind.to_lowercase()),
                ));
            } else if !selector_matches(sel, labels) {
                errs.push(FieldError::invalid_raw(
                    "spec.template.metadata.labels",
                    go_string_map(labels),
                    "`selector` does not match template `labels`",
                ));
            }
        }
        _ => {}
    }
    let ps = spec.pointer("/template/spec").cloned().unwrap_or(json!({}));
    container_errors(&ps, "spec.template.spec", errs);
    match kind {
        "Job" => restart_policy_errors(&ps, "spec.template.spec", &["OnFailure", "Never"], errs),
        _ => restart_policy_errors(&ps, "spec.template.spec", &["Always"], errs),
    }
    if kind == "Deployment"
        && spec.pointer("/strategy/type").and_then(Value::as_str) == Some("Recreate")
        && spec
            .pointer("/strategy/rollingUpdate")
            .is_some_and(|v| !v.is_null())
    {
        errs.push(FieldError::forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        ));
    }
}

/// What [`admit`] needs from the store: whether a cluster IP / node port is taken.
pub trait Allocations {
    fn cluster_ip_taken(&self, ip: &str) -> bool;
    fn node_port_taken(&self, port: u64) -> bool;
}

fn random_u32() -> u32 {
    let b = uuid::Uuid::new_v4();
    let b = b.as_bytes();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn service_defaults(
    obj: &mut Value,
    old: Option<&Value>,
    alloc: &dyn Allocations,
) -> Result<(), ApiError> {
    let spec = obj_at(obj, &["spec"]);
    default(spec, "type", json!("ClusterIP"));
    let ty = spec["type"].as_str().unwrap_or("").to_string();
    if ty != "ExternalName" {
        default(spec, "sessionAffinity", json!("None"));
    }
    let old_ip = old
        .and_then(|o| o.pointer("/spec/clusterIP"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if ty != "ExternalName" {
        if spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            let ip = match &old_ip {
                Some(ip) => ip.clone(),
                None => loop {
                    // 10.96.0.0/12, skipping .0 and 10.96.0.1 (the `kubernetes` service)
                    let n = 2 + random_u32() % ((1 << 20) - 3);
                    let ip = format!("10.{}.{}.{}", 96 + (n >> 16), (n >> 8) & 255, n & 255);
                    if !alloc.cluster_ip_taken(&ip) {
                        break ip;
                    }
                },
            };
            spec.insert("clusterIP".into(), json!(ip));
        }
        let ip = spec["clusterIP"].clone();
        default(spec, "clusterIPs", json!([ip]));
        default(spec, "ipFamilies", json!(["IPv4"]));
        default(spec, "ipFamilyPolicy", json!("SingleStack"));
        default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    let old_ports: Vec<Value> = old
        .and_then(|o| o.pointer("/spec/ports"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(p, "protocol", json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                default(p, "targetPort", port);
            }
            if (ty == "NodePort" || ty == "LoadBalancer") && p.get("nodePort").is_none() {
                let prev = old_ports
                    .iter()
                    .find(|o| o.get("port") == p.get("port"))
                    .and_then(|o| o.get("nodePort"))
                    .cloned();
                let np = match prev {
                    Some(v) => v,
                    None => loop {
                        let n = 30000 + u64::from(random_u32() % 2768);
                        if !alloc.node_port_taken(n) {
                            break json!(n);
                        }
                    },
                };
                p.insert("nodePort".into(), np);
            }
        }
    }
    Ok(())
}

fn service_errors(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let ty = spec.get("type").cloned().unwrap_or(json!("ClusterIP"));
    let types = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !ty.as_str().is_some_and(|t| types.contains(&t)) {
        errs.push(FieldError::not_supported("spec.type", &ty, &types));
    }
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    let ports = spec
        .get("ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ports.is_empty() && ty != "ExternalName" && !headless {
        errs.push(FieldError::required("spec.ports", ""));
    }
    for (i, p) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        if ports.len() > 1
            && p.get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        }
        match p.get("port") {
            Some(v) if v.as_i64().is_some_and(|n| (1..=65535).contains(&n)) => {}
            Some(v) => errs.push(FieldError::invalid(
                format!("{path}.port"),
                v,
                "must be between 1 and 65535, inclusive",
            )),
            None => errs.push(FieldError::required(format!("{path}.port"), "")),
        }
        if let Some(proto) = p.get("protocol")
            && !matches!(proto.as_str(), Some("TCP" | "UDP" | "SCTP"))
        {
            errs.push(FieldError::not_supported(
                format!("{path}.protocol"),
                proto,
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
    if let Some(old_ip) = old
        .and_then(|o| o.pointer("/spec/clusterIP"))
        .and_then(Value::as_str)
        && let Some(new_ip) = spec.get("clusterIP").and_then(Value::as_str)
        && old_ip != new_ip
        && ty != "ExternalName"
    {
        errs.push(FieldError::invalid(
            "spec.clusterIP",
            &json!(new_ip),
            "field is immutable",
        ));
    }
}

fn pod_defaults(obj: &mut Value, create: bool) {
    let spec = obj_at(obj, &["spec"]);
    pod_spec_defaults(spec);
    default(spec, "enableServiceLinks", json!(true));
    default(spec, "priority", json!(0));
    default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    default(
        spec,
        "tolerations",
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ]),
    );
    if create {
        let qos = qos_class(&obj["spec"]);
        obj["status"] = json!({"phase": "Pending", "qosClass": qos});
    }
}

fn qos_class(spec: &Value) -> &'static str {
    let cs: Vec<&Value> = spec
        .get("containers")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let has = |c: &Value, k: &str| {
        c.pointer(&format!("/resources/{k}"))
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
    };
    if cs.iter().all(|c| !has(c, "requests") && !has(c, "limits")) {
        return "BestEffort";
    }
    let guaranteed = cs.iter().all(|c| {
        let l = c.pointer("/resources/limits");
        let r = c.pointer("/resources/requests").or(l);
        ["cpu", "memory"].iter().all(|k| {
            l.and_then(|l| l.get(*k)).is_some()
                && l.and_then(|l| l.get(*k)) == r.and_then(|r| r.get(*k))
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn template_spec(obj: &mut Value, path: &[&str]) {
    let mut p = path.to_vec();
    p.extend(["template", "spec"]);
    pod_spec_defaults(obj_at(obj, &p));
}

/// Decode checks, defaults and validation of a built-in kind, on create
/// (`old` = None) and update (also `/status`). Kinds not listed pass unchanged.
pub fn admit(
    rt: &ResourceType,
    obj: &mut Value,
    old: Option<&Value>,
    alloc: &dyn Allocations,
) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut errs = Vec::new();
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "ConfigMap") => config_map(obj, &mut errs)?,
        ("", "Secret") => secret(obj, &mut errs)?,
        ("", "Namespace") => namespace_defaults(obj, &name, old),
        ("", "Pod") => {
            pod_defaults(obj, old.is_none());
            let spec = obj["spec"].clone();
            container_errors(&spec, "spec", &mut errs);
            restart_policy_errors(&spec, "spec", &["Always", "OnFailure", "Never"], &mut errs);
        }
        ("", "Service") => {
            service_defaults(obj, old, alloc)?;
            service_errors(obj, old, &mut errs);
        }
        ("apps", "Deployment") => deployment(obj, &mut errs),
        ("apps", "StatefulSet") => stateful_set(obj, &mut errs),
        ("apps", "DaemonSet") => daemon_set(obj, &mut errs),
        ("apps", "ReplicaSet") => {
            default(obj_at(obj, &["spec"]), "replicas", json!(1));
            template_spec(obj, &["spec"]);
            workload_errors(obj, "ReplicaSet", &mut errs);
        }
        ("batch", "Job") => {
            job_defaults(obj, &["spec"], old);
            workload_errors(obj, "Job", &mut errs);
        }
        ("batch", "CronJob") => cron_job(obj, &mut errs),
        _ => {}
    }
    ApiError::unless_invalid(&rt.group, &rt.kind, &name, &errs)
}

/// ConfigMap: string `data`, base64 `binaryData`, valid keys, the size limit.
fn config_map(obj: &mut Value, errs: &mut Vec<FieldError>) -> Result<(), ApiError> {
    string_map(obj, "data", "ConfigMap")?;
    bytes_map(obj, "binaryData", "ConfigMap")?;
    config_key_errors(obj, "data", errs);
    config_key_errors(obj, "binaryData", errs);
    let size = value_bytes(obj, "data", false) + value_bytes(obj, "binaryData", true);
    too_big(size, "[]", errs);
    Ok(())
}

/// Secret: `stringData` folded into `data`, type `Opaque` by default, valid keys, the size limit.
fn secret(obj: &mut Value, errs: &mut Vec<FieldError>) -> Result<(), ApiError> {
    bytes_map(obj, "data", "Secret")?;
    string_map(obj, "stringData", "Secret")?;
    if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
        let data = obj_at(obj, &["data"]);
        for (k, v) in sd {
            data.insert(k, json!(base64_encode(v.as_str().unwrap_or("").as_bytes())));
        }
    }
    if let Some(m) = obj.as_object_mut() {
        default(m, "type", json!("Opaque"));
        if m.get("data")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            m.remove("data");
        }
    }
    config_key_errors(obj, "data", errs);
    too_big(value_bytes(obj, "data", true), "data", errs);
    Ok(())
}

/// Namespace: the `kubernetes.io/metadata.name` label and the `kubernetes` finalizer.
fn namespace_defaults(obj: &mut Value, name: &str, old: Option<&Value>) {
    let labels = obj_at(obj, &["metadata", "labels"]);
    labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    // `kubernetes` on create; an update without spec.finalizers keeps the old ones.
    let fins = match obj.pointer("/spec/finalizers") {
        Some(f) => Some(f.clone()),
        None => match old {
            Some(o) => o.pointer("/spec/finalizers").cloned(),
            None => Some(json!(["kubernetes"])),
        },
    };
    let spec = obj_at(obj, &["spec"]);
    match fins {
        Some(f) => {
            spec.insert("finalizers".into(), f);
        }
        None => {
            spec.remove("finalizers");
        }
    }
}

/// Deployment defaults (replicas, history, progress deadline, rolling update) and checks.
fn deployment(obj: &mut Value, errs: &mut Vec<FieldError>) {
    let spec = obj_at(obj, &["spec"]);
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    let strat = obj_at(obj, &["spec", "strategy"]);
    default(strat, "type", json!("RollingUpdate"));
    if strat["type"] == "RollingUpdate" {
        let ru = obj_at(obj, &["spec", "strategy", "rollingUpdate"]);
        default(ru, "maxUnavailable", json!("25%"));
        default(ru, "maxSurge", json!("25%"));
    }
    template_spec(obj, &["spec"]);
    workload_errors(obj, "Deployment", errs);
}

/// StatefulSet defaults (replicas, pod management, history, PVC retention, partition) and checks.
fn stateful_set(obj: &mut Value, errs: &mut Vec<FieldError>) {
    let spec = obj_at(obj, &["spec"]);
    default(spec, "replicas", json!(1));
    default(spec, "podManagementPolicy", json!("OrderedReady"));
    default(spec, "revisionHistoryLimit", json!(10));
    default(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    let us = obj_at(obj, &["spec", "updateStrategy"]);
    default(us, "type", json!("RollingUpdate"));
    if us["type"] == "RollingUpdate" {
        default(
            obj_at(obj, &["spec", "updateStrategy", "rollingUpdate"]),
            "partition",
            json!(0),
        );
    }
    template_spec(obj, &["spec"]);
    workload_errors(obj, "StatefulSet", errs);
}

/// DaemonSet defaults (history, rolling update) and checks.
fn daemon_set(obj: &mut Value, errs: &mut Vec<FieldError>) {
    default(obj_at(obj, &["spec"]), "revisionHistoryLimit", json!(10));
    let us = obj_at(obj, &["spec", "updateStrategy"]);
    default(us, "type", json!("RollingUpdate"));
    if us["type"] == "RollingUpdate" {
        let ru = obj_at(obj, &["spec", "updateStrategy", "rollingUpdate"]);
        default(ru, "maxUnavailable", json!(1));
        default(ru, "maxSurge", json!(0));
    }
    template_spec(obj, &["spec"]);
    workload_errors(obj, "DaemonSet", errs);
}

/// CronJob defaults (concurrency, suspend, history limits, job template) and checks.
fn cron_job(obj: &mut Value, errs: &mut Vec<FieldError>) {
    let spec = obj_at(obj, &["spec"]);
    default(spec, "concurrencyPolicy", json!("Allow"));
    default(spec, "suspend", json!(false));
    default(spec, "successfulJobsHistoryLimit", json!(3));
    default(spec, "failedJobsHistoryLimit", json!(1));
    let js = obj_at(obj, &["spec", "jobTemplate", "spec"]);
    default(js, "backoffLimit", json!(6));
    default(js, "completionMode", json!("NonIndexed"));
    default(js, "suspend", json!(false));
    template_spec(obj, &["spec", "jobTemplate", "spec"]);
    if obj
        .pointer("/spec/schedule")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        errs.push(FieldError::required("spec.schedule", ""));
    }
    let ps = obj
        .pointer("/spec/jobTemplate/spec/template/spec")
        .cloned()
        .unwrap_or(json!({}));
    container_errors(&ps, "spec.jobTemplate.spec.template.spec", errs);
    restart_policy_errors(
        &ps,
        "spec.jobTemplate.spec.template.spec",
        &["OnFailure", "Never"],
        errs,
    );
}

fn job_defaults(obj: &mut Value, path: &[&str], old: Option<&Value>) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let spec = obj_at(obj, path);
    if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
        spec.insert("completions".into(), json!(1));
    }
    default(spec, "parallelism", json!(1));
    default(spec, "backoffLimit", json!(6));
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    if !manual && !uid.is_empty() {
        if let Some(sel) = old.and_then(|o| o.pointer("/spec/selector")).cloned() {
            spec.insert("selector".into(), sel);
        } else if spec.get("selector").is_none() {
            spec.insert(
                "selector".into(),
                json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
            );
        }
        let labels = obj_at(obj, &[path, &["template", "metadata", "labels"]].concat());
        default(labels, "batch.kubernetes.io/controller-uid", json!(uid));
        default(labels, "batch.kubernetes.io/job-name", json!(name));
        default(labels, "controller-uid", json!(uid));
        default(labels, "job-name", json!(name));
    }
    template_spec(obj, path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_roundtrip() {
        for s in ["", "a", "ab", "abc", "abcd", "hello world"] {
            assert_eq!(
                base64_decode(&base64_encode(s.as_bytes())).unwrap(),
                s.as_bytes()
            );
        }
        assert_eq!(base64_encode(b"admin"), "YWRtaW4=");
        assert_eq!(base64_decode_at("YWRt!W4="), Err(4));
        assert_eq!(base64_decode_at("abc"), Err(0));
    }

    #[test]
    fn pull_policies() {
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("nginx:latest"), "Always");
        assert_eq!(pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(pull_policy("localhost:5000/nginx"), "Always");
        assert_eq!(pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }
}
