//! One Go function per imported WIT function: lower the arguments, call the
//! `//go:wasmimport`, lift the result.
//!
//! Owns: `import_func`. Must not touch: exports.

use std::fmt::Write as _;

use anyhow::{Result, bail};
use wit_parser::{Function, FunctionKind, TypeId};

use super::generator::Gen;
use super::layout::Flat;
use super::names::{camel, go_param};

impl Gen<'_> {
    pub(super) fn import_func(
        &mut self,
        iface_name: &str,
        iface_go: &str,
        func: &Function,
    ) -> Result<String> {
        let (params, indirect, results) = self.check_signature(func, true)?;
        let (id_name, receiver) = self.import_names(iface_go, func)?;
        let raw = format!("import{id_name}");
        let mut out = String::new();
        // The raw import.
        let mut core_params: Vec<String> = Vec::new();
        if indirect {
            core_params.push("args uint32".into());
        } else {
            for (i, f) in params.iter().enumerate() {
                core_params.push(format!("f{i} {}", f.go()));
            }
        }
        let retptr = results.len() > 1;
        if retptr {
            core_params.push("ret uint32".into());
        }
        let core_result = if results.len() == 1 {
            format!(" {}", results[0].go())
        } else {
            String::new()
        };
        writeln!(
            out,
            "//go:wasmimport {iface_name} {}\nfunc {raw}({}){core_result}\n",
            func.name,
            core_params.join(", ")
        )?;
        // The Go wrapper.
        let mut go_params = Vec::new();
        for p in &func.params {
            go_params.push(format!("{} {}", go_param(&p.name), self.go_type(&p.ty)?));
        }
        let header = match receiver {
            Some(method) => {
                let this = go_params.remove(0);
                format!("({this}) {method}")
            }
            None => id_name,
        };
        let go_result = match &func.result {
            Some(t) => format!(" {}", self.go_type(t)?),
            None => String::new(),
        };
        out += &self.docs(&func.docs.contents);
        writeln!(
            out,
            "//\n// WIT: `{iface_name}#{}`.\nfunc {header}({}){go_result} {{",
            func.name,
            go_params.join(", ")
        )?;
        let mut body = String::from("c := new(Call)\n");
        let mut args = Vec::new();
        if indirect {
            let (offsets, (size, align)) = self.record_layout(func.params.iter().map(|p| &p.ty))?;
            body += &format!("args := c.Alloc({size}, {align})\n");
            for (p, off) in func.params.iter().zip(offsets) {
                body += &self.store(&p.ty, &format!("args+{off}"), &go_param(&p.name), "c")?;
            }
            args.push("args".to_string());
        } else if !params.is_empty() {
            let slots: Vec<(String, Flat)> = params
                .iter()
                .enumerate()
                .map(|(i, f)| (format!("f{i}"), *f))
                .collect();
            for (name, f) in &slots {
                body += &format!("var {name} {}\n", f.go());
            }
            let mut at = 0;
            for p in &func.params {
                let k = self.flat(&p.ty)?.len();
                body += &self.lower_flat(&p.ty, &go_param(&p.name), "c", &slots[at..at + k])?;
                at += k;
            }
            args.extend(slots.iter().map(|s| s.0.clone()));
        }
        let memory = func.result.as_ref().is_some_and(|t| self.has_memory(t));
        if retptr {
            let t = func.result.as_ref().expect("retptr without a result");
            let (size, align) = self.size_align(t)?;
            body += &format!("ret := c.Alloc({size}, {align})\n");
            args.push("ret".into());
        }
        if memory {
            body += "mark := EnterImport()\n";
        }
        match (&func.result, retptr) {
            (Some(t), true) => {
                body += &format!("{raw}({})\n", args.join(", "));
                body += &format!("r := {}\n", self.load(t, "ret")?);
            }
            (Some(t), false) => {
                body += &format!("raw := {raw}({})\n", args.join(", "));
                body += &format!(
                    "r := {}\n",
                    self.lift_flat(t, &[("raw".into(), results[0])])?
                );
            }
            (None, _) => body += &format!("{raw}({})\n", args.join(", ")),
        }
        if memory {
            body += "LeaveImport(mark)\n";
        }
        body += "c.Done()\n";
        if func.result.is_some() {
            body += "return r\n";
        }
        out += &body;
        out += "}\n\n";
        Ok(out)
    }

    /// The Go name of an imported function (also the raw import's, after `import`), and for a
    /// method its Go method name: `LogInfo`; `HttpFieldsFromList` (static),
    /// `NewHttpFields` (constructor); a method `(self HttpFields) Append` is `HttpFieldsAppend`.
    fn import_names(&self, iface_go: &str, func: &Function) -> Result<(String, Option<String>)> {
        let item = camel(func.item_name());
        Ok(match &func.kind {
            FunctionKind::Freestanding => (format!("{iface_go}{}", camel(&func.name)), None),
            FunctionKind::Method(r) => (format!("{}{item}", self.bare_name(*r)?), Some(item)),
            FunctionKind::Static(r) => (format!("{}{item}", self.bare_name(*r)?), None),
            FunctionKind::Constructor(r) => (format!("New{}", self.bare_name(*r)?), None),
            other => bail!("unsupported function kind {other:?}"),
        })
    }

    /// `Drop` of an imported resource's handle (`[resource-drop]name`).
    pub(super) fn resource_drop(&self, iface_name: &str, id: TypeId) -> Result<String> {
        let name = self.bare_name(id)?;
        let wit_name = self.resolve.types[id].name.clone().unwrap_or_default();
        Ok(format!(
            "//go:wasmimport {iface_name} [resource-drop]{wit_name}\nfunc importDrop{name}(h uint32)\n\n// Drop ends the handle (an owned one; its children must be dropped first).\n//\n// WIT: `{iface_name}#[resource-drop]{wit_name}`.\nfunc (h {name}) Drop() {{\nimportDrop{name}(uint32(h))\n}}\n\n"
        ))
    }
}
