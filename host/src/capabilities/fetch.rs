//! Downloads for plugins (WIT `fetch`, 1.2): HTTP(S) GETs and OCI pulls the host does because
//! a plugin has no sockets — the helm deployer's charts from chart repositories, archives and
//! OCI registries.
//!
//! Owns: the `fetch:` configuration, HTTP(S) downloads (the per-request timeout, skipped TLS
//! verification for the hosts the configuration names, the Context's
//! `helmChartRepoCredentials`). OCI pulls, the allowlist, the size limit and the
//! content-addressed cache are the `oci` room's, shared with the `ocm` capability. Must not
//! touch: what the bytes mean (charts are the plugin's business) or anything a plugin could use
//! to reach another host.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use plugin_runtime::{DeployerError, FetchRequest, Fetched};
use serde::Deserialize;

use crate::landscaper::{codes, parse_go_duration};
use crate::oci::allowlist::allowed;
use crate::oci::blob_cache::{digest_matches, sha256};
use crate::oci::error::{error as err, error_chain, is_certificate_problem};
use crate::oci::{self as registry, Blobs, ItemContext, Registries};

/// `fetch:` section of the host configuration.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FetchConfig {
    /// What plugins may download: URL prefixes (`https://charts.example.com/stable/`), hosts
    /// (`charts.example.com`, `127.0.0.1` = any port, `127.0.0.1:5000`) and registry paths
    /// (`registry.example.com/charts/`); `*` allows everything. Not given: nothing (`run`), or
    /// everything in `deployer-host dev` ([`crate::dev::with_dev_fetch`]); given, even empty,
    /// it is what it says.
    pub allow: Option<Vec<String>>,
    /// OCI registries (`host[:port]`) spoken to over plain HTTP (like Landscaper's
    /// `deployer.oci.allowPlainHttp`, but per registry).
    #[serde(default)]
    pub plain_http: Vec<String>,
    /// Hosts whose TLS certificates are not verified (`deployer.oci.insecureSkipVerify`).
    #[serde(default)]
    pub insecure_skip_verify: Vec<String>,
    /// A PEM file of CA certificates the host trusts, besides the system's, for every download
    /// of its own: plugins' fetches and OCM reads of every item, and plugin delivery from OCI
    /// registries (the operator's internal CA; Landscaper's chart mounts such CAs into its
    /// pods' trust store, `landscaper.truststore`). Read at start. An item's own CAs come from
    /// its Context and are trusted for that item only.
    pub ca_bundle: Option<PathBuf>,
    /// Largest download in MiB. Default 64.
    pub max_mib: Option<u64>,
    /// Timeout of one request (Go duration), also bounded by the invocation deadline.
    /// Default `60s`.
    pub timeout: Option<String>,
    /// Directory of the content-addressed cache (`sha256/<hex>` files) kept across restarts.
    /// Default: memory only.
    pub cache_dir: Option<PathBuf>,
    /// Size of the in-memory cache in MiB. Default 256.
    pub cache_mib: Option<u64>,
}

impl FetchConfig {
    /// The allow list in force: as given, else empty (nothing may be downloaded).
    pub fn allow(&self) -> &[String] {
        self.allow.as_deref().unwrap_or_default()
    }

    /// Whether `location` (a URL, or an OCI reference without scheme) is allowed.
    pub fn allows(&self, location: &str) -> bool {
        allowed(self.allow(), location)
    }

