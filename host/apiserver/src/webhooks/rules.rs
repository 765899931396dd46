//! Which webhooks a write calls: rules (operations, apiGroups, apiVersions, resources, scope)
//! with `matchPolicy`, then namespaceSelector and objectSelector, as kube-apiserver's
//! `rules.Matcher`, namespace and object matchers decide; and where each is called
//! (`clientConfig.url`, or a Service resolved through its Endpoints).
//!
//! Owns: matching ([`Rule`]'s, [`Hook`]'s), [`Call`], [`any_rule_matches`] and [`plan`]. Must not
//! touch: the calls themselves (`call`).

use super::attributes::{Attributes, Operation};
use super::config::{Endpoint, Hook, Rule};
use crate::builtin::selector_matches;
use crate::registry::NAMESPACE_KEY;
use crate::store::Inner;
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

impl Rule {
    fn matches(&self, op: Operation, a: &Attributes<'_>, version: &str) -> bool {
        let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        any(&self.operations, op.as_str())
            && any(&self.groups, &a.rt.group)
            && any(&self.versions, version)
            && self.resources.iter().any(|(res, sub)| {
                (res == "*" || *res == a.rt.plural) && (sub == "*" || sub == a.subresource)
            })
            && match self.scope.as_str() {
                // Namespaces are cluster-scoped: `Cluster` names them, `Namespaced` does not.
                "Cluster" => !a.rt.namespaced,
                "Namespaced" => a.rt.namespaced,
                _ => true,
            }
    }
}

impl Hook {
    /// The version the webhook is called with when its rules match: the request's, or with
    /// `matchPolicy: Equivalent` another served version of the same resource a rule names.
    fn matched_version(&self, op: Operation, a: &Attributes<'_>) -> Option<String> {
        if self.rules.iter().any(|r| r.matches(op, a, a.version)) {
            return Some(a.version.to_string());
        }
        if !self.equivalent {
            return None;
        }
        a.rt.versions
            .iter()
            .filter(|v| v.as_str() != a.version)
            .find(|v| self.rules.iter().any(|r| r.matches(op, a, v)))
            .cloned()
    }

    /// kube-apiserver's namespace matcher: cluster-scoped objects other than namespaces are
    /// always selected; a namespace by its own labels; a namespaced object by its namespace's.
    fn namespace_selected(
        &self,
        a: &Attributes<'_>,
        ns_labels: Option<&Value>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> bool {
        let Some(sel) = &self.namespace_selector else {
            return true;
        };
        let is_namespace = a.rt.group.is_empty() && a.rt.plural == "namespaces";
        if is_namespace && a.subresource.is_empty() {
            let labels = object.or(old).and_then(|o| o.pointer("/metadata/labels"));
            return selector_matches(sel, labels);
        }
        if !a.rt.namespaced {
            return true;
        }
        selector_matches(sel, ns_labels)
    }

    /// kube-apiserver's object matcher: the new or the old object's labels.
    fn object_selected(&self, object: Option<&Value>, old: Option<&Value>) -> bool {
        let Some(sel) = &self.object_selector else {
            return true;
        };
        [object, old]
            .into_iter()
            .flatten()
            .any(|o| selector_matches(sel, o.pointer("/metadata/labels")))
    }
}

/// Whether some webhook's rules match the write for one of `ops` (before the object is known:
/// a write no rule names runs in one step).
pub(crate) fn any_rule_matches(hooks: &[Arc<Hook>], a: &Attributes<'_>, ops: &[Operation]) -> bool {
    hooks
        .iter()
        .any(|h| ops.iter().any(|op| h.matched_version(*op, a).is_some()))
}

/// Where a call goes: the URL, and for a Service the address the host name resolves to.
pub(crate) struct Target {
    pub(super) url: String,
    pub(super) resolve: Option<(String, SocketAddr)>,
}

/// One webhook to call for a write.
pub(crate) struct Call {
    pub(super) hook: Arc<Hook>,
    /// The version of the resource the webhook gets the object in.
    pub(super) version: String,
    /// Resolved under the store lock; `Err` is a failed call.
    pub(super) target: Result<Target, String>,
}

/// The webhooks a write calls (rules for `op`, then the selectors), each with where to call
/// it; read under the store lock (namespace labels, Services, Endpoints).
pub(crate) fn plan(
    hooks: &[Arc<Hook>],
    inner: &Inner,
    a: &Attributes<'_>,
    op: Operation,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Vec<Call> {
    let ns_labels = inner
        .lookup(NAMESPACE_KEY, "", a.namespace)
        .and_then(|n| n.pointer("/metadata/labels"));
    hooks
        .iter()
        .filter_map(|h| {
            let version = h.matched_version(op, a)?;
            (h.namespace_selected(a, ns_labels, object, old) && h.object_selected(object, old))
                .then(|| Call {
                    hook: h.clone(),
                    version,
                    target: target(h, inner),
                })
        })
        .collect()
}

fn target(h: &Hook, inner: &Inner) -> Result<Target, String> {
    match &h.endpoint {
        Some(Endpoint::Url(url)) => Ok(Target {
            url: url.clone(),
            resolve: None,
        }),
        Some(Endpoint::Service {
            namespace,
            name,
            path,
            port,
        }) => {
            let host = format!("{name}.{namespace}.svc");
            let addr = service_address(inner, namespace, name, *port)?;
            let path = if path.starts_with('/') || path.is_empty() {
                path.clone()
            } else {
                format!("/{path}")
            };
            Ok(Target {
                url: format!("https://{host}:{port}{path}"),
                resolve: Some((host, addr)),
            })
        }
        None => Err("no clientConfig.url or clientConfig.service".into()),
    }
}

/// A Service's port resolved through its Endpoints, as kube-apiserver's endpoint service
/// resolver does: the service port named by number, the port of the Endpoints subset with its
/// name (or the target port's number), the subset's first ready address.
fn service_address(inner: &Inner, ns: &str, name: &str, port: u16) -> Result<SocketAddr, String> {
    let svc = inner
        .lookup("/services", ns, name)
        .ok_or_else(|| format!("service \"{name}\" not found"))?;
    let sp = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(port.into()))
        .ok_or_else(|| format!("no service port {port} found for service \"{name}\""))?;
    let port_name = sp["name"].as_str().unwrap_or("");
    let target_port = sp["targetPort"].as_u64().or(sp["port"].as_u64());
    let eps = inner
        .lookup("/endpoints", ns, name)
        .ok_or_else(|| format!("endpoints \"{name}\" not found"))?;
    for subset in eps
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ep_port = subset
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| {
                if port_name.is_empty() {
                    p["port"].as_u64() == target_port || p["name"].as_str().unwrap_or("").is_empty()
                } else {
                    p["name"].as_str() == Some(port_name)
                }
            })
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok());
        let ip = subset
            .get("addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|a| a["ip"].as_str())
            .and_then(|ip| ip.parse::<IpAddr>().ok());
        if let (Some(p), Some(ip)) = (ep_port, ip) {
            return Ok(SocketAddr::new(ip, p));
        }
    }
    Err(format!("no endpoints available for service \"{name}\""))
}
