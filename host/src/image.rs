//! The host's own container image, built without a container engine: a static `deployer-host`
//! binary, the default plugins and a non-root user, as an OCI image (layout on disk and/or pushed
//! with the plugin delivery's OCI client). `cargo xtask image` drives it; the chart runs it.
//!
//! Owns: the image's layers (deterministic tar+gzip), its config (user, entrypoint) and
//! manifest. Must not touch: how the binary or the plugins are built (xtask does that).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::oci;

/// Where the binary lives in the image.
pub const BINARY_PATH: &str = "usr/local/bin/deployer-host";
/// Where the default plugins live (the chart's `plugins.dir`).
pub const PLUGINS_DIR: &str = "plugins";
/// The user the image runs as (distroless' `nonroot`).
pub const USER_ID: u64 = 65532;
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
const CA_BUNDLE_PATH: &str = "etc/ssl/certs/ca-certificates.crt";
/// The image's default host configuration (`DEPLOYER_CONFIG`): the shipped plugins and caches
/// under `/var/cache/wasm-deployer`, so `podman run IMAGE` serves without a `--config`. The
/// chart mounts its own configuration elsewhere and passes `--config`, which wins.
pub const DEFAULT_CONFIG_PATH: &str = "etc/wasm-deployer/config.yaml";
pub const DEFAULT_CONFIG: &str = "\
# The image's defaults (DEPLOYER_CONFIG); `--config FILE` replaces them.
plugins:
  dir: /plugins
  cacheDir: /var/cache/wasm-deployer/compiled
fetch:
  cacheDir: /var/cache/wasm-deployer/blobs
";

/// What goes into the image.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    /// The `deployer-host` executable (statically linked unless `allow_dynamic`).
    pub binary: PathBuf,
    /// `.wasm` components shipped in `/plugins`.
    pub plugins: Vec<PathBuf>,
    /// CA certificates for registries and clusters reached over TLS (PEM bundle).
    pub ca_bundle: Option<PathBuf>,
    /// `org.opencontainers.image.version`.
    pub version: String,
    /// Creation time written into the config (RFC 3339); fixed for reproducible images.
    pub created: String,
    /// Accept a dynamically linked binary (it cannot start: the image has no libc). For tests
    /// of the image's layout only.
    pub allow_dynamic: bool,
}

/// One gzip-compressed layer.
#[derive(Clone, Debug)]
pub struct Layer {
    pub gzip: Vec<u8>,
    /// `sha256:` of the uncompressed tar (the config's `rootfs.diff_ids`).
    pub diff_id: String,
    /// What the layer adds (`history`).
    pub created_by: String,
}

/// A built image: layers, config and manifest, ready to write or push.
#[derive(Clone, Debug)]
pub struct Image {
    /// The OCI platform architecture of its binary (`amd64`, `arm64`).
    pub architecture: &'static str,
    pub layers: Vec<Layer>,
    pub config: Vec<u8>,
    pub manifest: Vec<u8>,
}

/// Images of the same host for several platforms under one tag: an OCI image index (what
/// `docker pull` / kubelet resolve to the node's platform).
#[derive(Clone, Debug)]
pub struct ImageIndex {
    pub images: Vec<Image>,
    pub index: Vec<u8>,
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// ELF facts the image needs: the architecture, and whether the binary needs a dynamic loader.
fn inspect_elf(bytes: &[u8]) -> anyhow::Result<(&'static str, bool)> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        bail!("not an ELF executable");
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        bail!("only 64-bit little-endian ELF executables are supported");
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let arch = match u16_at(0x12) {
        0x3e => "amd64",
        0xb7 => "arm64",
        other => bail!("unsupported ELF machine {other:#x}"),
    };
    let phoff = u64::from_le_bytes(bytes[0x20..0x28].try_into()?) as usize;
    let (phentsize, phnum) = (u16_at(0x36) as usize, u16_at(0x38) as usize);
    const PT_INTERP: u32 = 3;
    let dynamic = (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        bytes
            .get(at..at + 4)
            .is_some_and(|t| u32::from_le_bytes(t.try_into().unwrap()) == PT_INTERP)
    });
    Ok((arch, dynamic))
}

/// A tar layer with fixed owners, modes and times, so the same inputs give the same digest.
struct LayerBuilder {
    tar: tar::Builder<Vec<u8>>,
}

