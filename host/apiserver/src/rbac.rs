//! RBAC authorization as Kubernetes' RBAC authorizer evaluates it (`rbac.authorization.k8s.io/v1`).
//!
//! Owns: the request attributes a URL stands for ([`Attributes::from_request`], Kubernetes'
//! `RequestInfoFactory`), rule matching ([`rule_allows`]: verbs, apiGroups, resources incl. `*`,
//! `resource/subresource` and `*/subresource`, resourceNames, nonResourceURLs with a trailing
//! `*`), the walk over ClusterRoleBindings and the request namespace's RoleBindings
//! ([`Policy::authorize`], [`Policy::rules_for`]), the `Forbidden` Status in the server's words
//! ([`forbidden`]), privilege-escalation prevention for Role and binding writes
//! ([`Policy::confirm_no_escalation`]), the rules of aggregated ClusterRoles
//! ([`aggregated_rules`], what Kubernetes' clusterrole-aggregation controller writes) and the
//! bootstrap policy a fresh cluster has ([`bootstrap_objects`]).
//!
//! Must not touch: the store (a [`Policy`] is a snapshot of the RBAC objects, taken by the
//! caller), HTTP, or authentication (who the user is comes from `auth`).

use crate::status::ApiError;
use serde_json::{Value, json};
use std::collections::HashMap;

/// Group every member of is allowed everything (Kubernetes' privileged group).
pub const SYSTEM_MASTERS: &str = "system:masters";
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
pub const ANONYMOUS: &str = "system:anonymous";

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    /// The cluster administrator (`system:admin`, `system:masters`).
    pub fn admin() -> Self {
        Self::new("system:admin", &[SYSTEM_MASTERS, ALL_AUTHENTICATED])
    }

    /// A request without credentials.
    pub fn anonymous() -> Self {
        Self::new(ANONYMOUS, &[ALL_UNAUTHENTICATED])
    }

    /// `system:serviceaccount:{ns}:{name}` with its groups.
    pub fn service_account(ns: &str, name: &str) -> Self {
        UserInfo {
            name: service_account_user(ns, name),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                ALL_AUTHENTICATED.into(),
            ],
        }
    }

    pub fn in_group(&self, g: &str) -> bool {
        self.groups.iter().any(|x| x == g)
    }
}

pub fn service_account_user(ns: &str, name: &str) -> String {
    format!("system:serviceaccount:{ns}:{name}")
}

/// `(namespace, name)` of a `system:serviceaccount:{ns}:{name}` user name.
pub fn split_service_account_user(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// What a request asks to do, as Kubernetes' authorizers see it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    pub user: String,
    pub groups: Vec<String>,
    pub verb: String,
    pub resource_request: bool,
    /// The URL path (non-resource requests).
    pub path: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    pub namespace: String,
}

fn valid_path_segment(s: &str) -> bool {
    !matches!(s, "." | "..") && !s.contains('/') && !s.contains('%')
}

