package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"wasm-deployer.dev/plugin/internal/wit"
)

// Invocation is one reconcile/delete step with every JSON string parsed.
type Invocation struct {
	// "reconcile" or "delete".
	Operation string
	// The DeployItem (metadata, spec, status) and its JSON text.
	Item     Object
	ItemJSON string
	// metadata.name, metadata.namespace, spec.type and status.phase ("" if absent).
	Name, Namespace, Type, Phase string
	// metadata.annotations (never nil).
	Annotations map[string]string
	// The resolved Target object (nil if the item has none) and its resolved content (the raw
	// JSON of spec.config, or the referenced Secret data).
	Target        Object
	TargetContent json.RawMessage
	// The Landscaper Context object named by spec.context (nil if none).
	Context Object
	// status.providerStatus as JSON (nil if none).
	PreviousProviderStatus json.RawMessage
}

// Lookup walks v (decoded JSON) by object keys; nil if a key is missing.
func Lookup(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// LookupString is Lookup for strings ("" if missing or not a string).
func LookupString(v any, keys ...string) string {
	s, _ := Lookup(v, keys...).(string)
	return s
}

func invocationFromWit(operation string, w wit.Invocation) (*Invocation, error) {
	inv := &Invocation{Operation: operation, ItemJSON: w.DeployItem, Annotations: map[string]string{}}
	if err := json.Unmarshal([]byte(w.DeployItem), &inv.Item); err != nil {
		return nil, InternalError("InvalidInvocation", "deploy-item: %v", err)
	}
	inv.Name = LookupString(inv.Item, "metadata", "name")
	inv.Namespace = LookupString(inv.Item, "metadata", "namespace")
	inv.Type = LookupString(inv.Item, "spec", "type")
	inv.Phase = LookupString(inv.Item, "status", "phase")
	if a, ok := Lookup(inv.Item, "metadata", "annotations").(map[string]any); ok {
		for k, v := range a {
			if s, ok := v.(string); ok {
				inv.Annotations[k] = s
			}
		}
	}
	if w.Target != nil {
		if err := json.Unmarshal([]byte(w.Target.Target), &inv.Target); err != nil {
			return nil, InternalError("InvalidInvocation", "target: %v", err)
		}
		inv.TargetContent = json.RawMessage(w.Target.Content)
	}
	if w.Context != nil {
		if err := json.Unmarshal([]byte(*w.Context), &inv.Context); err != nil {
			return nil, InternalError("InvalidInvocation", "context: %v", err)
		}
	}
	if w.PreviousProviderStatus != nil {
		inv.PreviousProviderStatus = json.RawMessage(*w.PreviousProviderStatus)
	}
	return inv, nil
}

// ConfigRaw is spec.config (the ProviderConfiguration), or nil if absent, null or {}.
func (inv *Invocation) ConfigRaw() any {
	c := Lookup(inv.Item, "spec", "config")
	if m, ok := c.(map[string]any); ok && len(m) == 0 {
		return nil
	}
	return c
}

// Config is spec.config as an object; ERR_CONFIGURATION_PROBLEM (reason
// ProviderConfigurationMissing) when it is absent, null or {}.
func (inv *Invocation) Config() (map[string]any, error) {
	c := inv.ConfigRaw()
	if c == nil {
		return nil, ConfigurationError("ProviderConfigurationMissing", "provider configuration missing")
	}
	m, ok := c.(map[string]any)
	if !ok {
		return nil, ConfigurationError("", "spec.config: expected an object, got %s", jsonKind(c))
	}
	return m, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// ConfigValue is spec.config.<field> (dots walk into nested objects); false if missing or null.
func (inv *Invocation) ConfigValue(field string) (any, bool, error) {
	c, err := inv.Config()
	if err != nil {
		return nil, false, err
	}
	v := Lookup(c, strings.Split(field, ".")...)
	return v, v != nil, nil
}

// ConfigString is the required string spec.config.<field>; ERR_CONFIGURATION_PROBLEM naming the
// field if it is missing or not a string.
func (inv *Invocation) ConfigString(field string) (string, error) {
	v, ok, err := inv.ConfigValue(field)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", ConfigurationError("", "spec.config.%s: required string is missing", field)
	}
	s, isString := v.(string)
	if !isString {
		return "", ConfigurationError("", "spec.config.%s: expected a string, got %s", field, jsonKind(v))
	}
	return s, nil
}

// ConfigBool is the optional boolean spec.config.<field> (dflt if missing or null).
func (inv *Invocation) ConfigBool(field string, dflt bool) (bool, error) {
	v, ok, err := inv.ConfigValue(field)
	if err != nil || !ok {
		return dflt, err
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, ConfigurationError("", "spec.config.%s: expected a boolean, got %s", field, jsonKind(v))
	}
	return b, nil
}

// DecodeConfig decodes spec.config into out (a pointer to a struct with json tags), as a Go
// deployer decodes its ProviderConfiguration. A missing configuration is
// ProviderConfigurationMissing; a value of the wrong type is ERR_CONFIGURATION_PROBLEM naming
// the field ("spec.config.phase: expected string, got array").
func (inv *Invocation) DecodeConfig(out any) error {
	c, err := inv.Config()
	if err != nil {
		return err
	}
	return DecodeAt(c, "spec.config", out)
}

// DecodeAt decodes the JSON value v into out; errors name the field below prefix.
func DecodeAt(v any, prefix string, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return ConfigurationError("", "%s: %v", prefix, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := prefix
			if te.Field != "" {
				field += "." + te.Field
			}
			return ConfigurationError("", "%s: expected %s, got %s", field, te.Type, te.Value)
		}
		return ConfigurationError("", "%s: %v", prefix, err)
	}
	return nil
}
