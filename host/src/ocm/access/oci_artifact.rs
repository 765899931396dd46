//! `ociArtifact` (and the older `ociRegistry`, `ociImage`): an artifact in an OCI registry,
//! named by `imageReference` (with or without `oci://`).
//!
//! Owns: the spec. Must not touch: pulling it (the reader does, through `oci`).

use serde::Deserialize;

/// The spec of an `ociArtifact` access.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OciArtifact {
    #[serde(default, deserialize_with = "super::fields::string_or_empty")]
    pub image_reference: String,
}

impl OciArtifact {
    /// The reference without `oci://`; `None` if there is none.
    pub fn reference(&self) -> Option<&str> {
        let r = self.image_reference.as_str();
        (!r.is_empty()).then(|| r.strip_prefix("oci://").unwrap_or(r))
    }
}
