// Package deployer exports a plugin.Deployer as the WIT interface
// `wasm-deployer:plugin/deployer` (worlds deployer-plugin and deployer-hook-plugin).
// Importing this package adds the exports to the module; a hook-only plugin does not import it.
package deployer

import (
	"wasm-deployer.dev/plugin"
	"wasm-deployer.dev/plugin/internal/wit/exportdeployer"
)

// Export makes d the plugin's deployer. Call it once, from an init function (the host calls
// describe right after the module has started).
func Export(d plugin.Deployer) {
	exportdeployer.Impl = plugin.WitDeployer{D: d}
}
