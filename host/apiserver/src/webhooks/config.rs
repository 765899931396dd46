//! Webhook configurations: what kube-apiserver defaults and validates when one is written, and
//! the compiled form the matching and the calls use.
//!
//! Owns: [`admit_configuration`] (v1 defaults and the validation a client most often meets),
//! [`Hook`], [`Rule`] and [`compile`]. Must not touch: matching (`rules`) or calling (`call`).

use crate::builtin::{base64_decode, base64_decode_at, is_dns_subdomain};
use crate::registry::ResourceType;
use crate::status::{ApiError, FieldError, go_quote};
use crate::store::Obj;
use serde_json::{Map, Value, json};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const GROUP: &str = "admissionregistration.k8s.io";
/// The resource key of `ValidatingWebhookConfiguration`s in the store.
pub(super) const VALIDATING_KEY: &str =
    "admissionregistration.k8s.io/validatingwebhookconfigurations";

/// The resources writes to which are never sent to webhooks (as kube-apiserver: a broken
/// webhook must not be able to lock its own configuration).
pub(crate) fn is_webhook_configuration(rt: &ResourceType) -> bool {
    rt.group == GROUP
        && matches!(
            rt.plural.as_str(),
            "validatingwebhookconfigurations" | "mutatingwebhookconfigurations"
        )
}

/// One rule of a webhook.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rule {
    pub(super) operations: Vec<String>,
    pub(super) groups: Vec<String>,
    pub(super) versions: Vec<String>,
    /// `(resource, subresource)`: `"pods"` is `("pods", "")`, `"*/*"` is `("*", "*")`.
    pub(super) resources: Vec<(String, String)>,
    pub(super) scope: String,
}

impl Rule {
    pub(super) fn from_json(r: &Value) -> Rule {
        let list = |k: &str| crate::rbac::strings(r, k);
        Rule {
            operations: list("operations"),
            groups: list("apiGroups"),
            versions: list("apiVersions"),
            resources: list("resources")
                .into_iter()
                .map(|r| match r.split_once('/') {
                    Some((res, sub)) => (res.to_string(), sub.to_string()),
                    None => (r, String::new()),
                })
                .collect(),
            scope: r
                .get("scope")
                .and_then(Value::as_str)
                .unwrap_or("*")
                .to_string(),
        }
    }
}

