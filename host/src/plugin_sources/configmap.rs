//! Plugins in ConfigMaps: one `binaryData` key holds a component, raw or gzip (sniffed by its
//! magic bytes); a detached signature may sit beside it in `<key>.sig`. A ConfigMap is limited
//! to 1 MiB by the API server — larger plugins (Python, JavaScript) go to an OCI registry.
//!
//! Owns: reading and unpacking. Must not touch: trust (the caller checks pins and signatures).

use std::io::Read as _;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;

use super::ConfigMapSource;

/// The largest component accepted after gunzip (a gzip bomb stops here).
const MAX_UNPACKED: u64 = 256 << 20;

/// What a ConfigMap holds for one plugin.
#[derive(Clone, Debug)]
pub struct FromConfigMap {
    pub bytes: Vec<u8>,
    /// The ConfigMap's `resourceVersion`: a new one means "look again".
    pub resource_version: String,
    /// Base64 signature of the component bytes (`<key>.sig`), if present.
    pub signature: Option<String>,
}

/// `bytes`, gunzipped if they are gzip.
pub fn unpack(bytes: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes);
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .take(MAX_UNPACKED + 1)
        .read_to_end(&mut out)
        .context("gunzip")?;
    if out.len() as u64 > MAX_UNPACKED {
        bail!(
            "the gunzipped plugin is larger than {} MiB",
            MAX_UNPACKED >> 20
        );
    }
    Ok(out)
}

/// Reads the plugin of `source` (namespace default `namespace`).
pub async fn read(
    client: &Client,
    namespace: &str,
    source: &ConfigMapSource,
) -> anyhow::Result<FromConfigMap> {
    let ns = source.namespace.as_deref().unwrap_or(namespace);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm = api
        .get_opt(&source.name)
        .await
        .with_context(|| format!("reading ConfigMap {ns}/{}", source.name))?
        .with_context(|| {
            format!(
                "ConfigMap {ns}/{} not found (the API server refuses ConfigMaps over 1 MiB: ship \
                 large plugins through an OCI registry)",
                source.name
            )
        })?;
    let mut data = cm.binary_data.unwrap_or_default();
    let key = match &source.key {
        Some(k) => k.clone(),
        None => {
            let keys: Vec<&String> = data.keys().filter(|k| !k.ends_with(".sig")).collect();
            match keys.as_slice() {
                [one] => (*one).clone(),
                [] => bail!("ConfigMap {ns}/{} has no binaryData key", source.name),
                _ => bail!(
                    "ConfigMap {ns}/{} has several binaryData keys ({keys:?}): name one in source.configMap.key",
                    source.name
                ),
            }
        }
    };
    let raw = data.remove(&key).with_context(|| {
        format!(
            "ConfigMap {ns}/{} has no binaryData key {key:?}",
            source.name
        )
    })?;
    let signature = data
        .remove(&format!("{key}.sig"))
        .map(|s| String::from_utf8_lossy(&s.0).trim().to_string())
        .or_else(|| {
            cm.data
                .as_ref()
                .and_then(|d| d.get(&format!("{key}.sig")))
                .map(|s| s.trim().to_string())
        });
    Ok(FromConfigMap {
        bytes: unpack(raw.0)
            .with_context(|| format!("ConfigMap {ns}/{} key {key}", source.name))?,
        resource_version: cm.metadata.resource_version.unwrap_or_default(),
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn gzip_is_sniffed_and_raw_passes() {
        let wasm = b"\0asm\x0d\0\x01\0".to_vec();
        assert_eq!(unpack(wasm.clone()).unwrap(), wasm);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&wasm).unwrap();
        assert_eq!(unpack(gz.finish().unwrap()).unwrap(), wasm);
        assert!(unpack(vec![0x1f, 0x8b, 0, 1, 2]).is_err());
    }
}
