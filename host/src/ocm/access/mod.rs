//! Access methods of OCM resources (`access.type`), one module per type as OCM's Go library
//! lays them out (`api/ocm/extensions/accessmethods/*`): [`local_blob`] (`localBlob`, and the
//! older `localFilesystemBlob` / `localOciBlob`), [`oci_artifact`] (`ociArtifact`, and
//! `ociRegistry` / `ociImage`), [`helm`]. A version suffix (`ociArtifact/v1`) is ignored; any
//! other type reads as [`Access::Unsupported`] and fails only when its content is asked for.
//!
//! Owns: what each access spec says. Must not touch: the network (the reader fetches).

mod fields;
pub mod helm;
pub mod local_blob;
pub mod oci_artifact;

use serde::Deserialize;
use serde_json::Value;

pub use helm::Helm;
pub use local_blob::LocalBlob;
pub use oci_artifact::OciArtifact;

/// A resource's `access`, by its type.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "type")]
pub enum Access {
    #[serde(
        rename = "localBlob",
        alias = "localFilesystemBlob",
        alias = "localOciBlob"
    )]
    LocalBlob(LocalBlob),
    #[serde(rename = "ociArtifact", alias = "ociRegistry", alias = "ociImage")]
    OciArtifact(OciArtifact),
    #[serde(rename = "helm")]
    Helm(Helm),
    /// A type the host does not read (or no access at all).
    #[serde(other)]
    Unsupported,
}

impl Access {
    /// The access `spec` describes (its `type` without a version suffix).
    pub fn of(spec: &Value) -> Access {
        let mut spec = spec.clone();
        if let Some(t) = spec.get("type").and_then(Value::as_str) {
            let bare = t.split('/').next().unwrap_or(t).to_string();
            spec["type"] = Value::String(bare);
        }
        serde_json::from_value(spec).unwrap_or(Access::Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn access_types_read_with_their_aliases_and_version_suffixes() {
        assert_eq!(
            Access::of(&json!({"type": "localFilesystemBlob/v1", "filename": "sha256:aa"})),
            Access::LocalBlob(LocalBlob {
                local_reference: None,
                filename: Some("sha256:aa".into()),
                media_type: String::new(),
            })
        );
        assert_eq!(
            Access::of(&json!({"type": "ociRegistry", "imageReference": "r.io/a:1"})),
            Access::OciArtifact(OciArtifact {
                image_reference: "r.io/a:1".into()
            })
        );
        assert_eq!(
            Access::of(&json!({"type": "ociArtifact/v1", "imageReference": 5})),
            Access::OciArtifact(OciArtifact::default())
        );
        assert_eq!(
            Access::of(
                &json!({"type": "helm/v1", "helmRepository": "oci://r.io/c", "helmChart": "a:1"})
            ),
            Access::Helm(Helm {
                helm_repository: "oci://r.io/c".into(),
                helm_chart: "a:1".into(),
            })
        );
        assert_eq!(Access::of(&json!({"type": "s3"})), Access::Unsupported);
        assert_eq!(Access::of(&Value::Null), Access::Unsupported);
    }
}
