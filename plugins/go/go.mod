module wasm-deployer.dev/examples

go 1.24

require wasm-deployer.dev/plugin v0.0.0

// The Go guest helper of this checkout (no module proxy is needed or reachable).
replace wasm-deployer.dev/plugin => ../../sdk-guest/go