impl LayerBuilder {
    fn new() -> Self {
        Self {
            tar: tar::Builder::new(Vec::new()),
        }
    }

    fn header(path: &str, size: u64, mode: u32, owner: u64, kind: tar::EntryType) -> tar::Header {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(mode);
        h.set_uid(owner);
        h.set_gid(owner);
        h.set_mtime(0);
        // ustar paths are limited; every path here is short.
        h.set_path(path).expect("short path");
        h.set_cksum();
        h
    }

    fn dir(&mut self, path: &str, mode: u32, owner: u64) -> anyhow::Result<()> {
        let h = Self::header(
            &format!("{path}/"),
            0,
            mode,
            owner,
            tar::EntryType::Directory,
        );
        self.tar.append(&h, std::io::empty())?;
        Ok(())
    }

    fn file(&mut self, path: &str, mode: u32, data: &[u8]) -> anyhow::Result<()> {
        let h = Self::header(path, data.len() as u64, mode, 0, tar::EntryType::Regular);
        self.tar.append(&h, data)?;
        Ok(())
    }

    fn finish(self, created_by: &str) -> anyhow::Result<Layer> {
        let tar = self.tar.into_inner()?;
        let mut gz = flate2::GzBuilder::new()
            .mtime(0)
            .write(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar)?;
        Ok(Layer {
            gzip: gz.finish()?,
            diff_id: sha256(&tar),
            created_by: created_by.to_string(),
        })
    }
}

/// Builds the image: a base layer (user, CA certificates, writable directories), the binary,
/// and the plugins.
pub fn build(spec: &ImageSpec) -> anyhow::Result<Image> {
    let binary = std::fs::read(&spec.binary)
        .with_context(|| format!("reading the host binary {}", spec.binary.display()))?;
    let (arch, dynamic) =
        inspect_elf(&binary).with_context(|| format!("{}", spec.binary.display()))?;
    if dynamic && !spec.allow_dynamic {
        bail!(
            "{} is dynamically linked; the image has no libc, so it could not start. Build it \
             statically (cargo xtask image builds for x86_64-unknown-linux-musl)",
            spec.binary.display()
        );
    }

    let mut base = LayerBuilder::new();
    for dir in [
        "etc",
        "etc/ssl",
        "etc/ssl/certs",
        "etc/wasm-deployer",
        "var",
        "var/cache",
    ] {
        base.dir(dir, 0o755, 0)?;
    }
    base.file(DEFAULT_CONFIG_PATH, 0o644, DEFAULT_CONFIG.as_bytes())?;
    base.file(
        "etc/passwd",
        0o644,
        format!("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{USER_ID}:{USER_ID}:nonroot:/home/nonroot:/sbin/nologin\n").as_bytes(),
    )?;
    base.file(
        "etc/group",
        0o644,
        format!("root:x:0:\nnonroot:x:{USER_ID}:\n").as_bytes(),
    )?;
    if let Some(ca) = &spec.ca_bundle {
        let pem =
            std::fs::read(ca).with_context(|| format!("reading CA bundle {}", ca.display()))?;
        base.file(CA_BUNDLE_PATH, 0o644, &pem)?;
    }
    base.dir("home", 0o755, 0)?;
    base.dir("home/nonroot", 0o700, USER_ID)?;
    base.dir("tmp", 0o1777, 0)?;
    // The compiled-plugin cache when no volume is mounted there.
    base.dir("var/cache/wasm-deployer", 0o755, USER_ID)?;
    let base = base.finish("wasm-deployer: user nonroot, CA certificates, writable directories")?;

    let mut bin = LayerBuilder::new();
    for dir in ["usr", "usr/local", "usr/local/bin"] {
        bin.dir(dir, 0o755, 0)?;
    }
    bin.file(BINARY_PATH, 0o755, &binary)?;
    let bin = bin.finish("wasm-deployer: /usr/local/bin/deployer-host")?;

    let mut plugins = LayerBuilder::new();
    plugins.dir(PLUGINS_DIR, 0o755, 0)?;
    let mut names = Vec::new();
    let mut sorted = spec.plugins.clone();
    sorted.sort();
    for p in &sorted {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| n.ends_with(".wasm"))
            .with_context(|| format!("plugin {} is not a .wasm file", p.display()))?;
        let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        plugins.file(&format!("{PLUGINS_DIR}/{name}"), 0o644, &bytes)?;
        names.push(name.trim_end_matches(".wasm").to_string());
    }
    let plugins = plugins.finish(&format!("wasm-deployer: /plugins ({})", names.join(", ")))?;

    let layers = vec![base, bin, plugins];
    let mut env = vec![
        "PATH=/usr/local/bin".to_string(),
        format!("DEPLOYER_CONFIG=/{DEFAULT_CONFIG_PATH}"),
    ];
    if spec.ca_bundle.is_some() {
        env.push(format!("SSL_CERT_FILE=/{CA_BUNDLE_PATH}"));
    }
    let config = json!({
        "created": spec.created,
        "architecture": arch,
        "os": "linux",
        "config": {
            "User": format!("{USER_ID}:{USER_ID}"),
            "Entrypoint": [format!("/{BINARY_PATH}")],
            "Cmd": ["run"],
            "Env": env,
            "WorkingDir": "/",
            "Labels": {
                "org.opencontainers.image.title": "deployer-host",
                "org.opencontainers.image.description": "wasm-deployer: Landscaper deployers as WebAssembly components",
                "org.opencontainers.image.version": spec.version,
                "dev.wasm-deployer.plugins": names.join(","),
            },
        },
        "rootfs": {
            "type": "layers",
            "diff_ids": layers.iter().map(|l| l.diff_id.clone()).collect::<Vec<_>>(),
        },
        "history": layers.iter().map(|l| json!({"created": spec.created, "created_by": l.created_by})).collect::<Vec<_>>(),
    });
    let config = serde_json::to_vec(&config)?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": sha256(&config), "size": config.len()},
        "layers": layers.iter().map(|l| json!({
            "mediaType": LAYER_MEDIA_TYPE, "digest": sha256(&l.gzip), "size": l.gzip.len(),
        })).collect::<Vec<_>>(),
        "annotations": {"org.opencontainers.image.version": spec.version, "org.opencontainers.image.created": spec.created},
    });
    Ok(Image {
        architecture: arch,
        layers,
        config,
        manifest: serde_json::to_vec(&manifest)?,
    })
}

