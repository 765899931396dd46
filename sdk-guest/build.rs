//! `wit/deps/`: the WASI packages the `deployer-plugin` world's `wasi:http` import needs
//! (WIT 1.5), which `wit_bindgen::generate!` reads from `../wit`. Written from wasmtime's own
//! `wasmtime-wasi-http` crate if missing (`wit/build/wasi_deps.rs`, shared with the host's
//! build scripts).

include!("../wit/build/wasi_deps.rs");

fn main() {
    let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    wasi_deps::ensure(&wit);
    println!("cargo:rerun-if-changed=build.rs");
}
