//! The generator's state (the resolved WIT, fresh variable names, the package prefix) and the
//! Go type a WIT type is.
//!
//! Owns: [`Gen`]. Must not touch: layout or the generated functions.

use anyhow::{Context, Result, bail};
use wit_parser::{Resolve, Type, TypeDefKind, TypeId};

use super::names::camel;

pub(super) struct Gen<'a> {
    pub(super) resolve: &'a Resolve,
    /// Counter for fresh Go variable names.
    pub(super) n: usize,
    /// Go type name prefix for types of package `wit` (empty inside it, `wit.` outside).
    pub(super) q: &'static str,
}

impl<'a> Gen<'a> {
    pub(super) fn fresh(&mut self, base: &str) -> String {
        self.n += 1;
        format!("{base}{}", self.n)
    }

    /// Follows type aliases (`use`, `type x = y`).
    pub(super) fn resolved(&self, ty: &Type) -> Type {
        let mut ty = *ty;
        while let Type::Id(id) = ty {
            match &self.resolve.types[id].kind {
                TypeDefKind::Type(t) => ty = *t,
                _ => break,
            }
        }
        ty
    }

    pub(super) fn def(&self, id: TypeId) -> &'a TypeDefKind {
        &self.resolve.types[id].kind
    }

    pub(super) fn named(&self, id: TypeId) -> Result<String> {
        let name = self.resolve.types[id]
            .name
            .as_deref()
            .context("anonymous record or enum")?;
        Ok(format!("{}{}", self.q, camel(name)))
    }

    pub(super) fn go_type(&self, ty: &Type) -> Result<String> {
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

    pub(super) fn opt_go_type(&self, ty: &Option<Type>) -> Result<String> {
        match ty {
            Some(t) => self.go_type(t),
            None => Ok("struct{}".into()),
        }
    }

    pub(super) fn docs(&self, d: &Option<String>) -> String {
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
