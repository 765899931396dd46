module wasm-deployer.dev/plugin

go 1.24
