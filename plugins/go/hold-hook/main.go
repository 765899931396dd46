// go-hold-hook: the example hook plugin in Go (world `hook-plugin`).
//
// Holds DeployItems annotated `examples.wasm-deployer.dev/hold: "true"` before their reconcile
// and asks the host to look again after a second. Build: `plugins/go/build.sh OUT_DIR`.
package main

import (
	"time"

	"wasm-deployer.dev/plugin"
	"wasm-deployer.dev/plugin/hooks"
)

const holdAnnotation = "examples.wasm-deployer.dev/hold"

type hold struct{}

func (hold) Setup() plugin.HookSetup {
	return plugin.HookSetup{Name: "go-hold-hook", Version: "0.1.0", HookTypes: []plugin.HookType{plugin.HookBeforeReconcile}}
}

func (hold) Run(env plugin.Env, in *plugin.HookInput) (*plugin.HookResult, error) {
	if in.Annotations[holdAnnotation] != "true" {
		return nil, nil // no opinion
	}
	env.Infof("holding %s", in.Name)
	// Requeue false + RequeueAfter: look again in a second (Requeue true means "now").
	return &plugin.HookResult{AbortReconcile: true, RequeueAfter: time.Second}, nil
}

func init() { hooks.Export(hold{}) }

func main() {}
