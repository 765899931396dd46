//! The Go declaration of a WIT record or enum, with its `Load*` and `Store*` functions.
//!
//! Owns: `type_decl`. Must not touch: functions (`imports`, `exports`).

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use wit_parser::{TypeDefKind, TypeId, Variant};

use super::generator::Gen;
use super::layout::cases_of;
use super::names::camel;

impl Gen<'_> {
    /// The type declaration plus `Load*`/`Store*` for a named record or enum (package `wit`).
    pub(super) fn type_decl(&mut self, id: TypeId, iface: &str) -> Result<String> {
        let def = &self.resolve.types[id];
        def.name.as_deref().context("anonymous type")?;
        let name = self.bare_name(id)?;
        let wit_name = def.name.clone().unwrap_or_default();
        let mut out = String::new();
        let doc = |d: &Option<String>, indent: &str| {
            d.as_deref()
                .map(|d| {
                    d.lines()
                        .map(|l| format!("{indent}// {l}\n").replace("// \n", "//\n"))
                        .collect::<String>()
                })
                .unwrap_or_default()
        };
        match &def.kind {
            TypeDefKind::Record(r) => {
                out += &doc(&def.docs.contents, "");
                writeln!(out, "//\n// WIT: record `{iface}.{wit_name}`.")?;
                writeln!(out, "type {name} struct {{")?;
                for f in &r.fields {
                    out += &doc(&f.docs.contents, "\t");
                    writeln!(out, "\t{} {}", camel(&f.name), self.go_type(&f.ty)?)?;
                }
                out += "}\n\n";
                let (offsets, (size, align)) =
                    self.record_layout(r.fields.iter().map(|f| &f.ty))?;
                writeln!(
                    out,
                    "// Size and alignment of {name} in linear memory.\nconst (\n\tSize{name} = {size}\n\tAlign{name} = {align}\n)\n"
                )?;
                let mut body = String::new();
                for (f, off) in r.fields.iter().zip(&offsets) {
                    body += &format!(
                        "{}: {},\n",
                        camel(&f.name),
                        self.load(&f.ty, &format!("p+{off}"))?
                    );
                }
                writeln!(
                    out,
                    "// Load{name} reads a {name} at p.\nfunc Load{name}(p uint32) {name} {{\nreturn {name}{{\n{body}}}\n}}\n"
                )?;
                let mut body = String::new();
                for (f, off) in r.fields.iter().zip(&offsets) {
                    body += &self.store(
                        &f.ty,
                        &format!("p+{off}"),
                        &format!("v.{}", camel(&f.name)),
                        "c",
                    )?;
                }
                writeln!(
                    out,
                    "// Store{name} writes v at p; c keeps its strings and lists alive.\nfunc Store{name}(c *Call, p uint32, v {name}) {{\n{body}}}\n"
                )?;
            }
            TypeDefKind::Enum(e) => {
                out += &doc(&def.docs.contents, "");
                writeln!(out, "//\n// WIT: enum `{iface}.{wit_name}`.")?;
                writeln!(out, "type {name} uint8\n\nconst (")?;
                for (i, c) in e.cases.iter().enumerate() {
                    out += &doc(&c.docs.contents, "\t");
                    if i == 0 {
                        writeln!(out, "\t{name}{} {name} = iota", camel(&c.name))?;
                    } else {
                        writeln!(out, "\t{name}{}", camel(&c.name))?;
                    }
                }
                out += ")\n\n";
                writeln!(
                    out,
                    "// String is the WIT name of the case.\nfunc (v {name}) String() string {{\nswitch v {{"
                )?;
                for c in &e.cases {
                    writeln!(out, "case {name}{}:\nreturn \"{}\"", camel(&c.name), c.name)?;
                }
                writeln!(out, "}}\nreturn \"{wit_name}(?)\"\n}}\n")?;
                writeln!(
                    out,
                    "// Load{name} reads a {name} at p.\nfunc Load{name}(p uint32) {name} {{\nreturn {name}(Ld8(p))\n}}\n"
                )?;
                writeln!(
                    out,
                    "// Store{name} writes v at p.\nfunc Store{name}(_ *Call, p uint32, v {name}) {{\nSt8(p, uint8(v))\n}}\n"
                )?;
            }
            TypeDefKind::Variant(v) => {
                out += &doc(&def.docs.contents, "");
                writeln!(
                    out,
                    "//\n// WIT: variant `{iface}.{wit_name}`: Tag is the case, the field of the case's name its payload."
                )?;
                writeln!(out, "type {name} struct {{\n\tTag uint8")?;
                for c in &v.cases {
                    if let Some(t) = &c.ty {
                        out += &doc(&c.docs.contents, "\t");
                        writeln!(out, "\t{} {}", camel(&c.name), self.go_type(t)?)?;
                    }
                }
                out += "}\n\n";
                out += &self.variant_funcs(&name, &wit_name, v)?;
            }
            TypeDefKind::Resource => {
                out += &doc(&def.docs.contents, "");
                writeln!(
                    out,
                    "//\n// WIT: resource `{iface}.{wit_name}`: a handle (Drop ends an owned one).\ntype {name} uint32\n"
                )?;
            }
            _ => {}
        }
        Ok(out)
    }

    /// The tag constants, `Case`, the layout constants, `Load*` and `Store*` of a variant.
    fn variant_funcs(&mut self, name: &str, wit_name: &str, v: &Variant) -> Result<String> {
        let mut out = format!("// The cases of {name} (its Tag).\nconst (\n");
        let mut names = String::new();
        let mut load = String::new();
        let mut store = String::new();
        let (off, (size, align)) = self.variant_layout(&cases_of(v))?;
        for (i, c) in v.cases.iter().enumerate() {
            if c.name.eq_ignore_ascii_case("tag") {
                bail!("variant {wit_name}: a case named `tag`");
            }
            if i == 0 {
                writeln!(out, "\t{name}{} uint8 = iota", camel(&c.name))?;
            } else {
                writeln!(out, "\t{name}{}", camel(&c.name))?;
            }
            writeln!(names, "case {i}:\nreturn \"{}\"", c.name)?;
            if let Some(t) = &c.ty {
                let field = camel(&c.name);
                let at = format!("p+{off}");
                writeln!(load, "case {i}:\nv.{field} = {}", self.load(t, &at)?)?;
                let st = self.store(t, &at, &format!("v.{field}"), "c")?;
                write!(store, "case {i}:\n{st}")?;
            }
        }
        out += ")\n\n";
        writeln!(
            out,
            "// Case is the WIT name of the case.\nfunc (v {name}) Case() string {{\nswitch v.Tag {{\n{names}}}\nreturn \"{wit_name}(?)\"\n}}\n"
        )?;
        writeln!(
            out,
            "// Size and alignment of {name} in linear memory.\nconst (\n\tSize{name} = {size}\n\tAlign{name} = {align}\n)\n"
        )?;
        writeln!(
            out,
            "// Load{name} reads a {name} at p.\nfunc Load{name}(p uint32) {name} {{\nvar v {name}\nv.Tag = Ld8(p)\nswitch v.Tag {{\n{load}}}\nreturn v\n}}\n"
        )?;
        writeln!(
            out,
            "// Store{name} writes v at p; c keeps its strings and lists alive.\nfunc Store{name}(c *Call, p uint32, v {name}) {{\nSt8(p, v.Tag)\nswitch v.Tag {{\n{store}}}\n}}\n"
        )?;
        Ok(out)
    }
}
