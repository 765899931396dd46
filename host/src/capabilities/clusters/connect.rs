//! Building the client of one Target kubeconfig, and reading why a call could not reach it.
//!
//! kube's default client keeps every kept-alive connection for ever (hyper's idle timeout
//! needs a timer it does not set), retries, and logs each failed connect at ERROR; a host that
//! talks to thousands of clusters needs the opposite. So the stack is built here from kube's
//! own layers (base URI, auth with token refresh, extra headers) over a hyper client whose idle
//! connections close, with a connect timeout that covers the TLS handshake, one TLS session
//! slot (one server per client) and a count of open connections.
//!
//! Owns: the HTTP stack of a Target client and the error chain's reading. Must not touch: when
//! clients are built or released (`super`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

use super::config::ClusterSettings;

/// The client for `config`, its open connections counted in `open`.
pub fn client(
    config: &kube::Config,
    settings: &ClusterSettings,
    open: Arc<AtomicUsize>,
) -> Result<kube::Client, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(settings.connect_timeout));
    http.set_nodelay(true);
    let mut tls = tls_config(config)?;
    // One server per client: a single resumption slot instead of rustls' 256.
    tls.resumption = rustls::client::Resumption::in_memory_sessions(8);
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|e| {
            kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
        })?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let connector = Bounded {
        inner: https.enable_http1().wrap_connector(http),
        connect_timeout: settings.connect_timeout,
        open,
    };
    let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(settings.connection_idle_timeout)
        // Concurrent calls may open more; only one stays open once they are done.
        .pool_max_idle_per_host(1)
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

/// The TLS configuration of the client for `config`.
///
/// kube builds a new one per call. Without a CA of the kubeconfig's own (and without a client
/// certificate), that is the operating system's verifier, which reads and parses every root
/// certificate of the system again: about 80 KiB of memory per client (measured: 1,000 Target
/// clusters over plain HTTP held 184.5 MiB, over TLS with a CA 106.6 MiB), and a failure where
/// the system has no roots. Such configurations are all alike, so they share one verifier;
/// a plain-HTTP cluster never uses its configuration and shares an empty one.
fn tls_config(config: &kube::Config) -> Result<rustls::ClientConfig, kube::Error> {
    static SYSTEM_TRUST: std::sync::OnceLock<rustls::ClientConfig> = std::sync::OnceLock::new();
    static UNUSED: std::sync::OnceLock<rustls::ClientConfig> = std::sync::OnceLock::new();
    if config.cluster_url.scheme_str() == Some("http") {
        return Ok(UNUSED
            .get_or_init(|| {
                rustls::ClientConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
            })
            .clone());
    }
    let auth = &config.auth_info;
    let system_trust = config.root_cert.is_none()
        && config.root_cert_file.is_none()
        && !config.accept_invalid_certs
        && auth.client_certificate.is_none()
        && auth.client_certificate_data.is_none()
        && auth.client_key.is_none()
        && auth.client_key_data.is_none()
        && auth.exec.is_none();
    if !system_trust {
        return config.rustls_client_config();
    }
    if let Some(shared) = SYSTEM_TRUST.get() {
        return Ok(shared.clone());
    }
    let built = config.rustls_client_config()?;
    Ok(SYSTEM_TRUST.get_or_init(|| built).clone())
}

/// Why `e` means the cluster could not be reached (refused, timed out, TLS, name lookup), in
/// words for the item's `lastError`; `None` for an answer of the cluster, even an error.
pub fn unreachable_cause(e: &kube::Error) -> Option<String> {
    let source: &(dyn std::error::Error + 'static) = match e {
        kube::Error::HyperError(e) => e,
        kube::Error::Service(e) => e.as_ref(),
        _ => return None,
    };
    let mut chain = Vec::new();
    let mut next = Some(source);
    while let Some(err) = next {
        chain.push(err);
        next = err.source();
    }
    let text = crate::oci::error::error_chain(source);
    for err in &chain {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(format!("TLS handshake failed: {tls}"));
        }
        if let Some(io) = err.downcast_ref::<io::Error>() {
            if let Some(tls) = io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
                return Some(format!("TLS handshake failed: {tls}"));
            }
            return Some(match io.kind() {
                io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
                io::ErrorKind::TimedOut => format!("timed out: {io}"),
                io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => {
                    "connection reset by the server".to_string()
                }
                io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
                _ => format!("connection failed: {text}"),
            });
        }
    }
    if let Some(hyper) = chain
        .iter()
        .find_map(|e| e.downcast_ref::<hyper_util::client::legacy::Error>())
        && hyper.is_connect()
    {
        return Some(format!("connection failed: {text}"));
    }
    if chain
        .iter()
        .any(|e| e.downcast_ref::<hyper::Error>().is_some())
    {
        return Some(format!("connection failed: {text}"));
    }
    None
}

/// A connector with a connect timeout over TCP and TLS together, counting its connections.
#[derive(Clone)]
struct Bounded<C> {
    inner: C,
    connect_timeout: Duration,
    open: Arc<AtomicUsize>,
}

impl<C> tower::Service<http::Uri> for Bounded<C>
where
    C: tower::Service<http::Uri> + Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = Counted<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> <Self as tower::Service<http::Uri>>::Future {
        let connecting = self.inner.call(uri);
        let within = self.connect_timeout;
        let open = self.open.clone();
        Box::pin(async move {
            match tokio::time::timeout(within, connecting).await {
                Ok(Ok(io)) => {
                    open.fetch_add(1, Ordering::Relaxed);
                    Ok(Counted { io, open })
                }
                Ok(Err(e)) => Err(e.into()),
                Err(_) => Err(Box::new(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no TCP connection and TLS handshake within {}s",
                        within.as_secs_f32()
                    ),
                )) as BoxError),
            }
        })
    }
}

/// A connection, counted while it is open.
struct Counted<T> {
    io: T,
    open: Arc<AtomicUsize>,
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T: Connection> Connection for Counted<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(url: &str, settings: &ClusterSettings) -> kube::Error {
        let config = kube::Config::new(url.parse().unwrap());
        let client = client(&config, settings, Default::default()).unwrap();
        client.apiserver_version().await.unwrap_err()
    }

    #[tokio::test]
    async fn a_refused_connection_says_so() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = call(
            &format!("http://127.0.0.1:{port}"),
            &ClusterSettings::default(),
        )
        .await;
        assert_eq!(unreachable_cause(&e).as_deref(), Some("connection refused"));
    }

    #[tokio::test]
    async fn a_tls_handshake_that_never_ends_times_out() {
        // Accepts (the kernel's backlog) and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let settings = ClusterSettings {
            connect_timeout: Duration::from_millis(300),
            ..ClusterSettings::default()
        };
        let e = call(&format!("https://127.0.0.1:{port}"), &settings).await;
        let cause = unreachable_cause(&e).expect("unreachable");
        assert!(
            cause.starts_with("timed out: no TCP connection and TLS handshake"),
            "{cause}"
        );
        assert!(cause.contains("within 0.3s"), "{cause}");
        drop(listener);
    }

    #[test]
    fn an_api_answer_is_not_unreachable() {
        let e = kube::Error::Api(
            kube::core::Status::failure("forbidden", "Forbidden")
                .with_code(403)
                .boxed(),
        );
        assert_eq!(unreachable_cause(&e), None);
    }
}
