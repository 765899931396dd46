// Package plugin writes wasm-deployer plugins in Go: the Go twin of the Rust `sdk-guest` crate
// and of sdk-guest/{python,js,c}. Standard library only; a plugin author never touches WIT
// records or the canonical ABI (internal/wit, generated from wit/).
//
//	package main
//
//	import (
//		"wasm-deployer.dev/plugin"
//		"wasm-deployer.dev/plugin/deployer"
//	)
//
//	type echo struct{}
//
//	func (echo) Describe() plugin.Description {
//		return plugin.Description{Name: "echo", Version: "0.1.0", DeployItemTypes: []string{"example.dev/echo"}}
//	}
//
//	func (echo) Reconcile(ctx *plugin.Ctx, inv *plugin.Invocation) (*plugin.Response, error) {
//		message, err := inv.ConfigString("message") // ERR_CONFIGURATION_PROBLEM naming the field
//		if err != nil {
//			return nil, err
//		}
//		ctx.Infof("echo %s", message)
//		return &plugin.Response{Phase: plugin.PhaseSucceeded, Exports: map[string]string{"message": message}}, nil
//	}
//
//	func (echo) Delete(ctx *plugin.Ctx, inv *plugin.Invocation) (*plugin.Response, error) {
//		return &plugin.Response{Phase: plugin.PhaseSucceeded}, nil
//	}
//
//	func init() { deployer.Export(echo{}) }
//
//	func main() {}
//
// Build (docs/plugins/go.md): `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`, then
// `go-componentize new`; or `deployer-host plugin build` in a project made by
// `deployer-host plugin new --lang go`.
//
// What the helper does:
//   - parses the invocation's JSON strings (Invocation: Item, Name, Namespace, Target, ...), with
//     typed accessors for the provider configuration that fail with ERR_CONFIGURATION_PROBLEM
//     naming the field (ConfigString, ConfigBool, DecodeConfig);
//   - converts the returned *Response into the WIT `response` (ProviderStatus and Exports are
//     marshalled with encoding/json);
//   - maps returned errors: an *Error keeps its codes (ConfigurationError, InternalError, ...);
//     any other error, and any panic, becomes ERR_INTERNAL_PROBLEM with its text — never a trap;
//   - gives Ctx: logging, clocks, progress checkpoints, Kubernetes (ctx.Kube) on
//     map[string]any objects, and fetch (ctx.HTTPGet, ctx.OCIPull);
//   - HTTP to the API under the item's Target (http.go): Invocation.HTTPURL, HTTPStatusError,
//     HTTPTransportError; Go's net/http client over wasi:http is package
//     wasm-deployer.dev/plugin/wasihttp (wasihttp.Client(), wasihttp.Check).
//
// Go specifics (docs/plugins/go.md, "Traps"): every goroutine a step starts must finish before
// the step returns (the instance is not called again to run them), and a panic in another
// goroutine than the step's own kills the instance (a trap, reported by the host as such).
package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"wasm-deployer.dev/plugin/internal/wit"
)

// WITVersion is the WIT package version this helper speaks (`wasm-deployer:plugin@…`).
const WITVersion = "1.5.0"

// Landscaper error codes (sdk-guest/model/src/codes.rs).
const (
	ErrUnauthorized         = "ERR_UNAUTHORIZED"
	ErrConfigurationProblem = "ERR_CONFIGURATION_PROBLEM"
	ErrInternalProblem      = "ERR_INTERNAL_PROBLEM"
	ErrTimeout              = "ERR_TIMEOUT"
	ErrCyclicDependencies   = "ERR_CYCLIC_DEPENDENCIES"
	ErrCleanup              = "ERR_CLEANUP"
	ErrWebhook              = "ERR_WEBHOOK"
	ErrUnfinished           = "ERR_UNFINISHED"
	ErrForInfoOnly          = "ERR_FOR_INFO_ONLY"
	ErrNoRetry              = "ERR_NO_RETRY"
)

