//! Dependency processing and value coalescing over the chart tree, following Helm's
//! `chartutil/dependencies.go` and `coalesce.go`: aliases, `tags` then `condition` (first path
//! resolving to a bool wins), removal of disabled subcharts, `import-values` (which also merges
//! the subcharts' defaults into the parent's values), globals copied down every level.

use std::rc::Rc;

use crate::chart::{Chart, Dependency, File, ImportValue, Metadata};
use crate::funcs::semver::{Constraints, Version};
use crate::value::{Map, MapRef, Value};
use crate::values::{clean_nil, coalesce_tables, path_value, read_values, table};

/// A chart prepared for rendering (values parsed, dependencies resolved).
#[derive(Clone)]
pub struct WChart {
    pub meta: Metadata,
    pub values: MapRef,
    pub templates: Rc<Vec<File>>,
    pub files: Rc<Vec<File>>,
    pub schema: Option<Rc<Vec<u8>>>,
    pub deps: Vec<WChart>,
}

impl WChart {
    /// Prepares a loaded chart (parses every `values.yaml`).
    pub fn from_chart(c: &Chart) -> Result<WChart, String> {
        let values = match &c.values {
            Some(v) => read_values(&String::from_utf8_lossy(v))
                .map_err(|e| format!("cannot load values.yaml: {e}"))?,
            None => Value::new_map(),
        };
        let Value::Map(values) = values else {
            unreachable!()
        };
        Ok(WChart {
            meta: c.metadata.clone(),
            values,
            templates: Rc::new(c.templates.clone()),
            files: Rc::new(c.files.clone()),
            schema: c.schema.clone().map(Rc::new),
            deps: c
                .dependencies
                .iter()
                .map(WChart::from_chart)
                .collect::<Result<_, _>>()?,
        })
    }

    fn deep_clone(&self) -> WChart {
        let mut c = self.clone();
        c.values = copy_map(&self.values);
        c.deps = self.deps.iter().map(|d| d.deep_clone()).collect();
        c
    }

    /// The chart name (alias applied).
    pub fn name(&self) -> &str {
        &self.meta.name
    }
}

fn compatible(constraint: &str, ver: &str) -> bool {
    let Ok(v) = Version::parse(ver) else {
        return false;
    };
    match Constraints::parse(constraint) {
        Ok(c) => c.check(&v),
        Err(_) => false,
    }
}

fn copy_map(m: &MapRef) -> MapRef {
    match Value::Map(m.clone()).deep_copy() {
        Value::Map(m) => m,
        _ => unreachable!(),
    }
}

fn new_map() -> MapRef {
    Rc::new(std::cell::RefCell::new(Map::new()))
}

/// `CoalesceValues` (merge=false) / `MergeValues` (merge=true) of `vals` with the chart tree.
pub fn coalesce_values(c: &WChart, vals: &MapRef, merge: bool) -> MapRef {
    let dest = copy_map(vals);
    coalesce(c, &dest, "", merge);
    dest
}

fn coalesce(c: &WChart, dest: &MapRef, prefix: &str, merge: bool) {
    coalesce_chart_values(c, dest, merge);
    coalesce_deps(c, dest, prefix, merge);
}

fn coalesce_deps(c: &WChart, dest: &MapRef, prefix: &str, merge: bool) {
    for sub in &c.deps {
        let name = sub.name().to_string();
        let existing = dest.borrow().get(&name).cloned();
        let dv = match existing {
            None => {
                let m = new_map();
                dest.borrow_mut()
                    .insert(name.clone(), Value::Map(m.clone()));
                m
            }
            Some(Value::Map(m)) => m,
            Some(_) => continue,
        };
        let sub_prefix = if prefix.is_empty() {
            c.name().to_string()
        } else {
            format!("{prefix}.{}", c.name())
        };
        coalesce_globals(&dv, dest);
        coalesce(sub, &dv, &sub_prefix, merge);
    }
}

fn coalesce_globals(dest: &MapRef, src: &MapRef) {
    let dg = match dest.borrow().get("global") {
        None => new_map(),
        Some(Value::Map(m)) => m.clone(),
        Some(_) => return,
    };
    let sg = match src.borrow().get("global") {
        None => new_map(),
        Some(Value::Map(m)) => m.clone(),
        Some(_) => return,
    };
    let entries: Vec<(String, Value)> = sg
        .borrow()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, val) in entries {
        if let Value::Map(vm) = &val {
            let vv: MapRef = Rc::new(std::cell::RefCell::new(vm.borrow().clone()));
            let destv = dg.borrow().get(&key).cloned();
            match destv {
                None => {
                    dg.borrow_mut().insert(key, Value::Map(vv));
                }
                Some(Value::Map(dvm)) => {
                    coalesce_tables(&vv, &dvm, true);
                    dg.borrow_mut().insert(key, Value::Map(vv));
                }
                Some(_) => {}
            }
        } else if matches!(dg.borrow().get(&key), Some(Value::Map(_))) {
            // table in destination: skip
        } else {
            dg.borrow_mut().insert(key, val);
        }
    }
    dest.borrow_mut().insert("global".into(), Value::Map(dg));
}

