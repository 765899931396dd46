//! Wasm plugins in OCI registries: pull (the CNCF wasm layout, and the legacy Kubewarden/Spin
//! layer type) and push (the CNCF layout), registry credentials from Docker configs, plain HTTP
//! only for registries named explicitly, and cosign-style signature artifacts (`trust`).
//!
//! Owns: talking to registries. Must not touch: loading or trusting what it fetched (the caller
//! checks digests and signatures before anything is compiled).

use std::collections::BTreeMap;
use std::sync::Once;

use anyhow::{Context as _, bail};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::json;

/// The CNCF TAG-runtime wasm layout: config and layer media types.
pub const WASM_CONFIG_V0: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER: &str = "application/wasm";
/// The legacy layer type (Kubewarden, wasm-to-oci, Spin), accepted on pull.
pub const LEGACY_WASM_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";

/// How to reach registries.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Registries (`host[:port]`) spoken to over plain HTTP; every other one needs HTTPS.
    pub plain_http: Vec<String>,
    /// Docker config documents (`{"auths": {...}}`) with credentials.
    pub docker_configs: Vec<String>,
    /// PEM CA certificates trusted besides the system's (the host's `fetch.caBundle`; an item's
    /// registry CA from its Context's OCM credentials). Only for the client built with these
    /// options: nothing else trusts them.
    pub ca_certs: Vec<String>,
}

/// The certificates (`-----BEGIN CERTIFICATE-----` blocks) of a PEM document, each as its own
/// PEM text; anything else in the document is skipped.
pub fn pem_certificates(pem: &str) -> Vec<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            break;
        };
        let end = start + len + END.len();
        out.push(format!("{}\n", &rest[start..end]));
        rest = &rest[end..];
    }
    out
}

fn extra_roots(options: &RegistryOptions) -> Vec<oci_client::client::Certificate> {
    options
        .ca_certs
        .iter()
        .flat_map(|pem| pem_certificates(pem))
        .map(|pem| oci_client::client::Certificate {
            encoding: oci_client::client::CertificateEncoding::Pem,
            data: pem.into_bytes(),
        })
        .collect()
}

/// What a pull brought.
#[derive(Clone, Debug)]
pub struct Pulled {
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of the manifest (what tags resolve to, and what signatures sign).
    pub manifest_digest: String,
    /// `sha256:<hex>` of the wasm layer.
    pub layer_digest: String,
}

/// Installs the rustls crypto provider once (reqwest is built without one of its own).
pub fn install_crypto() {
    static ONCE: Once = Once::new();
    // reqwest is built without a provider of its own; use the ring provider kube uses too.
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A client for `reference`'s registry and the credentials for it.
pub fn client_for(reference: &Reference, options: &RegistryOptions) -> (Client, RegistryAuth) {
    install_crypto();
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(options.plain_http.clone()),
        extra_root_certificates: extra_roots(options),
        ..Default::default()
    });
    (
        client,
        auth_for(reference.resolve_registry(), &options.docker_configs),
    )
}

/// A client for registries as `options` say, optionally without TLS verification (the host's
/// `fetch.insecureSkipVerify`) and with a request timeout.
pub fn client_with(
    options: &RegistryOptions,
    insecure: bool,
    timeout: std::time::Duration,
) -> Client {
    install_crypto();
    Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(options.plain_http.clone()),
        accept_invalid_certificates: insecure,
        extra_root_certificates: extra_roots(options),
        read_timeout: Some(timeout),
        connect_timeout: Some(timeout),
        ..Default::default()
    })
}

/// Basic credentials for `registry` from the first Docker config that has them.
pub fn auth_for(registry: &str, docker_configs: &[String]) -> RegistryAuth {
    use base64::Engine as _;
    for doc in docker_configs {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(doc) else {
            continue;
        };
        let Some(auths) = v.get("auths").and_then(|a| a.as_object()) else {
            continue;
        };
        let host = |k: &str| {
            k.trim_start_matches("https://")
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap_or_default()
                .to_string()
        };
        if let Some(entry) = auths
            .iter()
            .find(|(k, _)| host(k) == registry)
            .map(|(_, e)| e)
        {
            if let (Some(u), Some(p)) = (entry["username"].as_str(), entry["password"].as_str()) {
                return RegistryAuth::Basic(u.into(), p.into());
            }
            if let Some(auth) = entry["auth"].as_str()
                && let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(auth)
                && let Some((u, p)) = String::from_utf8_lossy(&decoded).split_once(':')
            {
                return RegistryAuth::Basic(u.into(), p.into());
            }
        }
    }
    RegistryAuth::Anonymous
}

/// Parses `registry/repository[:tag][@digest]`.
pub fn parse(reference: &str) -> anyhow::Result<Reference> {
    reference
        .parse::<Reference>()
        .with_context(|| format!("{reference:?} is not an OCI reference"))
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

/// The manifest digest `reference` resolves to now (one request: for polling tags).
pub async fn resolve(reference: &str, options: &RegistryOptions) -> anyhow::Result<String> {
    let r = parse(reference)?;
    let (client, auth) = client_for(&r, options);
    client
        .fetch_manifest_digest(&r, &auth)
        .await
        .with_context(|| format!("resolving {reference}"))
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

/// The repository part of `reference` (`registry/repository`), as signatures name it.
pub fn repository_of(reference: &str) -> anyhow::Result<String> {
    let r = parse(reference)?;
    Ok(format!("{}/{}", r.registry(), r.repository()))
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
        super::trust::signature_tag(manifest_digest)
    );
    let r = parse(&sig_ref)?;
    let (client, auth) = client_for(&r, options);
    let image = match client
        .pull(&r, &auth, vec![super::trust::SIMPLE_SIGNING])
        .await
    {
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
            let sig = l
                .annotations
                .as_ref()?
                .get(super::trust::SIGNATURE_ANNOTATION)?
                .clone();
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
    let payload = super::trust::payload(&repository, manifest_digest);
    let signature = super::trust::sign_blob(&payload, key);
    let sig_ref = format!(
        "{repository}:{}",
        super::trust::signature_tag(manifest_digest)
    );
    let r = parse(&sig_ref)?;
    let (client, auth) = client_for(&r, options);
    let layer = ImageLayer::new(
        payload,
        super::trust::SIMPLE_SIGNING.to_string(),
        Some(BTreeMap::from([(
            super::trust::SIGNATURE_ANNOTATION.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_the_matching_docker_config_entry() {
        let docs = vec![
            r#"{"auths": {"other.io": {"username": "o", "password": "p"}}}"#.to_string(),
            // "user:secret" in base64, under a URL-shaped key
            r#"{"auths": {"https://reg.example:5000/v2/": {"auth": "dXNlcjpzZWNyZXQ="}}}"#
                .to_string(),
        ];
        assert_eq!(
            auth_for("reg.example:5000", &docs),
            RegistryAuth::Basic("user".into(), "secret".into())
        );
        assert_eq!(
            auth_for("other.io", &docs),
            RegistryAuth::Basic("o".into(), "p".into())
        );
        assert_eq!(auth_for("nowhere.io", &docs), RegistryAuth::Anonymous);
    }

    #[test]
    fn a_pem_bundle_splits_into_its_certificates() {
        let one = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
        let two = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----";
        let bundle = format!(
            "# a comment\n{one}\n-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n{two}\n"
        );
        assert_eq!(
            pem_certificates(&bundle),
            [format!("{one}\n"), format!("{two}\n")]
        );
        assert!(pem_certificates("not pem").is_empty());
    }
}
