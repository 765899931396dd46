//! Outgoing HTTP (WIT 1.5, `wasi:http`): what a plugin may send requests to, and with which
//! credentials. A request is granted when its URL is under the `url` of the item's Target of type
//! `wasm-deployer.dev/http-api`, of a secondary Target the provider configuration names by
//! `targetName`, or under a prefix of the host configuration's `http.allow`. For a Target, the
//! host reads the `auth` Secret (bearer token or basic user and password, in the Target's
//! namespace) and the runtime puts the `Authorization` in place of any the plugin set; the Target
//! the plugin sees holds only the Secret's name. Anything else is refused (`HttpNotAllowed`).
//! Requests per plugin, host and status, and their durations, are counted in [`HttpStats`].
//!
//! Owns: the `http:` configuration, the `http-api` Target type, grants and the metrics. Must not
//! touch: sending (`plugin_runtime`'s `capabilities::http` does it, with the host's limits).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::Client;
use plugin_runtime::{DeployerError, HttpGrant, HttpObservation, HttpSettings, ResolvedTarget};
use serde::Deserialize;

use super::secondary_targets::secret_ref_data;
use crate::contract::target;
use crate::landscaper::{GoDuration, Target, parse_go_duration};
use crate::metrics::family::{Counters, Histograms};

/// The Target type that names an HTTP API.
pub const HTTP_API_TARGET_TYPE: &str = "wasm-deployer.dev/http-api";

/// `http:` section of the host configuration.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpConfig {
    /// URL prefixes (`https://status.example.com/api/`) every plugin may send requests to,
    /// besides its Targets' URLs; the host adds no credentials to them. Default: none.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Connecting (TCP and TLS), Go duration. Default `5s`; always cut to the invocation deadline.
    pub connect_timeout: Option<String>,
    /// From sending a request to its response's headers, Go duration. Default `30s`; always cut
    /// to the invocation deadline.
    pub request_timeout: Option<String>,
    /// Largest response body in KiB; a larger one fails the item. Default 4096 (4 MiB).
    #[serde(rename = "maxResponseKiB")]
    pub max_response_kib: Option<u64>,
    /// Requests one invocation may have in flight at once (more wait). Default 8.
    pub max_in_flight: Option<usize>,
}

impl HttpConfig {
    /// The limits in force; an invalid value is a start-up error naming the key.
    pub fn settings(&self) -> anyhow::Result<HttpSettings> {
        let d = HttpSettings::default();
        let duration = |key: &str, v: &Option<String>, default: Duration| match v.as_deref() {
            None => Ok(default),
            Some(s) => match parse_go_duration(s).map_err(anyhow::Error::msg)? {
                GoDuration::Finite(d) if !d.is_zero() => Ok(d),
                _ => anyhow::bail!("http.{key} must be a positive duration, got {s:?}"),
            },
        };
        let max_response_bytes = match self.max_response_kib {
            None => d.max_response_bytes,
            Some(0) => anyhow::bail!("http.maxResponseKiB must be at least 1"),
            Some(k) => k.saturating_mul(1024),
        };
        let max_in_flight = match self.max_in_flight {
            None => d.max_in_flight,
            Some(0) => anyhow::bail!("http.maxInFlight must be at least 1"),
            Some(n) => n,
        };
        Ok(HttpSettings {
            connect_timeout: duration("connectTimeout", &self.connect_timeout, d.connect_timeout)?,
            request_timeout: duration("requestTimeout", &self.request_timeout, d.request_timeout)?,
            max_response_bytes,
            max_in_flight,
        })
    }

    /// Every `allow` entry is an absolute `http://` or `https://` URL.
    pub fn validate(&self) -> anyhow::Result<()> {
        for prefix in &self.allow {
            Base::parse(prefix).map_err(|e| anyhow::anyhow!("http.allow {prefix:?}: {e}"))?;
        }
        self.settings().map(|_| ())
    }
}

/// The host's HTTP grants, shared by every invocation: configuration and metrics.
pub struct HttpService {
    allow: Vec<Base>,
    settings: HttpSettings,
    pub stats: HttpStats,
}

impl HttpService {
    pub fn new(config: &HttpConfig) -> anyhow::Result<Self> {
        config.validate()?;
        Ok(Self {
            allow: config
                .allow
                .iter()
                .filter_map(|p| Base::parse(p).ok())
                .collect(),
            settings: config.settings()?,
            stats: HttpStats::default(),
        })
    }
}

