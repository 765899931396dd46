//! Go code that loads a WIT value from linear memory and stores one into it (strings and lists
//! through `cabi_realloc`).
//!
//! Owns: `load`, `store`, `lower_list`. Must not touch: flat parameters (`flatten`).

use anyhow::{Result, bail};
use wit_parser::{Type, TypeDefKind};

use super::generator::Gen;

impl Gen<'_> {
    /// A Go expression reading a `ty` from linear memory at `addr` (a `uint32` expression).
    pub(super) fn load(&mut self, ty: &Type, addr: &str) -> Result<String> {
        let q = self.q;
        Ok(match ty {
            Type::Bool => format!("({q}Ld8({addr}) != 0)"),
            Type::U8 => format!("{q}Ld8({addr})"),
            Type::S8 => format!("int8({q}Ld8({addr}))"),
            Type::U16 => format!("{q}Ld16({addr})"),
            Type::S16 => format!("int16({q}Ld16({addr}))"),
            Type::U32 => format!("{q}Ld32({addr})"),
            Type::S32 => format!("int32({q}Ld32({addr}))"),
            Type::U64 => format!("{q}Ld64({addr})"),
            Type::S64 => format!("int64({q}Ld64({addr}))"),
            Type::String => format!("{q}LiftString({q}Ld32({addr}), {q}Ld32(({addr})+4))"),
            Type::Id(id) => match self.def(*id) {
                TypeDefKind::Type(t) => self.load(t, addr)?,
                TypeDefKind::Record(_) | TypeDefKind::Enum(_) | TypeDefKind::Variant(_) => {
                    format!("{}({addr})", self.named_fn("Load", *id)?)
                }
                TypeDefKind::Resource | TypeDefKind::Handle(_) => {
                    format!("{}({q}Ld32({addr}))", self.go_type(ty)?)
                }
                TypeDefKind::Tuple(t) => {
                    let (offsets, _) = self.record_layout(t.types.iter())?;
                    let mut fields = String::new();
                    for (i, (ty, off)) in t.types.iter().zip(offsets).enumerate() {
                        fields +=
                            &format!("F{i}: {},\n", self.load(ty, &format!("({addr})+{off}"))?);
                    }
                    format!("{}{{\n{fields}}}", self.go_type(ty)?)
                }
                TypeDefKind::List(t) if self.resolved(t) == Type::U8 => {
                    format!("{q}LiftBytes({q}Ld32({addr}), {q}Ld32(({addr})+4))")
                }
                TypeDefKind::List(t) => {
                    let (size, _) = self.size_align(t)?;
                    let (p, out, i) = (self.fresh("p"), self.fresh("out"), self.fresh("i"));
                    let elem = self.load(t, &format!("{p}+uint32({i})*{size}"))?;
                    format!(
                        "func() {gt} {{\n{p} := {q}Ld32({addr})\n{out} := make({gt}, {q}Ld32(({addr})+4))\nfor {i} := range {out} {{\n{out}[{i}] = {elem}\n}}\nreturn {out}\n}}()",
                        gt = self.go_type(ty)?
                    )
                }
                TypeDefKind::Option(t) => {
                    let (off, _) = self.variant_layout(&[None, Some(*t)])?;
                    let v = self.fresh("v");
                    let payload = self.load(t, &format!("({addr})+{off}"))?;
                    format!(
                        "func() {gt} {{\nif {q}Ld8({addr}) == 0 {{\nreturn nil\n}}\n{v} := {payload}\nreturn &{v}\n}}()",
                        gt = self.go_type(ty)?
                    )
                }
                TypeDefKind::Result(r) => {
                    let (off, _) = self.variant_layout(&[r.ok, r.err])?;
                    let v = self.fresh("r");
                    let mut body = format!("var {v} {}\n", self.go_type(ty)?);
                    body += &format!("if {q}Ld8({addr}) == 0 {{\n");
                    if let Some(t) = &r.ok {
                        body +=
                            &format!("{v}.Ok = {}\n", self.load(t, &format!("({addr})+{off}"))?);
                    }
                    body += "} else {\n";
                    body += &format!("{v}.IsErr = true\n");
                    if let Some(t) = &r.err {
                        body +=
                            &format!("{v}.Err = {}\n", self.load(t, &format!("({addr})+{off}"))?);
                    }
                    body += "}\n";
                    format!("func() {} {{\n{body}return {v}\n}}()", self.go_type(ty)?)
                }
                other => bail!("unsupported WIT type {}", other.as_str()),
            },
            other => bail!("unsupported WIT type {other:?}"),
        })
    }

    /// Go statements writing `val` (of `ty`) to linear memory at `addr`; `c` is the `*Call`
    /// that keeps what the stored pointers point to alive.
    pub(super) fn store(&mut self, ty: &Type, addr: &str, val: &str, c: &str) -> Result<String> {
        let q = self.q;
        Ok(match ty {
            Type::Bool => {
                format!("if {val} {{\n{q}St8({addr}, 1)\n}} else {{\n{q}St8({addr}, 0)\n}}\n")
            }
            Type::U8 | Type::S8 => format!("{q}St8({addr}, uint8({val}))\n"),
            Type::U16 | Type::S16 => format!("{q}St16({addr}, uint16({val}))\n"),
            Type::U32 | Type::S32 => format!("{q}St32({addr}, uint32({val}))\n"),
            Type::U64 | Type::S64 => format!("{q}St64({addr}, uint64({val}))\n"),
            Type::String => {
                let (p, n) = (self.fresh("p"), self.fresh("n"));
                format!(
                    "{p}, {n} := {c}.Str({val})\n{q}St32({addr}, {p})\n{q}St32(({addr})+4, {n})\n"
                )
            }
            Type::Id(id) => match self.def(*id) {
                TypeDefKind::Type(t) => self.store(t, addr, val, c)?,
                TypeDefKind::Record(_) | TypeDefKind::Enum(_) | TypeDefKind::Variant(_) => {
                    format!("{}({c}, {addr}, {val})\n", self.named_fn("Store", *id)?)
                }
                TypeDefKind::Resource | TypeDefKind::Handle(_) => {
                    format!("{q}St32({addr}, uint32({val}))\n")
                }
                TypeDefKind::Tuple(t) => {
                    let (offsets, _) = self.record_layout(t.types.iter())?;
                    let mut out = String::new();
                    for (i, (ty, off)) in t.types.iter().zip(offsets).enumerate() {
                        out += &self.store(
                            ty,
                            &format!("({addr})+{off}"),
                            &format!("{val}.F{i}"),
                            c,
                        )?;
                    }
                    out
                }
                TypeDefKind::List(t) => {
                    let (p, n) = (self.fresh("p"), self.fresh("n"));
                    let lower = self.lower_list(t, val, c)?;
                    format!("{p}, {n} := {lower}\n{q}St32({addr}, {p})\n{q}St32(({addr})+4, {n})\n")
                }
                TypeDefKind::Option(t) => {
                    let (off, _) = self.variant_layout(&[None, Some(*t)])?;
                    let payload =
                        self.store(t, &format!("({addr})+{off}"), &format!("(*{val})"), c)?;
                    format!(
                        "if {val} == nil {{\n{q}St8({addr}, 0)\n}} else {{\n{q}St8({addr}, 1)\n{payload}}}\n"
                    )
                }
                TypeDefKind::Result(r) => {
                    let (off, _) = self.variant_layout(&[r.ok, r.err])?;
                    let ok = match &r.ok {
                        Some(t) => {
                            self.store(t, &format!("({addr})+{off}"), &format!("{val}.Ok"), c)?
                        }
                        None => String::new(),
                    };
                    let err = match &r.err {
                        Some(t) => {
                            self.store(t, &format!("({addr})+{off}"), &format!("{val}.Err"), c)?
                        }
                        None => String::new(),
                    };
                    format!(
                        "if {val}.IsErr {{\n{q}St8({addr}, 1)\n{err}}} else {{\n{q}St8({addr}, 0)\n{ok}}}\n"
                    )
                }
                other => bail!("unsupported WIT type {}", other.as_str()),
            },
            other => bail!("unsupported WIT type {other:?}"),
        })
    }

    /// A Go expression of two `uint32` values (pointer, length) for list `val` of `elem`.
    pub(super) fn lower_list(&mut self, elem: &Type, val: &str, c: &str) -> Result<String> {
        if self.resolved(elem) == Type::U8 {
            return Ok(format!("{c}.Bytes({val})"));
        }
        let (size, align) = self.size_align(elem)?;
        let (base, i, e) = (self.fresh("base"), self.fresh("i"), self.fresh("e"));
        let st = self.store(elem, &format!("{base}+uint32({i})*{size}"), e.as_str(), c)?;
        Ok(format!(
            "func() (uint32, uint32) {{\n{base} := {c}.Alloc(uint32(len({val}))*{size}, {align})\nfor {i}, {e} := range {val} {{\n{st}}}\nreturn {base}, uint32(len({val}))\n}}()"
        ))
    }
}
