//! `deployer-host image build`: the host's container image, without a container engine.
//!
//! Owns: the flags, the reproducible creation time and what the command prints. Must not
//! touch: the image's layout (`crate::image`).

use std::path::PathBuf;

use anyhow::Context as _;

use super::registry::registry_options;
use crate::image;

#[derive(clap::Subcommand)]
pub enum ImageCommand {
    /// Build the image from a static `deployer-host` binary and plugins; write it as an OCI
    /// image layout and/or push it. Prints the image's digest. With a binary per architecture
    /// (`--binary` repeated), one image each and an OCI image index over them under the tag.
    Build {
        /// The `deployer-host` executable to ship (statically linked); repeat it for each
        /// architecture (read from the ELF header: x86_64 is `amd64`, aarch64 `arm64`).
        #[arg(long, required = true)]
        binary: Vec<PathBuf>,
        /// A directory of `.wasm` components to ship in `/plugins`.
        #[arg(long)]
        plugins: Option<PathBuf>,
        /// PEM CA bundle to ship (default: /etc/ssl/certs/ca-certificates.crt if present).
        #[arg(long)]
        ca_bundle: Option<PathBuf>,
        /// Write an OCI image layout into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Push to this reference (`registry/repository:tag`).
        #[arg(long)]
        push: Option<String>,
        /// Speak plain HTTP to the registry (only for registries you trust, e.g. on loopback).
        #[arg(long)]
        plain_http: bool,
        /// Version label (default: this host's version).
        #[arg(long)]
        version: Option<String>,
        /// Accept a dynamically linked binary (the image cannot run it: layout tests only).
        #[arg(long)]
        allow_dynamic: bool,
    },
}

impl ImageCommand {
    pub async fn run(self) -> anyhow::Result<()> {
        let ImageCommand::Build {
            binary,
            plugins,
            ca_bundle,
            out,
            push,
            plain_http,
            version,
            allow_dynamic,
        } = self;
        let plugins = match plugins {
            Some(dir) => wasm_files(&dir)?,
            None => Vec::new(),
        };
        let default_ca = PathBuf::from("/etc/ssl/certs/ca-certificates.crt");
        let ca_bundle = ca_bundle.or_else(|| default_ca.exists().then_some(default_ca));
        // Reproducible: the creation time comes from SOURCE_DATE_EPOCH (default: 0).
        let epoch = std::env::var("SOURCE_DATE_EPOCH")
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(0);
        let created = jiff::Timestamp::from_second(epoch)?.to_string();
        let version = version.unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
        let spec = image::ImageSpec {
            binary: binary[0].clone(),
            plugins,
            ca_bundle,
            version: version.clone(),
            created,
            allow_dynamic,
        };
        if out.is_none() && push.is_none() {
            anyhow::bail!("nothing to do: give --out DIR and/or --push REFERENCE");
        }
        let options = push
            .as_deref()
            .map(|r| registry_options(r, plain_http, None))
            .transpose()?;
        let digest = if binary.len() == 1 {
            let built = image::build(&spec)?;
            if let Some(dir) = &out {
                built.write_layout(dir, &version)?;
                eprintln!(
                    "wrote OCI image layout {} ({})",
                    dir.display(),
                    built.architecture
                );
            }
            if let (Some(reference), Some(options)) = (&push, &options) {
                built.push(reference, options).await?;
                eprintln!("pushed {reference}");
            }
            built.digest()
        } else {
            let built = image::build_index(&spec, &binary)?;
            let platforms: Vec<_> = built.images.iter().map(|i| i.architecture).collect();
            if let Some(dir) = &out {
                built.write_layout(dir, &version)?;
                eprintln!(
                    "wrote OCI image layout {} (an index: {})",
                    dir.display(),
                    platforms.join(", ")
                );
            }
            if let (Some(reference), Some(options)) = (&push, &options) {
                built.push(reference, options).await?;
                eprintln!("pushed {reference} (an index: {})", platforms.join(", "));
            }
            built.digest()
        };
        println!("{digest}");
        Ok(())
    }
}

/// The `.wasm` files of `dir`, sorted.
fn wasm_files(dir: &std::path::Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    files.sort();
    Ok(files)
}
