//! One `//go:wasmexport` function per exported WIT function: lift the arguments, call `Impl`,
//! store the result in a return area; and its `cabi_post_*` function.
//!
//! Owns: `export_func`. Must not touch: imports.

use std::fmt::Write as _;

use anyhow::Result;
use wit_parser::Function;

use super::generator::Gen;
use super::layout::Flat;
use super::names::{camel, go_param};

impl Gen<'_> {
    pub(super) fn export_func(
        &mut self,
        iface_name: &str,
        func: &Function,
    ) -> Result<(String, String)> {
        let (params, indirect, results) = self.check_signature(func, false)?;
        let go_name = camel(&func.name);
        // The method of the Exports interface.
        let mut go_params = Vec::new();
        for p in &func.params {
            go_params.push(format!("{} {}", go_param(&p.name), self.go_type(&p.ty)?));
        }
        let go_result = match &func.result {
            Some(t) => format!(" {}", self.go_type(t)?),
            None => String::new(),
        };
        let method = format!(
            "{}\t// WIT: `{iface_name}#{}`.\n\t{go_name}({}){go_result}\n",
            self.docs(&func.docs.contents).replace("//", "\t//"),
            func.name,
            go_params.join(", ")
        );
        let q = self.q;
        let mut out = String::new();
        let mut core_params = Vec::new();
        if indirect {
            core_params.push("args uint32".to_string());
        } else {
            for (i, f) in params.iter().enumerate() {
                core_params.push(format!("f{i} {}", f.go()));
            }
        }
        let core_result = match results.len() {
            0 => String::new(),
            1 => format!(" {}", results[0].go()),
            _ => " uint32".into(),
        };
        let export_name = format!("{iface_name}#{}", func.name);
        writeln!(
            out,
            "//go:wasmexport {export_name}\nfunc export{go_name}({}){core_result} {{",
            core_params.join(", ")
        )?;
        let mut body = format!("{q}BeginExport()\n");
        if indirect {
            let (offsets, _) = self.record_layout(func.params.iter().map(|p| &p.ty))?;
            for (p, off) in func.params.iter().zip(offsets) {
                body += &format!(
                    "{} := {}\n",
                    go_param(&p.name),
                    self.load(&p.ty, &format!("args+{off}"))?
                );
            }
        } else {
            let slots: Vec<(String, Flat)> = params
                .iter()
                .enumerate()
                .map(|(i, f)| (format!("f{i}"), *f))
                .collect();
            let mut at = 0;
            for p in &func.params {
                let k = self.flat(&p.ty)?.len();
                body += &format!(
                    "{} := {}\n",
                    go_param(&p.name),
                    self.lift_flat(&p.ty, &slots[at..at + k])?
                );
                at += k;
            }
        }
        body += &format!("{q}ArgsLifted()\n");
        let call_args: Vec<String> = func.params.iter().map(|p| go_param(&p.name)).collect();
        match (&func.result, results.len()) {
            (None, _) => {
                body += &format!("Impl.{go_name}({})\n{q}EndExport()\n", call_args.join(", "))
            }
            (Some(t), 1) => {
                body += &format!("r := Impl.{go_name}({})\n", call_args.join(", "));
                let c = "c";
                let slot = [("out".to_string(), results[0])];
                body += &format!("c := {q}ResultCall()\nvar out {}\n", results[0].go());
                body += &self.lower_flat(t, "r", c, &slot)?;
                body += &format!("{q}EndExport()\nreturn out\n");
            }
            (Some(t), _) => {
                let (size, align) = self.size_align(t)?;
                body += &format!("r := Impl.{go_name}({})\n", call_args.join(", "));
                body += &format!("c := {q}ResultCall()\nret := c.Alloc({size}, {align})\n");
                body += &self.store(t, "ret", "r", "c")?;
                body += &format!("{q}EndExport()\nreturn ret\n");
            }
        }
        out += &body;
        out += "}\n\n";
        if !core_result.is_empty() {
            writeln!(
                out,
                "//go:wasmexport cabi_post_{export_name}\nfunc post{go_name}({}) {{\n{q}PostReturn()\n}}\n",
                if results.len() == 1 {
                    format!("_ {}", results[0].go())
                } else {
                    "_ uint32".into()
                }
            )?;
        }
        Ok((method, out))
    }
}
