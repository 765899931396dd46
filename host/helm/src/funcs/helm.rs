//! Helm's own template functions: `include`, `tpl`, `required`, `toYaml`/`fromYaml`,
//! `toJson`/`fromJson` (and their Sprig JSON siblings), `toToml`/`fromToml`, and `lookup`
//! (always empty: there is no cluster while rendering).

use std::collections::HashMap;

use super::args::{FR, arg_str, want};
use crate::template::{Exec, Func, FuncError, TemplateError};
use crate::value::{Map, Value};
use crate::{json, yaml};

const MAX_INCLUDE: usize = 1000;

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    m.insert("include", include);
    m.insert("tpl", tpl);
    m.insert("required", |_, a| {
        want("required", a, 2)?;
        let warn = arg_str(&a[0])?;
        match &a[1] {
            Value::Nil => Err(FuncError::call(format!("HELM_ERR_START{warn}HELM_ERR_END"))),
            Value::Str(s) if s.is_empty() => {
                Err(FuncError::call(format!("HELM_ERR_START{warn}HELM_ERR_END")))
            }
            v => Ok(v.clone()),
        }
    });
    m.insert("toYaml", |_, a| {
        want("toYaml", a, 1)?;
        Ok(Value::from(yaml::to_yaml(&a[0])))
    });
    m.insert("mustToYaml", |_, a| {
        want("mustToYaml", a, 1)?;
        Ok(Value::from(yaml::to_yaml(&a[0])))
    });
    m.insert("toYamlPretty", |_, a| {
        want("toYamlPretty", a, 1)?;
        Ok(Value::from(yaml::to_yaml(&a[0])))
    });
    m.insert("fromYaml", |_, a| {
        want("fromYaml", a, 1)?;
        let s = arg_str(&a[0])?;
        Ok(match yaml::parse(s) {
            Ok(Value::Map(m)) => Value::Map(m),
            Ok(Value::Nil) => Value::new_map(),
            Ok(other) => error_map(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                json_kind(&other)
            )),
            Err(e) => error_map(e.0),
        })
    });
    m.insert("fromYamlArray", |_, a| {
        want("fromYamlArray", a, 1)?;
        let s = arg_str(&a[0])?;
        Ok(match yaml::parse(s) {
            Ok(Value::List(l)) => Value::List(l),
            Ok(Value::Nil) => Value::from(Vec::new()),
            Ok(other) => Value::from(vec![Value::from(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type []interface {{}}",
                json_kind(&other)
            ))]),
            Err(e) => Value::from(vec![Value::from(e.0)]),
        })
    });
    m.insert("toJson", |_, a| {
        want("toJson", a, 1)?;
        Ok(Value::from(json::marshal(&a[0])))
    });
    m.insert("mustToJson", |_, a| {
        want("mustToJson", a, 1)?;
        Ok(Value::from(json::marshal(&a[0])))
    });
    m.insert("toPrettyJson", |_, a| {
        want("toPrettyJson", a, 1)?;
        Ok(Value::from(json::marshal_pretty(&a[0])))
    });
    m.insert("mustToPrettyJson", |_, a| {
        want("mustToPrettyJson", a, 1)?;
        Ok(Value::from(json::marshal_pretty(&a[0])))
    });
    m.insert("toRawJson", |_, a| {
        want("toRawJson", a, 1)?;
        Ok(Value::from(json::marshal_raw(&a[0])))
    });
    m.insert("mustToRawJson", |_, a| {
        want("mustToRawJson", a, 1)?;
        Ok(Value::from(json::marshal_raw(&a[0])))
    });
    m.insert("fromJson", |_, a| {
        want("fromJson", a, 1)?;
        let s = arg_str(&a[0])?;
        Ok(match json::parse(s) {
            Ok(Value::Map(m)) => Value::Map(m),
            Ok(other) => error_map(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                json_kind(&other)
            )),
            Err(e) => error_map(e),
        })
    });
    m.insert("mustFromJson", |_, a| {
        want("mustFromJson", a, 1)?;
        json::parse(arg_str(&a[0])?).map_err(FuncError::call)
    });
    m.insert("fromJsonArray", |_, a| {
        want("fromJsonArray", a, 1)?;
        let s = arg_str(&a[0])?;
        Ok(match json::parse(s) {
            Ok(Value::List(l)) => Value::List(l),
            Ok(other) => Value::from(vec![Value::from(format!(
                "json: cannot unmarshal {} into Go value of type []interface {{}}",
                json_kind(&other)
            ))]),
            Err(e) => Value::from(vec![Value::from(e)]),
        })
    });
    m.insert("toToml", |_, a| {
        want("toToml", a, 1)?;
        Ok(Value::from(to_toml(&a[0])))
    });
    m.insert("mustToToml", |_, a| {
        want("mustToToml", a, 1)?;
        Ok(Value::from(to_toml(&a[0])))
    });
    m.insert("fromToml", |_, a| {
        want("fromToml", a, 1)?;
        Ok(error_map("fromToml is not supported by helm-engine".into()))
    });
    m.insert("lookup", |ex, a| {
        want("lookup", a, 4)?;
        let (api_version, kind) = (arg_str(&a[0])?, arg_str(&a[1])?);
        let (namespace, name) = (arg_str(&a[2])?, arg_str(&a[3])?);
        // No cluster (`helm template`, lint): an empty map.
        let Some(cluster) = ex.eng.lookup else {
            return Ok(Value::new_map());
        };
        match cluster.lookup(api_version, kind, namespace, name) {
            Ok(Some(found)) => Ok(json::from_unstructured(&found)),
            Ok(None) => Ok(Value::new_map()),
            Err(e) => Err(FuncError::call(e)),
        }
    });
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Str(_) => "string",
        Value::Float(_) | Value::Int(_) => "number",
        Value::Bool(_) => "bool",
        Value::List(_) => "array",
        Value::Map(_) => "object",
        _ => "value",
    }
}

