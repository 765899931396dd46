//! OCM credential configurations as Landscaper accepts them — a registry pull secret's
//! `.ocmcredentialconfig`, and the `.ocmconfig` of the Context's `ocmConfig` ConfigMap — turned
//! into the Docker config JSON the host's registry client reads. Understood: a
//! `credentials.config.ocm.software` document, alone or inside a `generic.config.ocm.software/v1`
//! document's `configurations`; its `consumers` whose identity is `OCIRegistry` (`hostname`,
//! optional `port`) with `Credentials` properties `username`/`password` (or `identityToken`
//! is not supported: named in docs/ocm.md). Everything else in the document is ignored.
//!
//! Owns: reading OCM credential configurations. Must not touch: the registry requests themselves.

use serde_json::{Map, Value, json};

/// The Docker config (`{"auths": {...}}`) of the OCI registry credentials in an OCM
/// configuration, or `None` if it holds none (or is no OCM configuration).
pub fn docker_config(text: &str) -> Option<String> {
    let doc: Value = serde_yaml::from_str(text).ok()?;
    let mut auths = Map::new();
    for_each_registry(&doc, &mut |key, p| {
        if auths.contains_key(key) {
            return;
        }
        if let (Some(u), Some(pw)) = (p["username"].as_str(), p["password"].as_str()) {
            auths.insert(key.to_string(), json!({"username": u, "password": pw}));
        }
    });
    (!auths.is_empty()).then(|| json!({"auths": auths}).to_string())
}

/// The CA certificates (PEM) the OCM configuration gives for OCI registries: the
/// `certificateAuthority` property of an `OCIRegistry` consumer's credentials, as
/// (`host[:port]`, PEM) — what OCM's registry client adds to the system's roots for that
/// registry only (`ocireg` in the OCM Go library Landscaper vendors).
pub fn certificate_authorities(text: &str) -> Vec<(String, String)> {
    let Ok(doc) = serde_yaml::from_str::<Value>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for_each_registry(&doc, &mut |key, p| {
        if let Some(ca) = p["certificateAuthority"].as_str().filter(|c| !c.is_empty()) {
            out.push((key.to_string(), ca.to_string()));
        }
    });
    out
}

/// Calls `f(host[:port], properties)` for every credentials entry of every `OCIRegistry`
/// consumer of the document (and of the documents a generic configuration holds).
fn for_each_registry(doc: &Value, f: &mut dyn FnMut(&str, &Value)) {
    let kind = doc["type"].as_str().unwrap_or_default();
    if kind.starts_with("generic.config.ocm.software") {
        for c in doc["configurations"].as_array().into_iter().flatten() {
            for_each_registry(c, f);
        }
        return;
    }
    if !kind.starts_with("credentials.config.ocm.software") {
        return;
    }
    for consumer in doc["consumers"].as_array().into_iter().flatten() {
        let id = &consumer["identity"];
        let id_type = id["type"].as_str().unwrap_or_default();
        if !id_type
            .split('/')
            .next()
            .unwrap_or_default()
            .eq_ignore_ascii_case("OCIRegistry")
        {
            continue;
        }
        let Some(host) = id["hostname"].as_str().filter(|h| !h.is_empty()) else {
            continue;
        };
        let key = match id["port"].as_str().filter(|p| !p.is_empty()) {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        for c in consumer["credentials"].as_array().into_iter().flatten() {
            f(&key, &c["properties"]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ocm_credential_configs_become_docker_configs() {
        let creds = r#"
type: credentials.config.ocm.software
consumers:
- identity: {type: OCIRegistry, hostname: 127.0.0.1, port: "5000"}
  credentials:
  - type: Credentials
    properties: {username: ocm, password: s3cret}
- identity: {type: HelmChartRepository, hostname: charts.example.com}
  credentials: [{type: Credentials, properties: {username: a, password: b}}]
"#;
        let d: Value = serde_json::from_str(&docker_config(creds).unwrap()).unwrap();
        assert_eq!(
            d,
            json!({"auths": {"127.0.0.1:5000": {"username": "ocm", "password": "s3cret"}}})
        );
        let generic = format!(
            "type: generic.config.ocm.software/v1\nconfigurations:\n- {}\n",
            serde_json::to_string(&serde_yaml::from_str::<Value>(creds).unwrap()).unwrap()
        );
        assert_eq!(
            serde_json::from_str::<Value>(&docker_config(&generic).unwrap()).unwrap(),
            d
        );
        assert!(docker_config("{\"auths\": {}}").is_none());
        assert!(certificate_authorities(creds).is_empty());
        assert!(docker_config("not: [an ocm config").is_none());
    }

    #[test]
    fn a_registry_ca_comes_from_the_credentials_of_its_consumer() {
        let creds = r#"
type: credentials.config.ocm.software
consumers:
- identity: {type: OCIRegistry, hostname: 127.0.0.1, port: "5000"}
  credentials:
  - type: Credentials
    properties: {username: ocm, password: s3cret, certificateAuthority: "-----BEGIN CERTIFICATE-----\nAA\n-----END CERTIFICATE-----\n"}
- identity: {type: OCIRegistry, hostname: other.example}
  credentials: [{type: Credentials, properties: {username: a, password: b}}]
"#;
        assert_eq!(
            certificate_authorities(creds),
            [(
                "127.0.0.1:5000".to_string(),
                "-----BEGIN CERTIFICATE-----\nAA\n-----END CERTIFICATE-----\n".to_string()
            )]
        );
        assert!(certificate_authorities("not: [yaml").is_empty());
    }
}
