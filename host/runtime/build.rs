//! `wit/deps/`: the WASI packages the plugin world's `wasi:http` import needs, for `bindgen!`.
include!("../../wit/build/wasi_deps.rs");

fn main() {
    let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
    wasi_deps::ensure(&wit);
}
