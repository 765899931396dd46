//! Chart loading as Helm's `chart/v2/loader` does it: from a directory (with `.helmignore`),
//! a `.tgz`, or a list of in-memory files (what the wasm plugin receives). `Chart.yaml`,
//! `values.yaml`, `values.schema.json`, `templates/`, `charts/` (directories and archives) and
//! everything else as `.Files`; then `Chart.yaml` validation.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::funcs::semver::Version;
use crate::glob::go_match;
use crate::value::{Map, Value};
use crate::yaml;

/// A file of a chart (path relative to the chart root, `/`-separated).
#[derive(Debug, Clone)]
pub struct File {
    pub name: String,
    pub data: Vec<u8>,
}

/// A maintainer entry of `Chart.yaml`.
#[derive(Debug, Clone, Default)]
pub struct Maintainer {
    pub name: String,
    pub email: String,
    pub url: String,
}

/// A dependency entry of `Chart.yaml` (or `requirements.yaml`).
#[derive(Debug, Clone, Default)]
pub struct Dependency {
    pub name: String,
    pub version: String,
    pub repository: String,
    pub condition: String,
    pub tags: Vec<String>,
    pub enabled: bool,
    pub import_values: Vec<ImportValue>,
    pub alias: String,
}

/// One `import-values` entry.
#[derive(Debug, Clone)]
pub enum ImportValue {
    /// `- name` (imports `exports.name`)
    Name(String),
    /// `- child: a.b` / `parent: c`
    Map { child: String, parent: String },
}

/// `Chart.yaml` metadata.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    pub name: String,
    pub home: String,
    pub sources: Vec<String>,
    pub version: String,
    pub description: String,
    pub keywords: Vec<String>,
    pub maintainers: Vec<Maintainer>,
    pub icon: String,
    pub api_version: String,
    pub condition: String,
    pub tags: String,
    pub app_version: String,
    pub deprecated: bool,
    pub annotations: BTreeMap<String, String>,
    pub kube_version: String,
    pub dependencies: Vec<Dependency>,
    pub chart_type: String,
}

/// A loaded chart with its subcharts.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub metadata: Metadata,
    /// `templates/…` files
    pub templates: Vec<File>,
    /// raw `values.yaml`
    pub values: Option<Vec<u8>>,
    /// raw `values.schema.json`
    pub schema: Option<Vec<u8>>,
    /// every other file (README, crds/, files used by `.Files`)
    pub files: Vec<File>,
    /// subcharts found under `charts/`
    pub dependencies: Vec<Chart>,
}

/// A chart loading error.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
}

fn s(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        Value::Nil => String::new(),
        Value::Float(f) => crate::strconv::format_float_v(*f),
        other => other.to_go_string(),
    }
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) => l.iter().map(s).collect(),
        _ => Vec::new(),
    }
}