/// A base URL a grant covers: scheme, authority (lowercase, default port removed) and a path
/// that ends in `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    origin: String,
    path: String,
    text: String,
}

impl Base {
    pub fn parse(url: &str) -> Result<Self, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
        let (origin, path) = origin_and_path(&uri)?;
        if uri.query().is_some() {
            return Err("a base URL has no query".into());
        }
        let path = if path.ends_with('/') {
            path
        } else {
            format!("{path}/")
        };
        Ok(Base {
            text: format!("{origin}{path}"),
            origin,
            path,
        })
    }

    /// `url` (as the runtime checked it) is this base or below it.
    pub fn covers(&self, url: &str) -> bool {
        let Ok(uri) = url.parse::<http::Uri>() else {
            return false;
        };
        let Ok((origin, path)) = origin_and_path(&uri) else {
            return false;
        };
        origin == self.origin && (path.starts_with(&self.path) || format!("{path}/") == self.path)
    }
}

impl std::fmt::Display for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// `https://host[:port]` without the scheme's default port, and the path (`/` when empty).
fn origin_and_path(uri: &http::Uri) -> Result<(String, String), String> {
    let scheme = uri.scheme_str().ok_or("no scheme")?.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        other => return Err(format!("scheme {other:?}: only http and https")),
    };
    let authority = uri.authority().ok_or("no host")?;
    if authority.as_str().contains('@') {
        return Err("user information in the URL".into());
    }
    let host = authority.host().to_ascii_lowercase();
    let origin = match authority.port_u16() {
        Some(p) if p != default_port => format!("{scheme}://{host}:{p}"),
        _ => format!("{scheme}://{host}"),
    };
    let path = if uri.path().is_empty() {
        "/"
    } else {
        uri.path()
    };
    Ok((origin, path.to_string()))
}

/// `spec.config` of an `http-api` Target (or the Secret its `secretRef` names).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HttpApiConfig {
    url: String,
    #[serde(default)]
    ca_data: Option<String>,
    #[serde(default, deserialize_with = "object_or_json_text")]
    auth: Option<AuthConfig>,
}