// DeployItem phases (status.phase).
const (
	PhaseInit         = "Init"
	PhaseProgressing  = "Progressing"
	PhaseSucceeded    = "Succeeded"
	PhaseFailed       = "Failed"
	PhaseInitDelete   = "InitDelete"
	PhaseDeleting     = "Deleting"
	PhaseDeleteFailed = "DeleteFailed"
)

// Description is what a deployer says about itself (WIT `description`).
type Description struct {
	Name            string
	Version         string
	DeployItemTypes []string
	// Informational only (hooks declare their types through the Hook interface).
	HookTypes []string
}

// Deployer is a deployer plugin: export it with deployer.Export in an init function.
//
// Reconcile is called again every few seconds while the phase is not final, so it must be
// idempotent and resume from inv.Phase / inv.PreviousProviderStatus. Delete runs when the
// DeployItem has a deletionTimestamp; a nil error lets the host remove the finalizer.
type Deployer interface {
	Describe() Description
	Reconcile(ctx *Ctx, inv *Invocation) (*Response, error)
	Delete(ctx *Ctx, inv *Invocation) (*Response, error)
}

// ConditionStatus is the status of a condition.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue        ConditionStatus = "True"
	ConditionFalse       ConditionStatus = "False"
	ConditionUnknown     ConditionStatus = "Unknown"
	ConditionProgressing ConditionStatus = "Progressing"
)

// Condition is a condition the plugin reports; the host owns its timestamps.
type Condition struct {
	Type    string
	Status  ConditionStatus
	Reason  string
	Message string
	Codes   []string
}

// Response is the successful result of a step. Zero fields change nothing.
type Response struct {
	// New status.phase ("" keeps the current one).
	Phase string
	// New status.providerStatus (marshalled to JSON; must carry apiVersion and kind). Nil keeps it.
	ProviderStatus any
	// Export values (marshalled to JSON), stored by the host in the export Secret. Nil: none.
	Exports any
	// Conditions to create or update.
	Conditions []Condition
	// "Not yet, call me again after this long"; 0: the host's default requeue rules.
	RetryAfter time.Duration
}

// Error is a failed step (WIT `deployer-error`), mapped by the host onto status.lastError.
// Codes ERR_CONFIGURATION_PROBLEM, ERR_INTERNAL_PROBLEM, ERR_TIMEOUT, ERR_UNAUTHORIZED and
// ERR_CYCLIC_DEPENDENCIES fail the item; an error without them is retried. An empty Operation
// is filled with "reconcile", "delete" or the hook type.
type Error struct {
	Codes      []string
	Operation  string
	Reason     string
	Message    string
	Conditions []Condition
}

func (e *Error) Error() string {
	if len(e.Codes) == 0 {
		return fmt.Sprintf("%s: %s", e.Reason, e.Message)
	}
	return fmt.Sprintf("%s (%s): %s", e.Reason, strings.Join(e.Codes, ", "), e.Message)
}

// HasCode says whether the error carries code.
func (e *Error) HasCode(code string) bool {
	for _, c := range e.Codes {
		if c == code {
			return true
		}
	}
	return false
}

// WithCondition attaches a condition the host applies even though the step failed.
func (e *Error) WithCondition(c Condition) *Error {
	e.Conditions = append(e.Conditions, c)
	return e
}

// NewError makes an error with one code ("" for none: the host retries it).
func NewError(code, reason, format string, args ...any) *Error {
	e := &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
	if code != "" {
		e.Codes = []string{code}
	}
	return e
}

// ConfigurationError is ERR_CONFIGURATION_PROBLEM (reason ParseProviderConfiguration if "").
func ConfigurationError(reason, format string, args ...any) *Error {
	if reason == "" {
		reason = "ParseProviderConfiguration"
	}
	return NewError(ErrConfigurationProblem, reason, format, args...)
}