fn parse_dependencies(v: &Value) -> Vec<Dependency> {
    let Value::List(l) = v else { return Vec::new() };
    l.iter()
        .map(|d| {
            let import_values = match d.get("import-values") {
                Value::List(iv) => iv
                    .iter()
                    .filter_map(|e| match e {
                        Value::Str(n) => Some(ImportValue::Name(n.to_string())),
                        Value::Map(_) => Some(ImportValue::Map {
                            child: e.get("child").to_go_string(),
                            parent: e.get("parent").to_go_string(),
                        }),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            Dependency {
                name: s(&d.get("name")),
                version: s(&d.get("version")),
                repository: s(&d.get("repository")),
                condition: s(&d.get("condition")),
                tags: strings(&d.get("tags")),
                enabled: d.get("enabled").truthy(),
                import_values,
                alias: s(&d.get("alias")),
            }
        })
        .collect()
}

impl Metadata {
    fn from_yaml(src: &[u8]) -> Result<Metadata, LoadError> {
        let v = yaml::parse(&String::from_utf8_lossy(src))
            .map_err(|e| LoadError::Invalid(format!("cannot load Chart.yaml: {e}")))?;
        let annotations = match v.get("annotations") {
            Value::Map(m) => m.borrow().iter().map(|(k, v)| (k.clone(), s(v))).collect(),
            _ => BTreeMap::new(),
        };
        let maintainers = match v.get("maintainers") {
            Value::List(l) => l
                .iter()
                .map(|m| Maintainer {
                    name: s(&m.get("name")),
                    email: s(&m.get("email")),
                    url: s(&m.get("url")),
                })
                .collect(),
            _ => Vec::new(),
        };
        let mut md = Metadata {
            name: s(&v.get("name")),
            home: s(&v.get("home")),
            sources: strings(&v.get("sources")),
            version: s(&v.get("version")),
            description: s(&v.get("description")),
            keywords: strings(&v.get("keywords")),
            maintainers,
            icon: s(&v.get("icon")),
            api_version: s(&v.get("apiVersion")),
            condition: s(&v.get("condition")),
            tags: s(&v.get("tags")),
            app_version: s(&v.get("appVersion")),
            deprecated: v.get("deprecated").truthy(),
            annotations,
            kube_version: s(&v.get("kubeVersion")),
            dependencies: parse_dependencies(&v.get("dependencies")),
            chart_type: s(&v.get("type")),
        };
        if md.api_version.is_empty() {
            md.api_version = "v1".into();
        }
        Ok(md)
    }

    /// Helm's `Metadata.Validate`.
    pub fn validate(&self) -> Result<(), LoadError> {
        let err = |m: &str| Err(LoadError::Invalid(format!("validation: {m}")));
        if self.api_version.is_empty() {
            return err("chart.metadata.apiVersion is required");
        }
        if self.name.is_empty() {
            return err("chart.metadata.name is required");
        }
        if self.name.contains('/')
            || self.name.contains('\\')
            || self.name == "."
            || self.name == ".."
        {
            return err(&format!("chart.metadata.name {:?} is invalid", self.name));
        }
        if self.version.is_empty() {
            return err("chart.metadata.version is required");
        }
        if Version::parse(&self.version).is_err() {
            return err(&format!(
                "chart.metadata.version {:?} is invalid",
                self.version
            ));
        }
        if !matches!(self.chart_type.as_str(), "" | "application" | "library") {
            return err("chart.metadata.type must be application or library");
        }
        let mut seen = std::collections::HashSet::new();
        for d in &self.dependencies {
            let key = if d.alias.is_empty() {
                &d.name
            } else {
                &d.alias
            };
            if !seen.insert(key.clone()) {
                return err(&format!(
                    "more than one dependency with name or alias {key:?}"
                ));
            }
        }
        Ok(())
    }

    /// `.Chart` as Helm 4 exposes it (Go field names, all fields present).
    pub fn to_value(&self, is_root: bool) -> Value {
        let mut m = Map::new();
        let strs = |v: &[String]| {
            Value::from(
                v.iter()
                    .map(|x| Value::from(x.as_str()))
                    .collect::<Vec<_>>(),
            )
        };
        m.insert("Name".into(), Value::from(self.name.as_str()));
        m.insert("Home".into(), Value::from(self.home.as_str()));
        m.insert("Sources".into(), strs(&self.sources));
        m.insert("Version".into(), Value::from(self.version.as_str()));
        m.insert("Description".into(), Value::from(self.description.as_str()));
        m.insert("Keywords".into(), strs(&self.keywords));
        let maint: Vec<Value> = self
            .maintainers
            .iter()
            .map(|x| {
                let mut mm = Map::new();
                mm.insert("Name".into(), Value::from(x.name.as_str()));
                mm.insert("Email".into(), Value::from(x.email.as_str()));
                mm.insert("URL".into(), Value::from(x.url.as_str()));
                Value::from(mm)
            })
            .collect();
        m.insert("Maintainers".into(), Value::from(maint));
        m.insert("Icon".into(), Value::from(self.icon.as_str()));
        m.insert("APIVersion".into(), Value::from(self.api_version.as_str()));
        m.insert("Condition".into(), Value::from(self.condition.as_str()));
        m.insert("Tags".into(), Value::from(self.tags.as_str()));
        m.insert("AppVersion".into(), Value::from(self.app_version.as_str()));
        m.insert("Deprecated".into(), Value::Bool(self.deprecated));
        let ann: Map = self
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect();
        m.insert(
            "Annotations".into(),
            if self.annotations.is_empty() {
                Value::Nil
            } else {
                Value::from(ann)
            },
        );
        m.insert(
            "KubeVersion".into(),
            Value::from(self.kube_version.as_str()),
        );
        let deps: Vec<Value> = self
            .dependencies
            .iter()
            .map(|d| {
                let mut dm = Map::new();
                dm.insert("Name".into(), Value::from(d.name.as_str()));
                dm.insert("Version".into(), Value::from(d.version.as_str()));
                dm.insert("Repository".into(), Value::from(d.repository.as_str()));
                dm.insert("Condition".into(), Value::from(d.condition.as_str()));
                dm.insert("Tags".into(), strs(&d.tags));
                dm.insert("Enabled".into(), Value::Bool(d.enabled));
                let iv: Vec<Value> = d
                    .import_values
                    .iter()
                    .map(|i| match i {
                        ImportValue::Name(n) => Value::from(n.as_str()),
                        ImportValue::Map { child, parent } => {
                            let mut x = Map::new();
                            x.insert("child".into(), Value::from(child.as_str()));
                            x.insert("parent".into(), Value::from(parent.as_str()));
                            Value::from(x)
                        }
                    })
                    .collect();
                dm.insert("ImportValues".into(), Value::from(iv));
                dm.insert("Alias".into(), Value::from(d.alias.as_str()));
                Value::from(dm)
            })
            .collect();
        m.insert("Dependencies".into(), Value::from(deps));
        m.insert("Type".into(), Value::from(self.chart_type.as_str()));
        m.insert("IsRoot".into(), Value::Bool(is_root));
        Value::from(m)
    }
}

/// `.helmignore` rules (Helm's `pkg/ignore`).
pub struct Ignore {
    patterns: Vec<(String, bool, bool)>, // (pattern, negate, must_dir)
}

impl Ignore {
    /// Parses `.helmignore` text and adds Helm's default `templates/.?*`.
    pub fn parse(text: &str) -> Ignore {
        let mut patterns = Vec::new();
        for line in text.lines().chain(std::iter::once("templates/.?*")) {
            let mut rule = line.trim();
            if rule.is_empty() || rule.starts_with('#') || rule.contains("**") {
                continue;
            }
            let negate = rule.starts_with('!');
            if negate {
                rule = &rule[1..];
            }
            let must_dir = rule.ends_with('/');
            let rule = rule.trim_end_matches('/');
            patterns.push((rule.to_string(), negate, must_dir));
        }
        Ignore { patterns }
    }

    /// Whether a path (relative, `/`-separated) is ignored.
    pub fn ignored(&self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() || path == "." || path == "./" {
            return false;
        }
        for (p, negate, must_dir) in &self.patterns {
            let matches = |n: &str| -> bool {
                if let Some(rest) = p.strip_prefix('/') {
                    go_match(rest, n)
                } else if p.contains('/') {
                    go_match(p, n)
                } else {
                    let base = n.rsplit('/').next().unwrap_or(n);
                    go_match(p, base)
                }
            };
            if *negate {
                if *must_dir && !is_dir {
                    return true;
                }
                if !matches(path) {
                    return true;
                }
                continue;
            }
            if *must_dir && !is_dir {
                continue;
            }
            if matches(path) {
                return true;
            }
        }
        false
    }
}

impl Chart {
    /// Loads a chart directory (applies `.helmignore`).
    pub fn load_dir(dir: impl AsRef<Path>) -> Result<Chart, LoadError> {
        let dir = dir.as_ref();
        let rules = match std::fs::read_to_string(dir.join(".helmignore")) {
            Ok(t) => Ignore::parse(&t),
            Err(_) => Ignore::parse(""),
        };
        let mut files = Vec::new();
        walk(dir, "", &rules, &mut files)?;
        Chart::load_files(files)
    }

    /// Loads a chart archive (`.tgz`: gzip tar with one top-level directory).
    pub fn load_tgz(bytes: &[u8]) -> Result<Chart, LoadError> {
        Chart::load_files(untar(bytes)?)
    }

    /// Loads a directory or an archive, depending on what `path` is.
    pub fn load(path: impl AsRef<Path>) -> Result<Chart, LoadError> {
        let p = path.as_ref();
        if p.is_dir() {
            Chart::load_dir(p)
        } else {
            let b = std::fs::read(p).map_err(|e| LoadError::Io(p.display().to_string(), e))?;
            Chart::load_tgz(&b)
        }
    }

    /// Builds a chart from `(path, bytes)` pairs relative to the chart root.
    pub fn load_files(files: Vec<(String, Vec<u8>)>) -> Result<Chart, LoadError> {
        let mut c = Chart::default();
        let mut meta = None;
        let mut requirements = None;
        let mut subcharts: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
        for (name, mut data) in files {
            if data.starts_with(&[0xEF, 0xBB, 0xBF]) {
                data.drain(..3);
            }
            match name.as_str() {
                "Chart.yaml" => meta = Some(Metadata::from_yaml(&data)?),
                "Chart.lock" | "requirements.lock" => {}
                "values.yaml" => c.values = Some(data),
                "values.schema.json" => c.schema = Some(data),
                "requirements.yaml" => requirements = Some(data.clone()),
                n if n.starts_with("templates/") => c.templates.push(File { name, data }),
                n if n.starts_with("charts/") && !n.ends_with(".prov") => {
                    let rest = &n["charts/".len()..];
                    let cname = rest.split('/').next().unwrap_or("").to_string();
                    subcharts
                        .entry(cname)
                        .or_default()
                        .push((rest.to_string(), data));
                }
                _ => c.files.push(File { name, data }),
            }
        }
        let mut meta =
            meta.ok_or_else(|| LoadError::Invalid("Chart.yaml file is missing".into()))?;
        if let Some(r) = requirements {
            let v = yaml::parse(&String::from_utf8_lossy(&r))
                .map_err(|e| LoadError::Invalid(format!("cannot load requirements.yaml: {e}")))?;
            meta.dependencies = parse_dependencies(&v.get("dependencies"));
            if meta.api_version == "v1" {
                c.files.push(File {
                    name: "requirements.yaml".into(),
                    data: r,
                });
            }
        }
        meta.validate()?;
        c.metadata = meta;
        for (n, files) in subcharts {
            if n.starts_with('_') || n.starts_with('.') {
                continue;
            }
            let sc = if n.ends_with(".tgz") || n.ends_with(".tar.gz") {
                let data = &files[0].1;
                Chart::load_tgz(data)
            } else {
                let buff: Vec<(String, Vec<u8>)> = files
                    .into_iter()
                    .filter_map(|(name, d)| {
                        name.split_once('/').map(|(_, rest)| (rest.to_string(), d))
                    })
                    .collect();
                Chart::load_files(buff)
            };
            let sc = sc.map_err(|e| {
                LoadError::Invalid(format!(
                    "error unpacking subchart {n} in {}: {e}",
                    c.metadata.name
                ))
            })?;
            c.dependencies.push(sc);
        }
        Ok(c)
    }

    /// The chart name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// `crds/*.yaml|yml|json` files of this chart (not subcharts).
    pub fn crd_files(&self) -> impl Iterator<Item = &File> {
        self.files.iter().filter(|f| {
            f.name.starts_with("crds/")
                && (f.name.ends_with(".yaml")
                    || f.name.ends_with(".yml")
                    || f.name.ends_with(".json"))
        })
    }
}

fn walk(
    root: &Path,
    rel: &str,
    rules: &Ignore,
    out: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), LoadError> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| LoadError::Io(dir.display().to_string(), e))?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let meta = std::fs::metadata(e.path()).map_err(|err| LoadError::Io(path.clone(), err))?;
        if meta.is_dir() {
            if rules.ignored(&path, true) {
                continue;
            }
            walk(root, &path, rules, out)?;
        } else {
            if rules.ignored(&path, false) {
                continue;
            }
            let data = std::fs::read(e.path()).map_err(|err| LoadError::Io(path.clone(), err))?;
            out.push((path, data));
        }
    }
    Ok(())
}

fn untar(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, LoadError> {
    let gz = flate2::read::GzDecoder::new(bytes);
    let mut ar = tar::Archive::new(gz);
    let mut out = Vec::new();
    let entries = ar
        .entries()
        .map_err(|e| LoadError::Io("archive".into(), e))?;
    for e in entries {
        let mut e = e.map_err(|e| LoadError::Io("archive".into(), e))?;
        if !e.header().entry_type().is_file() {
            continue;
        }
        let path = e
            .path()
            .map_err(|e| LoadError::Io("archive".into(), e))?
            .to_string_lossy()
            .replace('\\', "/");
        if path == "pax_global_header" {
            continue;
        }
        let Some((_, rest)) = path.split_once('/') else {
            continue;
        };
        if rest.split('/').any(|p| p == "..") || rest.starts_with('/') {
            return Err(LoadError::Invalid(format!(
                "chart illegally references parent directory: {path}"
            )));
        }
        let mut data = Vec::new();
        e.read_to_end(&mut data)
            .map_err(|e| LoadError::Io(path.clone(), e))?;
        out.push((rest.to_string(), data));
    }
    if out.is_empty() {
        return Err(LoadError::Invalid("no files in chart archive".into()));
    }
    Ok(out)
}
