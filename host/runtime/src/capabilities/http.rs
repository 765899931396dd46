//! Outgoing HTTP (WIT 1.5: the standard `wasi:http/outgoing-handler@0.2`, so each language's
//! own client works): every request a plugin sends goes through [`HttpGate`], which asks the
//! invocation's [`HostServices::http_grant`] whether the URL is granted (the item's
//! `wasm-deployer.dev/http-api` Target, secondary Targets, `http.allow`), puts the grant's
//! `Authorization` in place of any the plugin set, and sends it with the host's own client
//! ([`HttpClients`]: a connect timeout, the grant's CA), bounded by the host's limits and the
//! invocation deadline. Redirects are not followed: a 3xx goes back to the plugin, and a request
//! it sends to the new location is checked like any other. Granted to deployers.
//!
//! A refused request answers `HTTP-request-denied` at once, and the invocation fails with the
//! host's error (`ERR_CONFIGURATION_PROBLEM`, `HttpNotAllowed`, naming the URL) whatever the
//! plugin makes of it: the plugin is interrupted at its next epoch tick ([`HttpGate::refused`]).
//! A response larger than the cap ends the invocation the same way (`HttpResponseTooLarge`).
//!
//! Owns: the request path from the plugin to the wire and back. Must not touch: what is granted
//! and which credentials (the host's `capabilities::http`).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sdk_guest::DeployerError;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use crate::api::{HostServices, HttpGrant, HttpObservation, HttpSettings};

/// What ended an invocation's HTTP early: the first refused request, or a response over the cap.
#[derive(Clone, Debug)]
pub(crate) struct Incident(pub(crate) DeployerError);

/// The plugin side's HTTP state of one invocation (the `WasiHttpHooks` of its store).
pub(crate) struct HttpGate {
    shared: Arc<GateShared>,
}

struct GateShared {
    plugin: Arc<str>,
    host: Option<Arc<dyn HostServices>>,
    deadline: Instant,
    settings: HttpSettings,
    in_flight: Arc<tokio::sync::Semaphore>,
    incident: Mutex<Option<Incident>>,
    /// The last request that got no answer (`PUT <url>: <cause>`), for the item's lastError.
    last_failure: Mutex<Option<String>>,
    /// Set with the incident; the epoch callback interrupts the plugin when it sees it.
    stop: AtomicBool,
}

impl HttpGate {
    pub(crate) fn new(
        plugin: Arc<str>,
        host: Option<Arc<dyn HostServices>>,
        deadline: Instant,
    ) -> Self {
        let settings = host.as_ref().map(|h| h.http_settings()).unwrap_or_default();
        let permits = settings.max_in_flight.max(1);
        HttpGate {
            shared: Arc::new(GateShared {
                plugin,
                host,
                deadline,
                settings,
                in_flight: Arc::new(tokio::sync::Semaphore::new(permits)),
                incident: Mutex::new(None),
                last_failure: Mutex::new(None),
                stop: AtomicBool::new(false),
            }),
        }
    }

    /// True once a request was refused or a response was too large: the invocation must stop.
    pub(crate) fn refused(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// `error` (the plugin's, retryable) naming the last request that got no answer, when its
    /// message does not already say so (a client that reports no cause, as JavaScript's `fetch`).
    pub(crate) fn explain(&self, mut error: DeployerError) -> DeployerError {
        let failure = self
            .shared
            .last_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(failure) = failure
            && error.codes.is_empty()
            && !error.message.contains(&failure)
        {
            error.message = format!("{}; the host saw: {failure}", error.message);
        }
        error
    }

    /// The error that ends the invocation, if HTTP ended it.
    pub(crate) fn incident(&self) -> Option<DeployerError> {
        let incident = self
            .shared
            .incident
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        incident.as_ref().map(|i| i.0.clone())
    }
}

impl GateShared {
    fn record(&self, error: DeployerError) {
        let mut incident = self.incident.lock().unwrap_or_else(|e| e.into_inner());
        if incident.is_none() {
            *incident = Some(Incident(error));
        }
        self.stop.store(true, Ordering::Relaxed);
    }