    /// Checks the durations and sizes.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.timeout()?;
        self.ca_certificates()?;
        if self.max_mib == Some(0) {
            anyhow::bail!("fetch.maxMib must be positive");
        }
        Ok(())
    }

    /// The certificates of `caBundle` (PEM, one per certificate); none without it. A file that
    /// cannot be read, or holds no certificate, is an error.
    pub fn ca_certificates(&self) -> anyhow::Result<Vec<String>> {
        let Some(path) = &self.ca_bundle else {
            return Ok(Vec::new());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("fetch.caBundle: reading {}", path.display()))?;
        let certs = registry::pem_certificates(&text);
        if certs.is_empty() {
            anyhow::bail!(
                "fetch.caBundle: {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                path.display()
            );
        }
        for c in &certs {
            reqwest::Certificate::from_pem(c.as_bytes())
                .with_context(|| format!("fetch.caBundle: {}", path.display()))?;
        }
        Ok(certs)
    }

    fn timeout(&self) -> anyhow::Result<Duration> {
        match self.timeout.as_deref() {
            None => Ok(Duration::from_secs(60)),
            Some(s) => match parse_go_duration(s).map_err(anyhow::Error::msg)? {
                crate::landscaper::GoDuration::Finite(d) if !d.is_zero() => Ok(d),
                _ => anyhow::bail!("fetch.timeout must be a positive duration, got {s:?}"),
            },
        }
    }
}

/// The host's downloader, shared by every invocation.
pub struct Fetcher {
    config: FetchConfig,
    http: reqwest::Client,
    http_insecure: reqwest::Client,
    /// Clients that also trust one item's CA (`customCAData`), by (insecure, CA PEM): a
    /// connection such a client made is never used for a request without that CA.
    ca_clients: Mutex<HashMap<(bool, String), reqwest::Client>>,
    /// The registries, the allowlist, the size limit and the blob cache (shared with `ocm`).
    pub registries: Registries,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("config", &self.config)
            .finish()
    }
}

impl Fetcher {
    /// A downloader for `config`.
    pub fn new(config: FetchConfig) -> anyhow::Result<Self> {
        config.validate()?;
        registry::install_crypto();
        let timeout = config.timeout()?;
        let host_cas = config.ca_certificates()?;
        Ok(Fetcher {
            http: http_client(timeout, false, &host_cas)?,
            http_insecure: http_client(timeout, true, &host_cas)?,
            ca_clients: Mutex::default(),
            registries: Registries {
                allow: config.allow().to_vec(),
                plain_http: config.plain_http.clone(),
                insecure_skip_verify: config.insecure_skip_verify.clone(),
                timeout,
                host_cas,
                blobs: Blobs::new(
                    config.max_mib.unwrap_or(64) << 20,
                    config.cache_mib.unwrap_or(256) << 20,
                    config.cache_dir.clone(),
                ),
            },
            config,
        })
    }

    /// The HTTP client for a request: the shared one, or one that also trusts `ca` (PEM
    /// certificates of one item's Context).
    fn http_client(&self, insecure: bool, ca: &[String]) -> anyhow::Result<reqwest::Client> {
        if ca.is_empty() {
            return Ok(match insecure {
                true => self.http_insecure.clone(),
                false => self.http.clone(),
            });
        }
        let key = (insecure, ca.concat());
        let mut clients = self.ca_clients.lock().expect("client cache");
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        // Distinct CAs are few (one per repository); a bound keeps a churning set from growing.
        if clients.len() >= 64 {
            clients.clear();
        }
        let roots: Vec<String> = self.registries.host_cas.iter().chain(ca).cloned().collect();
        let client = http_client(self.registries.timeout, insecure, &roots)?;
        clients.insert(key, client.clone());
        Ok(client)
    }
}