/// Where a webhook is called.
#[derive(Debug, Clone)]
pub(super) enum Endpoint {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One webhook of a configuration, compiled.
pub(crate) struct Hook {
    pub(super) name: String,
    pub(super) rules: Vec<Rule>,
    /// `failurePolicy: Fail` (the default): a failed call refuses the write.
    pub(super) fail_closed: bool,
    /// `matchPolicy: Equivalent` (the default): a rule naming another version of the resource
    /// matches too, and the webhook gets the object in that version.
    pub(super) equivalent: bool,
    /// `None`: selects everything (absent or `{}`).
    pub(super) namespace_selector: Option<Value>,
    pub(super) object_selector: Option<Value>,
    /// `sideEffects` is `None` or `NoneOnDryRun`: may be called for a dry run.
    pub(super) dry_run_safe: bool,
    pub(super) timeout: Duration,
    /// The AdmissionReview version sent: the first of `admissionReviewVersions` the server
    /// speaks (`v1`, `v1beta1`); `None` when there is none.
    pub(super) review_version: Option<&'static str>,
    pub(super) endpoint: Option<Endpoint>,
    /// `caBundle`, decoded (PEM); empty: the system's roots.
    pub(super) ca_bundle: Vec<u8>,
    /// The HTTPS client of a `url` webhook, built on first use (not under the store lock).
    pub(super) client: OnceLock<Result<reqwest::Client, String>>,
}

/// The webhooks of the configurations, in order (configurations by name, as the store keeps
/// cluster-scoped objects).
pub(super) fn compile(configs: &[&Obj]) -> Vec<Arc<Hook>> {
    configs
        .iter()
        .flat_map(|c| {
            c.get("webhooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .map(|w| Arc::new(hook(w)))
        .collect()
}

fn hook(w: &Value) -> Hook {
    let s = |k: &str| w.get(k).and_then(Value::as_str).unwrap_or("");
    let selector = |k: &str| w.get(k).filter(|s| !selector_is_empty(s)).cloned();
    let cc = w.get("clientConfig").cloned().unwrap_or(json!({}));
    let endpoint = match (cc.get("url").and_then(Value::as_str), cc.get("service")) {
        (Some(url), _) => Some(Endpoint::Url(url.to_string())),
        (None, Some(svc)) => Some(Endpoint::Service {
            namespace: svc["namespace"].as_str().unwrap_or("").to_string(),
            name: svc["name"].as_str().unwrap_or("").to_string(),
            path: svc["path"].as_str().unwrap_or("").to_string(),
            port: svc["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
        }),
        (None, None) => None,
    };
    Hook {
        name: s("name").to_string(),
        rules: w
            .get("rules")
            .and_then(Value::as_array)
            .map(|rs| rs.iter().map(Rule::from_json).collect())
            .unwrap_or_default(),
        fail_closed: s("failurePolicy") != "Ignore",
        equivalent: s("matchPolicy") != "Exact",
        namespace_selector: selector("namespaceSelector"),
        object_selector: selector("objectSelector"),
        dry_run_safe: matches!(s("sideEffects"), "None" | "NoneOnDryRun"),
        timeout: Duration::from_secs(
            w.get("timeoutSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(10)
                .clamp(1, 30),
        ),
        review_version: w
            .get("admissionReviewVersions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(|v| match v.as_str() {
                Some("v1") => Some("v1"),
                Some("v1beta1") => Some("v1beta1"),
                _ => None,
            }),
        endpoint,
        ca_bundle: cc
            .get("caBundle")
            .and_then(Value::as_str)
            .and_then(base64_decode)
            .unwrap_or_default(),
        client: OnceLock::new(),
    }
}

/// A label selector that selects everything: no `matchLabels`, no `matchExpressions`.
fn selector_is_empty(s: &Value) -> bool {
    let empty = |k: &str| match s.get(k) {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    };
    s.is_null() || (empty("matchLabels") && empty("matchExpressions"))
}

/// What kube-apiserver does to a `ValidatingWebhookConfiguration` or
/// `MutatingWebhookConfiguration` it is given (v1): the defaults (`failurePolicy: Fail`,
/// `matchPolicy: Equivalent`, empty selectors, `timeoutSeconds: 10`, rule `scope: "*"`, service
/// port 443; mutating: `reinvocationPolicy: Never`), then the checks a configuration most often
/// fails, in its words (422 `Invalid`).
pub(crate) fn admit_configuration(rt: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    let mutating = rt.plural == "mutatingwebhookconfigurations";
    ca_bundles_decode(rt, obj)?;
    let mut errs = Vec::new();
    let mut names: Vec<String> = Vec::new();
    if let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) {
        for (i, w) in hooks.iter_mut().enumerate() {
            let Some(w) = w.as_object_mut() else {
                continue;
            };
            defaults(w, mutating);
            let path = format!("webhooks[{i}]");
            let name = w.get("name").and_then(Value::as_str).unwrap_or("");
            if names.iter().any(|n| n == name) {
                errs.push(FieldError {
                    ty: crate::status::FieldErrorType::Duplicate,
                    field: format!("{path}.name"),
                    value: Some(go_quote(name)),
                    detail: String::new(),
                });
            }
            names.push(name.to_string());
            webhook_errors(w, &path, &mut errs);
        }
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    ApiError::unless_invalid(&rt.group, &rt.kind, name, &errs)
}

/// `caBundle` is bytes: base64 in JSON, which Go's decoder refuses (400) when it is not.
fn ca_bundles_decode(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    for w in obj
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match w.pointer("/clientConfig/caBundle") {
            None | Some(Value::Null) => {}
            Some(Value::String(ca)) => {
                if let Err(at) = base64_decode_at(ca) {
                    return Err(ApiError::bad_request(format!(
                        "{kind} in version \"v1\" cannot be handled as a {kind}: illegal base64 data at input byte {at}",
                        kind = rt.kind
                    )));
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal into Go struct field WebhookClientConfig.webhooks.clientConfig.caBundle of type []uint8",
                    kind = rt.kind
                )));
            }
        }
    }
    Ok(())
}

fn defaults(w: &mut Map<String, Value>, mutating: bool) {
    let mut set = |k: &str, v: Value| {
        if w.get(k).is_none_or(Value::is_null) {
            w.insert(k.to_string(), v);
        }
    };
    set("failurePolicy", json!("Fail"));
    set("matchPolicy", json!("Equivalent"));
    set("namespaceSelector", json!({}));
    set("objectSelector", json!({}));
    set("timeoutSeconds", json!(10));
    if mutating {
        set("reinvocationPolicy", json!("Never"));
    }
    for r in w
        .get_mut("rules")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(r) = r.as_object_mut()
            && r.get("scope").is_none_or(Value::is_null)
        {
            r.insert("scope".into(), json!("*"));
        }
    }
    if let Some(svc) = w
        .get_mut("clientConfig")
        .and_then(|c| c.get_mut("service"))
        .and_then(Value::as_object_mut)
        && svc.get("port").is_none_or(Value::is_null)
    {
        svc.insert("port".into(), json!(443));
    }
}

/// One webhook's checks (kube-apiserver's `validateValidatingWebhook`, the parts clients meet).
fn webhook_errors(w: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    let get = |k: &str| w.get(k).filter(|v| !v.is_null());
    match get("name").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required(format!("{path}.name"), "")),
        Some(n) if !is_dns_subdomain(n) || n.split('.').count() < 3 => {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                &json!(n),
                "should be a domain with at least three segments separated by dots",
            ))
        }
        Some(_) => {}
    }
    enum_check(w, path, "sideEffects", &["None", "NoneOnDryRun"], errs);
    enum_check(w, path, "failurePolicy", &["Fail", "Ignore"], errs);
    enum_check(w, path, "matchPolicy", &["Equivalent", "Exact"], errs);
    review_version_errors(get("admissionReviewVersions"), path, errs);
    if let Some(t) = get("timeoutSeconds")
        && !t.as_i64().is_some_and(|t| (1..=30).contains(&t))
    {
        errs.push(FieldError::invalid(
            format!("{path}.timeoutSeconds"),
            t,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    client_config_errors(get("clientConfig"), path, errs);
    for (j, r) in get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        rule_errors(r, &format!("{path}.rules[{j}]"), errs);
    }
}

fn enum_check(
    w: &Map<String, Value>,
    path: &str,
    field: &str,
    valid: &[&str],
    errs: &mut Vec<FieldError>,
) {
    match w.get(field).filter(|v| !v.is_null()) {
        None => errs.push(FieldError::required(
            format!("{path}.{field}"),
            format!("must specify one of {}", valid.join(", ")),
        )),
        Some(v) if !v.as_str().is_some_and(|s| valid.contains(&s)) => errs.push(
            FieldError::not_supported(format!("{path}.{field}"), v, valid),
        ),
        Some(_) => {}
    }
}

fn review_version_errors(v: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let field = format!("{path}.admissionReviewVersions");
    let versions: Vec<&str> = v
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::required(
            field,
            "must specify one of v1, v1beta1",
        ));
    } else if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
        let list: Vec<String> = versions.iter().map(|v| go_quote(v)).collect();
        errs.push(FieldError::invalid_raw(
            field,
            format!("[]string{{{}}}", list.join(", ")),
            "must include at least one of v1, v1beta1",
        ));
    }
}

