//! Registry credentials and trust: Docker configs (`{"auths": {...}}`) turned into a client's
//! credentials, PEM bundles split into certificates, and what one item's Context gives — its
//! registry pull secrets (Docker configs, or OCM credential configurations) and the `.ocmconfig`
//! of its `ocmConfig` ConfigMap, with the registry CAs those name.
//!
//! Owns: reading credentials. Must not touch: which registry a request goes to, or the allowlist.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use oci_client::secrets::RegistryAuth;
use plugin_runtime::DeployerError;

use super::error::error;
use super::ocm_config;
use crate::landscaper::{Context, codes};

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

/// Docker configs, and registry CAs as (`host[:port]`, PEM).
#[derive(Debug, Default)]
pub struct RegistryCredentials {
    pub docker_configs: Vec<String>,
    pub cas: Vec<(String, String)>,
}

/// One item as the registries see it: its Context, and where to read what the Context names
/// (the item's namespace, with the Landscaper cluster's client).
pub struct ItemContext {
    pub client: kube::Client,
    /// The Context's namespace (the item's).
    pub namespace: String,
    pub context: Option<Context>,
}

impl ItemContext {
    /// Docker configs of the Context's registry pull secrets (resolved by the controller; an
    /// `.ocmcredentialconfig` is turned into one), and of the OCM configuration in the
    /// Context's `ocmConfig` ConfigMap (key `.ocmconfig`, as Landscaper reads it); with the
    /// registry CAs (`host[:port]`, PEM) the OCM configurations among them give.
    pub async fn registry_credentials(&self) -> Result<RegistryCredentials, DeployerError> {
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
                                cas.extend(ocm_config::certificate_authorities(doc));
                                ocm_config::docker_config(doc).unwrap_or_default()
                            }
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(text) = self.ocm_config().await? {
            docs.extend(ocm_config::docker_config(&text));
            cas.extend(ocm_config::certificate_authorities(&text));
        }
        Ok(RegistryCredentials {
            docker_configs: docs,
            cas,
        })
    }

    /// The `.ocmconfig` of the Context's `ocmConfig` ConfigMap, if it names one.
    async fn ocm_config(&self) -> Result<Option<String>, DeployerError> {
        let name = self
            .context
            .as_ref()
            .and_then(|c| c.ocm_config.as_ref())
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty());
        let Some(name) = name else {
            return Ok(None);
        };
        let maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let missing = |what: String| error(Some(codes::CONFIGURATION_PROBLEM), "OcmConfig", what);
        let map = maps.get_opt(name).await.map_err(|e| {
            error(
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
        Ok(Some(text.clone()))
    }
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