// InternalError is ERR_INTERNAL_PROBLEM (reason InternalProblem if "").
func InternalError(reason, format string, args ...any) *Error {
	if reason == "" {
		reason = "InternalProblem"
	}
	return NewError(ErrInternalProblem, reason, format, args...)
}

// TimeoutError is ERR_TIMEOUT.
func TimeoutError(reason, format string, args ...any) *Error {
	return NewError(ErrTimeout, reason, format, args...)
}

// RetryableError has no code: the host retries the step.
func RetryableError(reason, format string, args ...any) *Error {
	return NewError("", reason, format, args...)
}

const maxMessage = 4000 // keep status.lastError.message readable

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage] + "…"
}

// urlError is net/url's *url.Error (what net/http's client wraps a transport's error in),
// known by its methods so that plugins without HTTP do not link net/url (240 KB).
type urlError interface {
	Unwrap() error
	Timeout() bool
	Temporary() bool
}

// asError turns any error into an *Error: an *Error in the chain keeps its codes and reason
// (the message is the whole chain's text); anything else is ERR_INTERNAL_PROBLEM.
func asError(err error, operation string) *Error {
	var e *Error
	var out Error
	if errors.As(err, &e) {
		out = *e
		out.Message = err.Error()
		// An *Error itself, or as net/http's client returns the transport's (a *url.Error
		// around it, whose `Put "URL": ` the message already says): its own message.
		if u, ok := err.(urlError); err == error(e) || (ok && u.Unwrap() == error(e)) {
			out.Message = e.Message
		}
	} else {
		out = Error{Codes: []string{ErrInternalProblem}, Reason: "InternalProblem", Message: err.Error()}
	}
	if out.Operation == "" {
		out.Operation = operation
	}
	out.Message = truncate(out.Message)
	return &out
}

// panicError is the error for a recovered panic: ERR_INTERNAL_PROBLEM, reason Panic, with the
// panic value and where it happened.
func panicError(v any, operation string) *Error {
	where := ""
	for _, line := range strings.Split(string(debug.Stack()), "\n") {
		line = strings.TrimSpace(line)
		// The first frame of plugin code below the runtime's and this helper's
		// ("wasm-deployer.dev/examples/echo/main.go:41 +0x1f" with -trimpath).
		if !strings.Contains(line, ".go:") || strings.HasPrefix(line, "runtime/") ||
			strings.Contains(line, "/runtime/") || strings.Contains(line, "wasm-deployer.dev/plugin/") ||
			strings.Contains(line, "wasm-deployer.dev/plugin@") || strings.Contains(line, "sdk-guest/go/") {
			continue
		}
		if i := strings.Index(line, " +0x"); i > 0 {
			line = line[:i]
		}
		where = " at " + line
		break
	}
	e := &Error{
		Codes:     []string{ErrInternalProblem},
		Operation: operation,
		Reason:    "Panic",
		Message:   truncate(fmt.Sprintf("panic: %v%s", v, where)),
	}
	Env{}.Errorf("%s failed: %s", operation, e.Message)
	return e
}

// ---- conversions to the WIT records -----------------------------------------------------------

func conditionStatusToWit(s ConditionStatus) (wit.ConditionStatus, error) {
	switch strings.ToLower(string(s)) {
	case "true":
		return wit.ConditionStatusTrue, nil
	case "false":
		return wit.ConditionStatusFalse, nil
	case "unknown", "":
		return wit.ConditionStatusUnknown, nil
	case "progressing":
		return wit.ConditionStatusProgressing, nil
	}
	return 0, fmt.Errorf("condition status %q: one of True, False, Unknown, Progressing", s)
}

