//! The wasmtime bindings of the `deployer-hook-plugin` world (`wit/`): a component may export
//! `deployer`, `hooks` or both. Generated at build time from `wit/`; nothing here is written
//! by hand.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "deployer-hook-plugin",
    imports: {
        "wasm-deployer:plugin/kubernetes": async,
        "wasm-deployer:plugin/cluster": async,
        "wasm-deployer:plugin/secondary-targets": async,
        "wasm-deployer:plugin/fetch": async,
        "wasm-deployer:plugin/ocm": async,
        "wasm-deployer:plugin/cluster-info": async,
    },
    exports: { default: async },
    // `wasi:http` (1.5) and what it uses are linked from wasmtime's own crates.
    with: {
        "wasi:http": wasmtime_wasi_http::p2::bindings::http,
        "wasi:io": wasmtime_wasi::p2::bindings::io,
        "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
    },
});