fn error_map(msg: String) -> Value {
    let mut m = Map::new();
    m.insert("Error".into(), Value::from(msg));
    Value::from(m)
}

fn include(ex: &mut Exec, a: &[Value]) -> FR {
    want("include", a, 2)?;
    let name = arg_str(&a[0])?.to_string();
    {
        let mut d = ex.eng.include_depth.borrow_mut();
        let n = d.entry(name.clone()).or_insert(0);
        if *n > MAX_INCLUDE {
            return Err(FuncError::call(format!(
                "unable to execute template: rendering template has a nested reference name: {name}: rendering template has reached the maximum nesting"
            )));
        }
        *n += 1;
    }
    let r = ex.execute_named(&name, &a[1]);
    if let Some(n) = ex.eng.include_depth.borrow_mut().get_mut(&name) {
        *n -= 1;
    }
    match r {
        Ok(s) => Ok(Value::from(s)),
        Err(e @ TemplateError::Exec { .. }) => Err(FuncError::Nested(String::new(), Box::new(e))),
        Err(e) => Err(FuncError::call(e.to_string())),
    }
}

fn tpl(ex: &mut Exec, a: &[Value]) -> FR {
    want("tpl", a, 2)?;
    let src = arg_str(&a[0])?.to_string();
    let (replaced, body) = ex
        .eng
        .add_scoped("gotpl", &src)
        .map_err(|e| FuncError::call(format!("cannot parse template {src:?}: {e}")))?;
    let r = ex.execute_template(body, &a[1]);
    ex.eng.restore(replaced);
    match r {
        Ok(s) => Ok(Value::from(s.replace("<no value>", ""))),
        Err(e @ TemplateError::Exec { .. }) => Err(FuncError::Nested(
            format!("error during tpl function execution for {src:?}: "),
            Box::new(e),
        )),
        Err(e) => Err(FuncError::call(format!(
            "error during tpl function execution for {src:?}: {e}"
        ))),
    }
}

fn toml_value(v: &Value) -> String {
    match v {
        Value::Str(s) => crate::strconv::go_quote(s),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => {
            let s = crate::strconv::format_float_v(*f);
            if s.contains(['.', 'e', 'I', 'N']) {
                s
            } else {
                format!("{s}.0")
            }
        }
        Value::Bool(b) => b.to_string(),
        Value::List(l) => format!(
            "[{}]",
            l.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Nil => String::new(),
        other => other.to_go_string(),
    }
}

fn toml_table(out: &mut String, prefix: &str, m: &Map) {
    for (k, v) in m.iter() {
        if !matches!(v, Value::Map(_)) && !v.is_nil() {
            out.push_str(&format!("{k} = {}\n", toml_value(v)));
        }
    }
    for (k, v) in m.iter() {
        if let Value::Map(sub) = v {
            let name = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            out.push_str(&format!("\n[{name}]\n"));
            toml_table(out, &name, &sub.borrow());
        }
    }
}

fn to_toml(v: &Value) -> String {
    let mut out = String::new();
    if let Value::Map(m) = v.plain() {
        toml_table(&mut out, "", &m.borrow());
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::Chart;
    use crate::render::{RenderOptions, render};

    /// argo-workflows (bitnami): its `tpl` of a values string includes a helper that calls
    /// `tpl ""`. Go's `t.New("gotpl").Parse("")` does not replace the outer `gotpl` in the set
    /// (an empty tree never replaces a non-empty one) but executes its own empty tree, so the
    /// inner `tpl` renders "", where executing the set's `gotpl` recursed until "unable to
    /// execute". Expected files are Helm 4.2.3's (helm-python-sdk 0.2.2) output.
    #[test]
    fn tpl_of_an_empty_text_inside_tpl_renders_it_as_helm() {
        let chart = Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: tplc\nversion: 0.1.0\n".to_vec(),
            ),
            (
                "values.yaml".into(),
                b"outer: \"a{{ tpl .Values.inner . }}b\"\ninner: \"\"\n".to_vec(),
            ),
            (
                "templates/cm.yaml".into(),
                br#"x: {{ tpl .Values.outer . | quote }}
y: {{ tpl "{{ tpl \"\" . }}z{{ tpl \"  \" . }}" . | quote }}
z: {{ tpl "{{ define \"d\" }}D{{ end }}" . | quote }}
"#
                .to_vec(),
            ),
        ])
        .unwrap();
        let out = render(&chart, &RenderOptions::default()).unwrap();
        assert_eq!(
            out.files["tplc/templates/cm.yaml"],
            "x: \"ab\"\ny: \"z  \"\nz: \"\"\n"
        );
    }
}
