package plugin

import (
	"encoding/json"
	"time"

	"wasm-deployer.dev/plugin/internal/wit"
)

// HookType is a point of the host's reconcile flow (Landscaper's names).
type HookType = wit.HookType

// Hook types, in flow order (docs/hooks.md).
const (
	HookStart                     = wit.HookTypeStart
	HookDuringResponsibilityCheck = wit.HookTypeDuringResponsibilityCheck
	HookAfterResponsibilityCheck  = wit.HookTypeAfterResponsibilityCheck
	HookShouldReconcile           = wit.HookTypeShouldReconcile
	HookBeforeAnyReconcile        = wit.HookTypeBeforeAnyReconcile
	HookBeforeAbort               = wit.HookTypeBeforeAbort
	HookBeforeForceReconcile      = wit.HookTypeBeforeForceReconcile
	HookBeforeDelete              = wit.HookTypeBeforeDelete
	HookBeforeReconcile           = wit.HookTypeBeforeReconcile
	HookEnd                       = wit.HookTypeEnd
)

// HookSetup is what a hook says about itself.
type HookSetup struct {
	Name      string
	Version   string
	HookTypes []HookType
}

// HookInput is one hook call, parsed.
type HookInput struct {
	Type HookType
	// The DeployItem (nil for HookStart) and its Target object (nil if none; never credentials).
	Item   Object
	Target Object
	// The item's metadata.name, metadata.namespace and annotations (never nil).
	Name, Namespace string
	Annotations     map[string]string
}

// HookResult is what a hook says about the reconcile (Landscaper's HookResult).
type HookResult struct {
	AbortReconcile bool
	// "Requeue now": the host loops; prefer RequeueAfter.
	Requeue      bool
	RequeueAfter time.Duration
}

// Hook is a hook plugin: export it with hooks.Export in an init function. Run returns nil for
// "no opinion" (the flow continues unchanged).
type Hook interface {
	Setup() HookSetup
	Run(env Env, in *HookInput) (*HookResult, error)
}

// WitHook adapts a Hook to the generated export interface (used by hooks.Export).
type WitHook struct{ H Hook }

// Describe implements the WIT export.
func (w WitHook) Describe() wit.HookSetup {
	s := w.H.Setup()
	types := s.HookTypes
	if types == nil {
		types = []HookType{}
	}
	return wit.HookSetup{Name: s.Name, Version: s.Version, HookTypes: types}
}

// Run implements the WIT export.
func (w WitHook) Run(in wit.HookInput) (out wit.Result[*wit.HookResult, wit.DeployerError]) {
	operation := in.HookType.String()
	defer func() {
		if v := recover(); v != nil {
			out = wit.Result[*wit.HookResult, wit.DeployerError]{IsErr: true, Err: errorToWit(panicError(v, operation))}
		}
	}()
	fail := func(err error) wit.Result[*wit.HookResult, wit.DeployerError] {
		return wit.Result[*wit.HookResult, wit.DeployerError]{IsErr: true, Err: errorToWit(asError(err, operation))}
	}
	h := &HookInput{Type: in.HookType, Annotations: map[string]string{}}
	if in.DeployItem != nil {
		if err := json.Unmarshal([]byte(*in.DeployItem), &h.Item); err != nil {
			return fail(InternalError("InvalidInvocation", "deploy-item: %v", err))
		}
		h.Name = LookupString(h.Item, "metadata", "name")
		h.Namespace = LookupString(h.Item, "metadata", "namespace")
		if a, ok := Lookup(h.Item, "metadata", "annotations").(map[string]any); ok {
			for k, v := range a {
				if s, ok := v.(string); ok {
					h.Annotations[k] = s
				}
			}
		}
	}
	if in.Target != nil {
		if err := json.Unmarshal([]byte(*in.Target), &h.Target); err != nil {
			return fail(InternalError("InvalidInvocation", "target: %v", err))
		}
	}
	r, err := w.H.Run(Env{}, h)
	if err != nil {
		return fail(err)
	}
	if r == nil {
		return wit.Result[*wit.HookResult, wit.DeployerError]{}
	}
	res := &wit.HookResult{AbortReconcile: r.AbortReconcile, Requeue: r.Requeue}
	if r.RequeueAfter > 0 {
		ms := uint64(r.RequeueAfter / time.Millisecond)
		res.RequeueAfterMs = &ms
	}
	return wit.Result[*wit.HookResult, wit.DeployerError]{Ok: res}
}
