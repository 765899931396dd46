//! Where things are: the repository, the built plugins, the test-only plugins.
//!
//! Owns: these paths. Must not touch: anything in them.

use std::path::PathBuf;

/// The repository's root (where `target/`, `docs/`, `examples/` and `tests/` are; `../shared`
/// is beside it).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the built plugins are: `$DEPLOYER_TEST_PLUGINS`, else `<workspace>/target/plugins`.
pub fn plugins_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("DEPLOYER_TEST_PLUGINS") {
        return PathBuf::from(dir);
    }
    let dir = workspace().join("target/plugins");
    assert!(
        dir.join("mock.wasm").exists(),
        "no plugins in {}: run `cargo xtask build-plugins` first (or `cargo xtask test`)",
        dir.display()
    );
    dir
}

/// Where the test-only plugins are (`faulty`): next to `plugins_dir()`, in `test-plugins/`.
pub fn test_plugins_dir() -> PathBuf {
    let dir = plugins_dir().join("../test-plugins");
    assert!(
        dir.join("faulty.wasm").exists(),
        "no test plugins in {}: run `cargo xtask build-plugins`",
        dir.display()
    );
    dir
}