impl Attributes {
    /// The attributes of an HTTP request (Kubernetes' `RequestInfoFactory`): `watch` is the
    /// `watch` query flag, `field_selector` the `fieldSelector` (a list with
    /// `metadata.name=x` is about the object `x`).
    pub fn from_request(
        user: &UserInfo,
        method: &str,
        path: &str,
        watch: bool,
        field_selector: Option<&str>,
    ) -> Self {
        let mut a = Attributes {
            user: user.name.clone(),
            groups: user.groups.clone(),
            verb: method.to_ascii_lowercase(),
            path: path.to_string(),
            ..Default::default()
        };
        let mut parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
            return a;
        }
        let prefix = parts.remove(0);
        if prefix == "apis" {
            if parts.len() < 3 {
                return a;
            }
            a.api_group = parts.remove(0).to_string();
        }
        a.resource_request = true;
        a.api_version = parts.remove(0).to_string();
        let mut special_verb = false;
        if matches!(parts[0], "watch" | "proxy") {
            if parts.len() < 2 {
                a.resource_request = false;
                a.api_group.clear();
                a.api_version.clear();
                return a;
            }
            a.verb = parts.remove(0).to_string();
            special_verb = true;
        } else {
            a.verb = match method {
                "POST" => "create",
                "GET" | "HEAD" => "get",
                "PUT" => "update",
                "PATCH" => "patch",
                "DELETE" => "delete",
                _ => "",
            }
            .to_string();
        }
        if parts[0] == "namespaces" && parts.len() > 1 {
            a.namespace = parts[1].to_string();
            if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
                parts.drain(..2);
            }
        }
        if parts.len() >= 3 && a.verb != "proxy" {
            a.subresource = parts[2].to_string();
        }
        if parts.len() >= 2 {
            a.name = parts[1].to_string();
        }
        if !parts.is_empty() {
            a.resource = parts[0].to_string();
        }
        if a.name.is_empty() && a.verb == "get" && !special_verb {
            a.verb = if watch { "watch" } else { "list" }.to_string();
        }
        if a.name.is_empty()
            && matches!(a.verb.as_str(), "list" | "watch")
            && let Some(fs) = field_selector
            && let Some(name) = fs.split(',').find_map(|t| {
                let t = t.trim();
                t.strip_prefix("metadata.name==")
                    .or_else(|| t.strip_prefix("metadata.name="))
            })
            && valid_path_segment(name)
        {
            a.name = name.to_string();
        }
        if a.name.is_empty() && a.verb == "delete" {
            a.verb = "deletecollection".to_string();
        }
        a
    }

    /// Resource attributes (an access review's `resourceAttributes`).
    #[allow(clippy::too_many_arguments)]
    pub fn resource(
        user: &UserInfo,
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        Attributes {
            user: user.name.clone(),
            groups: user.groups.clone(),
            verb: verb.to_string(),
            resource_request: true,
            api_group: group.to_string(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            ..Default::default()
        }
    }

    /// Non-resource attributes (a path and an HTTP verb in lower case).
    pub fn non_resource(user: &UserInfo, verb: &str, path: &str) -> Self {
        Attributes {
            user: user.name.clone(),
            groups: user.groups.clone(),
            verb: verb.to_string(),
            path: path.to_string(),
            ..Default::default()
        }
    }

    fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
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

fn strings(v: &Value, key: &str) -> Vec<String> {
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

fn meta<'a>(o: &'a Value, key: &str) -> &'a str {
    o.pointer(&format!("/metadata/{key}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn s<'a>(o: &'a Value, key: &str) -> &'a str {
    o.get(key).and_then(Value::as_str).unwrap_or("")
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
    /// A policy from RBAC objects of any kind (unit tests, [`bootstrap_objects`]).
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

/// The 403 a denied request gets, in the API server's words.
pub fn forbidden(a: &Attributes, reason: &str) -> ApiError {
    let msg = if a.resource_request {
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {:?}", a.namespace)
        };
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
            a.user,
            a.verb,
            a.combined_resource(),
            a.api_group
        )
    } else {
        format!("User {:?} cannot {} path {:?}", a.user, a.verb, a.path)
    };
    let err = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    forbidden_status(&a.api_group, &a.resource, &a.name, &err)
}

/// Kubernetes' `NewForbidden(GroupResource{group, resource}, name, err)`.
pub fn forbidden_status(group: &str, resource: &str, name: &str, err: &str) -> ApiError {
    let qualified = crate::status::qualified(group, resource);
    let message = if resource.is_empty() && group.is_empty() {
        format!("forbidden: {err}")
    } else if name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {name:?} is forbidden: {err}")
    };
    let mut d = json!({});
    for (k, v) in [("name", name), ("group", group), ("kind", resource)] {
        if !v.is_empty() {
            d[k] = json!(v);
        }
    }
    ApiError::new(403, "Forbidden", message).with_details(d)
}