func conditionsToWit(cs []Condition) ([]wit.ConditionReport, error) {
	out := make([]wit.ConditionReport, 0, len(cs))
	for _, c := range cs {
		st, err := conditionStatusToWit(c.Status)
		if err != nil {
			return nil, err
		}
		out = append(out, wit.ConditionReport{Type: c.Type, Status: st, Reason: c.Reason, Message: c.Message, Codes: nonNil(c.Codes)})
	}
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func errorToWit(e *Error) wit.DeployerError {
	conds, err := conditionsToWit(e.Conditions)
	if err != nil {
		conds = nil
	}
	return wit.DeployerError{Codes: nonNil(e.Codes), Operation: e.Operation, Reason: e.Reason, Message: e.Message, Conditions: conds}
}

func errorFromWit(e wit.DeployerError) *Error {
	out := &Error{Codes: e.Codes, Operation: e.Operation, Reason: e.Reason, Message: e.Message}
	for _, c := range e.Conditions {
		out.Conditions = append(out.Conditions, Condition{Type: c.Type, Status: ConditionStatus(strings.ToUpper(c.Status.String()[:1]) + c.Status.String()[1:]), Reason: c.Reason, Message: c.Message, Codes: c.Codes})
	}
	return out
}

func jsonText(v any, what string) (*string, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, InternalError("InvalidResponse", "%s: %v", what, err)
	}
	s := string(b)
	if s == "null" {
		return nil, nil
	}
	return &s, nil
}

func responseToWit(r *Response) (wit.Response, error) {
	if r == nil {
		r = &Response{}
	}
	var out wit.Response
	if r.Phase != "" {
		p := r.Phase
		out.Phase = &p
	}
	var err error
	if out.ProviderStatus, err = jsonText(r.ProviderStatus, "providerStatus"); err != nil {
		return out, err
	}
	if out.Exports, err = jsonText(r.Exports, "exports"); err != nil {
		return out, err
	}
	if out.Conditions, err = conditionsToWit(r.Conditions); err != nil {
		return out, InternalError("InvalidResponse", "%v", err)
	}
	if r.RetryAfter > 0 {
		ms := uint64(r.RetryAfter / time.Millisecond)
		out.RetryAfterMs = &ms
	}
	return out, nil
}

// ---- the deployer export glue -----------------------------------------------------------------

// WitDeployer adapts a Deployer to the generated export interface. It is used by
// deployer.Export; plugin code never needs it.
type WitDeployer struct{ D Deployer }

// Describe implements the WIT export.
func (w WitDeployer) Describe() wit.Description {
	d := w.D.Describe()
	return wit.Description{Name: d.Name, Version: d.Version, DeployItemTypes: nonNil(d.DeployItemTypes), HookTypes: nonNil(d.HookTypes)}
}

// Reconcile implements the WIT export.
func (w WitDeployer) Reconcile(inv wit.Invocation) wit.Result[wit.Response, wit.DeployerError] {
	return step("reconcile", w.D.Reconcile, inv)
}

// Delete implements the WIT export.
func (w WitDeployer) Delete(inv wit.Invocation) wit.Result[wit.Response, wit.DeployerError] {
	return step("delete", w.D.Delete, inv)
}

func step(operation string, f func(*Ctx, *Invocation) (*Response, error), raw wit.Invocation) (out wit.Result[wit.Response, wit.DeployerError]) {
	defer func() {
		if v := recover(); v != nil {
			out = wit.Result[wit.Response, wit.DeployerError]{IsErr: true, Err: errorToWit(panicError(v, operation))}
		}
	}()
	fail := func(err error) wit.Result[wit.Response, wit.DeployerError] {
		return wit.Result[wit.Response, wit.DeployerError]{IsErr: true, Err: errorToWit(asError(err, operation))}
	}
	inv, err := invocationFromWit(operation, raw)
	if err != nil {
		return fail(err)
	}
	resp, err := f(&Ctx{}, inv)
	if err != nil {
		return fail(err)
	}
	r, err := responseToWit(resp)
	if err != nil {
		return fail(err)
	}
	return wit.Result[wit.Response, wit.DeployerError]{Ok: r}
}
