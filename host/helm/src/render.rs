//! The render driver (Helm's `action.Install` in client-only mode plus `engine.Render`):
//! values from files and `--set`, dependency processing, schema validation, the template set
//! of the whole chart tree with per-chart scopes, execution, NOTES extraction, manifest sorting,
//! and the `helm template` output stream.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::chart::Chart;
use crate::deps::{WChart, coalesce_values, process_dependencies};
use crate::funcs::func_map;
use crate::funcs::semver::{Constraints, Version};
use crate::glob::go_match;
use crate::objects::{
    ApiVersions, Capabilities, DEFAULT_API_VERSIONS, Files, HelmVersion, KubeVersion,
};
use crate::sort::{Hook, Manifest, SplitMode, sort_manifests, split_manifests};
pub use crate::template::Lookup;
use crate::template::{Engine, TemplateError};
use crate::value::{Map, MapRef, Value};
use crate::values::{merge_maps, parse_set, read_values, table};

/// Default Kubernetes version of Helm v3.21 / v4.2 builds.
pub const DEFAULT_KUBE_VERSION: &str = "v1.36.0";

/// `.Capabilities` of a cluster, as Helm fills them from discovery (`action.getCapabilities`):
/// the server's `/version` and `GetVersionSet`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterCapabilities {
    /// `/version`'s `gitVersion` (`.Capabilities.KubeVersion.Version`), e.g. `v1.20.15`.
    pub git_version: String,
    /// `/version`'s `major`.
    pub major: String,
    /// `/version`'s `minor` (may carry a `+`, as on some providers).
    pub minor: String,
    /// Every served `group/version` and `group/version/Kind` (core: `v1`, `v1/Pod`).
    pub api_versions: Vec<String>,
}

/// Options of a render (the flags of `helm template`).
#[derive(Clone)]
pub struct RenderOptions<'a> {
    /// Release name (`--release-name`/positional NAME); default `release-name`.
    pub release_name: String,
    /// `--name-template`, rendered to produce the release name.
    pub name_template: Option<String>,
    /// Release namespace; default `default`.
    pub namespace: String,
    /// Contents of `-f/--values` files, in order.
    pub values_files: Vec<String>,
    /// `--set` expressions, in order.
    pub set: Vec<String>,
    /// `--set-string` expressions, in order.
    pub set_string: Vec<String>,
    /// `--kube-version`; default [`DEFAULT_KUBE_VERSION`].
    pub kube_version: Option<String>,
    /// `--api-versions` (each may be comma-separated).
    pub api_versions: Vec<String>,
    /// `--include-crds`
    pub include_crds: bool,
    /// Upgrade instead of install (`.Release.IsUpgrade`).
    pub is_upgrade: bool,
    /// `.Release.Revision`; default 1.
    pub revision: i64,
    /// `--skip-schema-validation`
    pub skip_schema_validation: bool,
    /// `--render-subchart-notes`
    pub subchart_notes: bool,
    /// Document splitting of the Helm version to match (default: current Helm).
    pub split_mode: SplitMode,
    /// `.Capabilities` from a cluster's discovery instead of `kube_version` and the built-in
    /// API versions (`api_versions` are still added).
    pub cluster: Option<ClusterCapabilities>,
    /// `lookup` against a cluster; `None`: `lookup` is empty.
    pub lookup: Option<&'a dyn Lookup>,
}

impl std::fmt::Debug for RenderOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderOptions")
            .field("release_name", &self.release_name)
            .field("name_template", &self.name_template)
            .field("namespace", &self.namespace)
            .field("values_files", &self.values_files)
            .field("set", &self.set)
            .field("set_string", &self.set_string)
            .field("kube_version", &self.kube_version)
            .field("api_versions", &self.api_versions)
            .field("include_crds", &self.include_crds)
            .field("is_upgrade", &self.is_upgrade)
            .field("revision", &self.revision)
            .field("skip_schema_validation", &self.skip_schema_validation)
            .field("subchart_notes", &self.subchart_notes)
            .field("split_mode", &self.split_mode)
            .field("cluster", &self.cluster)
            .field("lookup", &self.lookup.map(|_| "cluster"))
            .finish()
    }
}

