//! How the commands that talk to a registry (`plugin push|pull|inspect`, `image build --push`)
//! reach it: `--plain-http` and Docker credentials.
//!
//! Owns: turning those flags into registry options. Must not touch: the registry client.

use std::path::PathBuf;

use anyhow::Context as _;

/// How to reach the registry of `reference`: plain HTTP if asked, credentials from
/// `docker_config` or `$DOCKER_CONFIG/config.json`.
pub(super) fn registry_options(
    reference: &str,
    plain_http: bool,
    docker_config: Option<PathBuf>,
) -> anyhow::Result<crate::oci::RegistryOptions> {
    use crate::oci;
    let mut options = oci::RegistryOptions::default();
    if plain_http {
        options
            .plain_http
            .push(oci::parse(reference)?.resolve_registry().to_string());
    }
    let config_path = docker_config.or_else(|| {
        std::env::var("DOCKER_CONFIG")
            .ok()
            .map(|d| PathBuf::from(d).join("config.json"))
    });
    if let Some(p) = config_path.filter(|p| p.exists()) {
        options
            .docker_configs
            .push(std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?);
    }
    Ok(options)
}
