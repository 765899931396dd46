//! `wit/deps/`: the WASI packages the plugin world's `wasi:http` import needs, which
//! `deployer-host plugin new` writes into a project (`include_str!`).
include!("../wit/build/wasi_deps.rs");

fn main() {
    glibc_malloc();
    let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    wasi_deps::ensure(&wit);
}

/// `cfg(glibc_malloc)`: the process allocates with glibc's malloc (Linux with glibc, and neither
/// allocator feature chosen), so `src/allocator.rs` may call glibc's trim and statistics. Said
/// once here rather than as the same `cfg(all(...))` at every such call.
fn glibc_malloc() {
    println!("cargo::rustc-check-cfg=cfg(glibc_malloc)");
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    let other_allocator = ["CARGO_FEATURE_MIMALLOC", "CARGO_FEATURE_JEMALLOC"]
        .iter()
        .any(|feature| std::env::var_os(feature).is_some());
    if target("CARGO_CFG_TARGET_OS") == "linux"
        && target("CARGO_CFG_TARGET_ENV") == "gnu"
        && !other_allocator
    {
        println!("cargo::rustc-cfg=glibc_malloc");
    }
}