    fn observe(
        &self,
        method: &str,
        url: &http::Uri,
        status: Option<u16>,
        outcome: &str,
        took: Duration,
    ) {
        if let Some(host) = &self.host {
            host.http_observed(&HttpObservation {
                plugin: &self.plugin,
                method,
                host: url.authority().map(|a| a.as_str()).unwrap_or_default(),
                status,
                outcome,
                duration: took,
            });
        }
    }

    fn failed(&self, what: String) {
        *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
    }

    /// Time left of the invocation, at least a millisecond (a timer of zero would never fire).
    fn left(&self) -> Duration {
        self.deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    }

    async fn send(
        self: Arc<Self>,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<http::Response<WasiBody>, HttpError> {
        let started = Instant::now();
        let method = request.method().as_str().to_string();
        let uri = request.uri().clone();
        let Some(host) = self.host.clone() else {
            return Err(HttpError::HttpRequestDenied);
        };
        if self.stop.load(Ordering::Relaxed) {
            return Err(HttpError::HttpRequestDenied);
        }
        let grant = match checked_url(&uri) {
            Err(why) => Err(not_allowed(&self.plugin, &uri, &why)),
            Ok(url) => host.http_grant(&url).await,
        };
        let grant = match grant {
            Ok(grant) => grant,
            Err(error) => {
                tracing::warn!(plugin = %self.plugin, %method, url = %uri, error = %error.message, "denied: HTTP request outside the plugin's grant");
                self.record(error);
                self.observe(&method, &uri, None, "denied", started.elapsed());
                return Err(HttpError::HttpRequestDenied);
            }
        };
        put_authorization(&mut request, &grant);
        let request = with_content_length(request, self.left()).await?;
        let permit = tokio::time::timeout(self.left(), self.in_flight.clone().acquire_owned())
            .await
            .map_err(|_| HttpError::ConnectionLimitReached)?
            .map_err(|_| HttpError::ConnectionLimitReached)?;
        let connect = pick(
            options.and_then(|o| o.connect_timeout),
            self.settings.connect_timeout,
        )
        .min(self.left());
        let first_byte = pick(
            options.and_then(|o| o.first_byte_timeout),
            self.settings.request_timeout,
        )
        .min(self.left());
        let client = HTTP_CLIENTS.client(grant.ca_pem.as_deref().map(Vec::as_slice), connect)?;
        let answer = tokio::time::timeout(first_byte, client.request(request)).await;
        let response = match answer {
            Err(_) => {
                self.observe(&method, &uri, None, "timeout", started.elapsed());
                self.failed(format!(
                    "{method} {uri}: no response within {first_byte:?} (HTTP-response-timeout)"
                ));
                return Err(HttpError::HttpResponseTimeout);
            }
            Ok(Err(e)) => {
                let (error, outcome) = classify(&e);
                tracing::debug!(plugin = %self.plugin, %method, url = %uri, error = %e, "HTTP request failed");
                self.observe(&method, &uri, None, outcome, started.elapsed());
                self.failed(format!("{method} {uri}: {error}"));
                return Err(error);
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        self.observe(&method, &uri, Some(status), "ok", started.elapsed());
        let cap = self.settings.max_response_bytes;
        let declared = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > cap) {
            self.record(too_large(&self.plugin, &uri, cap));
            return Err(HttpError::HttpResponseBodySize(declared));
        }
        Ok(response.map(|body| {
            CappedBody {
                inner: body,
                seen: 0,
                cap,
                gate: self.clone(),
                uri: uri.clone(),
                _permit: permit,
            }
            .boxed_unsync()
        }))
    }
}

/// A request body without `Content-Length` is read first and sent with one: APIs often refuse
/// chunked uploads (411), and what plugins send is small. Bounded by the invocation deadline.
async fn with_content_length(
    request: http::Request<WasiBody>,
    left: Duration,
) -> Result<http::Request<WasiBody>, HttpError> {
    if request.headers().contains_key(http::header::CONTENT_LENGTH) {
        return Ok(request);
    }
    let (mut parts, body) = request.into_parts();
    let bytes = tokio::time::timeout(left, body.collect())
        .await
        .map_err(|_| HttpError::ConnectionWriteTimeout)??
        .to_bytes();
    if !bytes.is_empty() || !matches!(parts.method, http::Method::GET | http::Method::HEAD) {
        parts.headers.insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(bytes.len()),
        );
    }
    let body = http_body_util::Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync();
    Ok(http::Request::from_parts(parts, body))
}

/// The guest's own timeout if it set one and it is shorter, else the host's.
fn pick(guest: Option<Duration>, host: Duration) -> Duration {
    guest.map_or(host, |g| g.min(host))
}

/// The `Authorization` of the grant replaces any the plugin set (it cannot override or read it).
fn put_authorization(request: &mut http::Request<WasiBody>, grant: &HttpGrant) {
    if let Some(auth) = &grant.authorization {
        let headers = request.headers_mut();
        headers.remove(http::header::AUTHORIZATION);
        if let Ok(mut value) = http::HeaderValue::from_str(auth) {
            value.set_sensitive(true);
            headers.insert(http::header::AUTHORIZATION, value);
        }
    }
}

/// The URL a grant is checked against, or why no grant can cover it: no userinfo, no `.` or `..`
/// path segment (plain or percent-encoded), which a server could resolve outside the grant.
pub fn checked_url(uri: &http::Uri) -> Result<String, String> {
    let scheme = uri.scheme_str().ok_or("the URL has no scheme")?;
    let authority = uri.authority().ok_or("the URL has no host")?;
    if authority.as_str().contains('@') {
        return Err("the URL carries user information".into());
    }
    let path = uri.path();
    let dot_segment = path.split('/').any(|seg| {
        let s = seg.to_ascii_lowercase().replace("%2e", ".");
        s == "." || s == ".."
    });
    if dot_segment {
        return Err("the URL's path has a '.' or '..' segment".into());
    }
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    Ok(format!(
        "{scheme}://{}{path}{query}",
        authority.as_str().to_ascii_lowercase()
    ))
}

/// The error of a request outside the grant (the host's own denials read the same).
pub fn not_allowed(plugin: &str, url: &http::Uri, why: &str) -> DeployerError {
    DeployerError::configuration(
        "HttpNotAllowed",
        format!("plugin {plugin:?} may not send HTTP requests to {url}: {why}"),
    )
    .with_operation("http")
}

fn too_large(plugin: &str, url: &http::Uri, cap: u64) -> DeployerError {
    DeployerError::configuration(
        "HttpResponseTooLarge",
        format!(
            "the response of {url} to plugin {plugin:?} is larger than the host's limit of {} (http.maxResponseKiB)",
            crate::api::human_bytes(cap as usize)
        ),
    )
    .with_operation("http")
}

/// A failed request as a wasi:http error code, and its outcome label for the metric.
fn classify(e: &hyper_util::client::legacy::Error) -> (HttpError, &'static str) {
    use std::error::Error as _;
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            let text = io.to_string();
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => (HttpError::ConnectionRefused, "refused"),
                std::io::ErrorKind::TimedOut => (HttpError::ConnectionTimeout, "timeout"),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::UnexpectedEof => {
                    (HttpError::ConnectionTerminated, "error")
                }
                _ if text.contains("certificate") || text.contains("InvalidCertificate") => {
                    (HttpError::TlsCertificateError, "tls")
                }
                _ if text.contains("dns error") || text.contains("failed to lookup") => (
                    HttpError::DnsError {
                        rcode: Some(text),
                        info_code: None,
                    },
                    "dns",
                ),
                _ => (HttpError::InternalError(Some(text)), "error"),
            };
        }
        if s.to_string().contains("dns error") {
            return (
                HttpError::DnsError {
                    rcode: Some(s.to_string()),
                    info_code: None,
                },
                "dns",
            );
        }
        source = s.source();
    }
    if e.is_connect() {
        (HttpError::ConnectionRefused, "refused")
    } else {
        (HttpError::InternalError(Some(e.to_string())), "error")
    }
}

