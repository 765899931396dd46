//! A write as admission sees it: [`Attributes`] and the [`Operation`].
//!
//! Owns: both. Must not touch: anything else (they are plain data).

use crate::rbac::UserInfo;
use crate::registry::ResourceType;

/// An admission operation (`CONNECT` never happens: no connect subresource is served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// A write as admission sees it: the resource the client asked for, in the version it asked
/// for, the subresource, the object's namespace and name, who asks, whether it is a dry run.
pub(crate) struct Attributes<'a> {
    pub(crate) rt: &'a ResourceType,
    pub(crate) version: &'a str,
    /// `""`, `status` or `finalize`.
    pub(crate) subresource: &'a str,
    /// The object's namespace (`""` for cluster-scoped objects, namespaces included).
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
    pub(crate) user: &'a UserInfo,
    pub(crate) dry_run: bool,
}
