//! Built-in objects with methods: `.Files` (`Get GetBytes Glob Lines AsConfig AsSecrets`) and
//! `.Capabilities` (`KubeVersion` with `String`/`GitVersion`, `APIVersions.Has`, `HelmVersion`).

use std::collections::BTreeMap;
use std::rc::Rc;

use base64::Engine as _;

use crate::glob::glob_match;
use crate::value::{Map, Object, Value};

/// `.Files`: the chart's non-template files.
pub struct Files {
    pub files: Rc<BTreeMap<String, Rc<Vec<u8>>>>,
}

impl Files {
    fn subset(&self, pattern: &str) -> Files {
        let m: BTreeMap<String, Rc<Vec<u8>>> = self
            .files
            .iter()
            .filter(|(k, _)| glob_match(pattern, k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Files { files: Rc::new(m) }
    }

    fn as_map(&self, f: impl Fn(&[u8]) -> String) -> String {
        if self.files.is_empty() {
            return String::new();
        }
        let mut m = Map::new();
        for (k, v) in self.files.iter() {
            let base = k.rsplit('/').next().unwrap_or(k).to_string();
            m.insert(base, Value::from(f(v)));
        }
        crate::yaml::to_yaml(&Value::from(m))
    }
}

fn arg_s(args: &[Value], i: usize) -> Result<String, String> {
    match args.get(i) {
        Some(Value::Str(s)) => Ok(s.to_string()),
        Some(v) => Err(format!(
            "wrong type for value; expected string; got {}",
            v.type_name()
        )),
        None => Err(format!(
            "wrong number of args: want {} got {}",
            i + 1,
            args.len()
        )),
    }
}

impl Object for Files {
    fn type_name(&self) -> &'static str {
        "common.Files"
    }
    /// `Files` is a map type in Helm: an empty one (a `Glob` that matched nothing) is false.
    fn truthy(&self) -> bool {
        !self.files.is_empty()
    }
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }
    fn has_method(&self, name: &str) -> bool {
        matches!(
            name,
            "Get" | "GetBytes" | "Glob" | "Lines" | "AsConfig" | "AsSecrets"
        )
    }
    fn call(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        Some((|| -> Result<Value, String> {
            Ok(match name {
                "Get" => {
                    let n = arg_s(args, 0)?;
                    Value::from(
                        self.files
                            .get(&n)
                            .map(|d| String::from_utf8_lossy(d).into_owned())
                            .unwrap_or_default(),
                    )
                }
                "GetBytes" => {
                    let n = arg_s(args, 0)?;
                    Value::from(
                        self.files
                            .get(&n)
                            .map(|d| String::from_utf8_lossy(d).into_owned())
                            .unwrap_or_default(),
                    )
                }
                "Glob" => Value::Obj(Rc::new(self.subset(&arg_s(args, 0)?))),
                "Lines" => {
                    let n = arg_s(args, 0)?;
                    match self.files.get(&n) {
                        Some(d) if !d.is_empty() => {
                            let mut s = String::from_utf8_lossy(d).into_owned();
                            if s.ends_with('\n') {
                                s.pop();
                            }
                            Value::from(s.split('\n').map(Value::from).collect::<Vec<_>>())
                        }
                        _ => Value::from(Vec::new()),
                    }
                }
                "AsConfig" => Value::from(self.as_map(|d| String::from_utf8_lossy(d).into_owned())),
                "AsSecrets" => Value::from(
                    self.as_map(|d| base64::engine::general_purpose::STANDARD.encode(d)),
                ),
                _ => return Err(format!("can't evaluate field {name}")),
            })
        })())
    }
    fn to_value(&self) -> Value {
        let m: Map = self
            .files
            .iter()
            .map(|(k, v)| {
                let bytes: Vec<Value> = v.iter().map(|b| Value::Int(*b as i64)).collect();
                (k.clone(), Value::from(bytes))
            })
            .collect();
        Value::from(m)
    }
}

/// `.Capabilities.KubeVersion`.
pub struct KubeVersion {
    pub version: String,
    pub normalized: String,
    pub major: String,
    pub minor: String,
}

