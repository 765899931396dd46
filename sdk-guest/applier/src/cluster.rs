//! Which cluster a read or delete goes to: the item's Target, or a secondary Target named by
//! `targetName` (contract 1.4 last paragraph; readiness checks 6.5, deletion groups 6.6,
//! exports 6.7). The host looks a secondary Target up in the DeployItem's namespace and
//! offers get, list and delete on it (WIT `secondary-targets`).
//!
//! Owns: routing those three operations and naming the Target in their errors.
//! Must not touch: anything that writes (apply, annotate, patch) — that only ever goes to
//! the item's own Target.

use sdk_guest::{Ctx, DeployerError, KubeOp, ObjectRef};
use serde_json::Value;

/// The item's Target cluster, or the cluster of a secondary Target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cluster<'a> {
    Item,
    Secondary(&'a str),
}

impl<'a> Cluster<'a> {
    /// `targetName` as written in the configuration (empty = the item's Target).
    pub fn of(target_name: Option<&'a str>) -> Self {
        match target_name.filter(|t| !t.is_empty()) {
            Some(t) => Cluster::Secondary(t),
            None => Cluster::Item,
        }
    }

    /// ` on Target "x"` for a secondary Target, empty otherwise (for messages).
    pub fn suffix(&self) -> String {
        match self {
            Cluster::Item => String::new(),
            Cluster::Secondary(t) => format!(" on Target {t:?}"),
        }
    }

    fn call(&self, ctx: &Ctx, op: KubeOp) -> Result<Option<String>, DeployerError> {
        match self {
            Cluster::Item => ctx.kube(op),
            Cluster::Secondary(t) => ctx.kube_on(t, op).map_err(|e| {
                if e.message.contains(t) {
                    e
                } else {
                    DeployerError {
                        message: format!("Target {t:?}: {}", e.message),
                        ..e
                    }
                }
            }),
        }
    }

    /// Reads an object; `None` if it does not exist.
    pub fn get(&self, ctx: &Ctx, object: &ObjectRef) -> Result<Option<Value>, DeployerError> {
        if *self == Cluster::Item {
            return ctx.kube_get(object);
        }
        self.call(ctx, KubeOp::Get(object.clone()))?
            .map(|s| parse(&s))
            .transpose()
    }

    /// Lists objects of one kind (in `namespace`, or everywhere), filtered by labels.
    pub fn list(
        &self,
        ctx: &Ctx,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<Value>, DeployerError> {
        if *self == Cluster::Item {
            return ctx.kube_list(api_version, kind, namespace, label_selector);
        }
        let out = self.call(
            ctx,
            KubeOp::List {
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: namespace.map(Into::into),
                label_selector: label_selector.map(Into::into),
            },
        )?;
        let mut list = parse(out.as_deref().unwrap_or("{}"))?;
        Ok(match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        })
    }

    /// Deletes an object; `true` if it existed.
    pub fn delete(&self, ctx: &Ctx, object: &ObjectRef) -> Result<bool, DeployerError> {
        if *self == Cluster::Item {
            return ctx.kube_delete(object);
        }
        Ok(self.call(ctx, KubeOp::Delete(object.clone()))?.is_some())
    }
}

fn parse(s: &str) -> Result<Value, DeployerError> {
    serde_json::from_str(s).map_err(|e| {
        DeployerError::internal(
            "InvalidHostResponse",
            format!("host returned invalid JSON: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_target_name_is_the_item_target() {
        assert_eq!(Cluster::of(None), Cluster::Item);
        assert_eq!(Cluster::of(Some("")), Cluster::Item);
        assert_eq!(Cluster::of(Some("b")), Cluster::Secondary("b"));
        assert_eq!(Cluster::of(Some("b")).suffix(), " on Target \"b\"");
    }
}