impl Default for RenderOptions<'_> {
    fn default() -> Self {
        RenderOptions {
            release_name: "release-name".into(),
            name_template: None,
            namespace: "default".into(),
            values_files: Vec::new(),
            set: Vec::new(),
            set_string: Vec::new(),
            kube_version: None,
            api_versions: Vec::new(),
            include_crds: false,
            is_upgrade: false,
            revision: 1,
            skip_schema_validation: false,
            subchart_notes: false,
            split_mode: SplitMode::default(),
            cluster: None,
            lookup: None,
        }
    }
}

/// A render failure, worded as Helm words it.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// Invalid chart, values or options.
    #[error("{0}")]
    Invalid(String),
    /// A template failed to parse or execute.
    #[error("{}", .0.helm_message())]
    Template(TemplateError),
    /// A rendered document is not valid YAML; `partial` holds the raw rendered files
    /// (what `helm template --debug` prints).
    #[error("YAML parse error on {path}: {message}")]
    Yaml {
        path: String,
        message: String,
        partial: String,
    },
}

/// The result of rendering a chart.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// The release name used.
    pub release_name: String,
    /// Every rendered template (path → text), partials excluded, NOTES included.
    pub files: BTreeMap<String, String>,
    /// Non-hook documents in install order.
    pub manifests: Vec<Manifest>,
    /// Hook documents.
    pub hooks: Vec<Hook>,
    /// `crds/` files of the chart tree (path, content), in Helm's order.
    pub crds: Vec<(String, String)>,
    /// Rendered NOTES.txt.
    pub notes: String,
    include_crds: bool,
    split_mode: SplitMode,
}

impl Rendered {
    /// The release manifest (`rel.Manifest`): CRDs if requested, then the sorted documents.
    pub fn manifest(&self) -> String {
        let mut b = String::new();
        if self.include_crds {
            for (name, data) in &self.crds {
                b.push_str(&format!("---\n# Source: {name}\n{data}\n"));
            }
        }
        for m in &self.manifests {
            b.push_str(&format!("---\n# Source: {}\n{}\n", m.name, m.content));
        }
        b
    }

    /// Exactly what `helm template` prints on stdout for these options.
    pub fn to_template_stream(
        &self,
        show_only: &[String],
        skip_tests: bool,
    ) -> Result<String, RenderError> {
        let mut manifests = String::new();
        manifests.push_str(self.manifest().trim());
        manifests.push('\n');
        for h in &self.hooks {
            if skip_tests && h.is_test() {
                continue;
            }
            manifests.push_str(&format!("---\n# Source: {}\n{}\n", h.path, h.manifest));
        }
        if show_only.is_empty() {
            return Ok(manifests);
        }
        let docs = split_manifests(&manifests, self.split_mode);
        let mut out = String::new();
        for f in show_only {
            let f = f.replace('\\', "/");
            let mut missing = true;
            for m in &docs {
                let Some(line) = m
                    .lines()
                    .find(|l| l.starts_with("# Source: "))
                    .filter(|_| m.contains("# Source: "))
                else {
                    continue;
                };
                let src = &line["# Source: ".len()..];
                let Some((_, path)) = src.split_once('/') else {
                    continue;
                };
                if go_match(&f, path) {
                    out.push_str(&format!("---\n{m}\n"));
                    missing = false;
                }
            }
            if missing {
                return Err(RenderError::Invalid(format!(
                    "could not find template {f} in chart"
                )));
            }
        }
        Ok(out)
    }
}

