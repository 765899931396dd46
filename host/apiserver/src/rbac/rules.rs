//! One rule of a Role or ClusterRole: parsing, matching a request ([`rule_allows`]) and the
//! rules the clusterrole-aggregation controller writes ([`aggregated_rules`]).
//!
//! Owns: [`PolicyRule`]. Must not touch: bindings (that is `policy`) or the store.

use super::attributes::Attributes;
use serde_json::Value;

/// `metadata.<key>` of an object as a string (`""` when absent).
pub(super) fn meta<'a>(o: &'a Value, key: &str) -> &'a str {
    o.pointer(&format!("/metadata/{key}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `<key>` of an object as a string (`""` when absent).
pub(super) fn s<'a>(o: &'a Value, key: &str) -> &'a str {
    o.get(key).and_then(Value::as_str).unwrap_or("")
}

/// One rule of a Role or ClusterRole.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

/// The strings of the array `key` of `v` (none when it is missing; non-strings skipped).
pub(crate) fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl PolicyRule {
    pub fn from_json(v: &Value) -> Self {
        PolicyRule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    /// The rules of a Role or ClusterRole object.
    pub fn of_role(role: &Value) -> Vec<PolicyRule> {
        role.get("rules")
            .and_then(Value::as_array)
            .map(|r| r.iter().map(PolicyRule::from_json).collect())
            .unwrap_or_default()
    }
}

/// The rules Kubernetes' clusterrole-aggregation controller writes into a ClusterRole with an
/// `aggregationRule`: for each of its `clusterRoleSelectors` in order, the ClusterRoles the
/// selector matches (by name, never the role itself), each of their rules once (rules equal in
/// content count once). `None` when `role` has no `aggregationRule` or its rules are already
/// these (nothing to write; a missing `rules` equals `[]`, as Go's semantic equality has it).
pub fn aggregated_rules<'a>(
    role: &Value,
    cluster_roles: impl IntoIterator<Item = &'a Value>,
) -> Option<Vec<Value>> {
    let selectors = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)?;
    let own = meta(role, "name");
    let mut others: Vec<&Value> = cluster_roles
        .into_iter()
        .filter(|r| meta(r, "name") != own)
        .collect();
    others.sort_by(|a, b| meta(a, "name").cmp(meta(b, "name")));
    let mut rules: Vec<Value> = Vec::new();
    let mut seen: Vec<PolicyRule> = Vec::new();
    for sel in selectors {
        for other in &others {
            if !crate::builtin::selector_matches(sel, other.pointer("/metadata/labels")) {
                continue;
            }
            for rule in other
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let p = PolicyRule::from_json(rule);
                if !seen.contains(&p) {
                    seen.push(p);
                    rules.push(rule.clone());
                }
            }
        }
    }
    let current = PolicyRule::of_role(role);
    (current != seen).then_some(rules)
}

fn has_or_all(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

/// Kubernetes' `RuleAllows`.
pub fn rule_allows(a: &Attributes, rule: &PolicyRule) -> bool {
    if !has_or_all(&rule.verbs, &a.verb) {
        return false;
    }
    if !a.resource_request {
        return rule.non_resource_urls.iter().any(|u| {
            u == "*"
                || *u == a.path
                || (u.ends_with('*') && a.path.starts_with(u.trim_end_matches('*')))
        });
    }
    if !has_or_all(&rule.api_groups, &a.api_group) {
        return false;
    }
    let combined = a.combined_resource();
    let resource_ok = rule.resources.iter().any(|r| {
        r == "*"
            || *r == combined
            || (!a.subresource.is_empty()
                && r.len() == a.subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(a.subresource.as_str()))
    });
    resource_ok && (rule.resource_names.is_empty() || rule.resource_names.contains(&a.name))
}
