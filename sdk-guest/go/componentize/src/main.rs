//! # go-componentize — the build tool for wasm-deployer plugins written in Go
//!
//! Owns the two non-compiler steps of a Go plugin build (`plugins/go/build.sh`,
//! `deployer-host plugin build` for `--lang go`), so that neither `wit-bindgen go` (whose output
//! needs a Go module no reachable registry serves) nor `wasm-tools` is needed:
//!
//! - `go-componentize bindgen --wit DIR --out DIR [--check]` generates the Go canonical-ABI glue
//!   of the SDK (`sdk-guest/go/internal/wit/...`) from the WIT package (see `gen.rs`). `--check`
//!   writes nothing and fails if the files differ (whitespace aside): `cargo xtask go-bindgen`.
//! - `go-componentize new --wit DIR --world WORLD CORE.wasm -o OUT.wasm` embeds the world's
//!   component type into a `GOOS=wasip1 -buildmode=c-shared` core module and wraps it into a
//!   component with `wit-component` and the WASI preview1 *reactor* adapter of wasmtime 48.0.8
//!   (it imports `wasi:*@0.2.12`, which the host links) — what `c-componentize new` does for C.
//!
//! Must not: compile Go (the `go` command does that) or know anything about the plugin contract
//! beyond the WIT directory it is given.

mod glue;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};
use wit_parser::Resolve;

#[derive(Parser)]
#[command(version, about = "WIT glue and component wrapping for Go plugins")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate the Go glue (internal/wit/...) of the Go SDK from the WIT package.
    Bindgen {
        /// The WIT directory (one package, e.g. `wit/`).
        #[arg(long)]
        wit: PathBuf,
        /// The Go SDK module directory (`sdk-guest/go`).
        #[arg(long)]
        out: PathBuf,
        /// Write nothing; fail if the checked-in files are not what the WIT gives.
        #[arg(long)]
        check: bool,
        /// gofmt to format the output with (default: `gofmt` on PATH, else unformatted).
        #[arg(long, env = "GOFMT")]
        gofmt: Option<PathBuf>,
    },
    /// Turn a wasip1 core module (`go build -buildmode=c-shared`) into a component of WORLD.
    New {
        /// The WIT directory.
        #[arg(long)]
        wit: PathBuf,
        /// The world, e.g. `deployer-plugin` or `hook-plugin`.
        #[arg(long)]
        world: String,
        /// The core wasm module.
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
            out,
            check,
            gofmt,
        } => bindgen(&wit, &out, check, gofmt),
        Cmd::New {
            wit,
            world,
            core,
            output,
        } => new_component(&wit, &world, &core, &output),
    }
}

fn find_gofmt(explicit: Option<PathBuf>) -> Option<PathBuf> {
    explicit.or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("gofmt"))
                .find(|p| p.is_file())
        })
    })
}

/// Go source compared token-wise: gofmt only changes whitespace, and in doc comments it may
/// add empty `//` lines (before a URL or list of the WASI docs), which are ignored too.
pub fn normalized(text: &str) -> String {
    text.lines()
        .map(|l| l.split_whitespace().collect::<String>())
        .filter(|l| !l.is_empty() && l != "//")
        .collect::<Vec<_>>()
        .join("\n")
}

