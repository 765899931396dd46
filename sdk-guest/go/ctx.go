package plugin

import (
	"encoding/json"
	"fmt"
	"time"

	"wasm-deployer.dev/plugin/internal/wit"
)

// LogLevel is a log level of the host's tracing output.
type LogLevel = wit.LogLevel

// Log levels.
const (
	LevelTrace = wit.LogLevelTrace
	LevelDebug = wit.LogLevelDebug
	LevelInfo  = wit.LogLevelInfo
	LevelWarn  = wit.LogLevelWarn
	LevelError = wit.LogLevelError
)

// Env is what every plugin may call, deployer or hook: logging and clocks.
type Env struct{}

// Log emits one record at level.
func (Env) Log(level LogLevel, message string) { wit.LogLog(level, message) }

// Debugf logs at debug level.
func (e Env) Debugf(format string, args ...any) { e.Log(LevelDebug, fmt.Sprintf(format, args...)) }

// Infof logs at info level.
func (e Env) Infof(format string, args ...any) { e.Log(LevelInfo, fmt.Sprintf(format, args...)) }

// Warnf logs at warn level.
func (e Env) Warnf(format string, args ...any) { e.Log(LevelWarn, fmt.Sprintf(format, args...)) }

// Errorf logs at error level.
func (e Env) Errorf(format string, args ...any) { e.Log(LevelError, fmt.Sprintf(format, args...)) }

// Now is the host's wall-clock time (UTC, millisecond precision).
func (Env) Now() time.Time { return time.UnixMilli(int64(wit.ClockNowUnixMillis())).UTC() }

// NowRFC3339 is the host's wall-clock time as Kubernetes formats timestamps.
func (Env) NowRFC3339() string { return wit.ClockNowRfc3339() }

// MonotonicNanos is a monotonic clock of this invocation (only differences mean something).
func (Env) MonotonicNanos() uint64 { return wit.ClockMonotonicNanos() }

// Ctx is what a deployer step may call on the host.
type Ctx struct {
	Env
	// Kubernetes on the cluster of the item's resolved Target.
	Kube Kubernetes
}

// Checkpoint reports a progress checkpoint. It returns an ERR_TIMEOUT error once the item's
// progressing timeout has passed; return it.
func (*Ctx) Checkpoint(name string) error {
	if r := wit.ProgressCheckpoint(name); r.IsErr {
		return errorFromWit(r.Err)
	}
	return nil
}

// Remaining is the time left until the progressing timeout; false once it has passed.
func (*Ctx) Remaining() (time.Duration, bool) {
	ms := wit.ProgressRemainingMillis()
	if ms == nil {
		return 0, false
	}
	return time.Duration(*ms) * time.Millisecond, true
}

// Blob is what a fetch brought.
type Blob struct {
	Digest    string // sha256:<hex> of Data
	MediaType string
	Data      []byte
	Cached    bool // served from the host's cache
}

// OCIArtifact is what an OCI pull brought.
type OCIArtifact struct {
	ManifestDigest  string
	ConfigMediaType string
	Layer           Blob
}

// HTTPGet downloads url through the host (which checks its allowlist and size limit).
// expectedDigest ("sha256:<hex>", or "") lets the host answer from its cache.
func (*Ctx) HTTPGet(url, expectedDigest string) (*Blob, error) {
	var d *string
	if expectedDigest != "" {
		d = &expectedDigest
	}
	r := wit.FetchHttpGet(url, d)
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	return &Blob{Digest: r.Ok.Digest, MediaType: r.Ok.MediaType, Data: r.Ok.Data, Cached: r.Ok.Cached}, nil
}

// OCIPull pulls reference and returns its first layer whose media type is in layerMediaTypes.
func (*Ctx) OCIPull(reference string, layerMediaTypes []string) (*OCIArtifact, error) {
	r := wit.FetchOciPull(reference, nonNil(layerMediaTypes))
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	l := r.Ok.Layer
	return &OCIArtifact{ManifestDigest: r.Ok.ManifestDigest, ConfigMediaType: r.Ok.ConfigMediaType,
		Layer: Blob{Digest: l.Digest, MediaType: l.MediaType, Data: l.Data, Cached: l.Cached}}, nil
}

// ObjectRef names one Kubernetes object; Namespace "" is cluster-scoped.
type ObjectRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

func (r ObjectRef) wit() wit.ObjectRef {
	out := wit.ObjectRef{ApiVersion: r.APIVersion, Kind: r.Kind, Name: r.Name}
	if r.Namespace != "" {
		ns := r.Namespace
		out.Namespace = &ns
	}
	return out
}

// Object is a Kubernetes object as unstructured JSON (like unstructured.Unstructured.Object).
type Object = map[string]any

func parseObject(text, what string) (Object, error) {
	var o Object
	if err := json.Unmarshal([]byte(text), &o); err != nil {
		return nil, InternalError("InvalidHostAnswer", "%s: the host answered with invalid JSON: %v", what, err)
	}
	return o, nil
}

