//! The OCM repository of a Context (`repositoryContext`) and the OCI mapping of component
//! versions (OCM specification, "OCI registries"; `genericocireg` in the OCM Go library):
//! component `<name>` version `<version>` is the manifest
//! `<host>/<subPath>/component-descriptors/<name>:<tag>`, where the tag is the version with `+`
//! written as `.build-` (OCI tags cannot hold `+`). With `componentNameMapping: sha256-digest`
//! the repository is `<host>/<subPath>/<hex sha256 of the name>`.

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::error::RepositoryContextError;

/// The namespace prefix of component descriptors in an OCI registry.
pub const COMPONENT_DESCRIPTORS: &str = "component-descriptors";

/// An OCI registry holding component versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciRepository {
    /// `host[:port]`.
    pub host: String,
    /// Repository path prefix, without leading or trailing `/`; may be empty.
    pub sub_path: String,
    /// `componentNameMapping: sha256-digest`.
    pub digest_mapping: bool,
}

impl OciRepository {
    /// Reads a `repositoryContext`: `OCIRegistry` (any case, optionally `/v1`) with `baseUrl`
    /// (`host[:port][/path]`, optionally with a scheme) and `subPath`, or the legacy
    /// `ociRegistry` whose `baseUrl` holds the path.
    pub fn from_context(spec: &Value) -> Result<Self, RepositoryContextError> {
        let kind = spec["type"].as_str().unwrap_or_default();
        let base = kind.split('/').next().unwrap_or_default();
        if !base.eq_ignore_ascii_case("OCIRegistry") {
            return Err(RepositoryContextError::UnsupportedType(kind.to_string()));
        }
        let base_url = spec["baseUrl"].as_str().unwrap_or_default().trim();
        if base_url.is_empty() {
            return Err(RepositoryContextError::NoBaseUrl);
        }
        let without_scheme = base_url
            .split_once("://")
            .map(|(_, rest)| rest)
            .unwrap_or(base_url);
        let (host, path) = match without_scheme.split_once('/') {
            Some((h, p)) => (h, p),
            None => (without_scheme, ""),
        };
        let sub_path = [path, spec["subPath"].as_str().unwrap_or_default()]
            .iter()
            .map(|p| p.trim_matches('/'))
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("/");
        let digest_mapping = match spec["componentNameMapping"].as_str().unwrap_or("urlPath") {
            "urlPath" | "" => false,
            "sha256-digest" => true,
            other => {
                return Err(RepositoryContextError::UnknownNameMapping(
                    other.to_string(),
                ));
            }
        };
        Ok(OciRepository {
            host: host.to_string(),
            sub_path,
            digest_mapping,
        })
    }

    /// The OCI repository (without tag) of component `name`.
    pub fn component_repository(&self, name: &str) -> String {
        let tail = if self.digest_mapping {
            hex::encode(Sha256::digest(name.as_bytes()))
        } else {
            format!("{COMPONENT_DESCRIPTORS}/{name}")
        };
        [self.host.as_str(), self.sub_path.as_str(), tail.as_str()]
            .iter()
            .filter(|p| !p.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The OCI reference of component `name` version `version`.
    pub fn component_reference(&self, name: &str, version: &str) -> String {
        format!("{}:{}", self.component_repository(name), to_tag(version))
    }

    /// `host/subPath`, for messages.
    pub fn describe(&self) -> String {
        if self.sub_path.is_empty() {
            self.host.clone()
        } else {
            format!("{}/{}", self.host, self.sub_path)
        }
    }
}

/// A version as an OCI tag: `+` (build metadata) becomes `.build-`.
pub fn to_tag(version: &str) -> String {
    version.replace('+', ".build-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn component_versions_map_to_oci_references_as_ocm_maps_them() {
        let r = OciRepository::from_context(
            &json!({"type": "OCIRegistry", "baseUrl": "127.0.0.1:5000", "subPath": "ocm"}),
        )
        .unwrap();
        assert_eq!(
            r.component_reference("example.com/app", "1.0.0"),
            "127.0.0.1:5000/ocm/component-descriptors/example.com/app:1.0.0"
        );
        assert_eq!(
            r.component_reference("example.com/app", "1.0.0+abc"),
            "127.0.0.1:5000/ocm/component-descriptors/example.com/app:1.0.0.build-abc"
        );
        // Landscaper's legacy form: the path in baseUrl; a scheme is ignored.
        let legacy = OciRepository::from_context(
            &json!({"type": "ociRegistry", "baseUrl": "https://eu.gcr.io/proj/components/"}),
        )
        .unwrap();
        assert_eq!(legacy.host, "eu.gcr.io");
        assert_eq!(
            legacy.component_reference("a/b", "1"),
            "eu.gcr.io/proj/components/component-descriptors/a/b:1"
        );
        let bare =
            OciRepository::from_context(&json!({"type": "OCIRegistry/v1", "baseUrl": "r.io"}))
                .unwrap();
        assert_eq!(
            bare.component_reference("a", "1"),
            "r.io/component-descriptors/a:1"
        );
        let digest = OciRepository::from_context(
            &json!({"type": "OCIRegistry", "baseUrl": "r.io", "componentNameMapping": "sha256-digest"}),
        )
        .unwrap();
        assert_eq!(
            digest.component_repository("a"),
            format!("r.io/{}", hex::encode(Sha256::digest(b"a")))
        );
    }

    #[test]
    fn unsupported_repository_contexts_are_named() {
        let e = OciRepository::from_context(
            &json!({"type": "CommonTransportFormat", "filePath": "/x"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("CommonTransportFormat"), "{e}");
        let e = OciRepository::from_context(&json!({"type": "OCIRegistry"})).unwrap_err();
        assert!(matches!(e, RepositoryContextError::NoBaseUrl), "{e}");
    }
}