impl KubeVersion {
    /// `common.ParseKubeVersion` (`1.20`, `v1.20.3-gke.1`).
    pub fn parse(v: &str) -> Result<KubeVersion, String> {
        let t = v.trim().trim_start_matches('v');
        let core_end = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let core = &t[..core_end];
        let nums: Vec<&str> = core.split('.').filter(|s| !s.is_empty()).collect();
        if nums.len() < 2 || nums.iter().any(|n| n.parse::<u64>().is_err()) {
            return Err(format!("could not parse {v:?} as version"));
        }
        let n = |i: usize| nums.get(i).map(|x| x.parse::<u64>().unwrap()).unwrap_or(0);
        let git = if v.starts_with('v') {
            v.to_string()
        } else {
            format!("v{v}")
        };
        let rest = &t[core_end..];
        Ok(KubeVersion {
            version: git,
            normalized: format!("v{}.{}.{}{}", n(0), n(1), n(2), rest),
            major: n(0).to_string(),
            minor: n(1).to_string(),
        })
    }
}

impl Object for KubeVersion {
    fn type_name(&self) -> &'static str {
        "common.KubeVersion"
    }
    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Version" => Some(Value::from(self.version.as_str())),
            "Major" => Some(Value::from(self.major.as_str())),
            "Minor" => Some(Value::from(self.minor.as_str())),
            _ => None,
        }
    }
    fn has_method(&self, name: &str) -> bool {
        matches!(name, "String" | "GitVersion")
    }
    fn call(&self, name: &str, _args: &[Value]) -> Option<Result<Value, String>> {
        match name {
            "String" => Some(Ok(Value::from(self.normalized.as_str()))),
            "GitVersion" => Some(Ok(Value::from(self.version.as_str()))),
            _ => None,
        }
    }
    fn to_value(&self) -> Value {
        Value::from(self.normalized.as_str())
    }
}

/// `.Capabilities.APIVersions`.
pub struct ApiVersions(pub Vec<String>);

impl Object for ApiVersions {
    fn type_name(&self) -> &'static str {
        "common.VersionSet"
    }
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }
    fn has_method(&self, name: &str) -> bool {
        name == "Has"
    }
    fn call(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        if name != "Has" {
            return None;
        }
        Some(arg_s(args, 0).map(|a| Value::Bool(self.0.contains(&a))))
    }
    fn to_value(&self) -> Value {
        Value::from(
            self.0
                .iter()
                .map(|s| Value::from(s.as_str()))
                .collect::<Vec<_>>(),
        )
    }
}

/// `.Capabilities.HelmVersion` (Go field names; JSON keys when serialised).
pub struct HelmVersion {
    pub version: String,
    pub go_version: String,
    pub kube_client_version: String,
}

impl Object for HelmVersion {
    fn type_name(&self) -> &'static str {
        "version.BuildInfo"
    }
    fn field(&self, name: &str) -> Option<Value> {
        Some(Value::from(match name {
            "Version" => self.version.as_str(),
            "GoVersion" => self.go_version.as_str(),
            "KubeClientVersion" => self.kube_client_version.as_str(),
            "GitCommit" | "GitTreeState" => "",
            _ => return None,
        }))
    }
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("version".into(), Value::from(self.version.as_str()));
        m.insert("go_version".into(), Value::from(self.go_version.as_str()));
        m.insert(
            "kube_client_version".into(),
            Value::from(self.kube_client_version.as_str()),
        );
        Value::from(m)
    }
}

/// `.Capabilities`.
pub struct Capabilities {
    pub kube: Rc<KubeVersion>,
    pub apis: Rc<ApiVersions>,
    pub helm: Value,
}

impl Object for Capabilities {
    fn type_name(&self) -> &'static str {
        "*common.Capabilities"
    }
    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "KubeVersion" => Some(Value::Obj(self.kube.clone())),
            "APIVersions" => Some(Value::Obj(self.apis.clone())),
            "HelmVersion" => Some(self.helm.clone()),
            _ => None,
        }
    }
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("KubeVersion".into(), self.kube.to_value());
        m.insert("APIVersions".into(), self.apis.to_value());
        m.insert("HelmVersion".into(), self.helm.clone());
        Value::from(m)
    }
}

