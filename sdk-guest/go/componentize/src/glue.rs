//! The Go canonical-ABI glue generator: WIT package -> Go source (standard library only).
//!
//! Writes three Go files (paths relative to the Go SDK module, `sdk-guest/go`):
//! - `internal/wit/bindings.go`: one Go type per WIT record/enum of every interface the worlds
//!   use, `Load*`/`Store*` functions for them, and one Go function per imported WIT function
//!   (lowering the arguments, calling the `//go:wasmimport`, lifting the result);
//! - `internal/wit/export<iface>/bindings.go` for each exported interface: the
//!   `//go:wasmexport` functions (lifting the arguments, calling `Impl`, storing the result in
//!   a return area) and their `cabi_post_*` functions.
//!
//! The layout rules (sizes, alignments, flattening, joins) are the Component Model's canonical
//! ABI, computed here; `check_signature` compares the flattening with `wit-parser`'s own for
//! every function. The runtime half (memory access, `cabi_realloc`, the GC switch around
//! imports) is the hand-written `internal/wit/abi.go`.
//!
//! Supported WIT: bool, u8/u16/u32/u64, s8/s16/s32/s64, string, list, option, result, record,
//! enum and type aliases; anything else is a clear error (the plugin contract uses no more).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use wit_parser::abi::{AbiVariant, WasmType};
use wit_parser::{Function, InterfaceId, Resolve, Type, TypeDefKind, TypeId, WorldItem, WorldKey};

/// The Go module path of the SDK (`sdk-guest/go/go.mod`).
pub const MODULE: &str = "wasm-deployer.dev/plugin";

/// A flat (core wasm) value type of the canonical ABI, as far as this generator needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Flat {
    I32,
    I64,
}

impl Flat {
    fn go(self) -> &'static str {
        match self {
            Flat::I32 => "uint32",
            Flat::I64 => "uint64",
        }
    }
}

fn join(a: Flat, b: Flat) -> Flat {
    if a == b { a } else { Flat::I64 }
}

fn align_to(n: u32, a: u32) -> u32 {
    n.div_ceil(a) * a
}

