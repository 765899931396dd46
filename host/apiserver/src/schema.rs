//! CRD structural schemas: what a real kube-apiserver does to a custom
//! resource on every write (create, update, patch, `/status`), in its order:
//!
//! 1. **prune** fields the `openAPIV3Schema` does not declare (unless a node
//!    has `x-kubernetes-preserve-unknown-fields: true`; `apiVersion`, `kind`
//!    and `metadata` are always kept at the root and in
//!    `x-kubernetes-embedded-resource` objects), and drop `null` values of
//!    fields that are not `nullable` (Kubernetes ≥ 1.20);
//! 2. **default**: a missing property with a `default` gets it (then its own
//!    children are defaulted);
//! 3. **validate**: `type` (with `nullable`, `x-kubernetes-int-or-string`),
//!    `required`, `enum`, `pattern`, `minimum`/`maximum` (+ exclusive),
//!    `multipleOf`, `min/maxLength`, `min/maxItems`, `uniqueItems`,
//!    `min/maxProperties`, `format` (`date-time`, `date`, `byte`, `uuid`,
//!    `ipv4`, `ipv6`, `int32`/`int64` ranges are not checked, as upstream),
//!    `allOf`/`anyOf`/`oneOf`/`not`, and `x-kubernetes-embedded-resource`
//!    (`apiVersion` and `kind` required).
//!
//! Errors use the field paths and texts of `apiextensions-apiserver`
//! (kube-openapi validation mapped to `field.Error`): e.g.
//! `spec.type: Invalid value: "integer": spec.type in body must be of type string: "integer"`,
//! `status.observedGeneration: Required value`. A schema is compiled once per
//! CRD version ([`CrdSchemas::compile`]) and cached by the store.

use crate::status::{FieldError, FieldErrorType, go_quote};
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Ty {
    fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "object" => Ty::Object,
            "array" => Ty::Array,
            "string" => Ty::String,
            "integer" => Ty::Integer,
            "number" => Ty::Number,
            "boolean" => Ty::Boolean,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Ty::Object => "object",
            Ty::Array => "array",
            Ty::String => "string",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::Boolean => "boolean",
        }
    }
}

/// The value Kubernetes reports for a size or combinator error (the field's, not the value).
const EMPTY: Value = Value::String(String::new());

/// An Invalid field error worded `{path} in body {msg}`, as the OpenAPI validator words it.
fn in_body(errs: &mut Vec<FieldError>, path: &str, value: &Value, msg: String) {
    errs.push(FieldError::invalid(
        path,
        value,
        format!("{path} in body {msg}"),
    ));
}

/// The type name kube-openapi reports for a value.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                "integer"
            } else {
                "number"
            }
        }
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// One compiled schema node.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    ty: Option<Ty>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    embedded: bool,
    properties: Option<BTreeMap<String, Schema>>,
    additional: Option<Box<Schema>>,
    items: Option<Box<Schema>>,
    required: Vec<String>,
    enum_values: Option<Vec<Value>>,
    pattern: Option<(String, Regex)>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    format: Option<String>,
    default: Option<Value>,
    all_of: Vec<Schema>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    not: Option<Box<Schema>>,
    /// Root only: the CRD has `preserveUnknownFields: true` (nothing is pruned).
    keep_unknown_everywhere: bool,
}

/// Schemas of one CRD, by version (a version without a schema is `None`).
#[derive(Debug, Clone, Default)]
pub struct CrdSchemas {
    pub versions: Vec<(String, Option<Schema>)>,
}

