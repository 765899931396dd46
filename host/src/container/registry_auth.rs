//! Image pull credentials: from Docker config documents (the Context's registry pull secrets
//! and the provider configuration's `registryPullSecrets`), the one entry for the registry of
//! an image, written as a Docker config of that single registry (contract section 9.3).
//!
//! Owns: parsing image references and matching `auths` keys. Must not touch: the cluster.

use serde_json::{Value, json};

/// The registry host of an image reference (`docker.io` images are `index.docker.io`).
pub fn registry_of(image: &str) -> String {
    let first = image.split('/').next().unwrap_or_default();
    let is_host =
        image.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if is_host {
        normalize(first)
    } else {
        "index.docker.io".into()
    }
}

/// An `auths` key as a bare host (`https://index.docker.io/v1/` → `index.docker.io`).
fn normalize(key: &str) -> String {
    let host = key
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "registry-1.docker.io" => "index.docker.io".into(),
        _ => host,
    }
}

/// A Docker config with only the credentials for `image`'s registry, from the first document
/// that has them; `None` if none does. Documents that are not Docker configs are skipped.
pub fn pull_secret_for(image: &str, documents: &[String]) -> Option<Value> {
    let registry = registry_of(image);
    for doc in documents {
        let Ok(parsed) = serde_json::from_str::<Value>(doc) else {
            continue;
        };
        let Some(auths) = parsed.get("auths").and_then(Value::as_object) else {
            continue;
        };
        if let Some((_, entry)) = auths.iter().find(|(k, _)| normalize(k) == registry) {
            return Some(json!({ "auths": { registry: entry } }));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_of_image_references() {
        assert_eq!(registry_of("ubuntu:18.04"), "index.docker.io");
        assert_eq!(registry_of("library/ubuntu"), "index.docker.io");
        assert_eq!(registry_of("docker.io/library/ubuntu"), "index.docker.io");
        assert_eq!(registry_of("127.0.0.1:5000/x/y:1"), "127.0.0.1:5000");
        assert_eq!(registry_of("localhost/img"), "localhost");
        assert_eq!(registry_of("eu.gcr.io/p/img@sha256:ab"), "eu.gcr.io");
    }

    #[test]
    fn the_matching_entry_is_picked_from_the_first_document_that_has_it() {
        let docs = vec![
            "not json".to_string(),
            r#"{"auths": {"other.io": {"auth": "b3RoZXI="}}}"#.to_string(),
            r#"{"auths": {"https://index.docker.io/v1/": {"auth": "ZG9ja2Vy"}, "eu.gcr.io": {"auth": "Z2Ny"}}}"#.to_string(),
        ];
        assert_eq!(
            pull_secret_for("ubuntu", &docs),
            Some(json!({"auths": {"index.docker.io": {"auth": "ZG9ja2Vy"}}}))
        );
        assert_eq!(
            pull_secret_for("eu.gcr.io/p/x:1", &docs).unwrap()["auths"]["eu.gcr.io"]["auth"],
            "Z2Ny"
        );
        assert_eq!(pull_secret_for("quay.io/x", &docs), None);
    }
}
