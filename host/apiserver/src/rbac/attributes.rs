//! What a request asks to do, derived from its URL as Kubernetes' `RequestInfoFactory` does.
//!
//! Owns: [`Attributes`] and [`Attributes::from_request`]. Must not touch: rules, bindings or
//! the store.

use super::users::UserInfo;

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

    pub(super) fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}