impl CrdSchemas {
    /// Compile every version's `schema.openAPIV3Schema` (or the legacy
    /// top-level `spec.validation.openAPIV3Schema`). Errors name the bad node.
    pub fn compile(crd: &Value) -> Result<CrdSchemas, FieldError> {
        let mut out = CrdSchemas::default();
        let top = crd.pointer("/spec/validation/openAPIV3Schema");
        if let Some(vs) = crd.pointer("/spec/versions").and_then(Value::as_array) {
            for (i, v) in vs.iter().enumerate() {
                let Some(name) = v.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
                let mut s = match v.pointer("/schema/openAPIV3Schema").or(top) {
                    Some(s) => {
                        root_metadata_says_only_its_type(s, &path)?;
                        Some(Schema::compile(s, &path)?)
                    }
                    None => None,
                };
                // legacy `spec.preserveUnknownFields: true`: validate and default, never prune
                if let Some(s) = &mut s
                    && crd.pointer("/spec/preserveUnknownFields") == Some(&Value::Bool(true))
                {
                    s.keep_unknown_everywhere = true;
                }
                out.versions.push((name.to_string(), s));
            }
        }
        Ok(out)
    }

    pub fn for_version(&self, version: &str) -> Option<&Schema> {
        self.versions
            .iter()
            .find(|(v, _)| v == version)
            .and_then(|(_, s)| s.as_ref())
    }
}

/// At a CRD schema's root, `metadata` may give its type and restrict `name` and `generateName`,
/// nothing else (not even a description), as apiextensions-apiserver's validation says.
fn root_metadata_says_only_its_type(root: &Value, path: &str) -> Result<(), FieldError> {
    let Some(Value::Object(metadata)) = root.pointer("/properties/metadata") else {
        return Ok(());
    };
    let restricts_only_names = |key: &str, value: &Value| match key {
        "type" => value == "object",
        "properties" => value
            .as_object()
            .is_some_and(|p| p.keys().all(|k| k == "name" || k == "generateName")),
        _ => false,
    };
    if metadata.iter().all(|(k, v)| restricts_only_names(k, v)) {
        return Ok(());
    }
    Err(FieldError::forbidden(
        format!("{path}.properties[metadata]"),
        "must not specify anything other than name and generateName, but metadata is implicitly specified",
    ))
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}
fn uint(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}
fn flag(v: &Value, k: &str) -> bool {
    v.get(k).and_then(Value::as_bool).unwrap_or(false)
}