fn user_values(opts: &RenderOptions) -> Result<MapRef, RenderError> {
    let mut base: MapRef = Rc::new(std::cell::RefCell::new(Map::new()));
    for f in &opts.values_files {
        let v = read_values(f)
            .map_err(|e| RenderError::Invalid(format!("failed to parse values: {e}")))?;
        if let Value::Map(m) = v {
            base = merge_maps(&base, &m);
        }
    }
    for s in &opts.set {
        parse_set(s, &base, false)
            .map_err(|e| RenderError::Invalid(format!("failed parsing --set data: {e}")))?;
    }
    for s in &opts.set_string {
        parse_set(s, &base, true)
            .map_err(|e| RenderError::Invalid(format!("failed parsing --set-string data: {e}")))?;
    }
    Ok(base)
}

fn release_name(opts: &RenderOptions) -> Result<String, RenderError> {
    let Some(t) = &opts.name_template else {
        return Ok(opts.release_name.clone());
    };
    let eng = Engine::new(func_map());
    eng.add("name-template", t).map_err(RenderError::Template)?;
    eng.execute("name-template", &Value::Nil)
        .map_err(RenderError::Template)
}

fn capabilities(opts: &RenderOptions) -> Result<Rc<Capabilities>, RenderError> {
    let (kube, mut apis) = match &opts.cluster {
        Some(c) => {
            // Helm: KubeVersion{Version: gitVersion, Major, Minor} as the server says.
            let mut kube = KubeVersion::parse(&c.git_version).map_err(|e| {
                RenderError::Invalid(format!(
                    "invalid kube version '{}' from the cluster: {e}",
                    c.git_version
                ))
            })?;
            kube.major = c.major.clone();
            kube.minor = c.minor.clone();
            (kube, c.api_versions.clone())
        }
        None => {
            let kv = opts.kube_version.as_deref().unwrap_or(DEFAULT_KUBE_VERSION);
            let kube = KubeVersion::parse(kv)
                .map_err(|e| RenderError::Invalid(format!("invalid kube version '{kv}': {e}")))?;
            let apis: Vec<String> = DEFAULT_API_VERSIONS.iter().map(|s| s.to_string()).collect();
            (kube, apis)
        }
    };
    for a in &opts.api_versions {
        apis.extend(a.split(',').filter(|s| !s.is_empty()).map(String::from));
    }
    let helm = HelmVersion {
        version: "v4.2".into(),
        go_version: "go1.26.6".into(),
        kube_client_version: "v1.36".into(),
    };
    Ok(Rc::new(Capabilities {
        kube: Rc::new(kube),
        apis: Rc::new(ApiVersions(apis)),
        helm: Value::Obj(Rc::new(helm)),
    }))
}

struct Renderable {
    src: Rc<Vec<u8>>,
    vals: MapRef,
    base_path: String,
}

fn rec_all_templates(
    c: &WChart,
    full_path: &str,
    parent: &MapRef,
    is_root: bool,
    out: &mut BTreeMap<String, Renderable>,
) -> MapRef {
    let subcharts = Rc::new(std::cell::RefCell::new(Map::new()));
    let files: BTreeMap<String, Rc<Vec<u8>>> = c
        .files
        .iter()
        .map(|f| (f.name.clone(), Rc::new(f.data.clone())))
        .collect();
    let mut next = Map::new();
    next.insert("Chart".into(), c.meta.to_value(is_root));
    next.insert(
        "Files".into(),
        Value::Obj(Rc::new(Files {
            files: Rc::new(files),
        })),
    );
    next.insert(
        "Release".into(),
        parent.borrow().get("Release").cloned().unwrap_or_default(),
    );
    next.insert(
        "Capabilities".into(),
        parent
            .borrow()
            .get("Capabilities")
            .cloned()
            .unwrap_or_default(),
    );
    let values = if is_root {
        parent
            .borrow()
            .get("Values")
            .cloned()
            .unwrap_or_else(Value::new_map)
    } else {
        let pv = match parent.borrow().get("Values") {
            Some(Value::Map(m)) => Some(m.clone()),
            _ => None,
        };
        match pv.and_then(|m| table(&m, c.name())) {
            Some(t) => Value::Map(t),
            None => Value::new_map(),
        }
    };
    next.insert("Values".into(), values);
    next.insert("Subcharts".into(), Value::Map(subcharts.clone()));
    let next = Rc::new(std::cell::RefCell::new(next));
    for d in &c.deps {
        let child_path = format!("{full_path}/charts/{}", d.name());
        let sub = rec_all_templates(d, &child_path, &next, false, out);
        subcharts
            .borrow_mut()
            .insert(d.name().to_string(), Value::Map(sub));
    }
    let library = c.meta.chart_type == "library";
    for t in c.templates.iter() {
        let base = t.name.rsplit('/').next().unwrap_or(&t.name);
        if library && !base.starts_with('_') {
            continue;
        }
        out.insert(
            format!("{full_path}/{}", t.name),
            Renderable {
                src: Rc::new(t.data.clone()),
                vals: next.clone(),
                base_path: format!("{full_path}/templates"),
            },
        );
    }
    next
}