/// The roles and bindings a fresh cluster with RBAC has (the part of Kubernetes' bootstrap
/// policy that concerns API clients): `cluster-admin` for `system:masters`,
/// `system:discovery`, `system:basic-user` and `system:public-info-viewer`, and the
/// user-facing aggregated roles `admin` ⊇ `edit` ⊇ `view` with the `system:aggregate-to-*`
/// roles that feed them (see [`aggregated_roles`]).
pub fn bootstrap_objects() -> Vec<Value> {
    let md = |name: &str| {
        json!({"name": name,
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}})
    };
    let role = |name: &str, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": md(name), "rules": rules})
    };
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": md(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects})
    };
    let info = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    let mut discovery: Vec<&str> = vec![
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
    ];
    discovery.extend(info);
    vec![
        role(
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        binding("cluster-admin", &[SYSTEM_MASTERS]),
        role(
            "system:discovery",
            json!([{"nonResourceURLs": discovery, "verbs": ["get"]}]),
        ),
        binding("system:discovery", &[ALL_AUTHENTICATED]),
        role(
            "system:basic-user",
            json!([{"apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
                    "verbs": ["create"]}]),
        ),
        binding("system:basic-user", &[ALL_AUTHENTICATED]),
        role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": info, "verbs": ["get"]}]),
        ),
        binding(
            "system:public-info-viewer",
            &[ALL_AUTHENTICATED, ALL_UNAUTHENTICATED],
        ),
    ]
    .into_iter()
    .chain(aggregated_roles())
    .collect()
}

