//! Registry clients: plain HTTP only for the registries named, the CAs a client trusts besides
//! the system's, and the credentials it sends; parsing references and resolving tags.
//!
//! Owns: building `oci_client` clients. Must not touch: what is pulled (the callers' business).

use std::sync::Once;

use anyhow::Context as _;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::credentials::{auth_for, pem_certificates};

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

/// Parses `registry/repository[:tag][@digest]`.
pub fn parse(reference: &str) -> anyhow::Result<Reference> {
    reference
        .parse::<Reference>()
        .with_context(|| format!("{reference:?} is not an OCI reference"))
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

/// The repository part of `reference` (`registry/repository`), as signatures name it.
pub fn repository_of(reference: &str) -> anyhow::Result<String> {
    let r = parse(reference)?;
    Ok(format!("{}/{}", r.registry(), r.repository()))
}
