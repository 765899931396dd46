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
//!
//! One file per topic: `users` (who asks), `attributes` (what a URL asks), `rules` (one rule
//! against a request, aggregation), `policy` (the walk over bindings, escalation), `forbidden`
//! (the 403 in the server's words) and `default_roles` (the bootstrap policy, a table).

mod attributes;
mod default_roles;
mod forbidden;
mod policy;
mod rules;
mod users;

pub use attributes::Attributes;
pub use default_roles::bootstrap_objects;
pub use forbidden::{forbidden, forbidden_status};
pub use policy::{Decision, Policy};
pub(crate) use rules::strings;
pub use rules::{PolicyRule, aggregated_rules, rule_allows};
pub use users::{
    ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS, SYSTEM_MASTERS, UserInfo,
    service_account_user, split_service_account_user,
};

#[cfg(test)]
mod tests;