/// `auth` as an object, or — from a `spec.secretRef` without a key, whose every key is a string —
/// as the JSON text of one.
fn object_or_json_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<AuthConfig>, D::Error> {
    use serde::de::Error as _;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(text)) => serde_json::from_str(&text)
            .map(Some)
            .map_err(D::Error::custom),
        Some(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(D::Error::custom),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AuthConfig {
    bearer: Option<SecretKeyRef>,
    basic: Option<SecretOnlyRef>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecretKeyRef {
    secret_ref: NameKey,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecretOnlyRef {
    secret_ref: NameKey,
}

#[derive(Deserialize)]
struct NameKey {
    name: String,
    #[serde(default)]
    key: Option<String>,
}

/// One Target's grant, resolved once per invocation.
struct TargetGrant {
    base: Base,
    grant: HttpGrant,
}

/// Grants of one invocation: its Targets (resolved when first needed) and `http.allow`.
pub(super) struct ItemHttp {
    pub(super) service: Arc<HttpService>,
    pub(super) client: Client,
    /// The item's namespace (secondary Targets and Secrets are looked up there).
    pub(super) namespace: String,
    pub(super) primary: Option<ResolvedTarget>,
    pub(super) secondary: BTreeSet<String>,
    /// Resolved Target grants by Target name (`None`: not an http-api Target).
    resolved: tokio::sync::Mutex<HashMap<String, Option<Arc<TargetGrant>>>>,
}

impl ItemHttp {
    pub(super) fn new(
        service: Arc<HttpService>,
        client: Client,
        namespace: String,
        primary: Option<ResolvedTarget>,
        secondary: BTreeSet<String>,
    ) -> Self {
        Self {
            service,
            client,
            namespace,
            primary,
            secondary,
            resolved: Default::default(),
        }
    }

    pub(super) fn settings(&self) -> HttpSettings {
        self.service.settings
    }

    pub(super) async fn grant(&self, url: &str) -> Result<HttpGrant, DeployerError> {
        let mut considered = Vec::new();
        if let Some(primary) = &self.primary {
            let name = target_name(&primary.target);
            if let Some(g) = self
                .target_grant(&name, || async { Ok(primary.clone()) })
                .await?
            {
                if g.base.covers(url) {
                    return Ok(g.grant.clone());
                }
                considered.push(format!("the item's Target {name:?} ({})", g.base));
            }
        }
        for name in &self.secondary {
            let lookup = || self.lookup(name);
            if let Some(g) = self.target_grant(name, lookup).await? {
                if g.base.covers(url) {
                    return Ok(g.grant.clone());
                }
                considered.push(format!("Target {name:?} ({})", g.base));
            }
        }
        if let Some(prefix) = self.service.allow.iter().find(|b| b.covers(url)) {
            return Ok(HttpGrant {
                granted_by: format!("http.allow {prefix}"),
                ..Default::default()
            });
        }
        let granted = if considered.is_empty() && self.service.allow.is_empty() {
            "the item has no Target of type wasm-deployer.dev/http-api and http.allow is empty"
                .into()
        } else {
            let mut all = considered;
            all.extend(self.service.allow.iter().map(|b| format!("http.allow {b}")));
            format!("it is under none of {}", all.join(", "))
        };
        Err(DeployerError::configuration(
            "HttpNotAllowed",
            format!("HTTP request to {url} is not allowed: {granted}"),
        )
        .with_operation("http"))
    }

    /// The grant of Target `name` (resolved by `resolve` the first time), `None` if it is not an
    /// http-api Target.
    async fn target_grant<F, Fut>(
        &self,
        name: &str,
        resolve: F,
    ) -> Result<Option<Arc<TargetGrant>>, DeployerError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<ResolvedTarget, DeployerError>>,
    {
        let mut resolved = self.resolved.lock().await;
        if let Some(g) = resolved.get(name) {
            return Ok(g.clone());
        }
        let target = resolve().await?;
        let grant = if target_type(&target.target) == HTTP_API_TARGET_TYPE {
            Some(Arc::new(self.resolve_grant(name, &target).await?))
        } else {
            None
        };
        resolved.insert(name.to_string(), grant.clone());
        Ok(grant)
    }

    async fn lookup(&self, name: &str) -> Result<ResolvedTarget, DeployerError> {
        let targets: Api<Target> = Api::namespaced(self.client.clone(), &self.namespace);
        let problem = |m: String| invalid_target(name, m);
        let target = targets
            .get_opt(name)
            .await
            .map_err(|e| problem(format!("reading it: {e}")))?
            .ok_or_else(|| problem(format!("not found in namespace {:?}", self.namespace)))?;
        let data = secret_ref_data(&self.client, &self.namespace, &target)
            .await
            .map_err(|e| problem(format!("reading its secretRef: {e}")))?;
        let resolved = target::resolve(&target, data.as_ref()).map_err(problem)?;
        Ok(ResolvedTarget {
            target,
            content: resolved.content,
        })
    }

    async fn resolve_grant(
        &self,
        name: &str,
        target: &ResolvedTarget,
    ) -> Result<TargetGrant, DeployerError> {
        let problem = |m: String| invalid_target(name, m);
        let config: HttpApiConfig = serde_json::from_str(&target.content)
            .map_err(|e| problem(format!("spec.config must be {{url, caData?, auth?}}: {e}")))?;
        let base =
            Base::parse(&config.url).map_err(|e| problem(format!("url {:?}: {e}", config.url)))?;
        let ca_pem = decode_ca(name, config.ca_data.as_deref())?;
        let namespace = target
            .target
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| self.namespace.clone());
        let authorization = match &config.auth {
            None => None,
            Some(auth) => Some(self.authorization(name, &namespace, auth).await?),
        };
        Ok(TargetGrant {
            grant: HttpGrant {
                granted_by: format!("Target {namespace}/{name}"),
                authorization,
                ca_pem,
            },
            base,
        })
    }

    /// The `Authorization` value of `auth`, from its Secret in `namespace`.
    async fn authorization(
        &self,
        name: &str,
        namespace: &str,
        auth: &AuthConfig,
    ) -> Result<String, DeployerError> {
        let secret_name = auth.secret_name().map_err(|m| invalid_target(name, m))?;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = secrets
            .get_opt(secret_name)
            .await
            .map_err(|e| invalid_target(name, format!("reading Secret {secret_name:?}: {e}")))?
            .ok_or_else(|| {
                invalid_target(
                    name,
                    format!("Secret {secret_name:?} not found in namespace {namespace:?}"),
                )
            })?;
        authorization_from(name, auth, &secret_data(secret))
    }
}

impl AuthConfig {
    fn secret_name(&self) -> Result<&str, String> {
        match (&self.bearer, &self.basic) {
            (Some(b), None) => Ok(&b.secret_ref.name),
            (None, Some(b)) => Ok(&b.secret_ref.name),
            _ => Err("auth names exactly one of bearer and basic".into()),
        }
    }
}

fn secret_data(secret: Secret) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    for (k, v) in secret.string_data.unwrap_or_default() {
        data.insert(k, v.into_bytes());
    }
    data
}

/// The `Authorization` value of `auth` from its Secret's data.
fn authorization_from(
    name: &str,
    auth: &AuthConfig,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<String, DeployerError> {
    let secret_name = auth.secret_name().map_err(|m| invalid_target(name, m))?;
    let value = |key: &str| {
        let bytes = data.get(key).ok_or_else(|| {
            invalid_target(name, format!("Secret {secret_name:?} has no key {key:?}"))
        })?;
        String::from_utf8(bytes.clone())
            .map(|s| s.trim_end_matches(['\r', '\n']).to_string())
            .map_err(|_| {
                invalid_target(
                    name,
                    format!("key {key:?} of Secret {secret_name:?} is not UTF-8"),
                )
            })
    };
    Ok(match &auth.bearer {
        Some(b) => format!(
            "Bearer {}",
            value(b.secret_ref.key.as_deref().unwrap_or("token"))?
        ),
        None => {
            let pair = format!("{}:{}", value("username")?, value("password")?);
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        }
    })
}

/// The grant of an `http-api` Target for `deployer-host plugin run`, offline: its `auth`
/// Secret, if it has one, is one of `secrets` (read from files). `None`: not an http-api Target.
pub fn offline_grant(
    target: &ResolvedTarget,
    secrets: &[Secret],
) -> Result<Option<(Base, HttpGrant)>, DeployerError> {
    if target_type(&target.target) != HTTP_API_TARGET_TYPE {
        return Ok(None);
    }
    let name = target_name(&target.target);
    let config: HttpApiConfig = serde_json::from_str(&target.content).map_err(|e| {
        invalid_target(
            &name,
            format!("spec.config must be {{url, caData?, auth?}}: {e}"),
        )
    })?;
    let base = Base::parse(&config.url)
        .map_err(|e| invalid_target(&name, format!("url {:?}: {e}", config.url)))?;
    let authorization = match &config.auth {
        None => None,
        Some(auth) => {
            let secret_name = auth.secret_name().map_err(|m| invalid_target(&name, m))?;
            let secret = secrets
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(secret_name))
                .cloned()
                .ok_or_else(|| {
                    invalid_target(
                        &name,
                        format!("Secret {secret_name:?} not given (--secret FILE)"),
                    )
                })?;
            Some(authorization_from(&name, auth, &secret_data(secret))?)
        }
    };
    let ca_pem = decode_ca(&name, config.ca_data.as_deref())?;
    Ok(Some((
        base,
        HttpGrant {
            granted_by: format!("Target {name}"),
            authorization,
            ca_pem,
        },
    )))
}

fn decode_ca(name: &str, ca_data: Option<&str>) -> Result<Option<Arc<Vec<u8>>>, DeployerError> {
    ca_data
        .map(|b64| {
            base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map(Arc::new)
                .map_err(|e| invalid_target(name, format!("caData is not base64: {e}")))
        })
        .transpose()
}

fn invalid_target(name: &str, message: String) -> DeployerError {
    DeployerError::configuration(
        "InvalidHttpTarget",
        format!("http-api Target {name:?}: {message}"),
    )
    .with_operation("http")
}

fn target_name(target: &Target) -> String {
    target.metadata.name.clone().unwrap_or_default()
}

fn target_type(target: &Target) -> &str {
    &target.spec.type_
}

/// Upper bounds of the request-duration histogram, in seconds.
const BUCKETS: [f64; 11] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
];