/// Helm's parse order: deeper paths first; equal depth in reverse lexical order.
fn sort_templates(keys: &mut [String]) {
    keys.sort_by(|a, b| {
        let (ca, cb) = (a.matches('/').count(), b.matches('/').count());
        cb.cmp(&ca).then_with(|| b.cmp(a))
    });
}

fn collect_crds(c: &WChart, full_path: &str, out: &mut Vec<(String, String)>) {
    // Helm's CRDObjects: this chart's crds/ first, then each dependency's.
    for f in c.files.iter() {
        if f.name.starts_with("crds/")
            && (f.name.ends_with(".yaml") || f.name.ends_with(".yml") || f.name.ends_with(".json"))
        {
            out.push((
                format!("{full_path}/{}", f.name),
                String::from_utf8_lossy(&f.data).into_owned(),
            ));
        }
    }
    for d in &c.deps {
        collect_crds(d, &format!("{full_path}/charts/{}", d.name()), out);
    }
}

fn check_kube_version(c: &WChart, caps: &Capabilities) -> Result<(), RenderError> {
    let kv = &c.meta.kube_version;
    if kv.is_empty() {
        return Ok(());
    }
    let ok = match (
        Constraints::parse(kv),
        Version::parse(&caps.kube.normalized),
    ) {
        (Ok(con), Ok(v)) => con.check(&v),
        _ => false,
    };
    if !ok {
        return Err(RenderError::Invalid(format!(
            "chart requires kubeVersion: {kv} which is incompatible with Kubernetes {}",
            caps.kube.version
        )));
    }
    Ok(())
}