fn client_config_errors(cc: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let field = format!("{path}.clientConfig");
    let url = cc.and_then(|c| c.get("url")).filter(|v| !v.is_null());
    let svc = cc.and_then(|c| c.get("service")).filter(|v| !v.is_null());
    match (url, svc) {
        (Some(_), Some(_)) | (None, None) => errs.push(FieldError::required(
            field,
            "exactly one of url or service is required",
        )),
        (Some(u), None) => url_errors(u.as_str().unwrap_or(""), &format!("{field}.url"), errs),
        (None, Some(svc)) => {
            for k in ["namespace", "name"] {
                if svc.get(k).and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::required(
                        format!("{field}.service.{k}"),
                        format!("service {k} is required"),
                    ));
                }
            }
        }
    }
}

/// kube-apiserver's `ValidateWebhookURL` (with https forced).
fn url_errors(url: &str, field: &str, errs: &mut Vec<FieldError>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => {
            errs.push(FieldError::required(
                field,
                format!("url must be a valid URL: {e}{FORM}"),
            ));
            return;
        }
    };
    if u.scheme() != "https" {
        errs.push(FieldError::invalid(
            field,
            &json!(u.scheme()),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if u.host_str().is_none_or(str::is_empty) {
        errs.push(FieldError::invalid(
            field,
            &json!(""),
            format!("host must be specified{FORM}"),
        ));
    }
    if !u.username().is_empty() || u.password().is_some() {
        errs.push(FieldError::invalid(
            field,
            &json!(u.username()),
            "user information is not permitted in the URL",
        ));
    }
    if let Some(f) = u.fragment().filter(|f| !f.is_empty()) {
        errs.push(FieldError::invalid(
            field,
            &json!(f),
            "fragments are not permitted in the URL",
        ));
    }
    if let Some(q) = u.query().filter(|q| !q.is_empty()) {
        errs.push(FieldError::invalid(
            field,
            &json!(q),
            "query parameters are not permitted in the URL",
        ));
    }
}

fn rule_errors(r: &Value, path: &str, errs: &mut Vec<FieldError>) {
    const OPS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    let list = |k: &str| -> Vec<&Value> {
        r.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    if list("operations").is_empty() {
        errs.push(FieldError::required(format!("{path}.operations"), ""));
    }
    for (k, op) in list("operations").into_iter().enumerate() {
        if !op.as_str().is_some_and(|o| OPS.contains(&o)) {
            errs.push(FieldError::not_supported(
                format!("{path}.operations[{k}]"),
                op,
                OPS,
            ));
        }
    }
    for k in ["apiGroups", "apiVersions", "resources"] {
        if list(k).is_empty() {
            errs.push(FieldError::required(format!("{path}.{k}"), ""));
        }
    }
    if let Some(scope) = r.get("scope").filter(|v| !v.is_null())
        && !scope
            .as_str()
            .is_some_and(|s| matches!(s, "*" | "Cluster" | "Namespaced"))
    {
        errs.push(FieldError::not_supported(
            format!("{path}.scope"),
            scope,
            &["*", "Cluster", "Namespaced"],
        ));
    }
}