fn bindgen(wit: &Path, out: &Path, check: bool, gofmt: Option<PathBuf>) -> Result<()> {
    let mut files = glue::generate(wit)?;
    if let Some(gofmt) = find_gofmt(gofmt) {
        glue::gofmt(&mut files, &gofmt)?;
    }
    let mut stale = Vec::new();
    for (name, text) in &files {
        let path = out.join(name);
        let old = std::fs::read_to_string(&path).ok();
        if check {
            if old.as_deref().map(normalized) != Some(normalized(text)) {
                stale.push(path.display().to_string());
            }
            continue;
        }
        if old.as_deref() == Some(text) {
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if !stale.is_empty() {
        bail!(
            "the Go glue is out of date with the WIT: {} (run `cargo xtask go-bindgen`)",
            stale.join(", ")
        );
    }
    Ok(())
}

fn new_component(wit: &Path, world: &str, core: &Path, output: &Path) -> Result<()> {
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve
        .push_path(wit)
        .with_context(|| format!("parsing WIT in {}", wit.display()))?;
    let world_id = resolve.select_world(&[pkg], Some(world))?;
    let mut module = std::fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    embed_component_metadata(&mut module, &resolve, world_id, StringEncoding::UTF8, false)
        .context("embedding the component type")?;
    let component = ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .context("reading the core module")?
        .adapter(
            "wasi_snapshot_preview1",
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .context("adding the wasi_snapshot_preview1 reactor adapter")?
        .encode()
        .context("encoding the component (does the module export what the world needs?)")?;
    std::fs::write(output, component).with_context(|| format!("writing {}", output.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
    }

    /// A WIT change regenerates the glue: the checked-in files are what `wit/` gives.
    #[test]
    fn the_checked_in_go_glue_is_what_the_wit_gives() {
        let files = glue::generate(&repo().join("wit")).unwrap();
        assert_eq!(files.len(), 3, "{:?}", files.keys());
        for (name, text) in &files {
            let path = repo().join("sdk-guest/go").join(name);
            let old = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                normalized(&old) == normalized(text),
                "{} is out of date with wit/: run `cargo xtask go-bindgen`",
                path.display()
            );
        }
    }

    /// The generator follows the WIT: a new field in a record shows up in the Go type, its
    /// loader and storer, at the canonical ABI offset.
    #[test]
    fn a_wit_change_changes_the_glue() {
        let dir = tempfile_dir();
        for f in [
            "deployer.wit",
            "fetch.wit",
            "hooks.wit",
            "kubernetes.wit",
            "ocm.wit",
        ] {
            let text = std::fs::read_to_string(repo().join("wit").join(f)).unwrap();
            let text = if f == "hooks.wit" {
                text.replace(
                    "        requeue-after-ms: option<u64>,\n    }",
                    "        requeue-after-ms: option<u64>,\n        note: string,\n    }",
                )
            } else {
                text
            };
            std::fs::write(dir.join(f), text).unwrap();
        }
        // The WASI packages `deployer.wit` imports (wasi:http and what it uses).
        let deps = dir.join("deps");
        std::fs::create_dir_all(&deps).unwrap();
        for entry in std::fs::read_dir(repo().join("wit/deps")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), deps.join(entry.file_name())).unwrap();
        }
        let files = glue::generate(&dir).unwrap();
        let text = normalized(&files["internal/wit/bindings.go"]);
        // abort(1) requeue(1) pad option<u64>(16 at 8) -> note at 24, size 32.
        assert!(text.contains("Notestring"), "{text}");
        assert!(text.contains("Note:LiftString(Ld32(p+24),Ld32((p+24)+4)),"));
        assert!(text.contains("SizeHookResult=32"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The WASI interfaces the world imports (wasi:http and what it uses): resources become
    /// handle types with methods, statics, constructors and `Drop`; variants structs with a
    /// tag; tuples `Tuple2`; all at the canonical ABI's layout.
    #[test]
    fn wasi_resources_variants_and_tuples_get_glue() {
        let files = glue::generate(&repo().join("wit")).unwrap();
        let text = normalized(&files["internal/wit/bindings.go"]);
        for want in [
            "typeHttpFieldsuint32",
            "//go:wasmimportwasi:http/types@0.2.12[resource-drop]fields",
            "func(hHttpFields)Drop(){",
            "func(selfHttpFields)Append(namestring,value[]byte)Result[struct{},HttpHeaderError]{",
            "funcHttpFieldsFromList(entries[]Tuple2[string,[]byte])Result[HttpFields,HttpHeaderError]{",
            "funcNewHttpOutgoingRequest(headersHttpFields)HttpOutgoingRequest{",
            "//go:wasmimportwasi:http/types@0.2.12[static]outgoing-body.finish",
            "funcHttpOutgoingHandlerHandle(requestHttpOutgoingRequest,options*HttpRequestOptions)Result[HttpFutureIncomingResponse,HttpErrorCode]{",
            "func(selfIoInputStream)BlockingRead(len_uint64)Result[[]byte,IoStreamError]{",
            "HttpErrorCodeHTTPRequestDenied",
            // tag, payload at 8 (option<u64>), largest payload option<field-size-payload> (24).
            "SizeHttpErrorCode=32",
            "case15:\nreturn\"HTTP-request-denied\"",
        ] {
            assert!(text.contains(want), "missing {want}");
        }
        // Only the package's own worlds: nothing of wasi:sockets or wasi:filesystem.
        assert!(!text.contains("Sockets") && !text.contains("Filesystem"));
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("go-componentize-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