func objectText(obj any, what string) (string, error) {
	switch o := obj.(type) {
	case string:
		return o, nil
	case []byte:
		return string(o), nil
	case json.RawMessage:
		return string(o), nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return "", InternalError("InvalidObject", "%s: %v", what, err)
	}
	return string(b), nil
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Kubernetes is the Kubernetes capability on the item's Target cluster. Host errors come back
// as *Error with Landscaper codes and the Kubernetes reason (NotFound, Conflict, ...).
type Kubernetes struct{}

// Get reads an object; nil (and no error) if it does not exist.
func (Kubernetes) Get(ref ObjectRef) (Object, error) {
	r := wit.KubernetesGet(ref.wit())
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	if r.Ok == nil {
		return nil, nil
	}
	return parseObject(*r.Ok, "get "+ref.Kind+" "+ref.Name)
}

// Create creates obj (an Object, a struct with json tags, or JSON text); returns the created object.
func (Kubernetes) Create(obj any) (Object, error) {
	text, err := objectText(obj, "create")
	if err != nil {
		return nil, err
	}
	r := wit.KubernetesCreate(text)
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	return parseObject(r.Ok, "create")
}

// Update replaces obj (metadata.resourceVersion gives optimistic concurrency).
func (Kubernetes) Update(obj any) (Object, error) {
	text, err := objectText(obj, "update")
	if err != nil {
		return nil, err
	}
	r := wit.KubernetesUpdate(text)
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	return parseObject(r.Ok, "update")
}

// Delete deletes an object; true if it existed.
func (Kubernetes) Delete(ref ObjectRef) (bool, error) {
	r := wit.KubernetesDelete(ref.wit())
	if r.IsErr {
		return false, errorFromWit(r.Err)
	}
	return r.Ok, nil
}

// ListOptions narrows a List: Namespace "" = all namespaces; LabelSelector in Kubernetes syntax.
type ListOptions struct {
	Namespace     string
	LabelSelector string
}

func listItems(text, what string) ([]Object, error) {
	var l struct {
		Items []Object `json:"items"`
	}
	if err := json.Unmarshal([]byte(text), &l); err != nil {
		return nil, InternalError("InvalidHostAnswer", "%s: %v", what, err)
	}
	return l.Items, nil
}

// List lists the objects of one kind (items carry apiVersion and kind).
func (Kubernetes) List(apiVersion, kind string, opts ListOptions) ([]Object, error) {
	r := wit.ClusterList(apiVersion, kind, optString(opts.Namespace), optString(opts.LabelSelector))
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	return listItems(r.Ok, "list "+kind)
}

// PatchType is the kind of a patch.
type PatchType = wit.PatchType

// Patch types.
const (
	MergePatch = wit.PatchTypeMerge
	JSONPatch  = wit.PatchTypeJson
	ApplyPatch = wit.PatchTypeApply
)

// PatchOptions says how to patch (FieldManager is required for ApplyPatch).
type PatchOptions struct {
	Type         PatchType
	FieldManager string
	Force        bool
}

// Patch patches an object with patch (marshalled to JSON unless it is JSON text).
func (Kubernetes) Patch(ref ObjectRef, patch any, opts PatchOptions) (Object, error) {
	text, err := objectText(patch, "patch")
	if err != nil {
		return nil, err
	}
	r := wit.ClusterPatch(ref.wit(), text, wit.PatchOptions{PatchType: opts.Type, FieldManager: optString(opts.FieldManager), Force: opts.Force})
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	return parseObject(r.Ok, "patch")
}

// ResourceInfo is what discovery knows about a kind.
type ResourceInfo struct {
	APIVersion, Kind, Plural string
	Namespaced               bool
}

// Discover says how the cluster serves apiVersion/kind; nil if it does not.
func (Kubernetes) Discover(apiVersion, kind string) (*ResourceInfo, error) {
	r := wit.ClusterDiscover(apiVersion, kind)
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	if r.Ok == nil {
		return nil, nil
	}
	return &ResourceInfo{APIVersion: r.Ok.ApiVersion, Kind: r.Ok.Kind, Plural: r.Ok.Plural, Namespaced: r.Ok.Namespaced}, nil
}

// Secondary is get/list/delete on the cluster of the Target named targetName (in the item's
// namespace).
func (Kubernetes) Secondary(targetName string) SecondaryTarget { return SecondaryTarget{targetName} }

// SecondaryTarget is Kubernetes on the cluster of another Target.
type SecondaryTarget struct{ name string }

// Get reads an object; nil if it does not exist.
func (s SecondaryTarget) Get(ref ObjectRef) (Object, error) {
	r := wit.SecondaryTargetsGet(s.name, ref.wit())
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	if r.Ok == nil {
		return nil, nil
	}
	return parseObject(*r.Ok, "get "+ref.Kind+" "+ref.Name)
}

// List lists objects of one kind.
func (s SecondaryTarget) List(apiVersion, kind string, opts ListOptions) ([]Object, error) {
	r := wit.SecondaryTargetsList(s.name, apiVersion, kind, optString(opts.Namespace), optString(opts.LabelSelector))
	if r.IsErr {
		return nil, errorFromWit(r.Err)
	}
	return listItems(r.Ok, "list "+kind)
}

// Delete deletes an object; true if it existed.
func (s SecondaryTarget) Delete(ref ObjectRef) (bool, error) {
	r := wit.SecondaryTargetsDelete(s.name, ref.wit())
	if r.IsErr {
		return false, errorFromWit(r.Err)
	}
	return r.Ok, nil
}
