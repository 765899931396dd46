//! A release manifest as Kubernetes objects: Kubernetes' document split, `List`s expanded,
//! namespaces defaulted through discovery, Helm's ownership metadata and its checks. Owns:
//! manifest parsing and object identity. Must not touch: the cluster beyond discovery and
//! reads (applying is `apply`'s).

use std::collections::HashMap;

use sdk_guest::{Ctx, DeployerError, ObjectRef};
use serde_json::{Value, json};

use super::state::{
    MANAGED_BY_HELM, MANAGED_BY_LABEL, RELEASE_NAME_ANNOTATION, RELEASE_NAMESPACE_ANNOTATION,
    RESOURCE_POLICY_ANNOTATION,
};

/// Sets `protocol: TCP` (the API server's own default) on every port of a Service and of the
/// containers of a Pod, a pod template or a CronJob's job template that omits it. Kubernetes
/// before 1.21 refuses server-side apply of such a port ("associative list with keys has an
/// element that omits key field \"protocol\"": `protocol` is part of the list key there but
/// is not defaulted), and charts rarely spell it out.
pub fn default_port_protocols(object: &mut Value) {
    fn ports(list: Option<&mut Value>) {
        for port in list.and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(p) = port.as_object_mut()
                && !p.contains_key("protocol")
            {
                p.insert("protocol".into(), "TCP".into());
            }
        }
    }
    fn pod_spec(spec: Option<&mut Value>) {
        let Some(spec) = spec else { return };
        for key in ["containers", "initContainers"] {
            for c in spec
                .get_mut(key)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                ports(c.get_mut("ports"));
            }
        }
    }
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    match kind.as_str() {
        "Service" => ports(object.pointer_mut("/spec/ports")),
        "Pod" => pod_spec(object.get_mut("spec")),
        "CronJob" => pod_spec(object.pointer_mut("/spec/jobTemplate/spec/template/spec")),
        _ => pod_spec(object.pointer_mut("/spec/template/spec")),
    }
}

/// The documents of a YAML stream as Kubernetes' `yaml.YAMLReader` (under client-go's
/// `resource.Builder`, which Helm's `KubeClient.Build` uses, and Landscaper's
/// `YAMLOrJSONDecoder`) cuts them: at every line that starts with `---` (followed by nothing
/// but blanks or a comment), each document keeping all of its lines with their line breaks.
/// So a block scalar that ends a document keeps its final newline, as Helm's install applies
/// it (`releaseutil.SplitManifests` only decides how the release manifest is laid out).
pub fn yaml_documents(stream: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut doc = String::new();
    for line in stream.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("---") {
            let rest = rest.trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                return Err(format!("invalid Yaml document separator: {rest}"));
            }
            if !doc.is_empty() {
                out.push(std::mem::take(&mut doc));
            }
            continue;
        }
        doc.push_str(line);
    }
    if !doc.is_empty() {
        out.push(doc);
    }
    Ok(out)
}

/// The objects of a manifest stream (documents as [`yaml_documents`] cuts them, empty and
/// comments-only documents skipped, `List`s expanded), as JSON.
pub fn parse_manifest(manifest: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for doc in yaml_documents(manifest)? {
        let parsed = helm_engine::yaml::parse(&doc).map_err(|e| e.0)?;
        if matches!(parsed, helm_engine::value::Value::Nil) {
            continue;
        }
        let v = helm_engine::json::to_serde(&parsed);
        if !v.is_object() {
            return Err(format!("a document is not an object: {v}"));
        }
        let kind = v["kind"].as_str().unwrap_or_default();
        match v.get("items").and_then(Value::as_array) {
            Some(items) if kind.ends_with("List") => out.extend(items.iter().cloned()),
            _ => out.push(v),
        }
    }
    Ok(out)
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// One object of a release, resolved against discovery.
#[derive(Debug, Clone)]
pub(super) struct Obj {
    pub(super) value: Value,
    pub(super) r: ObjectRef,
}

impl Obj {
    /// Helm's identity: group, kind, namespace, name.
    pub(super) fn key(&self) -> (String, String, String, String) {
        (
            group_of(&self.r.api_version).to_string(),
            self.r.kind.clone(),
            self.r.namespace.clone().unwrap_or_default(),
            self.r.name.clone(),
        )
    }

    /// `Kind "name" in namespace "ns"` (Helm's `resourceString`).
    pub(super) fn describe(&self) -> String {
        format!(
            "{} {:?} in namespace {:?}",
            self.r.kind,
            self.r.name,
            self.r.namespace.as_deref().unwrap_or("")
        )
    }

    pub(super) fn short(&self) -> String {
        match &self.r.namespace {
            Some(ns) => format!("{} {ns}/{}", self.r.kind, self.r.name),
            None => format!("{} {}", self.r.kind, self.r.name),
        }
    }
}

fn annotation<'v>(o: &'v Value, key: &str) -> Option<&'v str> {
    o.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

pub(super) fn keep_policy(o: &Value) -> bool {
    annotation(o, RESOURCE_POLICY_ANNOTATION).is_some_and(|p| p.trim().eq_ignore_ascii_case("keep"))
}