/// Label sets kept; past this, further (plugin, host) pairs are counted under host `other`
/// (a plugin that keeps asking for new hosts cannot grow the host's memory).
const MAX_SERIES: usize = 1000;

/// Plugins' HTTP requests, for `/metrics`.
pub struct HttpStats {
    requests: Counters<3>,
    durations: Histograms<2>,
}

impl Default for HttpStats {
    fn default() -> Self {
        Self {
            requests: Counters::new(
                "wasm_deployer_plugin_http_requests_total",
                "Plugins' outgoing HTTP requests, by plugin, host and status code (or denied, refused, timeout, tls, dns, error).",
                ["plugin", "host", "code"],
            ),
            durations: Histograms::new(
                "wasm_deployer_plugin_http_request_duration_seconds",
                "From a plugin's send to the response headers (or the failure).",
                ["plugin", "host"],
                &BUCKETS,
            ),
        }
    }
}

impl HttpStats {
    pub fn observe(&self, o: &HttpObservation<'_>) {
        let host =
            if self.durations.contains([o.plugin, o.host]) || self.durations.len() < MAX_SERIES {
                o.host
            } else {
                "other"
            };
        let code = o
            .status
            .map_or_else(|| o.outcome.to_string(), |c| c.to_string());
        self.requests.inc([o.plugin, host, &code]);
        self.durations
            .observe([o.plugin, host], o.duration.as_secs_f64());
    }

