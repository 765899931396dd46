// The WASI packages the plugin world's `wasi:http` import refers to, written into `wit/deps/` at
// build time from the WIT that wasmtime's own `wasmtime-wasi-http` crate ships (the version the
// host links), so that no copy of a public repository's files lives in this one. Included by the
// build scripts of `plugin-runtime`, `sdk-guest` and `deployer-host` (`include!`), which parse
// `wit/` (bindgen) or embed it (`plugin new`); the first to run writes the files, the others find
// them. `wit/deps/` is ignored by git; `deployer-host plugin new` writes it into a project.
//
// Where the crate's sources are: `cargo metadata` (any registry, vendoring or `CARGO_HOME`), else
// `$CARGO_HOME/registry/src/*/`.

#[allow(dead_code)]
mod wasi_deps {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// The crate whose `wit/deps/` is copied, at the workspace's wasmtime version.
    const CRATE: &str = "wasmtime-wasi-http";
    const VERSION: &str = "48.0.8";
    /// The packages `wasi:http@0.2.12` needs (its `proxy` world names all of them).
    pub const FILES: [&str; 7] = [
        "cli.wit",
        "clocks.wit",
        "filesystem.wit",
        "http.wit",
        "io.wit",
        "random.wit",
        "sockets.wit",
    ];

    /// Makes sure `wit_dir/deps/` holds the WASI packages; returns the directory.
    pub fn ensure(wit_dir: &Path) -> PathBuf {
        let deps = wit_dir.join("deps");
        println!("cargo:rerun-if-changed={}", deps.display());
        if FILES.iter().all(|f| deps.join(f).is_file()) {
            return deps;
        }
        let source = locate().unwrap_or_else(|e| {
            panic!("the WASI WIT of {CRATE} {VERSION} is needed for wit/deps/ and was not found: {e}")
        });
        std::fs::create_dir_all(&deps).expect("creating wit/deps");
        for f in FILES {
            let text = std::fs::read_to_string(source.join(f))
                .unwrap_or_else(|e| panic!("reading {}: {e}", source.join(f).display()));
            // Several build scripts may run at once: write aside, then rename into place.
            let tmp = deps.join(format!(".{f}.{}", std::process::id()));
            std::fs::write(&tmp, text).expect("writing wit/deps");
            std::fs::rename(&tmp, deps.join(f)).expect("renaming into wit/deps");
        }
        deps
    }

    fn locate() -> Result<PathBuf, String> {
        if let Some(dir) = from_cargo_metadata() {
            return Ok(dir);
        }
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
            .ok_or("no CARGO_HOME or HOME")?;
        let src = home.join("registry").join("src");
        let registries = std::fs::read_dir(&src).map_err(|e| format!("{}: {e}", src.display()))?;
        for r in registries.flatten() {
            let dir = r.path().join(format!("{CRATE}-{VERSION}")).join("wit").join("deps");
            if dir.join("http.wit").is_file() {
                return Ok(dir);
            }
        }
        Err(format!("neither cargo metadata nor {} has {CRATE}-{VERSION}", src.display()))
    }

    /// The crate's directory as `cargo metadata` knows it (offline: the build has its sources).
    fn from_cargo_metadata() -> Option<PathBuf> {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?).join("Cargo.toml");
        let out = Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--offline", "--manifest-path"])
            .arg(&manifest)
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8(out.stdout).ok()?;
        let needle = format!("{CRATE}-{VERSION}");
        // `"manifest_path":"…/wasmtime-wasi-http-48.0.8/Cargo.toml"`: no JSON parser needed.
        text.split("\"manifest_path\":\"").skip(1).find_map(|rest| {
            let path = &rest[..rest.find('"')?];
            let path = Path::new(path);
            let dir = path.parent()?;
            (dir.file_name()?.to_str()? == needle)
                .then(|| dir.join("wit").join("deps"))
                .filter(|d| d.join("http.wit").is_file())
        })
    }
}