/// Builds one image per binary (each binary's architecture read from its ELF header) and the
/// index over them. Two binaries of the same architecture are refused.
pub fn build_index(spec: &ImageSpec, binaries: &[PathBuf]) -> anyhow::Result<ImageIndex> {
    let mut images: Vec<Image> = Vec::new();
    for binary in binaries {
        let image = build(&ImageSpec {
            binary: binary.clone(),
            ..spec.clone()
        })?;
        if images.iter().any(|i| i.architecture == image.architecture) {
            bail!(
                "two binaries for {} ({}); give one per architecture",
                image.architecture,
                binary.display()
            );
        }
        images.push(image);
    }
    images.sort_by_key(|i| i.architecture);
    let index = json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": images.iter().map(|i| json!({
            "mediaType": MANIFEST_MEDIA_TYPE,
            "digest": i.digest(),
            "size": i.manifest.len(),
            "platform": {"architecture": i.architecture, "os": "linux"},
        })).collect::<Vec<_>>(),
        "annotations": {"org.opencontainers.image.version": spec.version, "org.opencontainers.image.created": spec.created},
    });
    Ok(ImageIndex {
        images,
        index: serde_json::to_vec(&index)?,
    })
}

/// Writes the OCI layout's `oci-layout` and `index.json` (one entry, tagged `tag`).
fn write_layout_index(
    dir: &Path,
    media_type: &str,
    manifest: &[u8],
    tag: &str,
) -> anyhow::Result<()> {
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    let index = json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [{
            "mediaType": media_type,
            "digest": sha256(manifest),
            "size": manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": tag},
        }],
    });
    std::fs::write(dir.join("index.json"), serde_json::to_vec_pretty(&index)?)?;
    Ok(())
}

impl ImageIndex {
    /// `sha256:` of the index: what the tag names.
    pub fn digest(&self) -> String {
        sha256(&self.index)
    }

    /// Writes an OCI image layout whose tag names the index; every image's blobs beside it.
    pub fn write_layout(&self, dir: &Path, tag: &str) -> anyhow::Result<()> {
        for image in &self.images {
            image.write_blobs(dir)?;
        }
        std::fs::write(
            dir.join("blobs/sha256")
                .join(self.digest().trim_start_matches("sha256:")),
            &self.index,
        )?;
        write_layout_index(dir, INDEX_MEDIA_TYPE, &self.index, tag)
    }

