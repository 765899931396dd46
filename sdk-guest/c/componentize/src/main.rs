//! # c-componentize — the build tool for wasm-deployer plugins written in C
//!
//! Owns the two non-compiler steps of a C plugin build (`plugins/c/build.sh`), so that CI
//! needs neither `wit-bindgen-cli` nor `wasm-tools` from `cargo install`:
//!
//! - `c-componentize bindgen --wit DIR --world WORLD --out DIR` runs `wit-bindgen-c` (the
//!   same 0.63 release as the workspace's `wit-bindgen`) and writes `<world>.h`, `<world>.c`
//!   and `<world>_component_type.o` (the component-type custom section to link into the
//!   core module).
//! - `c-componentize new CORE.wasm -o OUT.wasm` wraps a `wasm32-wasi` reactor core module
//!   into a component with `wit-component`'s `ComponentEncoder` and the WASI preview1
//!   *reactor* adapter of wasmtime 48.0.8 (it imports `wasi:*@0.2.12`, which the host links).
//!
//! Must not: compile C (clang does that) or know anything about the plugin contract beyond
//! the WIT directory it is given.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
use wit_bindgen_core::Files;
use wit_component::ComponentEncoder;
use wit_parser::Resolve;

/// Command line of `c-componentize`.
#[derive(Parser)]
#[command(version, about = "WIT bindings and component wrapping for C plugins")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate the C bindings (`<world>.h`, `<world>.c`, `<world>_component_type.o`).
    Bindgen {
        /// The WIT directory (one package, e.g. `wit/`).
        #[arg(long)]
        wit: PathBuf,
        /// The world to generate, e.g. `deployer-plugin` or `hook-plugin`.
        #[arg(long)]
        world: String,
        /// Output directory (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// C name of the world (file names and the `<name>_string_t` prefix) instead of the
        /// world's own; `plugins/c/build.sh` passes `wd_wit` so that one helper fits every world.
        #[arg(long, value_name = "NAME")]
        rename_world: Option<String>,
    },
    /// Turn a core module (clang `-mexec-model=reactor`) into a component.
    New {
        /// The core wasm module with the component-type section linked in.
        core: PathBuf,
        /// Where to write the component.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
    },
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Bindgen {
            wit,
            world,
            out,
            rename_world,
        } => bindgen(&wit, &world, &out, rename_world),
        Cmd::New { core, output } => new_component(&core, &output),
    }
}

/// `bindgen`: parse the WIT package and run the C generator for `world`.
/// Files whose content is unchanged are not rewritten (stable mtimes for incremental builds).
fn bindgen(wit: &Path, world: &str, out: &Path, rename_world: Option<String>) -> Result<()> {
    let mut resolve = Resolve::default();
    let (pkg, _sources) = resolve
        .push_path(wit)
        .with_context(|| format!("parsing WIT in {}", wit.display()))?;
    let world_id = resolve.select_world(&[pkg], Some(world))?;
    let mut files = Files::default();
    let opts = wit_bindgen_c::Opts {
        rename_world,
        ..Default::default()
    };
    opts.build().generate(&mut resolve, world_id, &mut files)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for (name, bytes) in files.iter() {
        let path = out.join(name);
        if std::fs::read(&path).ok().as_deref() == Some(bytes) {
            continue;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    if files.iter().next().is_none() {
        bail!("wit-bindgen-c produced no files for world {world}");
    }
    Ok(())
}

/// `new`: encode the core module plus the preview1 reactor adapter as a component.
fn new_component(core: &Path, output: &Path) -> Result<()> {
    let module = std::fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    let component = ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .context("reading the component-type section (was <world>_component_type.o linked in?)")?
        .adapter(
            "wasi_snapshot_preview1",
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .context("adding the wasi_snapshot_preview1 reactor adapter")?
        .encode()
        .context("encoding the component")?;
    std::fs::write(output, component).with_context(|| format!("writing {}", output.display()))?;
    Ok(())
}