impl Schema {
    /// Compile one `JSONSchemaProps` node (recursively). `path` is used in errors.
    pub fn compile(v: &Value, path: &str) -> Result<Schema, FieldError> {
        let bad = |field: &str, value: &Value, why: &str| {
            Err(FieldError::invalid(format!("{path}.{field}"), value, why))
        };
        if !v.is_object() {
            return bad("", v, "must be an object");
        }
        let ty = match v.get("type") {
            None => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => match Ty::parse(s) {
                Some(t) => Some(t),
                None => {
                    return Err(FieldError::not_supported(
                        format!("{path}.type"),
                        &Value::String(s.clone()),
                        &["array", "boolean", "integer", "number", "object", "string"],
                    ));
                }
            },
            Some(other) => return bad("type", other, "must be a string"),
        };
        let mut s = Schema {
            ty,
            nullable: flag(v, "nullable"),
            int_or_string: flag(v, "x-kubernetes-int-or-string"),
            preserve_unknown: flag(v, "x-kubernetes-preserve-unknown-fields"),
            embedded: flag(v, "x-kubernetes-embedded-resource"),
            minimum: num(v, "minimum"),
            maximum: num(v, "maximum"),
            exclusive_minimum: flag(v, "exclusiveMinimum"),
            exclusive_maximum: flag(v, "exclusiveMaximum"),
            multiple_of: num(v, "multipleOf"),
            min_length: uint(v, "minLength"),
            max_length: uint(v, "maxLength"),
            min_items: uint(v, "minItems"),
            max_items: uint(v, "maxItems"),
            unique_items: flag(v, "uniqueItems"),
            min_properties: uint(v, "minProperties"),
            max_properties: uint(v, "maxProperties"),
            format: v
                .get("format")
                .and_then(Value::as_str)
                .filter(|f| !f.is_empty())
                .map(str::to_string),
            default: v.get("default").cloned(),
            enum_values: v.get("enum").and_then(Value::as_array).cloned(),
            required: v
                .get("required")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            ..Default::default()
        };
        if let Some(p) = v.get("pattern").and_then(Value::as_str) {
            match Regex::new(p) {
                Ok(re) => s.pattern = Some((p.to_string(), re)),
                Err(e) => {
                    return bad(
                        "pattern",
                        &Value::String(p.into()),
                        &format!("must be a valid regular expression, but isn't: {e}"),
                    );
                }
            }
        }
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            let mut m = BTreeMap::new();
            for (k, pv) in props {
                m.insert(
                    k.clone(),
                    Schema::compile(pv, &format!("{path}.properties[{k}]"))?,
                );
            }
            s.properties = Some(m);
        }
        match v.get("additionalProperties") {
            Some(Value::Object(_)) => {
                s.additional = Some(Box::new(Schema::compile(
                    &v["additionalProperties"],
                    &format!("{path}.additionalProperties"),
                )?));
            }
            Some(Value::Bool(true)) => s.preserve_unknown = true,
            _ => {}
        }
        if let Some(items) = v.get("items") {
            let it = match items {
                Value::Array(a) => a.first(),
                other => Some(other),
            };
            if let Some(it) = it {
                s.items = Some(Box::new(Schema::compile(it, &format!("{path}.items"))?));
            }
        }
        for (k, dst) in [
            ("allOf", &mut s.all_of),
            ("anyOf", &mut s.any_of),
            ("oneOf", &mut s.one_of),
        ] {
            if let Some(a) = v.get(k).and_then(Value::as_array) {
                for (i, sub) in a.iter().enumerate() {
                    dst.push(Schema::compile(sub, &format!("{path}.{k}[{i}]"))?);
                }
            }
        }
        if let Some(n) = v.get("not") {
            s.not = Some(Box::new(Schema::compile(n, &format!("{path}.not"))?));
        }
        Ok(s)
    }

    /// Prune unknown fields and non-nullable nulls, then apply defaults, in place.
    /// `obj` is a whole custom resource (root `apiVersion`/`kind`/`metadata` are kept).
    /// Returns the paths of the unknown fields it pruned (`spec.typo`), for
    /// `fieldValidation=Strict`.
    pub fn prune_and_default(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        self.walk(obj, true, !self.keep_unknown_everywhere, "", &mut pruned);
        pruned
    }

    fn walk(&self, v: &mut Value, root: bool, prune: bool, path: &str, pruned: &mut Vec<String>) {
        let at = |k: &str| {
            if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            }
        };
        match v {
            Value::Object(m) => {
                if let Some(props) = &self.properties {
                    if prune && !self.preserve_unknown {
                        let keep_meta = root || self.embedded;
                        m.retain(|k, _| {
                            let keep = props.contains_key(k)
                                || (self.additional.is_some())
                                || (keep_meta
                                    && (k == "apiVersion" || k == "kind" || k == "metadata"));
                            if !keep {
                                pruned.push(at(k));
                            }
                            keep
                        });
                    }
                    for (k, ps) in props {
                        if root && k == "metadata" {
                            continue;
                        }
                        if m.get(k).is_some_and(Value::is_null) && !ps.nullable {
                            m.remove(k);
                        }
                        if !m.contains_key(k)
                            && let Some(d) = &ps.default
                        {
                            m.insert(k.clone(), d.clone());
                        }
                        if let Some(child) = m.get_mut(k) {
                            ps.walk(child, false, prune, &at(k), pruned);
                        }
                    }
                    if let Some(ad) = &self.additional {
                        for (k, child) in m.iter_mut() {
                            if !props.contains_key(k) {
                                ad.walk(child, false, prune, &at(k), pruned);
                            }
                        }
                    }
                } else if let Some(ad) = &self.additional {
                    m.retain(|_, c| !c.is_null() || ad.nullable);
                    for (k, child) in m.iter_mut() {
                        ad.walk(child, false, prune, &at(k), pruned);
                    }
                } else if !prune {
                } else if self.ty == Some(Ty::Object)
                    && !self.preserve_unknown
                    && !self.embedded
                    && !root
                {
                    pruned.extend(m.keys().map(|k| at(k)));
                    m.clear();
                } else if self.embedded && !self.preserve_unknown {
                    m.retain(|k, _| {
                        let keep = k == "apiVersion" || k == "kind" || k == "metadata";
                        if !keep {
                            pruned.push(at(k));
                        }
                        keep
                    });
                }
            }
            Value::Array(a) => {
                if let Some(it) = &self.items {
                    for (i, child) in a.iter_mut().enumerate() {
                        it.walk(child, false, prune, &format!("{path}[{i}]"), pruned);
                    }
                }
            }
            _ => {}
        }
    }

    /// Validate a whole custom resource; returns the field errors (empty = valid).
    pub fn validate_object(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let (Some(m), Some(props)) = (obj.as_object(), &self.properties) {
            for r in &self.required {
                if !m.contains_key(r) && r != "metadata" && r != "apiVersion" && r != "kind" {
                    errs.push(FieldError::required(r.clone(), ""));
                }
            }
            for (k, v) in m {
                if k == "metadata" || k == "apiVersion" || k == "kind" {
                    continue;
                }
                if let Some(ps) = props.get(k) {
                    ps.validate(v, k, &mut errs);
                } else if let Some(ad) = &self.additional {
                    ad.validate(v, k, &mut errs);
                }
            }
        }
        let mut meta_errs = Vec::new();
        self.embedded_check(obj, "", &mut meta_errs, true);
        errs.extend(meta_errs);
        errs
    }

    /// `x-kubernetes-embedded-resource` checks (apiextensions' objectmeta validation), after the schema errors.
    fn embedded_check(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>, root: bool) {
        match v {
            Value::Object(m) => {
                if self.embedded && !root {
                    for k in ["apiVersion", "kind"] {
                        match m.get(k) {
                            None => errs.push(FieldError::required(
                                format!("{path}.{k}"),
                                "must not be empty",
                            )),
                            Some(Value::String(s)) if s.is_empty() => {
                                errs.push(FieldError::invalid(
                                    format!("{path}.{k}"),
                                    &m[k],
                                    "must not be empty",
                                ))
                            }
                            Some(Value::String(_)) => {}
                            Some(other) => errs.push(FieldError::invalid(
                                format!("{path}.{k}"),
                                other,
                                "must be a string",
                            )),
                        }
                    }
                }
                for (k, c) in m {
                    if root && k == "metadata" {
                        continue;
                    }
                    let cs = self
                        .properties
                        .as_ref()
                        .and_then(|p| p.get(k))
                        .or(self.additional.as_deref());
                    if let Some(cs) = cs {
                        cs.embedded_check(c, &join(path, k), errs, false);
                    }
                }
            }
            Value::Array(a) => {
                if let Some(it) = &self.items {
                    for (i, c) in a.iter().enumerate() {
                        it.embedded_check(c, &format!("{path}[{i}]"), errs, false);
                    }
                }
            }
            _ => {}
        }
    }

    fn validate(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        if !self.type_allows(v, path, errs) {
            return;
        }
        self.check_enum(v, path, errs);
        match v {
            Value::String(s) => self.check_string(s, v, path, errs),
            Value::Number(n) => self.check_number(n, v, path, errs),
            Value::Array(a) => self.check_array(a, path, errs),
            Value::Object(m) => self.check_object(m, path, errs),
            _ => {}
        }
        self.check_combinators(v, path, errs);
    }

    /// `type` (with `nullable` and `x-kubernetes-int-or-string`): false when nothing more is
    /// to be checked (a type error, or an allowed null).
    fn type_allows(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) -> bool {
        let actual = type_of(v);
        if v.is_null() {
            if !self.nullable && (self.ty.is_some() || self.int_or_string) {
                errs.push(self.type_error(path, actual));
                return false;
            }
            if self.nullable {
                return false;
            }
        } else if self.int_or_string {
            if actual != "integer" && actual != "string" {
                errs.push(self.type_error(path, actual));
                return false;
            }
        } else if let Some(t) = self.ty {
            let ok = match t {
                Ty::Number => actual == "integer" || actual == "number",
                _ => t.name() == actual,
            };
            if !ok {
                errs.push(self.type_error(path, actual));
                return false;
            }
        }
        true
    }

    fn check_enum(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        if let Some(en) = &self.enum_values
            && !en.iter().any(|e| e == v)
        {
            let allowed: Vec<String> = en
                .iter()
                .map(|e| match e {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            let refs: Vec<&str> = allowed.iter().map(String::as_str).collect();
            errs.push(FieldError::not_supported(path, v, &refs));
        }
    }

    fn check_string(&self, s: &str, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        let len = s.chars().count() as u64;
        if let Some(max) = self.max_length
            && len > max
        {
            in_body(errs, path, v, format!("should be at most {max} chars long"));
        }
        if let Some(min) = self.min_length
            && len < min
        {
            in_body(
                errs,
                path,
                v,
                format!("should be at least {min} chars long"),
            );
        }
        if let Some((p, re)) = &self.pattern
            && !re.is_match(s)
        {
            in_body(errs, path, v, format!("should match '{p}'"));
        }
        if let Some(f) = &self.format
            && !format_ok(f, s)
        {
            errs.push(FieldError::invalid(
                path,
                v,
                format!("{path} in body must be of type {f}: {}", go_quote(s)),
            ));
        }
    }

    fn check_number(
        &self,
        n: &serde_json::Number,
        v: &Value,
        path: &str,
        errs: &mut Vec<FieldError>,
    ) {
        let x = n.as_f64().unwrap_or(0.0);
        if let Some(max) = self.maximum {
            if self.exclusive_maximum && x >= max {
                in_body(
                    errs,
                    path,
                    v,
                    format!("should be less than {}", go_num(max)),
                );
            } else if x > max {
                in_body(
                    errs,
                    path,
                    v,
                    format!("should be less than or equal to {}", go_num(max)),
                );
            }
        }
        if let Some(min) = self.minimum {
            if self.exclusive_minimum && x <= min {
                in_body(
                    errs,
                    path,
                    v,
                    format!("should be greater than {}", go_num(min)),
                );
            } else if x < min {
                in_body(
                    errs,
                    path,
                    v,
                    format!("should be greater than or equal to {}", go_num(min)),
                );
            }
        }
        if let Some(m) = self.multiple_of
            && m != 0.0
            && (x / m).fract() != 0.0
        {
            in_body(
                errs,
                path,
                v,
                format!("should be a multiple of {}", go_num(m)),
            );
        }
    }

    fn check_array(&self, a: &[Value], path: &str, errs: &mut Vec<FieldError>) {
        if let Some(max) = self.max_items
            && a.len() as u64 > max
        {
            in_body(
                errs,
                path,
                &EMPTY,
                format!("should have at most {max} items"),
            );
        }
        if let Some(min) = self.min_items
            && (a.len() as u64) < min
        {
            in_body(
                errs,
                path,
                &EMPTY,
                format!("should have at least {min} items"),
            );
        }
        if self.unique_items && a.iter().enumerate().any(|(i, x)| a[..i].contains(x)) {
            in_body(errs, path, &EMPTY, "shouldn't contain duplicates".into());
        }
        if let Some(it) = &self.items {
            for (i, c) in a.iter().enumerate() {
                it.validate(c, &format!("{path}[{i}]"), errs);
            }
        }
    }

    fn check_object(&self, m: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
        if let Some(max) = self.max_properties
            && m.len() as u64 > max
        {
            in_body(
                errs,
                path,
                &EMPTY,
                format!("should have at most {max} properties"),
            );
        }
        if let Some(min) = self.min_properties
            && (m.len() as u64) < min
        {
            in_body(
                errs,
                path,
                &EMPTY,
                format!("should have at least {min} properties"),
            );
        }
        for r in &self.required {
            if !m.contains_key(r) {
                errs.push(FieldError::required(join(path, r), ""));
            }
        }
        self.validate_children(m, path, errs);
    }

    /// `allOf`, `anyOf`, `oneOf`, `not`.
    fn check_combinators(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        for s in &self.all_of {
            s.validate(v, path, errs);
        }
        if !self.any_of.is_empty() && !self.int_or_string {
            let ok = self.any_of.iter().any(|s| {
                let mut e = Vec::new();
                s.validate(v, path, &mut e);
                e.is_empty()
            });
            if !ok {
                in_body(
                    errs,
                    path,
                    &EMPTY,
                    "must validate at least one schema (anyOf)".into(),
                );
            }
        }
        if !self.one_of.is_empty() {
            let n = self
                .one_of
                .iter()
                .filter(|s| {
                    let mut e = Vec::new();
                    s.validate(v, path, &mut e);
                    e.is_empty()
                })
                .count();
            if n != 1 {
                in_body(
                    errs,
                    path,
                    &EMPTY,
                    "must validate one and only one schema (oneOf)".into(),
                );
            }
        }
        if let Some(n) = &self.not {
            let mut e = Vec::new();
            n.validate(v, path, &mut e);
            if e.is_empty() {
                in_body(
                    errs,
                    path,
                    &EMPTY,
                    "must not validate the schema (not)".into(),
                );
            }
        }
    }

    fn validate_children(&self, m: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
        for (k, c) in m {
            let cs = self
                .properties
                .as_ref()
                .and_then(|p| p.get(k))
                .or(self.additional.as_deref());
            if let Some(cs) = cs {
                cs.validate(c, &join(path, k), errs);
            }
        }
    }

    fn type_error(&self, path: &str, actual: &str) -> FieldError {
        let want = if self.int_or_string {
            "integer,string".to_string()
        } else {
            self.ty.map(Ty::name).unwrap_or("object").to_string()
        };
        FieldError {
            ty: FieldErrorType::TypeInvalid,
            field: path.to_string(),
            value: Some(go_quote(actual)),
            detail: format!(
                "{path} in body must be of type {want}: {}",
                go_quote(actual)
            ),
        }
    }
}

fn join(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// A float as Go's `%v` prints it (integral values without a fraction).
fn go_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e21 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// The string formats the apiserver checks (unknown formats pass, as upstream).
fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "date-time" => s.parse::<jiff::Timestamp>().is_ok(),
        "date" => s.parse::<jiff::civil::Date>().is_ok() && s.len() == 10,
        "byte" => crate::builtin::base64_decode(s).is_some(),
        "uuid" => uuid::Uuid::try_parse(s).is_ok() && s.len() == 36,
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(v: Value) -> Schema {
        Schema::compile(&v, "s").unwrap()
    }

    #[test]
    fn a_root_metadata_schema_may_only_give_its_type() {
        let crd = |metadata: Value| {
            json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema":
                {"type": "object", "properties": {"metadata": metadata}}}}]}})
        };
        assert!(CrdSchemas::compile(&crd(json!({"type": "object"}))).is_ok());
        let refused = CrdSchemas::compile(&crd(json!({"type": "object", "description": "x"})))
            .unwrap_err()
            .to_string();
        assert!(
            refused.starts_with("spec.versions[0].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName"),
            "{refused}"
        );
    }

    #[test]
    fn type_error_text() {
        let s = compile(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"type": {"type": "string"}}}}}),
        );
        let e = s.validate_object(&json!({"spec": {"type": 5}}));
        assert_eq!(
            e[0].to_string(),
            "spec.type: Invalid value: \"integer\": spec.type in body must be of type string: \"integer\""
        );
    }

    #[test]
    fn prune_default_nullable() {
        let s = compile(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "a": {"type": "string", "default": "x"},
                "b": {"type": "string"},
                "c": {"type": "string", "nullable": true},
                "o": {"type": "object", "default": {}, "properties": {"n": {"type": "integer", "default": 3}}}
            }}
        }}));
        let mut v = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "extra": 1,
            "spec": {"a": null, "b": null, "c": null, "zzz": true}});
        s.prune_and_default(&mut v);
        assert_eq!(
            v,
            json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"},
            "spec": {"a": "x", "c": null, "o": {"n": 3}}})
        );
        assert!(s.validate_object(&v).is_empty());
    }
}
