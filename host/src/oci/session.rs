//! Registries as the host reaches them for one item: the allowlist, plain HTTP and skipped TLS
//! verification for the registries the configuration names, the host's CAs and the item's own
//! (for its registries only), and the item's credentials — then one repository's manifest,
//! blobs and layers within the size limit, checked against their digests and cached.
//!
//! Owns: sessions with one repository. Must not touch: what the bytes mean, or HTTP downloads.

use std::time::Duration;

use oci_client::manifest::{OciDescriptor, OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use plugin_runtime::{DeployerError, Fetched};

use super::allowlist::{allowed, host_without_port};
use super::blob_cache::{Blobs, digest_matches, sha256};
use super::client::{RegistryOptions, client_with, parse};
use super::credentials::{ItemContext, auth_for, pem_certificates};
use super::error::{error, registry_error};
use crate::landscaper::codes;

/// The host's registry settings and blobs, shared by every invocation.
pub struct Registries {
    /// `fetch.allow` (`None`: nothing).
    pub allow: Vec<String>,
    /// Registries spoken to over plain HTTP (`fetch.plainHttp`).
    pub plain_http: Vec<String>,
    /// Hosts whose TLS certificates are not verified (`fetch.insecureSkipVerify`).
    pub insecure_skip_verify: Vec<String>,
    /// Timeout of one request.
    pub timeout: Duration,
    /// The certificates of `fetch.caBundle` (trusted for every download).
    pub host_cas: Vec<String>,
    pub blobs: Blobs,
}

impl Registries {
    /// Whether `location` (a URL, or an OCI reference without scheme) is allowed.
    pub fn allowed(&self, location: &str) -> bool {
        allowed(&self.allow, location)
    }

    /// What a location the allowlist refuses gets.
    pub fn not_allowed(&self, location: &str) -> DeployerError {
        error(
            Some(codes::CONFIGURATION_PROBLEM),
            "FetchNotAllowed",
            format!(
                "{location} is not allowed by the host's fetch.allow list ({}); ask the operator to allow it",
                if self.allow.is_empty() {
                    "empty: nothing may be downloaded".to_string()
                } else {
                    self.allow.join(", ")
                }
            ),
        )
    }

    /// Whether TLS certificates of `host` (`host[:port]`) are not verified.
    pub fn insecure(&self, host: &str) -> bool {
        self.insecure_skip_verify
            .iter()
            .any(|h| h == host || host_without_port(host) == h)
    }

    /// A session with `reference`'s repository for `item`: checked against the allowlist, with
    /// the client and the Context's credentials for its registry.
    pub async fn session(
        &self,
        reference: &str,
        item: &ItemContext,
    ) -> Result<Session<'_>, DeployerError> {
        if !self.allowed(reference) {
            return Err(self.not_allowed(reference));
        }
        let r = parse(reference).map_err(|e| {
            error(
                Some(codes::CONFIGURATION_PROBLEM),
                "InvalidReference",
                format!("{e:#}"),
            )
        })?;
        let registry_host = r.resolve_registry().to_string();
        let credentials = item.registry_credentials().await?;
        // The host's CAs, and the CA the item's Context gives for this registry only.
        let mut ca_certs = self.host_cas.clone();
        ca_certs.extend(
            credentials
                .cas
                .into_iter()
                .filter(|(key, _)| {
                    key == &registry_host
                        || (!key.contains(':') && key == host_without_port(&registry_host))
                })
                .flat_map(|(_, pem)| pem_certificates(&pem)),
        );
        let options = RegistryOptions {
            plain_http: self.plain_http.clone(),
            docker_configs: credentials.docker_configs,
            ca_certs,
        };
        let client = client_with(&options, self.insecure(&registry_host), self.timeout);
        let auth = auth_for(&registry_host, &options.docker_configs);
        Ok(Session {
            location: reference.to_string(),
            reference: r,
            client,
            auth,
            blobs: &self.blobs,
        })
    }
}