/// A response body that stops at the cap (recording why) and frees the in-flight slot with it.
struct CappedBody {
    inner: Incoming,
    seen: u64,
    cap: u64,
    gate: Arc<GateShared>,
    uri: http::Uri,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Body for CappedBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.seen += data.len() as u64;
                    if this.seen > this.cap {
                        this.gate
                            .record(too_large(&this.gate.plugin, &this.uri, this.cap));
                        return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(
                            this.seen,
                        )))));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(HttpError::from(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, WasiBody>;

/// The SHA-256 of the extra CA (none: the system's roots only) and the connect timeout.
type ClientKey = (Option<[u8; 32]>, Duration);

/// The host's HTTP clients for plugins, one per (extra CA, connect timeout): connections are
/// pooled across invocations (idle ones close after 30 s).
pub struct HttpClients {
    clients: Mutex<HashMap<ClientKey, HttpsClient>>,
}

/// At most this many clients are kept (distinct CAs × timeouts); past it the map starts over.
const MAX_CLIENTS: usize = 64;

static HTTP_CLIENTS: LazyLock<HttpClients> = LazyLock::new(|| HttpClients {
    clients: Mutex::new(HashMap::new()),
});

impl HttpClients {
    fn client(&self, ca_pem: Option<&[u8]>, connect: Duration) -> Result<HttpsClient, HttpError> {
        use sha2::Digest;
        // Round to 10 ms so deadlines that shrink each call do not make a client each.
        let connect = Duration::from_millis((connect.as_millis() as u64).div_ceil(10) * 10);
        let key = (ca_pem.map(|p| sha2::Sha256::digest(p).into()), connect);
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let tls = tls_config(ca_pem).map_err(|e| HttpError::InternalError(Some(e)))?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(connect));
        http.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .build(https);
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }
}

/// The system's roots plus the grant's CA (PEM), on the ring provider the host uses.
fn tls_config(ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    static SYSTEM: LazyLock<Vec<CertificateDer<'static>>> =
        LazyLock::new(|| rustls_native_certs::load_native_certs().certs);
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(SYSTEM.iter().cloned());
    if let Some(pem) = ca_pem {
        let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("the Target's caData is not PEM: {e}"))?;
        if certs.is_empty() {
            return Err("the Target's caData holds no certificate".into());
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("the Target's caData: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                    ),
                    HttpError,
                >,
            > + Send,
    > {
        let shared = self.shared.clone();
        // wasmtime runs this in a task of its own: keep the invocation's span (the item and job)
        // on what it logs.
        let span = tracing::Span::current();
        Box::new(tracing::Instrument::instrument(
            async move {
                let response = shared.send(request, options).await?;
                let io: Box<dyn Future<Output = Result<(), HttpError>> + Send> =
                    Box::new(async { Ok(()) });
                Ok((response, io))
            },
            span,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Result<String, String> {
        checked_url(&s.parse().unwrap())
    }

    #[test]
    fn urls_are_checked_without_userinfo_or_dot_segments() {
        assert_eq!(
            url("https://API.example.com:8443/v1/things?x=1").unwrap(),
            "https://api.example.com:8443/v1/things?x=1"
        );
        assert!(url("https://api.example.com/v1/../admin").is_err());
        assert!(url("https://api.example.com/v1/%2E%2e/admin").is_err());
        assert!(url("https://api.example.com/v1/./x").is_err());
        assert!(url("https://user:pw@api.example.com/v1/").is_err());
        assert!(url("https://api.example.com/v1/..x").is_ok());
    }

    #[test]
    fn the_guest_may_only_shorten_the_hosts_timeouts() {
        let host = Duration::from_secs(5);
        assert_eq!(pick(None, host), host);
        assert_eq!(
            pick(Some(Duration::from_secs(1)), host),
            Duration::from_secs(1)
        );
        assert_eq!(pick(Some(Duration::from_secs(60)), host), host);
    }
}