/// Renders a chart as `helm template` (client-only install) does.
pub fn render(chart: &Chart, opts: &RenderOptions) -> Result<Rendered, RenderError> {
    if chart.metadata.chart_type == "library" {
        return Err(RenderError::Invalid(
            "library charts are not installable".into(),
        ));
    }
    let user = user_values(opts)?;
    let mut wc = WChart::from_chart(chart).map_err(RenderError::Invalid)?;
    process_dependencies(&mut wc, &user).map_err(RenderError::Invalid)?;
    let name = release_name(opts)?;
    let caps = capabilities(opts)?;
    let vals = coalesce_values(&wc, &user, false);
    if !opts.skip_schema_validation {
        crate::schema::validate_tree(&wc, &vals).map_err(|e| {
            RenderError::Invalid(format!(
                "values don't meet the specifications of the schema(s) in the following chart(s):\n{e}"
            ))
        })?;
    }
    check_kube_version(&wc, &caps)?;

    let mut release = Map::new();
    release.insert("Name".into(), Value::from(name.as_str()));
    release.insert("Namespace".into(), Value::from(opts.namespace.as_str()));
    release.insert("IsUpgrade".into(), Value::Bool(opts.is_upgrade));
    release.insert("IsInstall".into(), Value::Bool(!opts.is_upgrade));
    release.insert("Revision".into(), Value::Int(opts.revision));
    release.insert("Service".into(), Value::from("Helm"));
    let mut top = Map::new();
    top.insert("Release".into(), Value::from(release));
    top.insert("Capabilities".into(), Value::Obj(caps.clone()));
    top.insert("Values".into(), Value::Map(vals));
    let top = Rc::new(std::cell::RefCell::new(top));

    let mut tpls = BTreeMap::new();
    let root_name = wc.name().to_string();
    rec_all_templates(&wc, &root_name, &top, true, &mut tpls);

    let eng = Engine::new(func_map()).with_lookup(opts.lookup);
    let mut keys: Vec<String> = tpls.keys().cloned().collect();
    sort_templates(&mut keys);
    for k in &keys {
        let r = &tpls[k];
        let src = String::from_utf8_lossy(&r.src);
        eng.add(k, &src).map_err(RenderError::Template)?;
    }
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for k in &keys {
        let base = k.rsplit('/').next().unwrap_or(k);
        if base.starts_with('_') {
            continue;
        }
        let r = &tpls[k];
        let mut tm = Map::new();
        tm.insert("Name".into(), Value::from(k.as_str()));
        tm.insert("BasePath".into(), Value::from(r.base_path.as_str()));
        r.vals
            .borrow_mut()
            .insert("Template".into(), Value::from(tm));
        let out = eng
            .execute(k, &Value::Map(r.vals.clone()))
            .map_err(RenderError::Template)?;
        files.insert(k.clone(), out.replace("<no value>", ""));
    }

    let mut notes = String::new();
    let root_notes = format!("{root_name}/templates/NOTES.txt");
    let mut manifest_files: Vec<(String, String)> = Vec::new();
    for (k, v) in &files {
        if k.ends_with("NOTES.txt") {
            if opts.subchart_notes || *k == root_notes {
                if !notes.is_empty() {
                    notes.push('\n');
                }
                notes.push_str(v);
            }
            continue;
        }
        manifest_files.push((k.clone(), v.clone()));
    }
    let (hooks, manifests) = sort_manifests(&manifest_files, opts.split_mode).map_err(|e| {
        let mut partial = String::new();
        for (name, content) in &manifest_files {
            if content.trim().is_empty() {
                continue;
            }
            partial.push_str(&format!("---\n# Source: {name}\n{content}\n"));
        }
        RenderError::Yaml {
            path: e.path,
            message: e.message,
            partial,
        }
    })?;
    let mut crds = Vec::new();
    collect_crds(&wc, &root_name, &mut crds);
    Ok(Rendered {
        release_name: name,
        files,
        manifests,
        hooks,
        crds,
        notes,
        include_crds: opts.include_crds,
        split_mode: opts.split_mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn chart(template: &str) -> Chart {
        Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: c\nversion: 0.1.0\n".to_vec(),
            ),
            // A YAML comment, so any text is a valid document.
            (
                "templates/t.yaml".into(),
                format!("# {template}").into_bytes(),
            ),
        ])
        .unwrap()
    }

    fn rendered(chart: &Chart, opts: &RenderOptions) -> String {
        let text = render(chart, opts).unwrap().files["c/templates/t.yaml"].clone();
        text.strip_prefix("# ").unwrap().to_string()
    }

    /// A cluster with one Secret, recording what was asked.
    struct OneSecret(RefCell<Vec<String>>);

    impl Lookup for OneSecret {
        fn lookup(
            &self,
            api_version: &str,
            kind: &str,
            namespace: &str,
            name: &str,
        ) -> Result<Option<serde_json::Value>, String> {
            self.0
                .borrow_mut()
                .push(format!("{api_version} {kind} {namespace} {name}"));
            match (kind, name) {
                ("Secret", "db") => Ok(Some(serde_json::json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "db", "namespace": namespace, "generation": 3},
                    "data": {"password": "c2VjcmV0"}
                }))),
                ("Secret", "") => Ok(Some(serde_json::json!({
                    "apiVersion": "v1", "kind": "SecretList", "metadata": {}, "items": [{"metadata": {"name": "db"}}]
                }))),
                ("Nope", _) => Err("unable to get apiresource from unstructured: /v1, Kind=Nope: the server could not find the requested resource".into()),
                _ => Ok(None),
            }
        }
    }

    #[test]
    fn without_a_cluster_lookup_is_an_empty_map_as_in_helm_template() {
        let c = chart("{{ lookup \"v1\" \"Secret\" \"ns\" \"db\" | toJson }}");
        assert_eq!(rendered(&c, &RenderOptions::default()), "{}");
    }

    #[test]
    fn with_a_cluster_lookup_returns_the_object_the_list_or_an_empty_map() {
        let cluster = OneSecret(RefCell::new(Vec::new()));
        let c = chart(concat!(
            "{{ (lookup \"v1\" \"Secret\" .Release.Namespace \"db\").data.password }}|",
            "{{ (lookup \"v1\" \"Secret\" \"ns\" \"db\").metadata.generation | kindIs \"float64\" }}|",
            "{{ lookup \"v1\" \"Secret\" \"ns\" \"gone\" | toJson }}|",
            "{{ len (lookup \"v1\" \"Secret\" \"\" \"\").items }}"
        ));
        let opts = RenderOptions {
            namespace: "ns".into(),
            lookup: Some(&cluster),
            ..Default::default()
        };
        // Whole numbers are integers, as client-go decodes them (not float64 as fromJson).
        assert_eq!(rendered(&c, &opts), "c2VjcmV0|false|{}|1");
        assert_eq!(
            cluster.0.borrow().as_slice(),
            [
                "v1 Secret ns db",
                "v1 Secret ns db",
                "v1 Secret ns gone",
                "v1 Secret  "
            ]
        );
    }

    #[test]
    fn a_lookup_error_fails_the_render_with_helms_wording() {
        let cluster = OneSecret(RefCell::new(Vec::new()));
        let c = chart("{{ lookup \"v1\" \"Nope\" \"ns\" \"x\" }}");
        let opts = RenderOptions {
            lookup: Some(&cluster),
            ..Default::default()
        };
        let e = render(&c, &opts).unwrap_err().to_string();
        assert!(
            e.contains(
                "error calling lookup: unable to get apiresource from unstructured: /v1, Kind=Nope"
            ),
            "{e}"
        );
    }

    #[test]
    fn cluster_capabilities_replace_the_defaults() {
        let c = chart(concat!(
            "{{ .Capabilities.KubeVersion.Version }} {{ .Capabilities.KubeVersion.Major }}.",
            "{{ .Capabilities.KubeVersion.Minor }} {{ .Capabilities.KubeVersion }} ",
            "{{ .Capabilities.APIVersions.Has \"policy/v1beta1\" }} ",
            "{{ .Capabilities.APIVersions.Has \"policy/v1\" }} ",
            "{{ .Capabilities.APIVersions.Has \"policy/v1beta1/PodDisruptionBudget\" }} ",
            "{{ semverCompare \">=1.21-0\" .Capabilities.KubeVersion.Version }}"
        ));
        let defaults = rendered(&c, &RenderOptions::default());
        assert_eq!(defaults, "v1.36.0 1.36 v1.36.0 true true false true");
        let opts = RenderOptions {
            cluster: Some(ClusterCapabilities {
                git_version: "v1.20.15".into(),
                major: "1".into(),
                minor: "20+".into(),
                api_versions: vec![
                    "v1".into(),
                    "policy/v1beta1".into(),
                    "policy/v1beta1/PodDisruptionBudget".into(),
                ],
            }),
            ..Default::default()
        };
        assert_eq!(
            rendered(&c, &opts),
            "v1.20.15 1.20+ v1.20.15 true false true false"
        );
    }
}