    /// Pushes every image by digest, then the index under `reference`'s tag; returns the
    /// index digest the registry reports.
    pub async fn push(
        &self,
        reference: &str,
        options: &oci::RegistryOptions,
    ) -> anyhow::Result<String> {
        let r = oci::parse(reference)?;
        let (client, auth) = oci::client_for(&r, options);
        client
            .store_auth_if_needed(r.resolve_registry(), &auth)
            .await;
        for image in &self.images {
            let at = r.clone_with_digest(image.digest());
            for layer in &image.layers {
                client
                    .push_blob(&at, layer.gzip.clone(), &sha256(&layer.gzip))
                    .await
                    .with_context(|| {
                        format!("pushing a layer of the {} image", image.architecture)
                    })?;
            }
            client
                .push_blob(&at, image.config.clone(), &sha256(&image.config))
                .await
                .with_context(|| format!("pushing the {} image's config", image.architecture))?;
            client
                .push_manifest_raw(&at, image.manifest.clone(), MANIFEST_MEDIA_TYPE.parse()?)
                .await
                .with_context(|| format!("pushing the {} image's manifest", image.architecture))?;
        }
        client
            .push_manifest_raw(&r, self.index.clone(), INDEX_MEDIA_TYPE.parse()?)
            .await
            .with_context(|| format!("pushing the image index to {reference}"))?;
        oci::resolve(reference, options).await
    }
}

impl Image {
    /// `sha256:` of the manifest: the image's digest.
    pub fn digest(&self) -> String {
        sha256(&self.manifest)
    }

    /// Writes an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/…`) into `dir`,
    /// tagged `tag` (`org.opencontainers.image.ref.name`).
    pub fn write_layout(&self, dir: &Path, tag: &str) -> anyhow::Result<()> {
        self.write_blobs(dir)?;
        write_layout_index(dir, MANIFEST_MEDIA_TYPE, &self.manifest, tag)
    }

    /// Its layers, config and manifest into `dir/blobs/sha256/`.
    fn write_blobs(&self, dir: &Path) -> anyhow::Result<()> {
        let blobs = dir.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).with_context(|| format!("creating {}", blobs.display()))?;
        for bytes in self
            .layers
            .iter()
            .map(|l| &l.gzip[..])
            .chain([&self.config[..], &self.manifest[..]])
        {
            std::fs::write(
                blobs.join(sha256(bytes).trim_start_matches("sha256:")),
                bytes,
            )?;
        }
        Ok(())
    }

    /// Pushes the image to `reference`; returns the manifest digest the registry reports.
    pub async fn push(
        &self,
        reference: &str,
        options: &oci::RegistryOptions,
    ) -> anyhow::Result<String> {
        let r = oci::parse(reference)?;
        let (client, auth) = oci::client_for(&r, options);
        let layers: Vec<ImageLayer> = self
            .layers
            .iter()
            .map(|l| ImageLayer::new(l.gzip.clone(), LAYER_MEDIA_TYPE.to_string(), None))
            .collect();
        let config = Config::new(self.config.clone(), CONFIG_MEDIA_TYPE.to_string(), None);
        let manifest: OciImageManifest = serde_json::from_slice(&self.manifest)?;
        client
            .push(&r, &layers, config, &auth, Some(manifest))
            .await
            .with_context(|| format!("pushing {reference}"))?;
        oci::resolve(reference, options).await
    }
}

/// The image's config as JSON (for inspection and tests).
pub fn config_json(image: &Image) -> anyhow::Result<Value> {
    Ok(serde_json::from_slice(&image.config)?)
}