/// The API versions `helm template` knows without a cluster (client-go's scheme plus
/// apiextensions), as Helm 4.2.3 (client-go v0.36) lists them.
pub const DEFAULT_API_VERSIONS: &[&str] = &[
    "v1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1alpha1",
    "admissionregistration.k8s.io/v1beta1",
    "internal.apiserver.k8s.io/v1alpha1",
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1alpha1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "authorization.k8s.io/v1beta1",
    "autoscaling/v1",
    "autoscaling/v2",
    "batch/v1",
    "batch/v1beta1",
    "certificates.k8s.io/v1",
    "certificates.k8s.io/v1beta1",
    "certificates.k8s.io/v1alpha1",
    "coordination.k8s.io/v1alpha2",
    "coordination.k8s.io/v1beta1",
    "coordination.k8s.io/v1",
    "discovery.k8s.io/v1",
    "discovery.k8s.io/v1beta1",
    "events.k8s.io/v1",
    "events.k8s.io/v1beta1",
    "extensions/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1",
    "flowcontrol.apiserver.k8s.io/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1beta2",
    "flowcontrol.apiserver.k8s.io/v1beta3",
    "networking.k8s.io/v1",
    "networking.k8s.io/v1beta1",
    "node.k8s.io/v1",
    "node.k8s.io/v1alpha1",
    "node.k8s.io/v1beta1",
    "policy/v1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io/v1beta1",
    "rbac.authorization.k8s.io/v1alpha1",
    "resource.k8s.io/v1",
    "resource.k8s.io/v1beta2",
    "resource.k8s.io/v1beta1",
    "resource.k8s.io/v1alpha3",
    "scheduling.k8s.io/v1alpha2",
    "scheduling.k8s.io/v1beta1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1beta1",
    "storage.k8s.io/v1",
    "storage.k8s.io/v1alpha1",
    "storagemigration.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1",
];

#[cfg(test)]
mod tests {
    use crate::{Chart, RenderOptions, render};

