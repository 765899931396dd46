// go-mock: Landscaper's mock deployer (contract section 8) in Go, a port of plugins/mock (Rust)
// with the same behaviour, so the mock stories (tests/mock_deployer.rs) run against both.
//
// Validates the ProviderConfiguration, computes the next phase from `phase` / `initialPhase`,
// returns `providerStatus` and `export` verbatim and the `DeployItemValidation` condition. The
// host writes the status and the export Secret and deletes it on delete.
//
// As in the Rust mock (and deliberately unlike Landscaper's), an undecodable configuration is
// ERR_CONFIGURATION_PROBLEM (reason FailedUnmarshal) naming the problem, so the item ends in
// Failed instead of being retried forever. Build: `plugins/go/build.sh OUT_DIR`.
package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"wasm-deployer.dev/plugin"
	"wasm-deployer.dev/plugin/deployer"
)

const (
	deployItemType      = "landscaper.gardener.cloud/mock"
	apiVersion          = "mock.deployer.landscaper.gardener.cloud/v1alpha1"
	conditionValidation = "DeployItemValidation"
)

// providerConfiguration is `mock.deployer.landscaper.gardener.cloud/v1alpha1`
// `ProviderConfiguration`, as in Landscaper's mock deployer.
type providerConfiguration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Phase written after every step (overrides everything).
	Phase *string `json:"phase"`
	// Phase written while the current phase is empty or Init; suppresses Succeeded.
	InitialPhase *string `json:"initialPhase"`
	// Copied into status.providerStatus.
	ProviderStatus json.RawMessage `json:"providerStatus"`
	// Written as the export (Secret data key `config`).
	Export json.RawMessage `json:"export"`
	// Parsed, no effect (as in Landscaper).
	ContinuousReconcile json.RawMessage `json:"continuousReconcile"`
}

func validationFailed(format string, args ...any) error {
	message := fmt.Sprintf(format, args...)
	return plugin.ConfigurationError("FailedUnmarshal", "%s", message).WithCondition(plugin.Condition{
		Type: conditionValidation, Status: plugin.ConditionFalse, Reason: "FailedUnmarshal", Message: message,
	})
}

func parseConfig(inv *plugin.Invocation) (*providerConfiguration, error) {
	raw, err := inv.Config() // ProviderConfigurationMissing
	if err != nil {
		return nil, err
	}
	var c providerConfiguration
	if err := plugin.DecodeAt(raw, "spec.config", &c); err != nil {
		msg := err.Error()
		var pe *plugin.Error
		if errors.As(err, &pe) {
			msg = pe.Message
		}
		return nil, validationFailed("unable to decode mock provider configuration: %s", msg)
	}
	if c.APIVersion != apiVersion || c.Kind != "ProviderConfiguration" {
		return nil, validationFailed("unable to decode mock provider configuration (spec.config): expected apiVersion %q and kind \"ProviderConfiguration\", got apiVersion %q and kind %q",
			apiVersion, c.APIVersion, c.Kind)
	}
	return &c, nil
}

type mock struct{}

func (mock) Describe() plugin.Description {
	return plugin.Description{Name: "mock", Version: "0.1.0", DeployItemTypes: []string{deployItemType}}
}

func (mock) Reconcile(ctx *plugin.Ctx, inv *plugin.Invocation) (*plugin.Response, error) {
	c, err := parseConfig(inv)
	if err != nil {
		return nil, err
	}
	current := inv.Phase
	next := plugin.PhaseSucceeded
	if c.InitialPhase != nil {
		// Landscaper's mock: the initial phase while the item is empty or Init, and no
		// automatic Succeeded after that — it stays where it is until told otherwise.
		if current == "" || current == plugin.PhaseInit {
			next = *c.InitialPhase
		} else {
			next = current
		}
	}
	if c.Phase != nil {
		next = *c.Phase
	}
	ctx.Debugf("mock: phase %q -> %q", current, next)
	r := &plugin.Response{
		Phase: next,
		Conditions: []plugin.Condition{{
			Type: conditionValidation, Status: plugin.ConditionTrue,
			Reason: "SuccessfullValidation", Message: "Successfully validated configuration",
		}},
	}
	// Verbatim (nil/null keeps the current value, as the Rust mock's None).
	if len(c.ProviderStatus) > 0 {
		r.ProviderStatus = c.ProviderStatus
	}
	if len(c.Export) > 0 {
		r.Exports = c.Export
	}
	return r, nil
}

func (mock) Delete(ctx *plugin.Ctx, _ *plugin.Invocation) (*plugin.Response, error) {
	// The host deletes the export Secret referenced by status.exportRef.
	ctx.Debugf("mock: delete")
	return &plugin.Response{}, nil
}

func init() { deployer.Export(mock{}) }

func main() {}
