// Package hooks exports a plugin.Hook as the WIT interface `wasm-deployer:plugin/hooks`
// (worlds hook-plugin and deployer-hook-plugin). Importing this package adds the exports.
package hooks

import (
	"wasm-deployer.dev/plugin"
	"wasm-deployer.dev/plugin/internal/wit/exporthooks"
)

// Export makes h the plugin's hook. Call it once, from an init function.
func Export(h plugin.Hook) {
	exporthooks.Impl = plugin.WitHook{H: h}
}