    /// Helm (4.2.3, helm-python-sdk) renders this chart to exactly `WANT`: a `Glob` that matches
    /// nothing is an empty map — false in `if`, `empty` is true.
    #[test]
    fn an_empty_glob_is_false_as_an_empty_map_is_in_go() {
        let template = r#"{{- if .Files.Glob "files/*.yaml" }}
apiVersion: v1
kind: ConfigMap
metadata: {name: present}
{{- end }}
{{- if .Files.Glob "nothing/*" }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: absent}
{{- end }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: empty-check}
data:
  glob-empty: {{ empty (.Files.Glob "nothing/*") | quote }}
  glob-full: {{ empty (.Files.Glob "files/*") | quote }}
"#;
        const WANT: &str = "---\n# Source: globchart/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: present}\n---\n# Source: globchart/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: empty-check}\ndata:\n  glob-empty: \"true\"\n  glob-full: \"false\"\n\n";
        let chart = Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: globchart\nversion: 0.1.0\n".to_vec(),
            ),
            ("templates/cm.yaml".into(), template.as_bytes().to_vec()),
            ("files/a.yaml".into(), b"x: 1\n".to_vec()),
        ])
        .unwrap();
        let out = render(
            &chart,
            &RenderOptions {
                release_name: "x".into(),
                namespace: "y".into(),
                split_mode: crate::sort::SplitMode::Legacy,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(out.manifest(), WANT);
    }

    /// Helm (4.2.3) renders these to exactly `WANT`: a nil that starts a chain (a parenthesized
    /// pipeline) gives nil fields, the pattern charts use for optional globals.
    #[test]
    fn fields_of_a_nil_pipeline_are_nil_as_in_helm() {
        let template = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: nil}
data:
  a: {{ (((.Values.global).postgresql).auth) | quote }}
  b: {{ ((.Values.nothere).deeper) | quote }}
  c: {{ default "d" (((.Values.global).postgresql).auth).password | quote }}
"#;
        const WANT: &str = "---\n# Source: nilchart/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: nil}\ndata:\n  a: \n  b: \n  c: \"d\"\n\n";
        let chart = Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: nilchart\nversion: 0.1.0\n".to_vec(),
            ),
            ("templates/cm.yaml".into(), template.as_bytes().to_vec()),
        ])
        .unwrap();
        let opts = RenderOptions {
            release_name: "x".into(),
            namespace: "y".into(),
            split_mode: crate::sort::SplitMode::Legacy,
            ..Default::default()
        };
        assert_eq!(render(&chart, &opts).unwrap().manifest(), WANT);
        // A nil met inside a chain (a missing key) is still an error, as in Helm.
        let bad = Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: nilchart\nversion: 0.1.0\n".to_vec(),
            ),
            (
                "templates/cm.yaml".into(),
                b"x: {{ .Values.nothere.deeper }}\n".to_vec(),
            ),
        ])
        .unwrap();
        let err = render(&bad, &opts).map(|_| ()).unwrap_err().to_string();
        assert!(
            err.contains("nil pointer evaluating interface {}.deeper"),
            "{err}"
        );
    }

    fn render_files(files: &[(&str, &str)], values: &str) -> Result<String, String> {
        let chart = Chart::load_files(
            files
                .iter()
                .map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))
                .collect(),
        )
        .map_err(|e| e.to_string())?;
        let opts = RenderOptions {
            release_name: "release-name".into(),
            namespace: "default".into(),
            values_files: vec![values.to_string()],
            split_mode: crate::sort::SplitMode::Legacy,
            ..Default::default()
        };
        render(&chart, &opts)
            .map(|r| r.manifest())
            .map_err(|e| e.to_string())
    }

    /// Helm (4.2.3) renders exactly this: an empty `Glob` is false in `if`/`with`, empty in
    /// `range` (the `else` runs), and has length 0.
    #[test]
    fn an_empty_glob_in_with_range_and_len() {
        let template = r#"g1: {{ if .Files.Glob "nothing/*" }}yes{{ else }}no{{ end }}
g2: {{ with .Files.Glob "nothing/*" }}yes{{ else }}no{{ end }}
g3: {{ .Files.Glob "nothing/*" | len }}
g4: {{ range $k, $v := .Files.Glob "nothing/*" }}{{ $k }}{{ else }}none{{ end }}
g5: {{ range $k, $v := .Files.Glob "files/*" }}{{ $k }}{{ else }}none{{ end }}
g6: {{ with .Files.Glob "files/*" }}yes{{ else }}no{{ end }}
g7: {{ .Files.Glob "files/*" | len }}
g8: {{ len (.Files.Glob "nothing/*") }}
"#;
        let out = render_files(
            &[
                ("Chart.yaml", "apiVersion: v2\nname: g\nversion: 0.1.0\n"),
                ("templates/cm.yaml", template),
                ("files/a.yaml", "x: 1\n"),
            ],
            "{}",
        )
        .unwrap();
        assert_eq!(
            out,
            "---\n# Source: g/templates/cm.yaml\ng1: no\ng2: no\ng3: 0\ng4: none\ng5: files/a.yaml\ng6: yes\ng7: 1\ng8: 0\n\n"
        );
    }

    /// Helm (4.2.3) renders exactly these: optional globals read through parenthesized chains,
    /// in the parent (where `global` may be absent) and in a subchart (which always has
    /// `global`, a map), without, with, and with other globals.
    #[test]
    fn nil_chains_through_globals_match_helm_in_parent_and_subchart() {
        let parent = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: top}
data:
  g: {{ .Values.global | quote }}
  gk: {{ kindOf .Values.global | quote }}
  a: {{ (((.Values.global).postgresql).auth) | quote }}
  b: {{ ((.Values.nothere).deeper) | quote }}
  c: {{ default "d" (((.Values.global).postgresql).auth).password | quote }}
  p: "{{ (((.Values.global).postgresql).auth) }}"
  v: {{ $x := .Values.nothere }}{{ $x.foo | quote }}
"#;
        let sub = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: sub}
data:
  g: {{ .Values.global | quote }}
  gk: {{ kindOf .Values.global | quote }}
  a: {{ (((.Values.global).postgresql).auth) | quote }}
  c: {{ default "d" (((.Values.global).postgresql).auth).password | quote }}
  e: {{ default "e" ((.Values.global).postgresql).auth | quote }}