/// An HTTP client with `timeout` that trusts the system's roots and `roots` (PEM certificates).
fn http_client(
    timeout: Duration,
    insecure: bool,
    roots: &[String],
) -> anyhow::Result<reqwest::Client> {
    let roots = roots
        .iter()
        .map(|pem| reqwest::Certificate::from_pem(pem.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .context("a CA certificate")?;
    reqwest::Client::builder()
        .timeout(timeout)
        .danger_accept_invalid_certs(insecure)
        .tls_certs_merge(roots)
        .user_agent(concat!("wasm-deployer/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("building the HTTP client")
}

/// What the Context's `helmChartRepoCredentials` give for one URL.
#[derive(Debug, Default)]
struct RepoAuth {
    /// The `url` of the entry used.
    url: String,
    /// `Authorization` header.
    header: Option<String>,
    /// The entry's `customCAData`, one PEM text per certificate.
    ca: Vec<String>,
}

/// What a plugin may fetch for one item: the shared [`Fetcher`] and the item's Context.
pub struct ItemFetch {
    pub(super) fetcher: Arc<Fetcher>,
    /// The item's Context, and where to read what it names.
    pub(super) item: ItemContext,
}

impl ItemFetch {
    /// One download, as WIT `fetch` describes it: an HTTP(S) GET or OCI pull, checked against
    /// the allowlist.
    pub async fn fetch(&self, request: FetchRequest) -> Result<Fetched, DeployerError> {
        let location = request.location().to_string();
        let registries = &self.fetcher.registries;
        if !registries.allowed(&location) {
            return Err(registries.not_allowed(&location));
        }
        match request {
            FetchRequest::Http {
                url,
                expected_digest,
            } => self.http_get(&url, expected_digest.as_deref()).await,
            FetchRequest::Oci {
                reference,
                layer_media_types,
            } => {
                registries
                    .session(&reference, &self.item)
                    .await?
                    .pull_layer(&layer_media_types)
                    .await
            }
            FetchRequest::Ocm { .. } => Err(err(
                Some(codes::INTERNAL_PROBLEM),
                "InvalidReference",
                format!("{location}: an OCM request is not a download"),
            )),
        }
    }

    /// The item's Context, and where to read what it names.
    pub(crate) fn item(&self) -> &ItemContext {
        &self.item
    }

    /// The host's registries (shared by every item).
    pub(crate) fn registries(&self) -> &Registries {
        &self.fetcher.registries
    }

    /// An HTTP(S) GET of `url`, with the Context's `helmChartRepoCredentials` for it; with
    /// `expected_digest`, from the cache if there, and checked against it if downloaded.
    async fn http_get(
        &self,
        url: &str,
        expected_digest: Option<&str>,
    ) -> Result<Fetched, DeployerError> {
        let parsed = http_url(url)?;
        if let Some(digest) = expected_digest
            && let Some(data) = self.fetcher.registries.blobs.get(digest)
        {
            return Ok(Fetched {
                digest: digest.to_string(),
                media_type: String::new(),
                data: data.to_vec(),
                cached: true,
                ..Default::default()
            });
        }
        let host = parsed.host_str().unwrap_or_default().to_string();
        let host_port = match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host,
        };
        let auth = self.repo_auth(url).await?.unwrap_or_default();
        let client = self
            .fetcher
            .http_client(self.fetcher.registries.insecure(&host_port), &auth.ca)
            .map_err(|e| {
                err(
                    Some(codes::CONFIGURATION_PROBLEM),
                    "HelmChartRepoCredentials",
                    format!(
                        "customCAData of the helmChartRepoCredentials entry for {}: {e:#}",
                        auth.url
                    ),
                )
            })?;
        let mut request = client.get(parsed.clone());
        if let Some(header) = &auth.header {
            request = request.header(reqwest::header::AUTHORIZATION, header);
        }
        let failed = |e| self.transport_error(url, &auth, e);
        let response = request.send().await.map_err(failed)?;
        let status = response.status();
        if !status.is_success() {
            let (code, reason) = match status.as_u16() {
                401 | 403 => (Some(codes::UNAUTHORIZED), "Unauthorized"),
                404 => (None, "NotFound"),
                _ => (None, "FetchFailed"),
            };
            return Err(err(code, reason, format!("GET {url}: {status}")));
        }
        if let Some(len) = response.content_length() {
            self.fetcher.registries.blobs.check_size(url, len)?;
        }
        let media_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let mut data = Vec::new();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(failed)?;
            data.extend_from_slice(&chunk);
            let size = data.len() as u64;
            self.fetcher.registries.blobs.check_size(url, size)?;
        }
        self.fetcher.registries.blobs.count_download();
        let digest = sha256(&data);
        if let Some(expected) = expected_digest
            && !digest_matches(expected, &digest)
        {
            return Err(err(
                Some(codes::INTERNAL_PROBLEM),
                "DigestMismatch",
                format!("GET {url}: expected digest {expected}, got {digest}"),
            ));
        }
        let data = self.fetcher.registries.blobs.put(&digest, data);
        Ok(Fetched {
            digest,
            media_type,
            data,
            cached: false,
            ..Default::default()
        })
    }

    /// What a GET of `url` that did not get an answer gets: a certificate the host does not
    /// trust is a configuration problem (saying where to give the CA), the rest is retried.
    fn transport_error(&self, url: &str, auth: &RepoAuth, e: reqwest::Error) -> DeployerError {
        let why = if e.is_timeout() {
            format!("timed out after {:?}", self.fetcher.registries.timeout)
        } else {
            error_chain(&e)
        };
        if is_certificate_problem(&why) {
            let hint = match auth.ca.is_empty() {
                true => "give the CA that signed it as customCAData of the Context's helmChartRepoCredentials entry for this URL, or the host's fetch.caBundle".to_string(),
                false => format!("the customCAData of the Context's helmChartRepoCredentials entry for {} did not verify it", auth.url),
            };
            return err(
                Some(codes::CONFIGURATION_PROBLEM),
                "UntrustedCertificate",
                format!("GET {url}: the server's TLS certificate is not trusted ({why}); {hint}"),
            );
        }
        err(None, "FetchFailed", format!("GET {url}: {why}"))
    }

    /// What the Context's `configurations.helmChartRepoCredentials.auths[]` give for `url`: the
    /// entry whose `url` is the longest prefix of the request — its `Authorization` header
    /// (`authHeader`, or `secretRef` in the Context's namespace, key `authHeader` by default)
    /// and its `customCAData` (PEM; base64 of PEM is taken too, as the API's comment words it).
    async fn repo_auth(&self, url: &str) -> Result<Option<RepoAuth>, DeployerError> {
        let Some(auths) = self
            .item
            .context
            .as_ref()
            .and_then(|c| c.configurations.as_ref())
            .and_then(|c| c.get("helmChartRepoCredentials"))
            .and_then(|c| c.get("auths"))
            .and_then(|a| a.as_array())
        else {
            return Ok(None);
        };
        let normalise = |u: &str| u.trim().trim_end_matches('/').to_string();
        let Some(entry) = auths
            .iter()
            .filter(|a| {
                let prefix = normalise(a["url"].as_str().unwrap_or_default());
                !prefix.is_empty() && url.starts_with(&prefix)
            })
            .max_by_key(|a| a["url"].as_str().unwrap_or_default().len())
        else {
            return Ok(None);
        };
        let entry_url = entry["url"].as_str().unwrap_or_default().to_string();
        let ca = match entry["customCAData"]
            .as_str()
            .filter(|c| !c.trim().is_empty())
        {
            None => Vec::new(),
            Some(data) => custom_ca(data).map_err(|why| {
                err(
                    Some(codes::CONFIGURATION_PROBLEM),
                    "HelmChartRepoCredentials",
                    format!(
                        "customCAData of the helmChartRepoCredentials entry for {entry_url}: {why}"
                    ),
                )
            })?,
        };
        let header = self.auth_header(entry).await?;
        Ok(Some(RepoAuth {
            url: entry_url,
            header: Some(header),
            ca,
        }))
    }

    /// The `Authorization` header of a `helmChartRepoCredentials` entry.
    async fn auth_header(&self, entry: &serde_json::Value) -> Result<String, DeployerError> {
        if let Some(header) = entry["authHeader"].as_str() {
            return Ok(header.to_string());
        }
        let Some(name) = entry["secretRef"]["name"].as_str() else {
            return Err(err(
                Some(codes::CONFIGURATION_PROBLEM),
                "HelmChartRepoCredentials",
                format!(
                    "helmChartRepoCredentials entry for {}: exactly one of authHeader and secretRef must be given",
                    entry["url"]
                ),
            ));
        };
        let key = entry["secretRef"]["key"].as_str().unwrap_or("authHeader");
        let secrets: Api<Secret> = Api::namespaced(self.item.client.clone(), &self.item.namespace);
        let secret = secrets.get_opt(name).await.map_err(|e| {
            err(
                None,
                "HelmChartRepoCredentials",
                format!("reading Secret {}/{name}: {e}", self.item.namespace),
            )
        })?;
        let value = secret.and_then(|s| s.data).and_then(|d| {
            d.get(key)
                .map(|v| String::from_utf8_lossy(&v.0).to_string())
        });
        match value {
            Some(v) => Ok(v.trim().to_string()),
            None => Err(err(
                None,
                "HelmChartRepoCredentials",
                format!(
                    "Secret {}/{name} with key {key:?} (helmChartRepoCredentials for {}) not found",
                    self.item.namespace, entry["url"]
                ),
            )),
        }
    }
}

/// `url` parsed, if it is an `http` or `https` URL.
fn http_url(url: &str) -> Result<reqwest::Url, DeployerError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        err(
            Some(codes::CONFIGURATION_PROBLEM),
            "InvalidReference",
            format!("{url:?} is not a URL: {e}"),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(err(
            Some(codes::CONFIGURATION_PROBLEM),
            "InvalidReference",
            format!("{url}: only http and https URLs can be fetched"),
        ));
    }
    Ok(parsed)
}

/// The certificates of a `customCAData`: PEM, or base64 of PEM; each must parse.
fn custom_ca(data: &str) -> Result<Vec<String>, String> {
    use base64::Engine as _;
    let text = if data.contains("-----BEGIN") {
        data.to_string()
    } else {
        let compact: String = data.split_whitespace().collect();
        base64::engine::general_purpose::STANDARD
            .decode(compact)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or("neither PEM nor base64 of PEM")?
    };
    let certs = registry::pem_certificates(&text);
    if certs.is_empty() {
        return Err("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into());
    }
    for c in &certs {
        reqwest::Certificate::from_pem(c.as_bytes()).map_err(|e| error_chain(&e))?;
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback HTTP server with `/small` (1 KiB), `/big` (2 MiB); anything else 404.
    async fn serve() -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/small", axum::routing::get(|| async { vec![b'a'; 1024] }))
            .route("/big", axum::routing::get(|| async { vec![b'b'; 2 << 20] }));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (url, task)
    }

    fn item_fetch(config: &str) -> ItemFetch {
        let server = embedded_apiserver::ApiServer::new(Default::default()).unwrap();
        ItemFetch {
            fetcher: Arc::new(Fetcher::new(serde_yaml::from_str(config).unwrap()).unwrap()),
            item: ItemContext {
                client: server.client(),
                namespace: "default".into(),
                context: None,
            },
        }
    }

    fn get(url: String, expected_digest: Option<String>) -> FetchRequest {
        FetchRequest::Http {
            url,
            expected_digest,
        }
    }

    #[tokio::test]
    async fn downloads_are_allowed_capped_checked_and_cached_by_digest() {
        let (url, task) = serve().await;
        let fetch = item_fetch("allow: [127.0.0.1]\nmaxMib: 1\n");

        let first = fetch
            .fetch(get(format!("{url}/small"), None))
            .await
            .unwrap();
        assert_eq!(first.data.len(), 1024);
        assert!(!first.cached);
        let again = fetch
            .fetch(get(format!("{url}/small"), Some(first.digest.clone())))
            .await
            .unwrap();
        assert!(again.cached, "a known digest is served from the cache");
        assert_eq!(again.data, first.data);
        assert_eq!(
            fetch
                .fetcher
                .registries
                .blobs
                .downloads
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );

        let e = fetch
            .fetch(get(format!("{url}/big"), None))
            .await
            .unwrap_err();
        assert_eq!(e.reason, "TooLarge");
        assert!(e.has_code(codes::CONFIGURATION_PROBLEM), "{e:?}");
        let e = fetch
            .fetch(get(format!("{url}/gone"), None))
            .await
            .unwrap_err();
        assert_eq!(e.reason, "NotFound", "{e:?}");
        let wrong = format!("sha256:{}", "0".repeat(64));
        let e = fetch
            .fetch(get(format!("{url}/small?x"), Some(wrong)))
            .await
            .unwrap_err();
        assert_eq!(e.reason, "DigestMismatch", "{e:?}");

        let denied = item_fetch("allow: [charts.example.com]\n");
        let e = denied
            .fetch(get(format!("{url}/small"), None))
            .await
            .unwrap_err();
        assert_eq!(e.reason, "FetchNotAllowed");
        assert!(e.message.contains("charts.example.com"), "{}", e.message);
        assert_eq!(e.operation, "fetch");
        task.abort();
    }

    /// An HTTPS server on loopback with a certificate of a fresh CA, serving `/small`.
    async fn serve_tls() -> (
        String,
        embedded_apiserver::tls::ServingCert,
        tokio::task::JoinHandle<()>,
    ) {
        let cert = embedded_apiserver::tls::ServingCert::generate(&[]).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let listener =
            embedded_apiserver::tls::TlsListener::new(listener, cert.server_config().unwrap())
                .unwrap();
        let app =
            axum::Router::new().route("/small", axum::routing::get(|| async { vec![b'a'; 1024] }));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (url, cert, task)
    }

    #[tokio::test]
    async fn the_hosts_ca_bundle_is_trusted_for_every_download_and_an_untrusted_certificate_is_a_configuration_problem()
     {
        let (url, cert, task) = serve_tls().await;
        let untrusted = item_fetch("allow: [127.0.0.1]\n");
        let e = untrusted
            .fetch(get(format!("{url}/small"), None))
            .await
            .unwrap_err();
        assert_eq!(e.reason, "UntrustedCertificate", "{e:?}");
        assert!(e.has_code(codes::CONFIGURATION_PROBLEM), "{e:?}");
        assert!(
            e.message.contains(&format!("GET {url}/small")),
            "{}",
            e.message
        );
        assert!(e.message.contains("fetch.caBundle"), "{}", e.message);

        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("ca.pem");
        std::fs::write(&bundle, cert.ca_pem()).unwrap();
        let trusted = item_fetch(&format!(
            "allow: [127.0.0.1]\ncaBundle: {}\n",
            bundle.display()
        ));
        let got = trusted
            .fetch(get(format!("{url}/small"), None))
            .await
            .unwrap();
        assert_eq!(got.data.len(), 1024);

        // A bundle without a certificate is refused at start.
        std::fs::write(&bundle, "not a certificate").unwrap();
        let config: FetchConfig =
            serde_yaml::from_str(&format!("caBundle: {}\n", bundle.display())).unwrap();
        let e = Fetcher::new(config).unwrap_err();
        assert!(
            format!("{e:#}").contains("holds no PEM certificate"),
            "{e:#}"
        );
        task.abort();
    }

    #[test]
    fn custom_ca_data_is_pem_or_base64_of_pem() {
        use base64::Engine as _;
        let cert = embedded_apiserver::tls::ServingCert::generate(&[]).unwrap();
        let pem = cert.ca_pem();
        assert_eq!(custom_ca(pem).unwrap().len(), 1);
        let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
        assert_eq!(custom_ca(&b64).unwrap(), custom_ca(pem).unwrap());
        assert!(
            custom_ca("bm90IHBlbQ==")
                .unwrap_err()
                .contains("no PEM certificate")
        );
        assert!(custom_ca("%%%").is_err());
    }
}