/// Annotations of a layer's files: path -> (mode, uid, size), for tests and `image inspect`.
pub fn layer_files(gzip: &[u8]) -> anyhow::Result<BTreeMap<String, (u32, u64, u64)>> {
    let mut out = BTreeMap::new();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(gzip));
    for entry in archive.entries()? {
        let entry = entry?;
        let h = entry.header();
        out.insert(
            entry.path()?.display().to_string(),
            (h.mode()?, h.uid()?, h.size()?),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(machine: u16, interp: bool) -> Vec<u8> {
        test_support::elf_header(machine, interp)
    }

    #[test]
    fn a_static_binary_has_no_interpreter() {
        assert_eq!(inspect_elf(&elf(0x3e, false)).unwrap(), ("amd64", false));
        assert_eq!(inspect_elf(&elf(0xb7, true)).unwrap(), ("arm64", true));
        assert!(inspect_elf(b"#!/bin/sh\n").is_err());
    }

    #[test]
    fn the_same_inputs_give_the_same_image_and_a_dynamic_binary_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("deployer-host");
        std::fs::write(&bin, elf(0x3e, false)).unwrap();
        let plugin = dir.path().join("mock.wasm");
        std::fs::write(&plugin, b"\0asm").unwrap();
        let spec = ImageSpec {
            binary: bin.clone(),
            plugins: vec![plugin],
            ca_bundle: None,
            version: "0.1.0".into(),
            created: "1970-01-01T00:00:00Z".into(),
            allow_dynamic: false,
        };
        let a = build(&spec).unwrap();
        let b = build(&spec).unwrap();
        assert_eq!(a.digest(), b.digest());
        let files = layer_files(&a.layers[1].gzip).unwrap();
        assert_eq!(files[BINARY_PATH].0, 0o755);
        assert!(
            layer_files(&a.layers[2].gzip)
                .unwrap()
                .contains_key("plugins/mock.wasm")
        );

        // The default configuration is where the image's environment says, and names the
        // shipped plugins and a cache on the cache volume.
        let config = config_json(&a).unwrap();
        let env = config["config"]["Env"].to_string();
        assert!(
            env.contains(&format!("DEPLOYER_CONFIG=/{DEFAULT_CONFIG_PATH}")),
            "{env}"
        );
        assert_eq!(
            layer_files(&a.layers[0].gzip).unwrap()[DEFAULT_CONFIG_PATH].0,
            0o644
        );
        let defaults: crate::config::HostConfig = serde_yaml::from_str(DEFAULT_CONFIG).unwrap();
        assert_eq!(defaults.plugins.dir.as_deref(), Some(Path::new("/plugins")));
        assert!(
            defaults
                .plugins
                .cache_dir
                .unwrap()
                .starts_with("/var/cache/wasm-deployer")
        );

        std::fs::write(&bin, elf(0x3e, true)).unwrap();
        let err = build(&spec).unwrap_err().to_string();
        assert!(err.contains("dynamically linked"), "{err}");
    }

    #[test]
    fn two_architectures_make_one_index_that_a_layout_tags() {
        let dir = tempfile::tempdir().unwrap();
        let (amd, arm) = (dir.path().join("amd64"), dir.path().join("arm64"));
        std::fs::write(&amd, elf(0x3e, false)).unwrap();
        std::fs::write(&arm, elf(0xb7, false)).unwrap();
        let spec = ImageSpec {
            binary: amd.clone(),
            plugins: vec![],
            ca_bundle: None,
            version: "0.1.0".into(),
            created: "1970-01-01T00:00:00Z".into(),
            allow_dynamic: false,
        };
        let index = build_index(&spec, &[arm.clone(), amd.clone()]).unwrap();
        let json: Value = serde_json::from_slice(&index.index).unwrap();
        assert_eq!(json["mediaType"], INDEX_MEDIA_TYPE);
        let platforms: Vec<_> = json["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["platform"]["architecture"].as_str().unwrap(),
                    m["digest"].clone(),
                )
            })
            .collect();
        assert_eq!(platforms.len(), 2);
        assert_eq!(platforms[0], ("amd64", json!(index.images[0].digest())));
        assert_eq!(platforms[1], ("arm64", json!(index.images[1].digest())));
        let config = config_json(&index.images[1]).unwrap();
        assert_eq!(config["architecture"], "arm64");
        // The plugins and base layers are the same bytes for both: shared blobs.
        assert_eq!(
            index.images[0].layers[2].gzip,
            index.images[1].layers[2].gzip
        );

        let out = dir.path().join("layout");
        index.write_layout(&out, "0.1.0").unwrap();
        let top: Value =
            serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
        assert_eq!(top["manifests"][0]["mediaType"], INDEX_MEDIA_TYPE);
        assert_eq!(top["manifests"][0]["digest"], json!(index.digest()));
        for image in &index.images {
            let blob = out
                .join("blobs/sha256")
                .join(image.digest().trim_start_matches("sha256:"));
            assert_eq!(std::fs::read(blob).unwrap(), image.manifest);
        }

        let err = build_index(&spec, &[amd.clone(), amd])
            .unwrap_err()
            .to_string();
        assert!(err.contains("two binaries for amd64"), "{err}");
    }
}
