//! The walk over ClusterRoleBindings and RoleBindings ([`Policy::authorize`],
//! [`Policy::rules_for`]) and privilege-escalation prevention
//! ([`Policy::confirm_no_escalation`]).
//!
//! Owns: [`Policy`], a snapshot of the RBAC objects taken by the caller, and [`Decision`].
//! Must not touch: the store, HTTP, or the wording of the 403 (that is `forbidden`).

use super::attributes::Attributes;
use super::rules::{PolicyRule, meta, rule_allows, s};
use super::users::{SYSTEM_MASTERS, UserInfo, service_account_user};
use serde_json::Value;
use std::collections::HashMap;

/// The outcome of [`Policy::authorize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// `RBAC: allowed by ...` when allowed; when denied, the errors met on the way
    /// (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`), or empty.
    pub reason: String,
}

/// A snapshot of the RBAC objects a decision needs.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub cluster_roles: HashMap<String, Value>,
    pub cluster_role_bindings: Vec<Value>,
    /// `(namespace, name)` → Role.
    pub roles: HashMap<(String, String), Value>,
    pub role_bindings: Vec<Value>,
}

/// Whether a binding subject is the user (Kubernetes' `appliesToUser`); `namespace` is the
/// binding's namespace (empty for a ClusterRoleBinding).
fn applies_to(user: &str, groups: &[String], subject: &Value, namespace: &str) -> bool {
    match s(subject, "kind") {
        "User" => user == s(subject, "name"),
        "Group" => groups.iter().any(|g| g == s(subject, "name")),
        "ServiceAccount" => {
            let ns = match s(subject, "namespace") {
                "" => namespace,
                n => n,
            };
            !ns.is_empty() && user == service_account_user(ns, s(subject, "name"))
        }
        _ => false,
    }
}

fn describe_subject(subject: &Value, binding_ns: &str) -> String {
    let kind = s(subject, "kind");
    let name = s(subject, "name");
    if kind == "ServiceAccount" {
        let ns = match s(subject, "namespace") {
            "" => binding_ns,
            n => n,
        };
        return format!("{kind} \"{name}/{ns}\"");
    }
    format!("{kind} \"{name}\"")
}

impl Policy {
    /// A policy from RBAC objects of any kind (unit tests, [`bootstrap_objects`](super::bootstrap_objects)).
    pub fn from_objects(objects: impl IntoIterator<Item = Value>) -> Self {
        let mut p = Policy::default();
        for o in objects {
            match s(&o, "kind") {
                "ClusterRole" => {
                    p.cluster_roles.insert(meta(&o, "name").to_string(), o);
                }
                "ClusterRoleBinding" => p.cluster_role_bindings.push(o),
                "Role" => {
                    let key = (
                        meta(&o, "namespace").to_string(),
                        meta(&o, "name").to_string(),
                    );
                    p.roles.insert(key, o);
                }
                "RoleBinding" => p.role_bindings.push(o),
                _ => {}
            }
        }
        p
    }

