//! Go code that lowers a WIT value to flat core values (parameters) and lifts one from them.
//!
//! Owns: `lower_flat`, `lift_flat`. Must not touch: memory layout rules (`layout`).

use anyhow::{Result, bail};
use wit_parser::{Type, TypeDefKind};

use super::generator::Gen;
use super::layout::Flat;
use super::names::camel;

impl Gen<'_> {
    /// Go statements assigning the flat lowering of `val` to the variables `slots` (declared by
    /// the caller with the slots' Go types, zero-initialised).
    pub(super) fn lower_flat(
        &mut self,
        ty: &Type,
        val: &str,
        c: &str,
        slots: &[(String, Flat)],
    ) -> Result<String> {
        let set =
            |slot: &(String, Flat), expr: &str| format!("{} = {}({expr})\n", slot.0, slot.1.go());
        Ok(match ty {
            Type::Bool => format!("if {val} {{\n{} = 1\n}}\n", slots[0].0),
            Type::U8
            | Type::S8
            | Type::U16
            | Type::S16
            | Type::U32
            | Type::S32
            | Type::U64
            | Type::S64 => set(&slots[0], val),
            Type::String => {
                let (p, n) = (self.fresh("p"), self.fresh("n"));
                format!(
                    "{p}, {n} := {c}.Str({val})\n{}{}",
                    set(&slots[0], &p),
                    set(&slots[1], &n)
                )
            }
            Type::Id(id) => match self.def(*id) {
                TypeDefKind::Type(t) => self.lower_flat(t, val, c, slots)?,
                TypeDefKind::Enum(_) | TypeDefKind::Resource | TypeDefKind::Handle(_) => {
                    set(&slots[0], val)
                }
                TypeDefKind::Variant(v) => {
                    let mut out = format!("switch {val}.Tag {{\n");
                    for (i, case) in v.cases.iter().enumerate() {
                        out += &format!("case {i}:\n{} = {i}\n", slots[0].0);
                        if let Some(t) = &case.ty {
                            let field = format!("{val}.{}", camel(&case.name));
                            out += &self.lower_flat(t, &field, c, &slots[1..])?;
                        }
                    }
                    out + "}\n"
                }
                TypeDefKind::Tuple(t) => {
                    let mut out = String::new();
                    let mut at = 0;
                    for (i, ty) in t.types.iter().enumerate() {
                        let k = self.flat(ty)?.len();
                        out +=
                            &self.lower_flat(ty, &format!("{val}.F{i}"), c, &slots[at..at + k])?;
                        at += k;
                    }
                    out
                }
                TypeDefKind::List(t) => {
                    let (p, n) = (self.fresh("p"), self.fresh("n"));
                    let lower = self.lower_list(t, val, c)?;
                    format!(
                        "{p}, {n} := {lower}\n{}{}",
                        set(&slots[0], &p),
                        set(&slots[1], &n)
                    )
                }
                TypeDefKind::Record(r) => {
                    let mut out = String::new();
                    let mut at = 0;
                    for f in &r.fields {
                        let k = self.flat(&f.ty)?.len();
                        out += &self.lower_flat(
                            &f.ty,
                            &format!("{val}.{}", camel(&f.name)),
                            c,
                            &slots[at..at + k],
                        )?;
                        at += k;
                    }
                    out
                }
                TypeDefKind::Option(t) => {
                    let payload = self.lower_flat(t, &format!("(*{val})"), c, &slots[1..])?;
                    format!("if {val} != nil {{\n{} = 1\n{payload}}}\n", slots[0].0)
                }
                TypeDefKind::Result(r) => {
                    let ok = match &r.ok {
                        Some(t) => self.lower_flat(t, &format!("{val}.Ok"), c, &slots[1..])?,
                        None => String::new(),
                    };
                    let err = match &r.err {
                        Some(t) => self.lower_flat(t, &format!("{val}.Err"), c, &slots[1..])?,
                        None => String::new(),
                    };
                    format!(
                        "if {val}.IsErr {{\n{} = 1\n{err}}} else {{\n{ok}}}\n",
                        slots[0].0
                    )
                }
                other => bail!("unsupported WIT type {}", other.as_str()),
            },
            other => bail!("unsupported WIT type {other:?}"),
        })
    }

    /// A Go expression lifting `ty` from the flat values `slots` (Go expressions of the slots'
    /// types; a slot wider than the value is narrowed).
    pub(super) fn lift_flat(&mut self, ty: &Type, slots: &[(String, Flat)]) -> Result<String> {
        let q = self.q;
        let s = |i: usize| match slots[i].1 {
            Flat::I32 => slots[i].0.clone(),
            Flat::I64 => format!("uint32({})", slots[i].0),
        };
        Ok(match ty {
            Type::Bool => format!("({} != 0)", slots[0].0),
            Type::U8 => format!("uint8({})", slots[0].0),
            Type::S8 => format!("int8({})", slots[0].0),
            Type::U16 => format!("uint16({})", slots[0].0),
            Type::S16 => format!("int16({})", slots[0].0),
            Type::U32 => s(0),
            Type::S32 => format!("int32({})", s(0)),
            Type::U64 => format!("uint64({})", slots[0].0),
            Type::S64 => format!("int64({})", slots[0].0),
            Type::String => format!("{q}LiftString({}, {})", s(0), s(1)),
            Type::Id(id) => match self.def(*id) {
                TypeDefKind::Type(t) => self.lift_flat(t, slots)?,
                TypeDefKind::Enum(_) => format!("{}({})", self.named(*id)?, s(0)),
                TypeDefKind::Resource | TypeDefKind::Handle(_) => {
                    format!("{}({})", self.go_type(ty)?, s(0))
                }
                TypeDefKind::Variant(v) => {
                    let (gt, r) = (self.go_type(ty)?, self.fresh("v"));
                    let mut body = format!(
                        "var {r} {gt}\n{r}.Tag = uint8({})\nswitch {r}.Tag {{\n",
                        s(0)
                    );
                    for (i, case) in v.cases.iter().enumerate() {
                        if let Some(t) = &case.ty {
                            let payload = self.lift_flat(t, &slots[1..])?;
                            body += &format!("case {i}:\n{r}.{} = {payload}\n", camel(&case.name));
                        }
                    }
                    format!("func() {gt} {{\n{body}}}\nreturn {r}\n}}()")
                }
                TypeDefKind::Tuple(t) => {
                    let mut fields = String::new();
                    let mut at = 0;
                    for (i, ty) in t.types.iter().enumerate() {
                        let k = self.flat(ty)?.len();
                        fields += &format!("F{i}: {},\n", self.lift_flat(ty, &slots[at..at + k])?);
                        at += k;
                    }
                    format!("{}{{\n{fields}}}", self.go_type(ty)?)
                }
                TypeDefKind::List(t) if self.resolved(t) == Type::U8 => {
                    format!("{q}LiftBytes({}, {})", s(0), s(1))
                }
                TypeDefKind::List(t) => {
                    let (size, _) = self.size_align(t)?;
                    let (p, out, i) = (self.fresh("p"), self.fresh("out"), self.fresh("i"));
                    let elem = self.load(t, &format!("{p}+uint32({i})*{size}"))?;
                    format!(
                        "func() {gt} {{\n{p} := {}\n{out} := make({gt}, {})\nfor {i} := range {out} {{\n{out}[{i}] = {elem}\n}}\nreturn {out}\n}}()",
                        s(0),
                        s(1),
                        gt = self.go_type(ty)?
                    )
                }
                TypeDefKind::Record(r) => {
                    let mut fields = String::new();
                    let mut at = 0;
                    for f in &r.fields {
                        let k = self.flat(&f.ty)?.len();
                        let v = self.lift_flat(&f.ty, &slots[at..at + k])?;
                        fields += &format!("{}: {v},\n", camel(&f.name));
                        at += k;
                    }
                    format!("{}{{\n{fields}}}", self.named(*id)?)
                }
                TypeDefKind::Option(t) => {
                    let v = self.fresh("v");
                    let payload = self.lift_flat(t, &slots[1..])?;
                    format!(
                        "func() {gt} {{\nif {} == 0 {{\nreturn nil\n}}\n{v} := {payload}\nreturn &{v}\n}}()",
                        slots[0].0,
                        gt = self.go_type(ty)?
                    )
                }
                TypeDefKind::Result(r) => {
                    let v = self.fresh("r");
                    let mut body =
                        format!("var {v} {}\nif {} == 0 {{\n", self.go_type(ty)?, slots[0].0);
                    if let Some(t) = &r.ok {
                        body += &format!("{v}.Ok = {}\n", self.lift_flat(t, &slots[1..])?);
                    }
                    body += &format!("}} else {{\n{v}.IsErr = true\n");
                    if let Some(t) = &r.err {
                        body += &format!("{v}.Err = {}\n", self.lift_flat(t, &slots[1..])?);
                    }
                    body += "}\n";
                    format!("func() {} {{\n{body}return {v}\n}}()", self.go_type(ty)?)
                }
                other => bail!("unsupported WIT type {}", other.as_str()),
            },
            other => bail!("unsupported WIT type {other:?}"),
        })
    }
}
