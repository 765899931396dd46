//! Downloads for plugins (WIT `fetch`, 1.2): HTTP(S) GETs and OCI pulls the host does because
//! a plugin has no sockets — the helm deployer's charts from chart repositories, archives and
//! OCI registries.
//!
//! Owns: the allowlist (`fetch.allow`), the size limit, the per-request timeout, plain HTTP and
//! skipped TLS verification for the registries the configuration names, credentials from the
//! item's Context (registry pull secrets; `helmChartRepoCredentials`), and the content-addressed
//! cache (memory, plus a directory if configured) so a blob whose digest is known is fetched
//! once. Must not touch: what the bytes mean (charts are the plugin's business) or anything a
//! plugin could use to reach another host.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use oci_client::manifest::OciManifest;
use plugin_runtime::{DeployerError, FetchRequest, Fetched};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::landscaper::{Context, codes, parse_go_duration};
use crate::plugin_sources::oci as registry;

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
    max_bytes: u64,
    timeout: Duration,
    http: reqwest::Client,
    http_insecure: reqwest::Client,
    /// The certificates of `fetch.caBundle` (trusted for every download).
    host_cas: Vec<String>,
    /// Clients that also trust one item's CA (`customCAData`), by (insecure, CA PEM): a
    /// connection such a client made is never used for a request without that CA.
    ca_clients: Mutex<HashMap<(bool, String), reqwest::Client>>,
    cache: BlobCache,
    /// Downloads that went to the network (the rest came from the cache).
    pub downloads: std::sync::atomic::AtomicU64,
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
            max_bytes: config.max_mib.unwrap_or(64) << 20,
            timeout,
            http: http_client(timeout, false, &host_cas)?,
            http_insecure: http_client(timeout, true, &host_cas)?,
            host_cas,
            ca_clients: Mutex::default(),
            cache: BlobCache::new(
                config.cache_mib.unwrap_or(256) << 20,
                config.cache_dir.clone(),
            ),
            config,
            downloads: Default::default(),
        })
    }

    /// Whether `location` (a URL, or an OCI reference without scheme) is allowed.
    pub fn allowed(&self, location: &str) -> bool {
        self.config.allows(location)
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
        let roots: Vec<String> = self.host_cas.iter().chain(ca).cloned().collect();
        let client = http_client(self.timeout, insecure, &roots)?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    fn insecure(&self, host: &str) -> bool {
        self.config
            .insecure_skip_verify
            .iter()
            .any(|h| h == host || host_without_port(host) == h)
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

/// One registry repository, reached as the host's configuration and the item's Context say.
pub(crate) struct OciSession {
    /// The reference as given (for messages and the allowlist).
    pub(crate) location: String,
    pub(crate) reference: oci_client::Reference,
    client: oci_client::Client,
    auth: oci_client::secrets::RegistryAuth,
}

/// Docker configs, and registry CAs as (`host[:port]`, PEM).
type RegistryCredentials = (Vec<String>, Vec<(String, String)>);

/// What a plugin may fetch for one item: the shared [`Fetcher`] and the item's Context.
pub struct ItemFetch {
    pub(super) fetcher: Arc<Fetcher>,
    pub(super) client: kube::Client,
    /// The Context's namespace (the item's).
    pub(super) namespace: String,
    pub(super) context: Option<Context>,
}

pub(crate) fn err(code: Option<&str>, reason: &str, message: String) -> DeployerError {
    DeployerError {
        codes: code.map(|c| vec![c.to_string()]).unwrap_or_default(),
        operation: "fetch".into(),
        reason: reason.into(),
        message,
        ..Default::default()
    }
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

impl ItemFetch {
    /// One download, as WIT `fetch` describes it.
    pub async fn fetch(&self, request: FetchRequest) -> Result<Fetched, DeployerError> {
        // OCM requests are checked per registry request (the repository decides where).
        if let FetchRequest::Ocm {
            resource_key,
            layer_media_types,
        } = request
        {
            return crate::ocm::Reader::new(self)
                .resource(&resource_key, &layer_media_types)
                .await;
        }
        if let FetchRequest::OcmComponent {
            repository_context,
            component_name,
            version,
            resource_name,
        } = request
        {
            return crate::ocm::Reader::new(self)
                .component(
                    repository_context.as_ref(),
                    &component_name,
                    &version,
                    resource_name.as_deref(),
                )
                .await;
        }
        self.download(request).await
    }

    /// An HTTP(S) GET or OCI pull, checked against the allowlist (what the OCM reader uses for
    /// the `helm` access type).
    pub(crate) async fn download(&self, request: FetchRequest) -> Result<Fetched, DeployerError> {
        let location = request.location().to_string();
        if !self.fetcher.allowed(&location) {
            return Err(self.not_allowed(&location));
        }
        match request {
            FetchRequest::Http {
                url,
                expected_digest,
            } => self.http_get(&url, expected_digest.as_deref()).await,
            FetchRequest::Oci {
                reference,
                layer_media_types,
            } => self.oci_pull(&reference, &layer_media_types).await,
            FetchRequest::Ocm { .. } | FetchRequest::OcmComponent { .. } => Err(err(
                Some(codes::INTERNAL_PROBLEM),
                "InvalidReference",
                format!("{location}: an OCM request is not a download"),
            )),
        }
    }

    async fn http_get(
        &self,
        url: &str,
        expected_digest: Option<&str>,
    ) -> Result<Fetched, DeployerError> {
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
        if let Some(digest) = expected_digest
            && let Some(data) = self.fetcher.cache.get(digest)
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
            .http_client(self.fetcher.insecure(&host_port), &auth.ca)
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
        let failed = |e: reqwest::Error| {
            let why = if e.is_timeout() {
                format!("timed out after {:?}", self.fetcher.timeout)
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
                    format!(
                        "GET {url}: the server's TLS certificate is not trusted ({why}); {hint}"
                    ),
                );
            }
            err(None, "FetchFailed", format!("GET {url}: {why}"))
        };
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
            self.check_size(url, len)?;
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
            self.check_size(url, data.len() as u64)?;
        }
        self.fetcher
            .downloads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
        let data = self.fetcher.cache.put(&digest, data);
        Ok(Fetched {
            digest,
            media_type,
            data,
            cached: false,
            ..Default::default()
        })
    }

    pub(crate) fn check_size(&self, location: &str, len: u64) -> Result<(), DeployerError> {
        if len > self.fetcher.max_bytes {
            return Err(err(
                Some(codes::CONFIGURATION_PROBLEM),
                "TooLarge",
                format!(
                    "{location} is larger than the host's limit of {} MiB (fetch.maxMib)",
                    self.fetcher.max_bytes >> 20
                ),
            ));
        }
        Ok(())
    }

    async fn oci_pull(
        &self,
        reference: &str,
        media_types: &[String],
    ) -> Result<Fetched, DeployerError> {
        let session = self.oci_session(reference).await?;
        let (manifest, manifest_digest) = self.oci_manifest(&session).await?;
        let Some(layer) = manifest
            .layers
            .iter()
            .find(|l| media_types.contains(&l.media_type))
        else {
            return Err(err(
                Some(codes::CONFIGURATION_PROBLEM),
                "NotFound",
                missing_layer(reference, media_types, &manifest),
            ));
        };
        self.oci_layer(&session, &manifest, manifest_digest, layer)
            .await
    }

    /// The content of `layer` of `manifest` (from the cache by digest, else downloaded), with
    /// where it came from.
    pub(crate) async fn oci_layer(
        &self,
        session: &OciSession,
        manifest: &oci_client::manifest::OciImageManifest,
        manifest_digest: String,
        layer: &oci_client::manifest::OciDescriptor,
    ) -> Result<Fetched, DeployerError> {
        let (data, cached) = self.oci_blob(session, layer).await?;
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

    /// A registry session for `reference`: checked against the allowlist, with the client and
    /// the Context's credentials for its registry.
    pub(crate) async fn oci_session(&self, reference: &str) -> Result<OciSession, DeployerError> {
        if !self.fetcher.allowed(reference) {
            return Err(self.not_allowed(reference));
        }
        let r = registry::parse(reference).map_err(|e| {
            err(
                Some(codes::CONFIGURATION_PROBLEM),
                "InvalidReference",
                format!("{e:#}"),
            )
        })?;
        let registry_host = r.resolve_registry().to_string();
        let (docker_configs, registry_cas) = self.registry_credentials().await?;
        // The host's CAs, and the CA the item's Context gives for this registry only.
        let mut ca_certs = self.fetcher.host_cas.clone();
        ca_certs.extend(
            registry_cas
                .into_iter()
                .filter(|(key, _)| {
                    key == &registry_host
                        || (!key.contains(':') && key == host_without_port(&registry_host))
                })
                .flat_map(|(_, pem)| registry::pem_certificates(&pem)),
        );
        let options = registry::RegistryOptions {
            plain_http: self.fetcher.config.plain_http.clone(),
            docker_configs,
            ca_certs,
        };
        let client = registry::client_with(
            &options,
            self.fetcher.insecure(&registry_host),
            self.fetcher.timeout,
        );
        let auth = registry::auth_for(&registry_host, &options.docker_configs);
        Ok(OciSession {
            location: reference.to_string(),
            reference: r,
            client,
            auth,
        })
    }

    /// The image manifest `session` names and its digest (an index is refused).
    pub(crate) async fn oci_manifest(
        &self,
        session: &OciSession,
    ) -> Result<(oci_client::manifest::OciImageManifest, String), DeployerError> {
        let (manifest, digest) = session
            .client
            .pull_manifest(&session.reference, &session.auth)
            .await
            .map_err(|e| oci_error(&session.location, "pulling the manifest of", e))?;
        let OciManifest::Image(manifest) = manifest else {
            return Err(err(
                Some(codes::CONFIGURATION_PROBLEM),
                "InvalidReference",
                format!(
                    "{} is an image index, not an artifact with layers",
                    session.location
                ),
            ));
        };
        Ok((manifest, digest))
    }

    /// One blob (layer or config) of `session`'s repository: from the cache by digest, else
    /// downloaded within the size limit and checked against its digest. True: from the cache.
    pub(crate) async fn oci_blob(
        &self,
        session: &OciSession,
        descriptor: &oci_client::manifest::OciDescriptor,
    ) -> Result<(Vec<u8>, bool), DeployerError> {
        let reference = session.location.as_str();
        if let Some(data) = self.fetcher.cache.get(&descriptor.digest) {
            return Ok((data.to_vec(), true));
        }
        self.check_size(reference, descriptor.size.max(0) as u64)?;
        let mut data = Vec::new();
        session
            .client
            .pull_blob(&session.reference, descriptor, &mut data)
            .await
            .map_err(|e| oci_error(reference, "pulling a blob of", e))?;
        self.check_size(reference, data.len() as u64)?;
        self.fetcher
            .downloads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let digest = sha256(&data);
        if !digest_matches(&descriptor.digest, &digest) {
            return Err(err(
                Some(codes::INTERNAL_PROBLEM),
                "DigestMismatch",
                format!(
                    "{reference}: blob {} arrived with digest {digest}",
                    descriptor.digest
                ),
            ));
        }
        Ok((self.fetcher.cache.put(&digest, data), false))
    }

    fn not_allowed(&self, location: &str) -> DeployerError {
        err(
            Some(codes::CONFIGURATION_PROBLEM),
            "FetchNotAllowed",
            format!(
                "{location} is not allowed by the host's fetch.allow list ({}); ask the operator to allow it",
                if self.fetcher.config.allow().is_empty() {
                    "empty: nothing may be downloaded".to_string()
                } else {
                    self.fetcher.config.allow().join(", ")
                }
            ),
        )
    }

    /// The item's Context, if it has one.
    pub(crate) fn context(&self) -> Option<&Context> {
        self.context.as_ref()
    }

    /// Docker configs of the Context's registry pull secrets (resolved by the controller; an
    /// `.ocmcredentialconfig` is turned into one), and of the OCM configuration in the
    /// Context's `ocmConfig` ConfigMap (key `.ocmconfig`, as Landscaper reads it); with the
    /// registry CAs (`host[:port]`, PEM) the OCM configurations among them give.
    async fn registry_credentials(&self) -> Result<RegistryCredentials, DeployerError> {
        let mut cas = Vec::new();
        let mut docs: Vec<String> = self
            .context
            .as_ref()
            .and_then(|c| c.resolved_registry_pull_secrets.as_ref())
            .map(|m| {
                m.values()
                    .map(|doc| {
                        let is_docker = serde_json::from_str::<serde_json::Value>(doc)
                            .is_ok_and(|v| v.get("auths").is_some());
                        match is_docker {
                            true => doc.clone(),
                            false => {
                                cas.extend(crate::ocm::credentials::certificate_authorities(doc));
                                crate::ocm::credentials::docker_config(doc).unwrap_or_default()
                            }
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ocm_config = self
            .context
            .as_ref()
            .and_then(|c| c.ocm_config.as_ref())
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty());
        if let Some(name) = ocm_config {
            let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
                Api::namespaced(self.client.clone(), &self.namespace);
            let missing = |what: String| err(Some(codes::CONFIGURATION_PROBLEM), "OcmConfig", what);
            let map = maps.get_opt(name).await.map_err(|e| {
                err(
                    None,
                    "OcmConfig",
                    format!(
                        "reading ConfigMap {}/{name} (the Context's ocmConfig): {e}",
                        self.namespace
                    ),
                )
            })?;
            let Some(map) = map else {
                return Err(missing(format!(
                    "ConfigMap {}/{name} (the Context's ocmConfig) not found",
                    self.namespace
                )));
            };
            let Some(text) = map.data.as_ref().and_then(|d| d.get(".ocmconfig")) else {
                return Err(missing(format!(
                    "ConfigMap {}/{name} (the Context's ocmConfig) has no key .ocmconfig",
                    self.namespace
                )));
            };
            docs.extend(crate::ocm::credentials::docker_config(text));
            cas.extend(crate::ocm::credentials::certificate_authorities(text));
        }
        Ok((docs, cas))
    }

    /// What the Context's `configurations.helmChartRepoCredentials.auths[]` give for `url`: the
    /// entry whose `url` is the longest prefix of the request — its `Authorization` header
    /// (`authHeader`, or `secretRef` in the Context's namespace, key `authHeader` by default)
    /// and its `customCAData` (PEM; base64 of PEM is taken too, as the API's comment words it).
    async fn repo_auth(&self, url: &str) -> Result<Option<RepoAuth>, DeployerError> {
        let Some(auths) = self
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
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret = secrets.get_opt(name).await.map_err(|e| {
            err(
                None,
                "HelmChartRepoCredentials",
                format!("reading Secret {}/{name}: {e}", self.namespace),
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
                    self.namespace, entry["url"]
                ),
            )),
        }
    }
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

/// Whether a transport error is a TLS certificate that was not accepted (unknown issuer,
/// wrong name, expired): a configuration problem that retrying the same job does not fix.
fn is_certificate_problem(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("invalid peer certificate") || t.contains("certificate verify failed")
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

/// What a manifest without the layer a caller asked for says: the media types asked for and those
/// it has.
pub(crate) fn missing_layer(
    location: &str,
    media_types: &[String],
    manifest: &oci_client::manifest::OciImageManifest,
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

fn oci_error(
    reference: &str,
    what: &str,
    e: oci_client::errors::OciDistributionError,
) -> DeployerError {
    use oci_client::errors::OciDistributionError as E;
    let text = error_chain(&e);
    let message = format!("{what} {reference}: {text}");
    if is_certificate_problem(&text) {
        return err(
            Some(codes::CONFIGURATION_PROBLEM),
            "UntrustedCertificate",
            format!(
                "{what} {reference}: the registry's TLS certificate is not trusted ({text}); give the CA that signed it as certificateAuthority of the registry's OCIRegistry credentials (the Context's .ocmcredentialconfig pull secret or ocmConfig), or the host's fetch.caBundle"
            ),
        );
    }
    match &e {
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. } => {
            err(Some(codes::UNAUTHORIZED), "Unauthorized", message)
        }
        E::ImageManifestNotFoundError(_) => err(None, "NotFound", message),
        E::RegistryError { envelope, .. }
            if envelope
                .errors
                .iter()
                .any(|x| format!("{:?}", x.code).contains("Unknown")) =>
        {
            err(None, "NotFound", message)
        }
        _ if text.contains("404") || text.to_lowercase().contains("not found") => {
            err(None, "NotFound", message)
        }
        _ if text.contains("401") || text.contains("403") => {
            err(Some(codes::UNAUTHORIZED), "Unauthorized", message)
        }
        _ => err(None, "FetchFailed", message),
    }
}

fn digest_matches(expected: &str, actual: &str) -> bool {
    // Chart repository indexes carry the bare hex digest.
    let hex = |d: &str| d.strip_prefix("sha256:").unwrap_or(d).to_ascii_lowercase();
    hex(expected) == hex(actual)
}

fn host_without_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    }
}

/// The allowlist rule: `*`; a URL prefix (entry with a scheme); or `host[:port][/path]`, where
/// an entry without port matches any port and a path must prefix the request's path.
fn allowed(allow: &[String], location: &str) -> bool {
    let (scheme, rest) = match location.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, location),
    };
    let (host_port, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    // No credentials in a URL may smuggle another host past the check.
    if host_port.contains('@') {
        return false;
    }
    allow.iter().any(|entry| {
        let entry = entry.trim();
        if entry == "*" {
            return true;
        }
        if entry.contains("://") {
            return scheme.is_some() && location.starts_with(entry);
        }
        let (e_host, e_path) = match entry.find('/') {
            Some(i) => (&entry[..i], &entry[i..]),
            None => (entry, ""),
        };
        let host_ok = if e_host.contains(':') {
            e_host.eq_ignore_ascii_case(host_port)
        } else {
            e_host.eq_ignore_ascii_case(host_without_port(host_port))
        };
        host_ok && (e_path.is_empty() || path.starts_with(e_path))
    })
}

/// Content-addressed blobs: memory (bounded, oldest out first) and, if configured, a directory.
struct BlobCache {
    max_bytes: u64,
    dir: Option<PathBuf>,
    memory: Mutex<Memory>,
}

#[derive(Default)]
struct Memory {
    blobs: HashMap<String, Arc<Vec<u8>>>,
    order: VecDeque<String>,
    bytes: u64,
}

impl BlobCache {
    fn new(max_bytes: u64, dir: Option<PathBuf>) -> Self {
        BlobCache {
            max_bytes,
            dir,
            memory: Mutex::default(),
        }
    }

    fn key(digest: &str) -> Option<String> {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        (hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| hex.to_ascii_lowercase())
    }

    fn get(&self, digest: &str) -> Option<Arc<Vec<u8>>> {
        let key = Self::key(digest)?;
        if let Some(b) = self.memory.lock().expect("cache lock").blobs.get(&key) {
            return Some(b.clone());
        }
        let path = self.dir.as_ref()?.join("sha256").join(&key);
        let data = std::fs::read(path).ok()?;
        // Never serve a file whose content does not match its name.
        (sha256(&data) == format!("sha256:{key}")).then(|| self.remember(key, data))
    }

    fn put(&self, digest: &str, data: Vec<u8>) -> Vec<u8> {
        let Some(key) = Self::key(digest) else {
            return data;
        };
        if let Some(dir) = &self.dir {
            let dir = dir.join("sha256");
            let tmp = dir.join(format!(".{key}.tmp"));
            let written = std::fs::create_dir_all(&dir)
                .and_then(|_| std::fs::write(&tmp, &data))
                .and_then(|_| std::fs::rename(&tmp, dir.join(&key)));
            if let Err(e) = written {
                tracing::warn!(error = %e, "fetch cache: could not write {}", dir.display());
            }
        }
        self.remember(key, data).to_vec()
    }

    fn remember(&self, key: String, data: Vec<u8>) -> Arc<Vec<u8>> {
        let data = Arc::new(data);
        let size = data.len() as u64;
        if size > self.max_bytes {
            return data;
        }
        let mut m = self.memory.lock().expect("cache lock");
        if m.blobs.insert(key.clone(), data.clone()).is_none() {
            m.order.push_back(key);
            m.bytes += size;
        }
        while m.bytes > self.max_bytes {
            let Some(old) = m.order.pop_front() else {
                break;
            };
            if let Some(b) = m.blobs.remove(&old) {
                m.bytes -= b.len() as u64;
            }
        }
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(entries: &[&str], location: &str) -> bool {
        allowed(
            &entries.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            location,
        )
    }

    #[test]
    fn the_allowlist_takes_prefixes_hosts_ports_and_paths() {
        assert!(!allow(&[], "https://charts.example.com/a.tgz"));
        assert!(allow(&["*"], "registry.example.com/x:1"));
        assert!(allow(
            &["https://charts.example.com/stable/"],
            "https://charts.example.com/stable/a.tgz"
        ));
        assert!(!allow(
            &["https://charts.example.com/stable/"],
            "https://charts.example.com/other/a.tgz"
        ));
        assert!(!allow(
            &["https://charts.example.com"],
            "http://charts.example.com/a.tgz"
        ));
        assert!(allow(&["127.0.0.1"], "http://127.0.0.1:5000/index.yaml"));
        assert!(allow(&["127.0.0.1"], "127.0.0.1:5000/charts/nginx:1.0.0"));
        assert!(allow(&["127.0.0.1:5000"], "127.0.0.1:5000/charts/nginx:1"));
        assert!(!allow(&["127.0.0.1:5000"], "127.0.0.1:5001/charts/nginx:1"));
        assert!(allow(&["reg.io/charts/"], "reg.io/charts/nginx:1"));
        assert!(!allow(&["reg.io/charts/"], "reg.io/other/nginx:1"));
        assert!(!allow(&["reg.io"], "evil.io/reg.io/x:1"));
        assert!(!allow(&["127.0.0.1"], "http://127.0.0.1@evil.io/x"));
    }

    #[test]
    fn the_cache_serves_by_digest_and_evicts_the_oldest() {
        let cache = BlobCache::new(10, None);
        let a = vec![1u8; 6];
        let b = vec![2u8; 6];
        let (da, db) = (sha256(&a), sha256(&b));
        cache.put(&da, a.clone());
        assert_eq!(cache.get(&da).as_deref(), Some(&a));
        cache.put(&db, b.clone());
        assert!(cache.get(&da).is_none(), "a was evicted for b");
        assert_eq!(cache.get(&db).as_deref(), Some(&b));
    }

    #[test]
    fn the_disk_cache_never_serves_a_file_whose_content_changed() {
        let dir = tempfile::tempdir().unwrap();
        let data = b"chart".to_vec();
        let digest = sha256(&data);
        BlobCache::new(1 << 20, Some(dir.path().into())).put(&digest, data.clone());
        let fresh = BlobCache::new(1 << 20, Some(dir.path().into()));
        assert_eq!(fresh.get(&digest).as_deref(), Some(&data));
        let file = dir
            .path()
            .join("sha256")
            .join(digest.trim_start_matches("sha256:"));
        std::fs::write(&file, b"tampered").unwrap();
        assert!(
            BlobCache::new(1 << 20, Some(dir.path().into()))
                .get(&digest)
                .is_none()
        );
    }

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
            client: server.client(),
            namespace: "default".into(),
            context: None,
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

    #[test]
    fn digests_compare_with_or_without_the_algorithm() {
        assert!(digest_matches("ABCD", "sha256:abcd"));
        assert!(digest_matches("sha256:abcd", "sha256:abcd"));
        assert!(!digest_matches("sha256:abce", "sha256:abcd"));
    }
}