    /// The rules a binding's `roleRef` points at; `namespace` is the binding's.
    pub fn role_ref_rules(
        &self,
        role_ref: &Value,
        namespace: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        let r = role_ref;
        let name = s(r, "name");
        match s(r, "kind") {
            "ClusterRole" => self
                .cluster_roles
                .get(name)
                .map(PolicyRule::of_role)
                .ok_or_else(|| {
                    format!("clusterrole.rbac.authorization.k8s.io \"{name}\" not found")
                }),
            "Role" if !namespace.is_empty() => self
                .roles
                .get(&(namespace.to_string(), name.to_string()))
                .map(PolicyRule::of_role)
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io \"{name}\" not found")),
            k => Err(format!("unsupported role reference kind: {k:?}")),
        }
    }

    /// Kubernetes' `VisitRulesFor`: every rule that applies to the user in `namespace` (cluster
    /// bindings first), with a description of where it came from; stops when `visit` says so.
    fn visit(
        &self,
        user: &str,
        groups: &[String],
        namespace: &str,
        errors: &mut Vec<String>,
        mut visit: impl FnMut(&str, &PolicyRule) -> bool,
    ) {
        for b in &self.cluster_role_bindings {
            let Some(subject) = b
                .get("subjects")
                .and_then(Value::as_array)
                .and_then(|ss| ss.iter().find(|x| applies_to(user, groups, x, "")))
            else {
                continue;
            };
            match self.role_ref_rules(&b["roleRef"], "") {
                Ok(rules) => {
                    let source = format!(
                        "ClusterRoleBinding \"{}\" of {} \"{}\" to {}",
                        meta(b, "name"),
                        b.pointer("/roleRef/kind")
                            .and_then(Value::as_str)
                            .unwrap_or(""),
                        b.pointer("/roleRef/name")
                            .and_then(Value::as_str)
                            .unwrap_or(""),
                        describe_subject(subject, "")
                    );
                    for r in &rules {
                        if !visit(&source, r) {
                            return;
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        if namespace.is_empty() {
            return;
        }
        for b in self
            .role_bindings
            .iter()
            .filter(|b| meta(b, "namespace") == namespace)
        {
            let Some(subject) = b
                .get("subjects")
                .and_then(Value::as_array)
                .and_then(|ss| ss.iter().find(|x| applies_to(user, groups, x, namespace)))
            else {
                continue;
            };
            match self.role_ref_rules(&b["roleRef"], namespace) {
                Ok(rules) => {
                    let source = format!(
                        "RoleBinding \"{}/{namespace}\" of {} \"{}\" to {}",
                        meta(b, "name"),
                        b.pointer("/roleRef/kind")
                            .and_then(Value::as_str)
                            .unwrap_or(""),
                        b.pointer("/roleRef/name")
                            .and_then(Value::as_str)
                            .unwrap_or(""),
                        describe_subject(subject, namespace)
                    );
                    for r in &rules {
                        if !visit(&source, r) {
                            return;
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
    }

    /// The decision for `a`: `system:masters` may do anything; otherwise some rule of a
    /// binding that applies must allow it.
    pub fn authorize(&self, a: &Attributes) -> Decision {
        if a.groups.iter().any(|g| g == SYSTEM_MASTERS) {
            return Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        let mut errors = Vec::new();
        let mut allowed_by = None;
        self.visit(
            &a.user,
            &a.groups,
            &a.namespace,
            &mut errors,
            |source, rule| {
                if rule_allows(a, rule) {
                    allowed_by = Some(format!("RBAC: allowed by {source}"));
                    return false;
                }
                true
            },
        );
        match allowed_by {
            Some(reason) => Decision {
                allowed: true,
                reason,
            },
            None => Decision {
                allowed: false,
                reason: match errors.len() {
                    0 => String::new(),
                    1 => format!("RBAC: {}", errors[0]),
                    _ => format!("RBAC: [{}]", errors.join(", ")),
                },
            },
        }
    }

    /// Every rule that applies to the user in `namespace` (and the errors met: missing roles).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut errors = Vec::new();
        let mut rules = Vec::new();
        self.visit(&user.name, &user.groups, namespace, &mut errors, |_, r| {
            rules.push(r.clone());
            true
        });
        (rules, errors)
    }

    /// Kubernetes' escalation check for a write of a Role/ClusterRole with `rules` (or a
    /// binding to a role with them) in `namespace`: the user must already hold every
    /// permission the rules grant. `Err` lists the missing ones in the server's words.
    pub fn confirm_no_escalation(
        &self,
        user: &UserInfo,
        namespace: &str,
        rules: &[PolicyRule],
    ) -> Result<(), String> {
        if user.in_group(SYSTEM_MASTERS) {
            return Ok(());
        }
        let (owner, errors) = self.rules_for(user, namespace);
        let missing: Vec<PolicyRule> = rules
            .iter()
            .flat_map(breakdown)
            .filter(|r| !owner.iter().any(|o| covers(o, r)))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        // Kubernetes compacts the missing rules: those differing only in verbs are one.
        let mut compact: Vec<PolicyRule> = Vec::new();
        for r in missing {
            match compact.iter_mut().find(|c| {
                c.api_groups == r.api_groups
                    && c.resources == r.resources
                    && c.resource_names == r.resource_names
                    && c.non_resource_urls == r.non_resource_urls
            }) {
                Some(c) => c.verbs.extend(r.verbs),
                None => compact.push(r),
            }
        }
        let mut msg = format!(
            "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            user.name,
            go_quoted(&user.groups),
            compact
                .iter()
                .map(describe_rule)
                .collect::<Vec<_>>()
                .join("\n")
        );
        if !errors.is_empty() {
            msg.push_str(&format!("; resolution errors: [{}]", errors.join(", ")));
        }
        Err(msg)
    }
}

/// One rule per verb × group × resource × name (Kubernetes' `BreakdownRule`).
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for g in &rule.api_groups {
        for r in &rule.resources {
            for v in &rule.verbs {
                if rule.resource_names.is_empty() {
                    out.push(PolicyRule {
                        verbs: vec![v.clone()],
                        api_groups: vec![g.clone()],
                        resources: vec![r.clone()],
                        ..Default::default()
                    });
                }
                for n in &rule.resource_names {
                    out.push(PolicyRule {
                        verbs: vec![v.clone()],
                        api_groups: vec![g.clone()],
                        resources: vec![r.clone()],
                        resource_names: vec![n.clone()],
                        ..Default::default()
                    });
                }
            }
        }
    }
    for u in &rule.non_resource_urls {
        for v in &rule.verbs {
            out.push(PolicyRule {
                verbs: vec![v.clone()],
                non_resource_urls: vec![u.clone()],
                ..Default::default()
            });
        }
    }
    out
}

/// Whether `owner` grants everything the broken-down rule `r` does (Kubernetes' `ruleCovers`).
fn covers(owner: &PolicyRule, r: &PolicyRule) -> bool {
    let all_or = |list: &[String], want: &[String]| {
        list.iter().any(|x| x == "*") || want.iter().all(|w| list.contains(w))
    };
    let resources_ok = r.resources.iter().all(|want| {
        owner.resources.iter().any(|o| {
            o == "*"
                || o == want
                || (o.starts_with("*/")
                    && want.split_once('/').is_some_and(|(_, sub)| o[2..] == *sub))
        })
    });
    let urls_ok = r.non_resource_urls.iter().all(|want| {
        owner.non_resource_urls.iter().any(|o| {
            o == "*" || o == want || (o.ends_with('*') && want.starts_with(o.trim_end_matches('*')))
        })
    });
    let names_ok = owner.resource_names.is_empty()
        || (!r.resource_names.is_empty()
            && r.resource_names
                .iter()
                .all(|n| owner.resource_names.contains(n)));
    all_or(&owner.verbs, &r.verbs)
        && all_or(&owner.api_groups, &r.api_groups)
        && resources_ok
        && urls_ok
        && names_ok
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_quoted(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|x| format!("{x:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// Kubernetes' `CompactString` of a rule.
fn describe_rule(r: &PolicyRule) -> String {
    let mut parts = Vec::new();
    if !r.api_groups.is_empty() {
        parts.push(format!("APIGroups:{}", go_quoted(&r.api_groups)));
    }
    if !r.resources.is_empty() {
        parts.push(format!("Resources:{}", go_quoted(&r.resources)));
    }
    if !r.resource_names.is_empty() {
        parts.push(format!("ResourceNames:{}", go_quoted(&r.resource_names)));
    }
    if !r.non_resource_urls.is_empty() {
        parts.push(format!(
            "NonResourceURLs:{}",
            go_quoted(&r.non_resource_urls)
        ));
    }
    parts.push(format!("Verbs:{}", go_quoted(&r.verbs)));
    format!("{{{}}}", parts.join(", "))
}