fn set_string(o: &mut Value, section: &str, key: &str, value: &str) {
    let meta = &mut o["metadata"];
    if !meta[section].is_object() {
        meta[section] = json!({});
    }
    meta[section][key] = Value::String(value.into());
}

/// Helm's `checkOwnership`.
pub(super) fn check_ownership(live: &Value, release: &str, namespace: &str) -> Result<(), String> {
    let label = live
        .pointer("/metadata/labels")
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .and_then(Value::as_str);
    let require = |actual: Option<&str>, key: &str, want: &str| match actual {
        None => Some(format!("missing key {key:?}: must be set to {want:?}")),
        Some(a) if a != want => Some(format!(
            "key {key:?} must equal {want:?}: current value is {a:?}"
        )),
        Some(_) => None,
    };
    let mut errs = Vec::new();
    if let Some(e) = require(label, MANAGED_BY_LABEL, MANAGED_BY_HELM) {
        errs.push(format!("label validation error: {e}"));
    }
    if let Some(e) = require(
        annotation(live, RELEASE_NAME_ANNOTATION),
        RELEASE_NAME_ANNOTATION,
        release,
    ) {
        errs.push(format!("annotation validation error: {e}"));
    }
    if let Some(e) = require(
        annotation(live, RELEASE_NAMESPACE_ANNOTATION),
        RELEASE_NAMESPACE_ANNOTATION,
        namespace,
    ) {
        errs.push(format!("annotation validation error: {e}"));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(format!("invalid ownership metadata; {}", errs.join("; ")))
    }
}

/// Discovery, cached for one call.
#[derive(Default)]
pub(super) struct Discovery {
    namespaced: HashMap<(String, String), Option<bool>>,
}

/// Why a manifest could not be turned into objects.
pub(super) enum BuildError {
    /// A Kubernetes call failed.
    Kube(DeployerError),
    /// The manifest is not valid or names a kind the cluster does not serve.
    Invalid(String),
}

impl From<DeployerError> for BuildError {
    fn from(e: DeployerError) -> Self {
        BuildError::Kube(e)
    }
}

impl Discovery {
    fn namespaced(
        &mut self,
        ctx: &Ctx,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<bool>, DeployerError> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(v) = self.namespaced.get(&key) {
            return Ok(*v);
        }
        let v = ctx.kube_discover(api_version, kind)?.map(|i| i.namespaced);
        self.namespaced.insert(key, v);
        Ok(v)
    }

    /// Helm's `KubeClient.Build`: objects with their namespace defaulted; with `owner`, Helm's
    /// ownership metadata set. `lenient` skips objects of kinds the cluster does not serve.
    pub(super) fn build(
        &mut self,
        ctx: &Ctx,
        manifest: &str,
        namespace: &str,
        owner: Option<(&str, &str)>,
        lenient: bool,
    ) -> Result<Vec<Obj>, BuildError> {
        let docs = parse_manifest(manifest).map_err(BuildError::Invalid)?;
        let mut out = Vec::new();
        for mut v in docs {
            let api_version = v["apiVersion"].as_str().unwrap_or_default().to_string();
            let kind = v["kind"].as_str().unwrap_or_default().to_string();
            let name = v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if api_version.is_empty() || kind.is_empty() {
                if lenient {
                    continue;
                }
                return Err(BuildError::Invalid(format!(
                    "error validating data: apiVersion and kind must be set (object {name:?})"
                )));
            }
            let Some(namespaced) = self.namespaced(ctx, &api_version, &kind)? else {
                if lenient {
                    ctx.warn(&format!(
                        "skipping {kind} {name}: the cluster does not serve {api_version}"
                    ));
                    continue;
                }
                let ns = v
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let version = api_version.rsplit('/').next().unwrap_or_default();
                return Err(BuildError::Invalid(format!(
                    "resource mapping not found for name: {name:?} namespace: {ns:?} from \"\": no matches for kind {kind:?} in version {:?}\nensure CRDs are installed first",
                    if group_of(&api_version).is_empty() {
                        version.to_string()
                    } else {
                        api_version.clone()
                    }
                )));
            };
            let ns = if namespaced {
                let ns = v
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .unwrap_or(namespace)
                    .to_string();
                v["metadata"]["namespace"] = Value::String(ns.clone());
                Some(ns)
            } else {
                if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("namespace");
                }
                None
            };
            if let Some((release, release_ns)) = owner {
                set_string(&mut v, "labels", MANAGED_BY_LABEL, MANAGED_BY_HELM);
                set_string(&mut v, "annotations", RELEASE_NAME_ANNOTATION, release);
                set_string(
                    &mut v,
                    "annotations",
                    RELEASE_NAMESPACE_ANNOTATION,
                    release_ns,
                );
            }
            out.push(Obj {
                r: ObjectRef {
                    api_version,
                    kind,
                    namespace: ns,
                    name,
                },
                value: v,
            });
        }
        Ok(out)
    }
}
