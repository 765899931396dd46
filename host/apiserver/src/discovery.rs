//! Discovery documents: `/version`, legacy discovery (`/api`, `/apis`,
//! `/api/v1`, `/apis/<g>[/<v>]`) and aggregated discovery
//! (`apidiscovery.k8s.io/v2[beta1]` `APIGroupDiscoveryList`), built from the
//! registry snapshot so CRDs appear as soon as they are created.

use crate::registry::{Registry, ResourceType};
use serde_json::{Value, json};

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-embedded",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({ "name": name, "versions": vs, "preferredVersion": vs[0] })
}

/// The registry's groups plus those served only by `reviews` (authentication, authorization).
fn all_groups(reg: &Registry) -> Vec<(String, Vec<String>)> {
    let mut groups = reg.groups();
    for (g, ..) in crate::reviews::RESOURCES {
        if !groups.iter().any(|(x, _)| x == g) {
            groups.push((g.to_string(), vec!["v1".to_string()]));
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    groups
}

/// The discovery entries of the review resources of `group` (none for other groups).
fn review_resources(group: &str) -> Vec<Value> {
    crate::reviews::RESOURCES
        .iter()
        .filter(|(g, ..)| *g == group)
        .map(|(_, plural, kind, namespaced)| {
            json!({"name": plural, "singularName": kind.to_lowercase(), "namespaced": namespaced,
                "kind": kind, "verbs": ["create"]})
        })
        .collect()
}

/// The core `serviceaccounts/token` subresource entry.
fn token_subresource() -> Value {
    json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true,
        "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
        "verbs": ["create"]})
}

pub fn api_group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = all_groups(reg)
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let (g, vs) = all_groups(reg)
        .into_iter()
        .find(|(g, _)| g == group && !g.is_empty())?;
    let mut v = group_json(&g, &vs);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let rts = reg.in_group_version(group, version);
    let mut resources = if version == "v1" {
        review_resources(group)
    } else {
        Vec::new()
    };
    if rts.is_empty() && resources.is_empty() {
        return None;
    }
    for rt in &rts {
        let mut r = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs(),
        });
        if !rt.short_names.is_empty() {
            r["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            r["categories"] = json!(rt.categories);
        }
        resources.push(r);
        if rt.status {
            resources.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if rt.group.is_empty() && rt.plural == "serviceaccounts" {
            resources.push(token_subresource());
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources }),
    )
}

fn aggregated_resource(rt: &ResourceType, version: &str) -> Value {
    let rk = json!({"group": rt.group, "version": version, "kind": rt.kind});
    let mut r = json!({
        "resource": rt.plural,
        "responseKind": rk,
        "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": rt.singular,
        "verbs": rt.verbs(),
    });
    if !rt.short_names.is_empty() {
        r["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        r["categories"] = json!(rt.categories);
    }
    if rt.status {
        r["subresources"] = json!([{ "subresource": "status", "responseKind": rk, "verbs": ["get", "patch", "update"] }]);
    }
    if rt.group.is_empty() && rt.plural == "serviceaccounts" {
        r["subresources"] = json!([{ "subresource": "token",
            "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
            "verbs": ["create"] }]);
    }
    r
}

/// `APIGroupDiscoveryList` for `/api` (core = true) or `/apis`.
pub fn aggregated(reg: &Registry, core: bool, api_version: &str) -> Value {
    let mut items = Vec::new();
    for (g, vs) in all_groups(reg) {
        if g.is_empty() != core {
            continue;
        }
        let versions: Vec<Value> = vs
            .iter()
            .map(|v| {
                let mut resources: Vec<Value> = reg
                    .in_group_version(&g, v)
                    .iter()
                    .map(|rt| aggregated_resource(rt, v))
                    .collect();
                if v == "v1" {
                    resources.extend(
                        crate::reviews::RESOURCES
                            .iter()
                            .filter(|(x, ..)| *x == g)
                            .map(|(_, plural, kind, namespaced)| {
                                json!({"resource": plural,
                                "responseKind": {"group": g, "version": "v1", "kind": kind},
                                "scope": if *namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": kind.to_lowercase(), "verbs": ["create"]})
                            }),
                    );
                }
                json!({ "version": v, "resources": resources, "freshness": "Current" })
            })
            .collect();
        let mut md = json!({ "creationTimestamp": null });
        if !g.is_empty() {
            md["name"] = json!(g);
        }
        items.push(json!({ "metadata": md, "versions": versions }));
    }
    json!({ "kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items })
}

/// If the Accept header asks for aggregated discovery, the apidiscovery version asked for.
pub fn wants_aggregated(accept: &str) -> Option<&'static str> {
    for mt in accept.split(',') {
        let params: Vec<&str> = mt.split(';').map(str::trim).collect();
        if !params.contains(&"as=APIGroupDiscoveryList")
            || !params.contains(&"g=apidiscovery.k8s.io")
        {
            continue;
        }
        if params.contains(&"v=v2") {
            return Some("v2");
        }
        if params.contains(&"v=v2beta1") {
            return Some("v2beta1");
        }
    }
    None
}