fn coalesce_chart_values(c: &WChart, v: &MapRef, merge: bool) {
    let vc = copy_map(&c.values);
    let entries: Vec<(String, Value)> = vc
        .borrow()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, val) in entries {
        let cur = v.borrow().get(&key).cloned();
        match cur {
            Some(value) => {
                if value.is_nil() && !merge {
                    v.borrow_mut().remove(&key);
                } else if let Value::Map(dest) = value
                    && let Value::Map(src) = &val
                {
                    let child_merge = merge || c.deps.iter().any(|d| d.name() == key);
                    if !child_merge {
                        clean_nil(src);
                    }
                    coalesce_tables(&dest, src, child_merge);
                }
            }
            None => {
                if !merge {
                    if val.is_nil() {
                        continue;
                    }
                    if let Value::Map(sub) = &val {
                        clean_nil(sub);
                    }
                }
                v.borrow_mut().insert(key, val);
            }
        }
    }
}

/// `ProcessDependencies`: enables/disables subcharts and applies import-values.
pub fn process_dependencies(c: &mut WChart, user: &MapRef) -> Result<(), String> {
    process_enabled(c, user, "")?;
    process_import_values_rec(c);
    Ok(())
}

fn process_enabled(c: &mut WChart, v: &MapRef, path: &str) -> Result<(), String> {
    if c.meta.dependencies.is_empty() {
        return Ok(());
    }
    let mut chart_deps: Vec<WChart> = Vec::new();
    'outer: for existing in &c.deps {
        for req in &c.meta.dependencies {
            if existing.name() == req.name && compatible(&req.version, &existing.meta.version) {
                continue 'outer;
            }
        }
        chart_deps.push(existing.clone());
    }
    for req in c.meta.dependencies.iter_mut() {
        if let Some(found) = c
            .deps
            .iter()
            .find(|d| d.name() == req.name && compatible(&req.version, &d.meta.version))
        {
            let mut out = found.deep_clone();
            if !req.alias.is_empty() {
                out.meta.name = req.alias.clone();
            }
            chart_deps.push(out);
        }
        if !req.alias.is_empty() {
            req.name = req.alias.clone();
        }
    }
    c.deps = chart_deps;
    for d in c.meta.dependencies.iter_mut() {
        d.enabled = true;
    }
    let cvals = coalesce_values(c, v, false);
    process_tags(&mut c.meta.dependencies, &cvals);
    process_conditions(&mut c.meta.dependencies, &cvals, path);
    let rm: Vec<String> = c
        .meta
        .dependencies
        .iter()
        .filter(|d| !d.enabled)
        .map(|d| d.name.clone())
        .collect();
    c.deps.retain(|d| !rm.contains(&d.meta.name));
    c.meta.dependencies.retain(|d| !rm.contains(&d.name));
    for t in c.deps.iter_mut() {
        let sub = format!("{path}{}.", t.meta.name);
        process_enabled(t, &cvals, &sub)?;
    }
    Ok(())
}

fn process_tags(reqs: &mut [Dependency], cvals: &MapRef) {
    let Some(vt) = table(cvals, "tags") else {
        return;
    };
    for r in reqs.iter_mut() {
        let (mut has_true, mut has_false) = (false, false);
        for k in &r.tags {
            if let Some(Value::Bool(b)) = vt.borrow().get(k) {
                if *b {
                    has_true = true;
                } else {
                    has_false = true;
                }
            }
        }
        if !has_true && has_false {
            r.enabled = false;
        } else if has_true || !has_false {
            r.enabled = true;
        }
    }
}

fn process_conditions(reqs: &mut [Dependency], cvals: &MapRef, path: &str) {
    for r in reqs.iter_mut() {
        for c in r.condition.trim().split(',') {
            if c.is_empty() {
                continue;
            }
            if let Some(Value::Bool(b)) = path_value(cvals, &format!("{path}{c}")) {
                r.enabled = b;
                break;
            }
        }
    }
}

fn path_to_map(path: &str, data: MapRef) -> MapRef {
    if path == "." {
        return data;
    }
    let mut cur = Value::Map(data);
    for p in path.split('.').rev() {
        let mut m = Map::new();
        m.insert(p.to_string(), cur);
        cur = Value::from(m);
    }
    match cur {
        Value::Map(m) => m,
        _ => unreachable!(),
    }
}

fn process_import_values_rec(c: &mut WChart) {
    for d in c.deps.iter_mut() {
        process_import_values_rec(d);
    }
    process_import_values(c);
}

fn process_import_values(c: &mut WChart) {
    if c.meta.dependencies.is_empty() {
        return;
    }
    let cvals = coalesce_values(c, &new_map(), true);
    let b = new_map();
    for r in c.meta.dependencies.iter_mut() {
        let mut out = Vec::new();
        for iv in &r.import_values {
            match iv {
                ImportValue::Map { child, parent } => {
                    out.push(ImportValue::Map {
                        child: child.clone(),
                        parent: parent.clone(),
                    });
                    if let Some(vv) = table(&cvals, &format!("{}.{}", r.name, child)) {
                        let src = path_to_map(parent, copy_map(&vv));
                        coalesce_tables(&b, &src, true);
                    }
                }
                ImportValue::Name(n) => {
                    let child = format!("exports.{n}");
                    out.push(ImportValue::Map {
                        child: child.clone(),
                        parent: ".".into(),
                    });
                    if let Some(vm) = table(&cvals, &format!("{}.{}", r.name, child)) {
                        coalesce_tables(&b, &copy_map(&vm), true);
                    }
                }
            }
        }
        r.import_values = out;
    }
    let cv = copy_map(&cvals);
    coalesce_tables(&cv, &b, true);
    c.values = cv;
}
