//! Wasm components as OCI artifacts: pull (the CNCF wasm layout, and the legacy
//! Kubewarden/Spin layer type) and push (the CNCF layout).
//!
//! Owns: the wasm artifact layout. Must not touch: trusting what was pulled (the caller checks
//! digests and signatures before anything is compiled).

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use serde_json::json;

use super::client::{RegistryOptions, client_for, parse, resolve};

/// The CNCF TAG-runtime wasm layout: config and layer media types.
pub const WASM_CONFIG_V0: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER: &str = "application/wasm";
/// The legacy layer type (Kubewarden, wasm-to-oci, Spin), accepted on pull.
pub const LEGACY_WASM_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";

/// What a pull brought.
#[derive(Clone, Debug)]
pub struct Pulled {
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of the manifest (what tags resolve to, and what signatures sign).
    pub manifest_digest: String,
    /// `sha256:<hex>` of the wasm layer.
    pub layer_digest: String,
}

/// Pulls the wasm component at `reference` (exactly one wasm layer).
pub async fn pull(reference: &str, options: &RegistryOptions) -> anyhow::Result<Pulled> {
    let r = parse(reference)?;
    let (client, auth) = client_for(&r, options);
    let image = client
        .pull(&r, &auth, vec![WASM_LAYER, LEGACY_WASM_LAYER])
        .await
        .with_context(|| format!("pulling {reference}"))?;
    let mut wasm = image
        .layers
        .into_iter()
        .filter(|l| l.media_type == WASM_LAYER || l.media_type == LEGACY_WASM_LAYER);
    let Some(layer) = wasm.next() else {
        bail!("{reference} has no wasm layer ({WASM_LAYER} or {LEGACY_WASM_LAYER})");
    };
    if wasm.next().is_some() {
        bail!("{reference} has more than one wasm layer");
    }
    let layer_digest = layer.sha256_digest();
    Ok(Pulled {
        bytes: layer.data.to_vec(),
        manifest_digest: image.digest.unwrap_or_default(),
        layer_digest,
    })
}

/// Pushes `bytes` as a wasm component in the CNCF layout; returns the manifest digest.
pub async fn push(
    reference: &str,
    bytes: &[u8],
    title: &str,
    options: &RegistryOptions,
) -> anyhow::Result<String> {
    push_as(reference, bytes, title, WASM_LAYER, options).await
}

/// Like [`push`] with another layer media type (tests push the legacy layout with it).
pub async fn push_as(
    reference: &str,
    bytes: &[u8],
    title: &str,
    layer_media_type: &str,
    options: &RegistryOptions,
) -> anyhow::Result<String> {
    let r = parse(reference)?;
    let (client, auth) = client_for(&r, options);
    let layer = ImageLayer::new(
        bytes.to_vec(),
        layer_media_type.to_string(),
        Some(BTreeMap::from([(
            "org.opencontainers.image.title".to_string(),
            format!("{title}.wasm"),
        )])),
    );
    let config = json!({
        "created": jiff::Timestamp::now().to_string(),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer.sha256_digest()],
        "component": {"exports": [], "imports": [], "target": null},
    });
    let config = Config::new(
        serde_json::to_vec(&config)?,
        WASM_CONFIG_V0.to_string(),
        None,
    );
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    client
        .push(&r, &[layer], config, &auth, Some(manifest))
        .await
        .with_context(|| format!("pushing {reference}"))?;
    resolve(reference, options).await
}
