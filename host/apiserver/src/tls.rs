//! HTTPS serving (only with [`crate::Options::tls`]): a CA and a serving certificate generated
//! at start, and an axum [`Listener`] that completes TLS handshakes off the accept loop.
//!
//! Why: kubectl (client-go) sends a kubeconfig's bearer token only over TLS, so RBAC
//! ([`crate::Options::rbac`]) is usable from kubectl only over HTTPS. The CA is self-signed and
//! lives for the process; its PEM goes into the kubeconfig (`certificate-authority-data`) and,
//! from [`crate::run_standalone`] and dev mode, into `ca.crt` beside the kubeconfig.
//!
//! Owns: certificate generation ([`ServingCert::generate`], rcgen on the ring provider the rest
//! of the tree uses), the rustls server configuration, and [`TlsListener`].
//! Must not touch: what is served (the router), authentication, the store.

use anyhow::Context as _;
use axum::serve::Listener;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A CA (self-signed) and a serving certificate it signed, for `localhost`, `127.0.0.1`, `::1`
/// and the extra names given.
pub struct ServingCert {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    key_der: Vec<u8>,
    key_pem: String,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").finish_non_exhaustive()
    }
}

impl ServingCert {
    /// Generates a fresh CA (`embedded-apiserver-ca`) and a serving certificate (ECDSA P-256)
    /// valid for the loopback names and `hosts` (DNS names or IP addresses).
    pub fn generate(hosts: &[String]) -> anyhow::Result<Self> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        let ca_key = KeyPair::generate().context("generating the CA key")?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name
            .push(DnType::CommonName, "embedded-apiserver-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).context("self-signing the CA")?;
        let issuer = Issuer::new(ca, ca_key);

        // kube-apiserver's own names too: clients reach it as `kubernetes.default` (the Service
        // `default/kubernetes` the server publishes), e.g. Landscaper's integration tests.
        let mut names = vec![
            "localhost".to_string(),
            "127.0.0.1".into(),
            "::1".into(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            "kubernetes.default.svc.cluster.local".into(),
        ];
        for h in hosts {
            if !h.is_empty() && !names.contains(h) {
                names.push(h.clone());
            }
        }
        let key = KeyPair::generate().context("generating the serving key")?;
        let mut params =
            CertificateParams::new(names).context("the serving certificate's names")?;
        params
            .distinguished_name
            .push(DnType::CommonName, "embedded-apiserver");
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &issuer)
            .context("signing the serving certificate")?;
        Ok(ServingCert {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            key_der: key.serialize_der(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The CA certificate (PEM): what a client trusts (`certificate-authority-data`).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The serving certificate (PEM), for servers other than this crate's (tests hand it to a
    /// registry or chart repository they start).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The serving certificate's private key (PKCS#8 PEM).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The CA certificate (DER).
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca_der
    }

    /// The rustls server configuration (ring provider; HTTP/1.1 only: watches are chunked
    /// HTTP/1.1 responses, and kubectl and kube-rs both speak it).
    pub fn server_config(&self) -> anyhow::Result<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_single_cert(
                vec![self.cert_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
            )
            .context("the serving certificate")?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// A TCP listener whose connections are TLS streams. Handshakes run in their own tasks (a
/// slow or silent client holds up nobody; one that has not finished in 10 s is dropped), and
/// finished ones are handed to axum in order of completion.
pub struct TlsListener {
    addr: SocketAddr,
    rx: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    acceptor: AbortOnDrop,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl TlsListener {
    /// Wraps `listener`; must be called inside a Tokio runtime.
    pub fn new(listener: TcpListener, config: rustls::ServerConfig) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let task = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // As axum's own listener: resource exhaustion passes, so wait a little.
                        tracing::debug!(error = %e, "accept");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
                    {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            addr,
            rx,
            acceptor: AbortOnDrop(task),
        })
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept task ended (it never does while the listener lives): nothing more.
            None => {
                let _ = &self.acceptor;
                std::future::pending().await
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;

    #[test]
    fn the_serving_certificate_is_signed_by_the_ca_for_loopback_names() {
        let cert = ServingCert::generate(&["example.test".into()]).unwrap();
        assert!(cert.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        // A rustls client that trusts only the CA accepts the server for each name.
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.ca_der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        for name in ["localhost", "127.0.0.1", "::1", "example.test"] {
            let server_name = rustls::pki_types::ServerName::try_from(name).unwrap();
            verifier
                .verify_server_cert(
                    &cert.cert_der,
                    &[],
                    &server_name,
                    &[],
                    rustls::pki_types::UnixTime::now(),
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let other = rustls::pki_types::ServerName::try_from("other.test").unwrap();
        assert!(
            verifier
                .verify_server_cert(
                    &cert.cert_der,
                    &[],
                    &other,
                    &[],
                    rustls::pki_types::UnixTime::now()
                )
                .is_err()
        );
        cert.server_config().unwrap();
    }
}
