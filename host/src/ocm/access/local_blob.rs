//! `localBlob` (and the older `localFilesystemBlob`, `localOciBlob`): a blob stored with the
//! component version — in an OCI repository, a layer of the version's manifest named by
//! `localReference` (its digest); a blob of media type `application/vnd.oci.image.manifest.v1+tar`
//! is an OCI artifact set (an OCI layout tar) whose main artifact's layer is the content.
//!
//! Owns: the spec and unpacking artifact sets. Must not touch: pulling the blob.

use std::collections::HashMap;

use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde::Deserialize;
use serde_json::Value;

use crate::oci::session::pick_layer;
use crate::ocm::error::ArtifactSetError;
use crate::ocm::tar::tar_files;

/// The media type of an OCI artifact stored as a blob (OCM "artifact set", an OCI layout tar).
pub const ARTIFACT_SET: &str = "application/vnd.oci.image.manifest.v1+tar";

/// The spec of a `localBlob` access.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalBlob {
    #[serde(default, deserialize_with = "super::fields::string_or_none")]
    pub local_reference: Option<String>,
    /// What `localFilesystemBlob` names the blob by.
    #[serde(default, deserialize_with = "super::fields::string_or_none")]
    pub filename: Option<String>,
    #[serde(default, deserialize_with = "super::fields::string_or_empty")]
    pub media_type: String,
}

impl LocalBlob {
    /// The digest of the blob (the layer of the component version's manifest).
    pub fn digest(&self) -> &str {
        self.local_reference
            .as_deref()
            .or(self.filename.as_deref())
            .unwrap_or_default()
    }

    /// Whether the blob is an OCI artifact set.
    pub fn is_artifact_set(&self) -> bool {
        self.media_type.starts_with(ARTIFACT_SET)
    }
}

/// The layer of an OCM artifact set (an OCI layout tar: `index.json`, `blobs/sha256/…`): of
/// its main artifact (annotation `software.ocm/main`, or the only one), the first layer whose
/// media type is in `media_types` (empty: the first).
pub fn layer_of_artifact_set(
    data: &[u8],
    media_types: &[String],
) -> Result<(OciDescriptor, Vec<u8>), ArtifactSetError> {
    let mut files = tar_files(data)?;
    let blob = |files: &mut HashMap<String, Vec<u8>>, digest: &str| {
        let path = format!("blobs/{}", digest.replacen(':', "/", 1));
        files
            .remove(&path)
            .ok_or_else(|| ArtifactSetError::MissingBlob(digest.to_string()))
    };
    let index: Value = serde_json::from_slice(
        &files
            .remove("index.json")
            .ok_or(ArtifactSetError::NoIndex)?,
    )
    .map_err(ArtifactSetError::Index)?;
    let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
    let main = index["annotations"]["software.ocm/main"]
        .as_str()
        .and_then(|m| {
            manifests.iter().find(|d| {
                d["digest"].as_str() == Some(m)
                    || d["annotations"]["software.ocm/tags"].as_str() == Some(m)
            })
        })
        .or(if manifests.len() == 1 {
            manifests.first()
        } else {
            None
        })
        .ok_or(ArtifactSetError::NoMainArtifact)?;
    let digest = main["digest"].as_str().unwrap_or_default().to_string();
    let manifest: OciImageManifest =
        serde_json::from_slice(&blob(&mut files, &digest)?).map_err(|source| {
            ArtifactSetError::Manifest {
                digest: digest.clone(),
                source,
            }
        })?;
    let layer = pick_layer(&manifest.layers, media_types)
        .ok_or_else(|| ArtifactSetError::NoLayer(media_types.to_vec()))?
        .clone();
    let data = blob(&mut files, &layer.digest)?;
    Ok((layer, data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocm::tar::file_in_tar;

    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn descriptor_tars_and_artifact_sets_are_unpacked() {
        let t = tar_of(&[("component-descriptor.yaml", b"meta: {}")]);
        assert_eq!(
            file_in_tar(&t, "component-descriptor.yaml").unwrap(),
            b"meta: {}"
        );
        assert_eq!(
            file_in_tar(&t, "x").unwrap_err().to_string(),
            "no x in the descriptor tar"
        );

        let chart = b"chart-bytes";
        let chart_digest = format!("sha256:{}", "c".repeat(64));
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.cncf.helm.config.v1+json", "digest": format!("sha256:{}", "d".repeat(64)), "size": 2},
            "layers": [{"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip", "digest": chart_digest, "size": chart.len()}]
        });
        let manifest = serde_json::to_vec(&manifest).unwrap();
        let m_digest = format!("sha256:{}", "a".repeat(64));
        let index = serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": m_digest, "size": manifest.len()}],
            "annotations": {"software.ocm/main": m_digest}
        });
        let set = tar_of(&[
            ("index.json", &serde_json::to_vec(&index).unwrap()),
            (&format!("blobs/sha256/{}", "a".repeat(64)), &manifest),
            (&format!("blobs/sha256/{}", "c".repeat(64)), chart),
        ]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &set).unwrap();
        let gz = gz.finish().unwrap();
        let (layer, data) = layer_of_artifact_set(
            &gz,
            &["application/vnd.cncf.helm.chart.content.v1.tar+gzip".to_string()],
        )
        .unwrap();
        assert_eq!(layer.digest, chart_digest);
        assert_eq!(data, chart);
        assert!(matches!(
            layer_of_artifact_set(&set, &["x/y".to_string()]),
            Err(ArtifactSetError::NoLayer(_))
        ));
    }
}
