//! The canonical ABI's layout rules: sizes, alignments, flattening (with joins), and the check
//! of our flattening against wit-parser's for every function.
//!
//! Owns: [`Flat`]. Must not touch: the Go text of loads, stores or functions.

use anyhow::{Result, bail};
use wit_parser::abi::{AbiVariant, WasmType};
use wit_parser::{Function, Type, TypeDefKind};

use super::generator::Gen;

/// A flat (core wasm) value type of the canonical ABI, as far as this generator needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Flat {
    I32,
    I64,
}

impl Flat {
    pub(super) fn go(self) -> &'static str {
        match self {
            Flat::I32 => "uint32",
            Flat::I64 => "uint64",
        }
    }
}

/// The payload types of a variant's cases, in order.
pub(super) fn cases_of(v: &wit_parser::Variant) -> Vec<Option<Type>> {
    v.cases.iter().map(|c| c.ty).collect()
}

pub(super) fn join(a: Flat, b: Flat) -> Flat {
    if a == b { a } else { Flat::I64 }
}

pub(super) fn align_to(n: u32, a: u32) -> u32 {
    n.div_ceil(a) * a
}

impl Gen<'_> {
    pub(super) fn size_align(&self, ty: &Type) -> Result<(u32, u32)> {
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
                TypeDefKind::Variant(v) => self.variant_layout(&cases_of(v))?.1,
                TypeDefKind::Tuple(t) => self.record_layout(t.types.iter())?.1,
                TypeDefKind::Resource | TypeDefKind::Handle(_) => (4, 4),
                other => bail!("unsupported WIT type {}", other.as_str()),
            },
            other => bail!("unsupported WIT type {other:?}"),
        })
    }

    /// Field offsets and (size, align) of a record (or a parameter tuple).
    pub(super) fn record_layout<'t>(
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
    pub(super) fn variant_layout(&self, cases: &[Option<Type>]) -> Result<(u32, (u32, u32))> {
        if cases.len() > 256 {
            bail!("variant with more than 256 cases");
        }
        let (mut size, mut align) = (0, 1);
        for t in cases.iter().flatten() {
            let (s, a) = self.size_align(t)?;
            size = size.max(s);
            align = align.max(a);
        }
        let payload = align_to(1, align);
        Ok((payload, (align_to(payload + size, align), align)))
    }

    pub(super) fn flat(&self, ty: &Type) -> Result<Vec<Flat>> {
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
                TypeDefKind::Variant(v) => self.variant_flat(&cases_of(v))?,
                TypeDefKind::Tuple(t) => {
                    let mut v = Vec::new();
                    for ty in &t.types {
                        v.extend(self.flat(ty)?);
                    }
                    v
                }
                TypeDefKind::Resource | TypeDefKind::Handle(_) => vec![Flat::I32],
                other => bail!("unsupported WIT type {}", other.as_str()),
            },
            other => bail!("unsupported WIT type {other:?}"),
        })
    }

    pub(super) fn variant_flat(&self, cases: &[Option<Type>]) -> Result<Vec<Flat>> {
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
    pub(super) fn has_memory(&self, ty: &Type) -> bool {
        match self.resolved(ty) {
            Type::String => true,
            Type::Id(id) => match self.def(id) {
                TypeDefKind::List(_) => true,
                TypeDefKind::Record(r) => r.fields.iter().any(|f| self.has_memory(&f.ty)),
                TypeDefKind::Option(t) => self.has_memory(t),
                TypeDefKind::Result(r) => {
                    [r.ok, r.err].iter().flatten().any(|t| self.has_memory(t))
                }
                TypeDefKind::Variant(v) => v
                    .cases
                    .iter()
                    .flat_map(|c| &c.ty)
                    .any(|t| self.has_memory(t)),
                TypeDefKind::Tuple(t) => t.types.iter().any(|t| self.has_memory(t)),
                _ => false,
            },
            _ => false,
        }
    }

    /// Compares our flattening of `func` with wit-parser's.
    pub(super) fn check_signature(
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
}