    /// `wasm_deployer_plugin_http_requests_total{plugin,host,code}` and the histogram
    /// `wasm_deployer_plugin_http_request_duration_seconds{plugin,host}`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.requests.render(&mut out);
        self.durations.render(&mut out);
        out
    }

    /// Requests counted for `plugin` with `code` (tests).
    pub fn count(&self, plugin: &str, code: &str) -> u64 {
        self.requests.sum(|[p, _, c]| p == plugin && c == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_covers_itself_and_what_is_below_it_only() {
        let b = Base::parse("https://API.example.com:443/v1").unwrap();
        assert_eq!(b.to_string(), "https://api.example.com/v1/");
        assert!(b.covers("https://api.example.com/v1"));
        assert!(b.covers("https://api.example.com/v1/"));
        assert!(b.covers("https://api.example.com/v1/things/a?x=1"));
        assert!(!b.covers("https://api.example.com/v10/things"));
        assert!(!b.covers("https://api.example.com/"));
        assert!(!b.covers("http://api.example.com/v1/things"));
        assert!(!b.covers("https://api.example.com:8443/v1/things"));
        assert!(!b.covers("https://api.example.com.evil.test/v1/things"));
        let root = Base::parse("http://127.0.0.1:8080").unwrap();
        assert!(root.covers("http://127.0.0.1:8080/anything"));
        assert!(!root.covers("http://127.0.0.1:8081/anything"));
    }

    #[test]
    fn bases_must_be_http_urls_without_query() {
        assert!(Base::parse("ftp://x/").is_err());
        assert!(Base::parse("/relative").is_err());
        assert!(Base::parse("https://x/?q=1").is_err());
        assert!(Base::parse("https://u:p@x/").is_err());
    }

    #[test]
    fn settings_default_and_validate() {
        let d = HttpConfig::default().settings().unwrap();
        assert_eq!(d, HttpSettings::default());
        let c: HttpConfig = serde_json::from_value(serde_json::json!({
            "allow": ["https://status.example.com/api/"], "connectTimeout": "2s",
            "requestTimeout": "10s", "maxResponseKiB": 64, "maxInFlight": 2
        }))
        .unwrap();
        let s = c.settings().unwrap();
        assert_eq!(s.connect_timeout, Duration::from_secs(2));
        assert_eq!(s.max_response_bytes, 64 * 1024);
        assert_eq!(s.max_in_flight, 2);
        let bad: HttpConfig =
            serde_json::from_value(serde_json::json!({"allow": ["status.example.com"]})).unwrap();
        assert!(bad.validate().is_err());
        let zero: HttpConfig =
            serde_json::from_value(serde_json::json!({"maxInFlight": 0})).unwrap();
        assert!(zero.validate().is_err());
    }

    #[test]
    fn metrics_count_by_plugin_host_and_code() {
        let stats = HttpStats::default();
        let o = |status, outcome| HttpObservation {
            plugin: "p",
            method: "PUT",
            host: "127.0.0.1:1",
            status,
            outcome,
            duration: Duration::from_millis(3),
        };
        stats.observe(&o(Some(200), "ok"));
        stats.observe(&o(Some(200), "ok"));
        stats.observe(&o(None, "denied"));
        assert_eq!(stats.count("p", "200"), 2);
        assert_eq!(stats.count("p", "denied"), 1);
        let text = stats.render();
        assert!(text.contains("wasm_deployer_plugin_http_requests_total{plugin=\"p\",host=\"127.0.0.1:1\",code=\"200\"} 2"));
        assert!(text.contains("wasm_deployer_plugin_http_request_duration_seconds_count{plugin=\"p\",host=\"127.0.0.1:1\"} 3"));
    }
}
