//! OCM credential configurations as Landscaper accepts them — a registry pull secret's
//! `.ocmcredentialconfig`, and the `.ocmconfig` of the Context's `ocmConfig` ConfigMap — turned
//! into the Docker config JSON the host's registry client reads. Understood: a
//! `credentials.config.ocm.software` document, alone or inside a `generic.config.ocm.software/v1`
//! document's `configurations`; its `consumers` whose identity is `OCIRegistry` (`hostname`,
//! optional `port`) with `Credentials` properties `username`/`password` (or `identityToken`
//! is not supported: named in docs/ocm.md). Everything else in the document is ignored.

use serde_json::{Map, Value, json};

/// The Docker config (`{"auths": {...}}`) of the OCI registry credentials in an OCM
/// configuration, or `None` if it holds none (or is no OCM configuration).
pub fn docker_config(text: &str) -> Option<String> {
    let doc: Value = serde_yaml::from_str(text).ok()?;
    let mut auths = Map::new();
    collect(&doc, &mut auths);
    (!auths.is_empty()).then(|| json!({"auths": auths}).to_string())
}

fn collect(doc: &Value, auths: &mut Map<String, Value>) {
    let kind = doc["type"].as_str().unwrap_or_default();
    if kind.starts_with("generic.config.ocm.software") {
        for c in doc["configurations"].as_array().into_iter().flatten() {
            collect(c, auths);
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
            let p = &c["properties"];
            if let (Some(u), Some(pw)) = (p["username"].as_str(), p["password"].as_str()) {
                auths.insert(key.clone(), json!({"username": u, "password": pw}));
                break;
            }
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
        assert!(docker_config("not: [an ocm config").is_none());
    }
}