"#;
        let files = [
            (
                "Chart.yaml",
                "apiVersion: v2\nname: nil\nversion: 0.1.0\ndependencies:\n- name: sub\n  version: 0.1.0\n",
            ),
            ("templates/cm.yaml", parent),
            (
                "charts/sub/Chart.yaml",
                "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
            ),
            ("charts/sub/templates/cm.yaml", sub),
        ];
        let cases = [
            (
                "{}",
                "---\n# Source: nil/charts/sub/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub}\ndata:\n  g: \"map[]\"\n  gk: \"map\"\n  a: \n  c: \"d\"\n  e: \"e\"\n\n---\n# Source: nil/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: top}\ndata:\n  g: \n  gk: \"invalid\"\n  a: \n  b: \n  c: \"d\"\n  p: \"\"\n  v: \n\n",
            ),
            (
                r#"{"global":{"postgresql":{"auth":{"password":"pw"}}}}"#,
                "---\n# Source: nil/charts/sub/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub}\ndata:\n  g: \"map[postgresql:map[auth:map[password:pw]]]\"\n  gk: \"map\"\n  a: \"map[password:pw]\"\n  c: \"pw\"\n  e: \"map[password:pw]\"\n\n---\n# Source: nil/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: top}\ndata:\n  g: \"map[postgresql:map[auth:map[password:pw]]]\"\n  gk: \"map\"\n  a: \"map[password:pw]\"\n  b: \n  c: \"pw\"\n  p: \"map[password:pw]\"\n  v: \n\n",
            ),
            (
                r#"{"global":{"x":1}}"#,
                "---\n# Source: nil/charts/sub/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub}\ndata:\n  g: \"map[x:1]\"\n  gk: \"map\"\n  a: \n  c: \"d\"\n  e: \"e\"\n\n---\n# Source: nil/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: top}\ndata:\n  g: \"map[x:1]\"\n  gk: \"map\"\n  a: \n  b: \n  c: \"d\"\n  p: \"\"\n  v: \n\n",
            ),
        ];
        for (values, want) in cases {
            assert_eq!(
                render_files(&files, values).unwrap(),
                want,
                "values {values}"
            );
        }
    }

    /// Go's split between an invalid value (what a pipeline, a variable set from one, or a
    /// missing key at the start of a parenthesized chain gives: its fields are nil) and a nil
    /// interface (a missing key or null inside a chain, a nil element being ranged over: a field
    /// of it is an error). Outcomes and positions as Helm 4.2.3 reports them.
    #[test]
    fn nil_interfaces_and_invalid_values_as_in_go() {
        let values = r#"{"global":{},"l":[null],"m":{"k":null},"nul":null}"#;
        let run = |t: &str| {
            render_files(
                &[
                    ("Chart.yaml", "apiVersion: v2\nname: n2\nversion: 0.1.0\n"),
                    ("templates/cm.yaml", t),
                ],
                values,
            )
        };
        let err = |t: &str, want: &str| {
            let e = run(t).map(|_| ()).unwrap_err();
            assert!(e.contains(want), "{t}: {e}");
        };
        err(
            "a: {{ (.Values.global).postgresql.auth }}",
            "nil pointer evaluating interface {}.auth",
        );
        err(
            "a: {{ range .Values.l }}{{ .foo }}{{ end }}",
            "n2/templates/cm.yaml:1:27",
        );
        err(
            "a: {{ range .Values.m }}{{ .foo }}{{ end }}",
            "nil pointer evaluating interface {}.foo",
        );
        err(
            "a: {{ range $v := .Values.l }}{{ $v.foo }}{{ end }}",
            "n2/templates/cm.yaml:1:35",
        );
        err(
            "a: {{ range $k, $v := .Values.m }}{{ $v.foo }}{{ end }}",
            "nil pointer evaluating interface {}.foo",
        );
        err("a: {{ .Values.nul.foo }}", "n2/templates/cm.yaml:1:13");
        err(
            "a: {{ $v := .Values }}{{ $v.nul.foo }}",
            "n2/templates/cm.yaml:1:27",
        );
        for ok in [
            r#"a: {{ range .Values.l }}{{ template "x" . }}{{ end }}{{ define "x" }}{{ .foo }}{{ end }}"#,
            r#"a: {{ range .Values.l }}{{ include "x" . }}{{ end }}{{ define "x" }}{{ .foo }}{{ end }}"#,
            "a: {{ range .Values.l }}{{ $x := . }}{{ $x.foo }}{{ end }}",
            "a: {{ range $v := .Values.l }}{{ $v = $.Values.nul }}{{ $v.foo }}{{ end }}",
            "a: {{ $x := index .Values.l 0 }}{{ $x.foo }}",
            "a: {{ (.Values.nul).foo }}",
            "a: {{ range .Values.l }}{{ . }}{{ end }}",
        ] {
            let out = run(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert!(out.ends_with("\na: \n"), "{ok}: {out:?}");
        }
    }
}
