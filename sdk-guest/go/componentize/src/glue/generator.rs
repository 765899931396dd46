//! The generator's state (the resolved WIT, fresh variable names, the package prefix) and the
//! Go type a WIT type is.
//!
//! Owns: [`Gen`]. Must not touch: layout or the generated functions.

use anyhow::{Context, Result, bail};
use wit_parser::{PackageId, Resolve, Type, TypeDefKind, TypeId, TypeOwner};

use super::names::camel;

pub(super) struct Gen<'a> {
    pub(super) resolve: &'a Resolve,
    /// Counter for fresh Go variable names.
    pub(super) n: usize,
    /// Go type name prefix for types of package `wit` (empty inside it, `wit.` outside).
    pub(super) q: &'static str,
    /// The package the glue is for: its types keep their bare names, those of other packages
    /// (`wasi:http`, `wasi:io`, ...) get the package name in front (`HttpFields`, `IoPollable`).
    pub(super) own: PackageId,
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

    /// The Go name of a named WIT type, without the package qualifier.
    pub(super) fn bare_name(&self, id: TypeId) -> Result<String> {
        let def = &self.resolve.types[id];
        let name = def
            .name
            .as_deref()
            .context("anonymous record, variant or enum")?;
        Ok(format!("{}{}", self.pkg_prefix(&def.owner), camel(name)))
    }

    /// `Http` for a type or function of `wasi:http`, nothing for the own package's.
    pub(super) fn pkg_prefix(&self, owner: &TypeOwner) -> String {
        let pkg = match owner {
            TypeOwner::Interface(i) => self.resolve.interfaces[*i].package,
            TypeOwner::World(w) => self.resolve.worlds[*w].package,
            TypeOwner::None => None,
        };
        match pkg {
            Some(p) if p != self.own => camel(&self.resolve.packages[p].name.name),
            _ => String::new(),
        }
    }

    pub(super) fn named(&self, id: TypeId) -> Result<String> {
        Ok(format!("{}{}", self.q, self.bare_name(id)?))
    }

    /// `{q}{prefix}{Name}`, e.g. `wit.LoadHttpErrorCode` for (`Load`, error-code).
    pub(super) fn named_fn(&self, prefix: &str, id: TypeId) -> Result<String> {
        Ok(format!("{}{prefix}{}", self.q, self.bare_name(id)?))
    }

    /// The resource a handle (`own<r>`, `borrow<r>`, a bare `r` or an alias of it) refers to.
    pub(super) fn resource_of(&self, id: TypeId) -> Option<TypeId> {
        match self.def(id) {
            TypeDefKind::Resource => Some(id),
            TypeDefKind::Handle(wit_parser::Handle::Own(r) | wit_parser::Handle::Borrow(r)) => {
                self.resource_of(*r)
            }
            TypeDefKind::Type(Type::Id(t)) => self.resource_of(*t),
            _ => None,
        }
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
                TypeDefKind::Record(_) | TypeDefKind::Enum(_) | TypeDefKind::Variant(_) => {
                    self.named(*id)?
                }
                TypeDefKind::Resource | TypeDefKind::Handle(_) => {
                    self.named(self.resource_of(*id).context("handle without a resource")?)?
                }
                TypeDefKind::Tuple(t) => {
                    let mut parts = Vec::new();
                    for ty in &t.types {
                        parts.push(self.go_type(ty)?);
                    }
                    if !(2..=4).contains(&parts.len()) {
                        bail!("tuple of {} (Tuple2..Tuple4 are defined)", parts.len());
                    }
                    format!("{}Tuple{}[{}]", self.q, parts.len(), parts.join(", "))
                }
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