/// One registry repository, reached as the host's configuration and the item's Context say.
pub struct Session<'a> {
    /// The reference as given (for messages and the allowlist).
    pub location: String,
    pub reference: Reference,
    client: Client,
    auth: RegistryAuth,
    blobs: &'a Blobs,
}

impl Session<'_> {
    /// The image manifest the session names and its digest (an index is refused).
    pub async fn manifest(&self) -> Result<(OciImageManifest, String), DeployerError> {
        let (manifest, digest) = self
            .client
            .pull_manifest(&self.reference, &self.auth)
            .await
            .map_err(|e| registry_error(&self.location, "pulling the manifest of", e))?;
        let OciManifest::Image(manifest) = manifest else {
            return Err(error(
                Some(codes::CONFIGURATION_PROBLEM),
                "InvalidReference",
                format!(
                    "{} is an image index, not an artifact with layers",
                    self.location
                ),
            ));
        };
        Ok((manifest, digest))
    }

    /// One blob (layer or config) of the repository: from the cache by digest, else downloaded
    /// within the size limit and checked against its digest. True: from the cache.
    pub async fn blob(&self, descriptor: &OciDescriptor) -> Result<(Vec<u8>, bool), DeployerError> {
        let reference = self.location.as_str();
        if let Some(data) = self.blobs.get(&descriptor.digest) {
            return Ok((data.to_vec(), true));
        }
        self.blobs
            .check_size(reference, descriptor.size.max(0) as u64)?;
        let mut data = Vec::new();
        self.client
            .pull_blob(&self.reference, descriptor, &mut data)
            .await
            .map_err(|e| registry_error(reference, "pulling a blob of", e))?;
        self.blobs.check_size(reference, data.len() as u64)?;
        self.blobs.count_download();
        let digest = sha256(&data);
        if !digest_matches(&descriptor.digest, &digest) {
            return Err(error(
                Some(codes::INTERNAL_PROBLEM),
                "DigestMismatch",
                format!(
                    "{reference}: blob {} arrived with digest {digest}",
                    descriptor.digest
                ),
            ));
        }
        Ok((self.blobs.put(&digest, data), false))
    }

    /// The content of `layer` of `manifest` (from the cache by digest, else downloaded), with
    /// where it came from.
    pub async fn layer(
        &self,
        manifest: &OciImageManifest,
        manifest_digest: String,
        layer: &OciDescriptor,
    ) -> Result<Fetched, DeployerError> {
        let (data, cached) = self.blob(layer).await?;
        Ok(Fetched {
            digest: layer.digest.clone(),
            media_type: layer.media_type.clone(),
            data,
            cached,
            manifest_digest: Some(manifest_digest),
            config_media_type: Some(manifest.config.media_type.clone()),
            ..Default::default()
        })
    }

    /// The first layer whose media type is one of `media_types` (WIT `fetch.oci-pull`).
    pub async fn pull_layer(&self, media_types: &[String]) -> Result<Fetched, DeployerError> {
        let (manifest, manifest_digest) = self.manifest().await?;
        let Some(layer) = manifest
            .layers
            .iter()
            .find(|l| media_types.contains(&l.media_type))
        else {
            return Err(error(
                Some(codes::CONFIGURATION_PROBLEM),
                "NotFound",
                missing_layer(&self.location, media_types, &manifest),
            ));
        };
        self.layer(&manifest, manifest_digest, layer).await
    }
}

/// The first layer whose media type is in `media_types` (empty: the first layer).
pub fn pick_layer<'l>(
    layers: &'l [OciDescriptor],
    media_types: &[String],
) -> Option<&'l OciDescriptor> {
    if media_types.is_empty() {
        layers.first()
    } else {
        layers.iter().find(|l| media_types.contains(&l.media_type))
    }
}

/// What a manifest without the layer a caller asked for says: the media types asked for and
/// those it has.
pub fn missing_layer(
    location: &str,
    media_types: &[String],
    manifest: &OciImageManifest,
) -> String {
    format!(
        "{location} has no layer of media type {} (it has: {})",
        media_types.join(" or "),
        manifest
            .layers
            .iter()
            .map(|l| l.media_type.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}
