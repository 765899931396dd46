// go-echo: the example deployer plugin in Go (world `deployer-plugin`).
//
// Writes the provider configuration's `message` into a ConfigMap `<item>-echo` next to the
// DeployItem and exports it. `crash: true` panics (the helper turns the panic into
// ERR_INTERNAL_PROBLEM with its text). Build: `plugins/go/build.sh OUT_DIR`.
package main

import (
	"fmt"

	"wasm-deployer.dev/plugin"
	"wasm-deployer.dev/plugin/deployer"
)

const apiVersion = "examples.wasm-deployer.dev/v1"

type echo struct{}

func (echo) Describe() plugin.Description {
	return plugin.Description{
		Name:            "go-echo",
		Version:         "0.1.0",
		DeployItemTypes: []string{"examples.wasm-deployer.dev/echo-go"},
	}
}

func configMapName(inv *plugin.Invocation) string { return inv.Name + "-echo" }

func (echo) Reconcile(ctx *plugin.Ctx, inv *plugin.Invocation) (*plugin.Response, error) {
	// ERR_CONFIGURATION_PROBLEM naming the field if missing or not a string.
	message, err := inv.ConfigString("message")
	if err != nil {
		return nil, err
	}
	crash, err := inv.ConfigBool("crash", false)
	if err != nil {
		return nil, err
	}
	if crash {
		// Not recovered here on purpose: the helper turns it into ERR_INTERNAL_PROBLEM.
		panic("crash requested")
	}

	name := configMapName(inv)
	data := map[string]any{"message": message}
	ctx.Infof("echo: writing %q into ConfigMap %s/%s", message, inv.Namespace, name)
	ref := plugin.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: inv.Namespace, Name: name}
	existing, err := ctx.Kube.Get(ref)
	if err != nil {
		return nil, err
	}
	if existing == nil {
		_, err = ctx.Kube.Create(plugin.Object{
			"apiVersion": "v1",
			"kind":       "ConfigMap",
			"metadata":   map[string]any{"name": name, "namespace": inv.Namespace},
			"data":       data,
		})
	} else {
		existing["data"] = data
		_, err = ctx.Kube.Update(existing)
	}
	if err != nil {
		return nil, fmt.Errorf("applying ConfigMap %s: %w", name, err)
	}
	return &plugin.Response{
		Phase:          plugin.PhaseSucceeded,
		ProviderStatus: map[string]any{"apiVersion": apiVersion, "kind": "ProviderStatus", "configMap": name},
		Exports:        data,
	}, nil
}

func (echo) Delete(ctx *plugin.Ctx, inv *plugin.Invocation) (*plugin.Response, error) {
	name := configMapName(inv)
	existed, err := ctx.Kube.Delete(plugin.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: inv.Namespace, Name: name})
	if err != nil {
		return nil, err
	}
	state := "was already gone"
	if existed {
		state = "deleted"
	}
	ctx.Infof("echo: ConfigMap %s/%s %s", inv.Namespace, name, state)
	return &plugin.Response{Phase: plugin.PhaseSucceeded}, nil
}

func init() { deployer.Export(echo{}) }

// main is not run: the module is a reactor (-buildmode=c-shared); init does the work.
func main() {}
