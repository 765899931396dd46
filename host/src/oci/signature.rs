//! Cosign-style signature artifacts in registries: `<repository>:sha256-<manifest hex>.sig`,
//! whose layer (`application/vnd.dev.cosign.simplesigning.v1+json`) is the simple-signing
//! payload naming the manifest digest, with the signature in the annotation
//! `dev.cosignproject.cosign/signature` (what `cosign sign --key` writes).
//!
//! Owns: the layout of signature artifacts, reading and writing them. Must not touch:
//! verification (`plugin_sources::trust` decides whether a signature counts).

use std::collections::BTreeMap;

use anyhow::Context as _;
use base64::Engine as _;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{DerSignature, SigningKey};
use serde_json::json;

use super::client::{RegistryOptions, client_for, parse, repository_of};

/// Media type of cosign's simple-signing payload layer.
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// Annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// The simple-signing payload cosign signs for an image.
pub fn payload(repository: &str, manifest_digest: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": manifest_digest},
            "type": "cosign container image signature",
        },
        "optional": null,
    }))
    .expect("payload")
}

/// The tag of the signature artifact of `manifest_digest` (`sha256-<hex>.sig`).
pub fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replace(':', "-"))
}

/// Signs `message`: base64 of the DER signature (as `cosign sign-blob`).
pub fn sign_blob(message: &[u8], key: &SigningKey) -> String {
    let sig: DerSignature = key.sign(message);
    base64::engine::general_purpose::STANDARD.encode(sig.as_bytes())
}

/// The cosign signature layers (payload, base64 signature) stored for `manifest_digest` in
/// `reference`'s repository; none if there is no signature artifact.
pub async fn signatures(
    reference: &str,
    manifest_digest: &str,
    options: &RegistryOptions,
) -> anyhow::Result<Vec<(Vec<u8>, String)>> {
    let sig_ref = format!(
        "{}:{}",
        repository_of(reference)?,
        signature_tag(manifest_digest)
    );
    let r = parse(&sig_ref)?;
    let (client, auth) = client_for(&r, options);
    let image = match client.pull(&r, &auth, vec![SIMPLE_SIGNING]).await {
        Ok(image) => image,
        Err(oci_client::errors::OciDistributionError::ImageManifestNotFoundError(_)) => {
            return Ok(Vec::new());
        }
        Err(e)
            if ["manifest unknown", "manifest_unknown", "not found"]
                .iter()
                .any(|m| e.to_string().to_lowercase().contains(m)) =>
        {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e).with_context(|| format!("pulling the signature {sig_ref}")),
    };
    Ok(image
        .layers
        .into_iter()
        .filter_map(|l| {
            let sig = l.annotations.as_ref()?.get(SIGNATURE_ANNOTATION)?.clone();
            Some((l.data.to_vec(), sig))
        })
        .collect())
}

/// Signs the artifact `manifest_digest` of `reference` and pushes the signature artifact as
/// `cosign sign --key` does.
pub async fn push_signature(
    reference: &str,
    manifest_digest: &str,
    key: &p256::ecdsa::SigningKey,
    options: &RegistryOptions,
) -> anyhow::Result<()> {
    let repository = repository_of(reference)?;
    let payload = payload(&repository, manifest_digest);
    let signature = sign_blob(&payload, key);
    let sig_ref = format!("{repository}:{}", signature_tag(manifest_digest));
    let r = parse(&sig_ref)?;
    let (client, auth) = client_for(&r, options);
    let layer = ImageLayer::new(
        payload,
        SIMPLE_SIGNING.to_string(),
        Some(BTreeMap::from([(
            SIGNATURE_ANNOTATION.to_string(),
            signature,
        )])),
    );
    let config = Config::new(
        b"{}".to_vec(),
        "application/vnd.oci.image.config.v1+json".to_string(),
        None,
    );
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    client
        .push(&r, &[layer], config, &auth, Some(manifest))
        .await
        .with_context(|| format!("pushing the signature {sig_ref}"))?;
    Ok(())
}