/// `kebab-case` -> `CamelCase`.
fn camel(s: &str) -> String {
    s.split(['-', '_'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The generated files: path (relative to the Go module) -> content.
pub type Files = BTreeMap<String, String>;

struct Gen<'a> {
    resolve: &'a Resolve,
    /// Counter for fresh Go variable names.
    n: usize,
    /// Go type name prefix for types of package `wit` (empty inside it, `wit.` outside).
    q: &'static str,
}

impl<'a> Gen<'a> {
    fn fresh(&mut self, base: &str) -> String {
        self.n += 1;
        format!("{base}{}", self.n)
    }

    /// Follows type aliases (`use`, `type x = y`).
    fn resolved(&self, ty: &Type) -> Type {
        let mut ty = *ty;
        while let Type::Id(id) = ty {
            match &self.resolve.types[id].kind {
                TypeDefKind::Type(t) => ty = *t,
                _ => break,
            }
        }
        ty
    }

    fn def(&self, id: TypeId) -> &'a TypeDefKind {
        &self.resolve.types[id].kind
    }

    fn named(&self, id: TypeId) -> Result<String> {
        let name = self.resolve.types[id]
            .name
            .as_deref()
            .context("anonymous record or enum")?;
        Ok(format!("{}{}", self.q, camel(name)))
    }

    fn size_align(&self, ty: &Type) -> Result<(u32, u32)> {
        Ok(match self.resolved(ty) {
            Type::Bool | Type::U8 | Type::S8 => (1, 1),
            Type::U16 | Type::S16 => (2, 2),
            Type::U32 | Type::S32 => (4, 4),
            Type::U64 | Type::S64 => (8, 8),
            Type::String => (8, 4),
            Type::Id(id) => match self.def(id) {
                TypeDefKind::List(_) => (8, 4),
                TypeDefKind::Record(r) => self.record_layout(r.fields.iter().map(|f| &f.ty))?.1,
                TypeDefKind::Enum(e) => {
                    if e.cases.len() > 256 {
                        bail!("enum with more than 256 cases")
                    }
                    (1, 1)
                }
                TypeDefKind::Option(t) => self.variant_layout(&[None, Some(*t)])?.1,
                TypeDefKind::Result(r) => self.variant_layout(&[r.ok, r.err])?.1,
                other => bail!("unsupported WIT type {}", other.as_str()),
            },
            other => bail!("unsupported WIT type {other:?}"),
        })
    }

    /// Field offsets and (size, align) of a record (or a parameter tuple).
    fn record_layout<'t>(
        &self,
        fields: impl Iterator<Item = &'t Type>,
    ) -> Result<(Vec<u32>, (u32, u32))> {
        let (mut off, mut align) = (0, 1);
        let mut offsets = Vec::new();
        for f in fields {
            let (s, a) = self.size_align(f)?;
            off = align_to(off, a);
            offsets.push(off);
            off += s;
            align = align.max(a);
        }
        Ok((offsets, (align_to(off, align), align)))
    }

    /// Payload offset and (size, align) of a variant with <= 256 cases.
    fn variant_layout(&self, cases: &[Option<Type>]) -> Result<(u32, (u32, u32))> {
        let (mut size, mut align) = (0, 1);
        for t in cases.iter().flatten() {
            let (s, a) = self.size_align(t)?;
            size = size.max(s);
            align = align.max(a);
        }
        let payload = align_to(1, align);
        Ok((payload, (align_to(payload + size, align), align)))
    }

    fn flat(&self, ty: &Type) -> Result<Vec<Flat>> {
        Ok(match self.resolved(ty) {
            Type::Bool | Type::U8 | Type::S8 | Type::U16 | Type::S16 | Type::U32 | Type::S32 => {
                vec![Flat::I32]
            }
            Type::U64 | Type::S64 => vec![Flat::I64],
            Type::String => vec![Flat::I32, Flat::I32],
            Type::Id(id) => match self.def(id) {
                TypeDefKind::List(_) => vec![Flat::I32, Flat::I32],
                TypeDefKind::Record(r) => {
                    let mut v = Vec::new();
                    for f in &r.fields {
                        v.extend(self.flat(&f.ty)?);
                    }
                    v
                }
                TypeDefKind::Enum(_) => vec![Flat::I32],
                TypeDefKind::Option(t) => self.variant_flat(&[None, Some(*t)])?,
                TypeDefKind::Result(r) => self.variant_flat(&[r.ok, r.err])?,
                other => bail!("unsupported WIT type {}", other.as_str()),
            },
            other => bail!("unsupported WIT type {other:?}"),
        })
    }

    fn variant_flat(&self, cases: &[Option<Type>]) -> Result<Vec<Flat>> {
        let mut joined: Vec<Flat> = Vec::new();
        for t in cases.iter().flatten() {
            for (i, f) in self.flat(t)?.into_iter().enumerate() {
                match joined.get_mut(i) {
                    Some(j) => *j = join(*j, f),
                    None => joined.push(f),
                }
            }
        }
        let mut v = vec![Flat::I32];
        v.extend(joined);
        Ok(v)
    }

    /// Whether values of `ty` carry memory the callee allocates (strings, lists).
    fn has_memory(&self, ty: &Type) -> bool {
        match self.resolved(ty) {
            Type::String => true,
            Type::Id(id) => match self.def(id) {
                TypeDefKind::List(_) => true,
                TypeDefKind::Record(r) => r.fields.iter().any(|f| self.has_memory(&f.ty)),
                TypeDefKind::Option(t) => self.has_memory(t),
                TypeDefKind::Result(r) => {
                    [r.ok, r.err].iter().flatten().any(|t| self.has_memory(t))
                }
                _ => false,
            },
            _ => false,
        }
    }

    fn go_type(&self, ty: &Type) -> Result<String> {
        Ok(match ty {
            Type::Bool => "bool".into(),
            Type::U8 => "uint8".into(),
            Type::U16 => "uint16".into(),
            Type::U32 => "uint32".into(),
            Type::U64 => "uint64".into(),
            Type::S8 => "int8".into(),
            Type::S16 => "int16".into(),
            Type::S32 => "int32".into(),
            Type::S64 => "int64".into(),
            Type::String => "string".into(),
            Type::Id(id) => match self.def(*id) {
                TypeDefKind::Type(t) => self.go_type(t)?,
                TypeDefKind::Record(_) | TypeDefKind::Enum(_) => self.named(*id)?,
                TypeDefKind::List(t) if self.resolved(t) == Type::U8 => "[]byte".into(),
                TypeDefKind::List(t) => format!("[]{}", self.go_type(t)?),
                TypeDefKind::Option(t) => format!("*{}", self.go_type(t)?),
                TypeDefKind::Result(r) => format!(
                    "{}Result[{}, {}]",
                    self.q,
                    self.opt_go_type(&r.ok)?,
                    self.opt_go_type(&r.err)?
                ),
                other => bail!("unsupported WIT type {}", other.as_str()),
            },
            other => bail!("unsupported WIT type {other:?}"),
        })
    }

    fn opt_go_type(&self, ty: &Option<Type>) -> Result<String> {
        match ty {
            Some(t) => self.go_type(t),
            None => Ok("struct{}".into()),
        }
    }

    /// A Go expression reading a `ty` from linear memory at `addr` (a `uint32` expression).
    fn load(&mut self, ty: &Type, addr: &str) -> Result<String> {
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
                TypeDefKind::Record(_) | TypeDefKind::Enum(_) => {
                    let name = self.named(*id)?;
                    let func = name.replacen(
                        name.trim_start_matches(q),
                        &format!("Load{}", name.trim_start_matches(q)),
                        1,
                    );
                    format!("{func}({addr})")
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
    fn store(&mut self, ty: &Type, addr: &str, val: &str, c: &str) -> Result<String> {
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
                TypeDefKind::Record(_) | TypeDefKind::Enum(_) => {
                    let name = self.named(*id)?;
                    let bare = name.trim_start_matches(q);
                    format!("{q}Store{bare}({c}, {addr}, {val})\n")
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
    fn lower_list(&mut self, elem: &Type, val: &str, c: &str) -> Result<String> {
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

    /// Go statements assigning the flat lowering of `val` to the variables `slots` (declared by
    /// the caller with the slots' Go types, zero-initialised).
    fn lower_flat(
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
                TypeDefKind::Enum(_) => set(&slots[0], val),
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
    fn lift_flat(&mut self, ty: &Type, slots: &[(String, Flat)]) -> Result<String> {
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

    /// The type declaration plus `Load*`/`Store*` for a named record or enum (package `wit`).
    fn type_decl(&mut self, id: TypeId, iface: &str) -> Result<String> {
        let def = &self.resolve.types[id];
        let name = camel(def.name.as_deref().context("anonymous type")?);
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
            _ => {}
        }
        Ok(out)
    }

    /// Compares our flattening of `func` with wit-parser's.
    fn check_signature(
        &self,
        func: &Function,
        import: bool,
    ) -> Result<(Vec<Flat>, bool, Vec<Flat>)> {
        let mut params = Vec::new();
        for p in &func.params {
            params.extend(self.flat(&p.ty)?);
        }
        let results = match &func.result {
            Some(t) => self.flat(t)?,
            None => vec![],
        };
        let indirect_params = params.len() > 16;
        let sig = self.resolve.wasm_signature(
            if import {
                AbiVariant::GuestImport
            } else {
                AbiVariant::GuestExport
            },
            func,
        );
        let conv = |w: &WasmType| match w {
            WasmType::I32 | WasmType::Pointer | WasmType::Length => Ok(Flat::I32),
            WasmType::I64 | WasmType::PointerOrI64 => Ok(Flat::I64),
            other => bail!("unsupported core type {other:?}"),
        };
        let theirs_params: Vec<Flat> = sig.params.iter().map(conv).collect::<Result<_>>()?;
        let theirs_results: Vec<Flat> = sig.results.iter().map(conv).collect::<Result<_>>()?;
        let mut ours_params = if indirect_params {
            vec![Flat::I32]
        } else {
            params.clone()
        };
        let ours_results = if results.len() > 1 {
            if import {
                ours_params.push(Flat::I32);
                vec![]
            } else {
                vec![Flat::I32]
            }
        } else {
            results.clone()
        };
        if ours_params != theirs_params
            || ours_results != theirs_results
            || indirect_params != sig.indirect_params
        {
            bail!(
                "{}: flattening differs from wit-parser's ({ours_params:?} -> {ours_results:?} vs {theirs_params:?} -> {theirs_results:?})",
                func.name
            );
        }
        Ok((params, indirect_params, results))
    }

    fn import_func(&mut self, iface_name: &str, iface_go: &str, func: &Function) -> Result<String> {
        let (params, indirect, results) = self.check_signature(func, true)?;
        let go_name = format!("{iface_go}{}", camel(&func.name));
        let raw = format!("import{go_name}");
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
        let go_result = match &func.result {
            Some(t) => format!(" {}", self.go_type(t)?),
            None => String::new(),
        };
        out += &self.docs(&func.docs.contents);
        writeln!(
            out,
            "//\n// WIT: `{iface_name}#{}`.\nfunc {go_name}({}){go_result} {{",
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

    fn export_func(&mut self, iface_name: &str, func: &Function) -> Result<(String, String)> {
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

    fn docs(&self, d: &Option<String>) -> String {
        d.as_deref()
            .map(|d| {
                d.lines()
                    .map(|l| {
                        if l.trim().is_empty() {
                            "//\n".to_string()
                        } else {
                            format!("// {l}\n")
                        }
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A Go parameter name for a WIT one (Go keywords get a trailing underscore).
fn go_param(name: &str) -> String {
    let c = camel(name);
    let mut s = c[..1].to_ascii_lowercase() + &c[1..];
    if matches!(
        s.as_str(),
        "type"
            | "func"
            | "range"
            | "map"
            | "chan"
            | "go"
            | "select"
            | "default"
            | "package"
            | "import"
            | "var"
            | "const"
            | "interface"
            | "struct"
            | "switch"
            | "case"
            | "break"
            | "continue"
            | "return"
            | "for"
            | "if"
            | "else"
            | "goto"
            | "defer"
            | "fallthrough"
            | "c"
            | "r"
            | "ret"
            | "args"
            | "mark"
            | "raw"
    ) {
        s.push('_');
    }
    s
}

const HEADER: &str = "// Code generated by go-componentize bindgen from the WIT in wit/. DO NOT EDIT.\n// Regenerate with `cargo xtask go-bindgen`.\n\n";

/// Generates the Go glue for every world of the package in `wit_dir`.
pub fn generate(wit_dir: &std::path::Path) -> Result<Files> {
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve
        .push_path(wit_dir)
        .with_context(|| format!("parsing WIT in {}", wit_dir.display()))?;
    let mut imports: BTreeSet<InterfaceId> = BTreeSet::new();
    let mut exports: BTreeSet<InterfaceId> = BTreeSet::new();
    for (_, world) in &resolve.worlds {
        for (key, item) in &world.imports {
            if let (WorldKey::Interface(_) | WorldKey::Name(_), WorldItem::Interface { id, .. }) =
                (key, item)
            {
                imports.insert(*id);
            }
        }
        for item in world.exports.values() {
            if let WorldItem::Interface { id, .. } = item {
                exports.insert(*id);
            }
        }
    }
    // Every interface whose types are used (imports, exports and what they `use`).
    let mut type_ifaces: BTreeSet<InterfaceId> = imports.iter().chain(&exports).copied().collect();
    for (id, _) in &resolve.interfaces {
        if resolve.interfaces[id].package == Some(pkg) {
            type_ifaces.insert(id);
        }
    }
    let mut g = Gen {
        resolve: &resolve,
        n: 0,
        q: "",
    };
    let mut files = Files::new();

    // Package wit: types and imports.
    let mut out = String::from(HEADER);
    out += "package wit\n\n";
    let mut seen = BTreeSet::new();
    for iface in &type_ifaces {
        let i = &resolve.interfaces[*iface];
        let iname = i.name.clone().unwrap_or_default();
        for (_, tid) in &i.types {
            if matches!(resolve.types[*tid].kind, TypeDefKind::Type(_)) {
                continue; // `use`d from another interface
            }
            let name = camel(resolve.types[*tid].name.as_deref().unwrap_or_default());
            if !seen.insert(name.clone()) {
                bail!("two WIT types map to the Go name {name}");
            }
            out += &g.type_decl(*tid, &iname)?;
        }
    }
    for iface in &imports {
        let i = &resolve.interfaces[*iface];
        let iname = resolve.id_of(*iface).context("unnamed interface")?;
        let iface_go = camel(i.name.as_deref().unwrap_or_default());
        for func in i.functions.values() {
            out += &g
                .import_func(&iname, &iface_go, func)
                .with_context(|| format!("import {iname}#{}", func.name))?;
        }
    }
    files.insert("internal/wit/bindings.go".into(), out);

    // One package per exported interface.
    for iface in &exports {
        let i = &resolve.interfaces[*iface];
        let iname = resolve.id_of(*iface).context("unnamed interface")?;
        let short = i.name.as_deref().unwrap_or_default().replace('-', "");
        let pkg_name = format!("export{short}");
        let mut g = Gen {
            resolve: &resolve,
            n: 0,
            q: "wit.",
        };
        let mut methods = String::new();
        let mut funcs = String::new();
        for func in i.functions.values() {
            let (m, f) = g
                .export_func(&iname, func)
                .with_context(|| format!("export {iname}#{}", func.name))?;
            methods += &m;
            funcs += &f;
        }
        let out = format!(
            "{HEADER}// Package {pkg_name} exports the WIT interface `{iname}`: linking it into a plugin adds\n// these exports, so only the worlds that export the interface import this package.\npackage {pkg_name}\n\nimport \"{MODULE}/internal/wit\"\n\n// Exports is what the plugin implements.\ntype Exports interface {{\n{methods}}}\n\n// Impl is called by the exports below; set it before the host calls them (in an init function).\nvar Impl Exports\n\n{funcs}"
        );
        files.insert(format!("internal/wit/{pkg_name}/bindings.go"), out);
    }
    Ok(files)
}

/// Formats Go source with `gofmt` when it is on PATH or `$GOFMT` (the checked-in files are
/// gofmt'ed; the up-to-date test compares unformatted output after formatting both).
pub fn gofmt(files: &mut Files, gofmt: &std::path::Path) -> Result<()> {
    for (name, text) in files.iter_mut() {
        let mut child = std::process::Command::new(gofmt)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("running {}", gofmt.display()))?;
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("gofmt failed on {name}");
        }
        *text = String::from_utf8(out.stdout)?;
    }
    Ok(())
}