/// Kubernetes' user-facing roles: `admin`, `edit` and `view` carry no rules of their own but an
/// `aggregationRule` selecting `rbac.authorization.k8s.io/aggregate-to-<role>: "true"`; `edit`
/// is itself aggregated into `admin` and `view` into `edit`; the rules come from
/// `system:aggregate-to-admin|edit|view` (upstream's bootstrap rules for the API groups this
/// server serves). Anyone may add a ClusterRole with such a label to extend them, as CRD
/// authors do.
fn aggregated_roles() -> Vec<Value> {
    const AGG: &str = "rbac.authorization.k8s.io/aggregate-to-";
    let read = json!(["get", "list", "watch"]);
    let write = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let read_write = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    let rule = |groups: &[&str], resources: &[&str], verbs: &Value| json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
    let role = |name: &str, labels: Value, aggregate: Option<&str>, rules: Vec<Value>| {
        let mut labels = labels;
        labels["kubernetes.io/bootstrapping"] = json!("rbac-defaults");
        let mut r = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels,
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": rules});
        if let Some(to) = aggregate {
            r["aggregationRule"] =
                json!({"clusterRoleSelectors": [{"matchLabels": {format!("{AGG}{to}"): "true"}}]});
        }
        r
    };
    let agg = |to: &[&str]| {
        let mut m = serde_json::Map::new();
        for t in to {
            m.insert(format!("{AGG}{t}"), json!("true"));
        }
        Value::Object(m)
    };
    let view_rules = vec![
        rule(
            &[""],
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
            &read,
        ),
        rule(
            &[""],
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
            &read,
        ),
        rule(&[""], &["namespaces"], &read),
        rule(&["discovery.k8s.io"], &["endpointslices"], &read),
        rule(
            &["apps"],
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
            ],
            &read,
        ),
        rule(
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
            &read,
        ),
        rule(
            &["batch"],
            &["jobs", "jobs/status", "cronjobs", "cronjobs/status"],
            &read,
        ),
        rule(
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
            &read,
        ),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
            &read,
        ),
    ];
    let edit_rules = vec![
        rule(&[""], &["serviceaccounts"], &json!(["impersonate"])),
        rule(
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
            &write,
        ),
        rule(&[""], &["pods/eviction"], &json!(["create"])),
        rule(
            &[""],
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
            &write,
        ),
        rule(&[""], &["serviceaccounts/token"], &json!(["create"])),
        rule(
            &["apps"],
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
            ],
            &write,
        ),
        rule(&["autoscaling"], &["horizontalpodautoscalers"], &write),
        rule(&["batch"], &["jobs", "cronjobs"], &write),
        rule(&["policy"], &["poddisruptionbudgets"], &write),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
            &write,
        ),
        rule(&["coordination.k8s.io"], &["leases"], &read_write),
        rule(
            &[""],
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
            &read,
        ),
    ];
    let admin_rules = vec![
        rule(
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
            &json!(["create"]),
        ),
        rule(
            &["rbac.authorization.k8s.io"],
            &["rolebindings", "roles"],
            &read_write,
        ),
    ];
    vec![
        role("admin", json!({}), Some("admin"), vec![]),
        role("edit", agg(&["admin"]), Some("edit"), vec![]),
        role("view", agg(&["edit"]), Some("view"), vec![]),
        role(
            "system:aggregate-to-admin",
            agg(&["admin"]),
            None,
            admin_rules,
        ),
        role("system:aggregate-to-edit", agg(&["edit"]), None, edit_rules),
        role("system:aggregate-to-view", agg(&["view"]), None, view_rules),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa() -> UserInfo {
        UserInfo::service_account("ns", "sa")
    }

    fn policy() -> Policy {
        let mut objs = bootstrap_objects();
        objs.extend([
            json!({"kind": "Role", "metadata": {"name": "cm-reader", "namespace": "ns"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "sa-reads", "namespace": "ns"},
                "roleRef": {"kind": "Role", "name": "cm-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
            json!({"kind": "ClusterRole", "metadata": {"name": "items"},
                "rules": [
                    {"apiGroups": ["landscaper.gardener.cloud"], "resources": ["deployitems"], "verbs": ["get", "list", "watch", "patch"]},
                    {"apiGroups": ["landscaper.gardener.cloud"], "resources": ["deployitems/status"], "verbs": ["update"]},
                    {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["one"], "verbs": ["get"]},
                    {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["update"]},
                    {"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]}]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "sa-items"},
                "roleRef": {"kind": "ClusterRole", "name": "items"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "team-edit", "namespace": "other"},
                "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "Group", "name": "team"}, {"kind": "User", "name": "alice"}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "dangling", "namespace": "gone"},
                "roleRef": {"kind": "Role", "name": "missing"},
                "subjects": [{"kind": "User", "name": "bob"}]}),
        ]);
        Policy::from_objects(objs)
    }

    fn req(user: &UserInfo, method: &str, path: &str) -> Attributes {
        let (p, q) = path.split_once('?').unwrap_or((path, ""));
        let watch = q.split('&').any(|kv| kv == "watch=true");
        let fs = q
            .split('&')
            .find_map(|kv| kv.strip_prefix("fieldSelector="));
        Attributes::from_request(user, method, p, watch, fs)
    }

    /// method, url, verb, group, resource, subresource, namespace, name
    type UrlCase = (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    );

    #[test]
    fn attributes_are_derived_from_the_url_as_kubernetes_does() {
        let u = sa();
        let cases: &[UrlCase] = &[
            // method, url, verb, group, resource, subresource, namespace, name
            (
                "GET",
                "/api/v1/namespaces/d/configmaps",
                "list",
                "",
                "configmaps",
                "",
                "d",
                "",
            ),
            (
                "GET",
                "/api/v1/namespaces/d/configmaps?watch=true",
                "watch",
                "",
                "configmaps",
                "",
                "d",
                "",
            ),
            (
                "GET",
                "/api/v1/namespaces/d/configmaps?fieldSelector=metadata.name%3Dx",
                "list",
                "",
                "configmaps",
                "",
                "d",
                "",
            ),
            (
                "GET",
                "/api/v1/namespaces/d/configmaps?fieldSelector=metadata.name=x",
                "list",
                "",
                "configmaps",
                "",
                "d",
                "x",
            ),
            (
                "GET",
                "/api/v1/namespaces/d/configmaps/x",
                "get",
                "",
                "configmaps",
                "",
                "d",
                "x",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/d/configmaps",
                "deletecollection",
                "",
                "configmaps",
                "",
                "d",
                "",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/d/configmaps/x",
                "delete",
                "",
                "configmaps",
                "",
                "d",
                "x",
            ),
            (
                "POST",
                "/api/v1/namespaces/d/serviceaccounts/sa/token",
                "create",
                "",
                "serviceaccounts",
                "token",
                "d",
                "sa",
            ),
            (
                "PUT",
                "/apis/landscaper.gardener.cloud/v1alpha1/namespaces/d/deployitems/i/status",
                "update",
                "landscaper.gardener.cloud",
                "deployitems",
                "status",
                "d",
                "i",
            ),
            ("GET", "/api/v1/pods", "list", "", "pods", "", "", ""),
            (
                "GET",
                "/api/v1/namespaces/d",
                "get",
                "",
                "namespaces",
                "",
                "d",
                "d",
            ),
            (
                "PUT",
                "/api/v1/namespaces/d/finalize",
                "update",
                "",
                "namespaces",
                "finalize",
                "d",
                "d",
            ),
            (
                "GET",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/x",
                "get",
                "rbac.authorization.k8s.io",
                "clusterroles",
                "",
                "",
                "x",
            ),
            (
                "GET",
                "/api/v1/watch/namespaces/d/configmaps",
                "watch",
                "",
                "configmaps",
                "",
                "d",
                "",
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/d/deployments/x/scale",
                "patch",
                "apps",
                "deployments",
                "scale",
                "d",
                "x",
            ),
        ];
        for (method, url, verb, group, resource, sub, ns, name) in cases {
            let a = req(&u, method, url);
            assert!(a.resource_request, "{url}");
            assert_eq!(
                (
                    a.verb.as_str(),
                    a.api_group.as_str(),
                    a.resource.as_str(),
                    a.subresource.as_str(),
                    a.namespace.as_str(),
                    a.name.as_str()
                ),
                (*verb, *group, *resource, *sub, *ns, *name),
                "{method} {url}"
            );
        }
        for (method, url, verb) in [
            ("GET", "/api", "get"),
            ("GET", "/apis/apps", "get"),
            ("GET", "/api/v1", "get"),
            ("GET", "/healthz", "get"),
            ("POST", "/openapi/v3", "post"),
            ("GET", "/apis/apps/v1", "get"),
        ] {
            let a = req(&u, method, url);
            assert!(!a.resource_request, "{url}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), (verb, url));
        }
    }

    #[test]
    fn the_evaluator_answers_as_rbac_does() {
        let p = policy();
        let sa = sa();
        let alice = UserInfo::new("alice", &[ALL_AUTHENTICATED]);
        let teammate = UserInfo::new("carol", &["team", ALL_AUTHENTICATED]);
        let anon = UserInfo::anonymous();
        let admin = UserInfo::admin();
        let r =
            |u: &UserInfo, verb: &str, group: &str, res: &str, sub: &str, ns: &str, name: &str| {
                Attributes::resource(u, verb, group, res, sub, ns, name)
            };
        let n = |u: &UserInfo, verb: &str, path: &str| Attributes::non_resource(u, verb, path);
        let ls = "landscaper.gardener.cloud";
        let cases: Vec<(Attributes, bool)> = vec![
            // RoleBinding to a Role: only in its namespace, only its verbs.
            (r(&sa, "list", "", "configmaps", "", "ns", ""), true),
            (r(&sa, "watch", "", "configmaps", "", "ns", ""), true),
            (r(&sa, "get", "", "configmaps", "", "ns", "x"), true),
            (r(&sa, "create", "", "configmaps", "", "ns", ""), false),
            (r(&sa, "list", "", "configmaps", "", "default", ""), false),
            (r(&sa, "list", "", "configmaps", "", "", ""), false),
            // ClusterRoleBinding: everywhere; subresources are separate resources.
            (r(&sa, "patch", ls, "deployitems", "", "any", "i"), true),
            (r(&sa, "list", ls, "deployitems", "", "", ""), true),
            (r(&sa, "update", ls, "deployitems", "", "any", "i"), false),
            (
                r(&sa, "update", ls, "deployitems", "status", "any", "i"),
                true,
            ),
            (
                r(&sa, "patch", ls, "deployitems", "status", "any", "i"),
                false,
            ),
            (
                r(&sa, "get", "other.group", "deployitems", "", "any", "i"),
                false,
            ),
            // resourceNames: only that object; never a list.
            (r(&sa, "get", "", "secrets", "", "ns", "one"), true),
            (r(&sa, "get", "", "secrets", "", "ns", "two"), false),
            (r(&sa, "list", "", "secrets", "", "ns", ""), false),
            // */subresource
            (
                r(&sa, "update", "apps", "deployments", "scale", "ns", "d"),
                true,
            ),
            (
                r(&sa, "update", "apps", "deployments", "", "ns", "d"),
                false,
            ),
            (
                r(&sa, "update", "apps", "deployments", "status", "ns", "d"),
                false,
            ),
            // non-resource URLs, exact and prefix; the bootstrap discovery roles.
            (n(&sa, "get", "/metrics"), true),
            (n(&sa, "get", "/logs/kube.log"), true),
            (n(&sa, "post", "/metrics"), false),
            (n(&sa, "get", "/api/v1"), true),
            (n(&sa, "get", "/openapi/v3/apis/apps/v1"), true),
            (n(&sa, "get", "/version"), true),
            (
                r(
                    &sa,
                    "create",
                    "authorization.k8s.io",
                    "selfsubjectaccessreviews",
                    "",
                    "",
                    "",
                ),
                true,
            ),
            (
                r(
                    &sa,
                    "create",
                    "authorization.k8s.io",
                    "subjectaccessreviews",
                    "",
                    "",
                    "",
                ),
                false,
            ),
            (n(&anon, "get", "/healthz"), true),
            (n(&anon, "get", "/api"), false),
            (r(&anon, "list", "", "configmaps", "", "ns", ""), false),
            // A RoleBinding to a ClusterRole grants it in the binding's namespace only; groups.
            (
                r(&alice, "delete", "apps", "deployments", "", "other", "x"),
                true,
            ),
            (
                r(&alice, "delete", "apps", "deployments", "", "ns", "x"),
                false,
            ),
            (r(&alice, "list", "", "namespaces", "", "", ""), false),
            (r(&teammate, "create", "", "secrets", "", "other", ""), true),
            (
                r(&teammate, "create", "", "secrets", "", "default", ""),
                false,
            ),
            // system:masters, and `*` verbs.
            (
                r(
                    &admin,
                    "escalate",
                    "rbac.authorization.k8s.io",
                    "clusterroles",
                    "",
                    "",
                    "",
                ),
                true,
            ),
            (n(&admin, "delete", "/anything"), true),
            (r(&sa, "*", "", "configmaps", "", "ns", ""), false),
        ];
        for (a, want) in cases {
            assert_eq!(p.authorize(&a).allowed, want, "{a:?}");
        }
    }

    #[test]
    fn reasons_name_the_binding_or_the_missing_role() {
        let p = policy();
        let d = p.authorize(&Attributes::resource(
            &sa(),
            "list",
            "",
            "configmaps",
            "",
            "ns",
            "",
        ));
        assert_eq!(
            d.reason,
            r#"RBAC: allowed by RoleBinding "sa-reads/ns" of Role "cm-reader" to ServiceAccount "sa/ns""#
        );
        let bob = UserInfo::new("bob", &[ALL_AUTHENTICATED]);
        let d = p.authorize(&Attributes::resource(
            &bob, "get", "", "pods", "", "gone", "p",
        ));
        assert!(!d.allowed);
        assert_eq!(
            d.reason,
            r#"RBAC: role.rbac.authorization.k8s.io "missing" not found"#
        );
    }

    #[test]
    fn forbidden_messages_are_the_api_servers() {
        let u = sa();
        let e = forbidden(
            &Attributes::resource(&u, "list", "", "configmaps", "", "default", ""),
            "",
        );
        assert_eq!(e.code, 403);
        assert_eq!(e.reason, "Forbidden");
        assert_eq!(
            e.message,
            r#"configmaps is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "configmaps" in API group "" in the namespace "default""#
        );
        assert_eq!(e.details, Some(json!({"kind": "configmaps"})));
        let e = forbidden(
            &Attributes::resource(
                &u,
                "get",
                "rbac.authorization.k8s.io",
                "clusterroles",
                "",
                "",
                "x",
            ),
            "",
        );
        assert_eq!(
            e.message,
            r#"clusterroles.rbac.authorization.k8s.io "x" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope"#
        );
        assert_eq!(
            e.details,
            Some(
                json!({"name": "x", "group": "rbac.authorization.k8s.io", "kind": "clusterroles"})
            )
        );
        let e = forbidden(
            &Attributes::resource(&u, "create", "", "serviceaccounts", "token", "ns", "sa"),
            "",
        );
        assert_eq!(
            e.message,
            r#"serviceaccounts "sa" is forbidden: User "system:serviceaccount:ns:sa" cannot create resource "serviceaccounts/token" in API group "" in the namespace "ns""#
        );
        let e = forbidden(&Attributes::non_resource(&u, "get", "/metrics"), "");
        assert_eq!(
            e.message,
            r#"forbidden: User "system:serviceaccount:ns:sa" cannot get path "/metrics""#
        );
    }

    #[test]
    fn escalation_needs_the_permissions_granted() {
        let p = policy();
        let held = vec![PolicyRule::from_json(
            &json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}),
        )];
        assert!(p.confirm_no_escalation(&sa(), "ns", &held).is_ok());
        let more = vec![PolicyRule::from_json(
            &json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "delete"]}),
        )];
        let e = p.confirm_no_escalation(&sa(), "ns", &more).unwrap_err();
        assert!(
            e.contains(r#"{APIGroups:[""], Resources:["configmaps"], Verbs:["delete"]}"#),
            "{e}"
        );
        let named = vec![PolicyRule::from_json(
            &json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["one"], "verbs": ["get"]}),
        )];
        assert!(p.confirm_no_escalation(&sa(), "ns", &named).is_ok());
        assert!(
            p.confirm_no_escalation(&UserInfo::admin(), "ns", &more)
                .is_ok()
        );
    }

    #[test]
    fn aggregated_cluster_roles_get_the_rules_of_the_roles_their_selectors_match() {
        let role = |name: &str, labels: Value, rules: Value| {
            json!({"kind": "ClusterRole", "metadata": {"name": name, "labels": labels},
                "rules": rules})
        };
        let pods = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let cms = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]});
        let mut monitoring = role("monitoring", json!({}), json!([]));
        monitoring["aggregationRule"] = json!({"clusterRoleSelectors": [
            {"matchLabels": {"agg": "monitoring"}},
            {"matchExpressions": [{"key": "extra", "operator": "Exists"}]}]});
        let b = role("b", json!({"agg": "monitoring"}), json!([pods.clone()]));
        // Matched by both selectors and carrying a rule `b` has: each rule once, by name.
        let a = role(
            "a",
            json!({"agg": "monitoring", "extra": "1"}),
            json!([cms.clone(), pods.clone()]),
        );
        let other = role("other", json!({"agg": "else"}), json!([{"verbs": ["*"]}]));
        let all = [&monitoring, &b, &a, &other];
        let rules = aggregated_rules(&monitoring, all).unwrap();
        assert_eq!(
            rules,
            [cms.clone(), pods.clone()],
            "a's rules, then b's new ones"
        );
        // Written once, nothing more to do; a role without an aggregationRule is left alone.
        let mut done = monitoring.clone();
        done["rules"] = json!(rules);
        assert_eq!(aggregated_rules(&done, [&done, &b, &a, &other]), None);
        assert_eq!(aggregated_rules(&b, all), None);
        // A matching role that goes takes its rules along; none left is `[]`.
        assert_eq!(aggregated_rules(&done, [&done, &b]).unwrap(), [pods]);
        assert_eq!(
            aggregated_rules(&done, [&done]).unwrap(),
            Vec::<Value>::new()
        );
        assert_eq!(
            aggregated_rules(&monitoring, [&monitoring]),
            None,
            "[] == no rules"
        );
    }

    #[test]
    fn the_bootstrap_aggregates_admin_edit_view() {
        let objs = bootstrap_objects();
        let named = |n: &str| {
            objs.iter()
                .find(|o| o["metadata"]["name"] == n && o["kind"] == "ClusterRole")
                .unwrap()
        };
        assert_eq!(
            named("edit")["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"],
            "true"
        );
        assert_eq!(
            named("view")["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
            "true"
        );
        let roles: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "ClusterRole").collect();
        let view = aggregated_rules(named("view"), roles.iter().copied()).unwrap();
        assert!(!view.is_empty());
        assert!(
            view.iter()
                .all(|r| r["verbs"] == json!(["get", "list", "watch"])),
            "view only reads"
        );
    }

    #[test]
    fn service_account_user_names_split() {
        assert_eq!(
            split_service_account_user("system:serviceaccount:a:b"),
            Some(("a", "b"))
        );
        assert_eq!(split_service_account_user("system:serviceaccount:a"), None);
        assert_eq!(split_service_account_user("alice"), None);
    }
}
