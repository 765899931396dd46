"""wasm_deployer -- write wasm-deployer plugins in Python (componentize-py).

The Python twin of the Rust `sdk-guest` crate. A plugin author never touches WIT records:

    from wasm_deployer import Deployer, Response, ConfigurationError, export_deployer

    class Echo(Deployer):
        name = "python-echo"
        version = "0.1.0"
        deploy_item_types = ["examples.wasm-deployer.dev/echo-python"]

        def reconcile(self, ctx, inv):
            message = inv.config_str("message")        # ConfigurationError if missing
            ctx.info(f"echo {message!r}")
            return Response(phase="Succeeded", exports={"message": message})

        def delete(self, ctx, inv):
            return Response(phase="Succeeded")

    Deployer = export_deployer(Echo)    # componentize-py looks for `Deployer` in the app module

Hook plugins (world `hook-plugin`) subclass `Hook` and end with `Hooks = export_hooks(MyHook)`.

Build (see docs/plugins/python.md):

    componentize-py -d <repo>/wit -w deployer-plugin componentize app \
        -p <plugin dir> -p <repo>/sdk-guest/python -o plugin.wasm

What the helper does for you:
- parses the invocation's JSON strings into dicts (`Invocation`), with typed accessors for the
  provider configuration that raise `ConfigurationError` naming the field;
- converts a `Response` (dicts, plain strings) into the WIT record with every field filled;
- maps `DeployerError` subclasses onto Landscaper error codes and fills `operation`;
- turns any other uncaught exception into `ERR_INTERNAL_PROBLEM` (reason `UncaughtException`,
  message `<Type>: <text> (at file:line in function)`) instead of a trap, and logs the
  traceback at error level;
- gives `ctx`: logging, clock, progress checkpoints and Kubernetes (`ctx.k8s`) on dicts;
- HTTP (WIT 1.5, module `wasm_deployer.http`): a blocking client over `wasi:http`
  (`http.put_json(url, value)`, `http.request(...)`), the URL under the item's Target
  (`inv.http_url(path)`), and the shared error mapping (`resp.raise_for_status()`).

The bindings (`wit_world`) only exist inside `componentize-py componentize`; everything that
needs them is resolved when the module is imported at build time (componentize-py
pre-initialises the component, so nothing is imported lazily at run time). Outside a build the
module still imports (the WIT parts are then unavailable), so its pure-Python parts can be
unit-tested with plain CPython.
"""

import datetime as _dt
import json as _json
import sys as _sys
import traceback as _traceback

__all__ = [
    "ERR_CONFIGURATION_PROBLEM",
    "ERR_INTERNAL_PROBLEM",
    "ERR_TIMEOUT",
    "ERR_UNAUTHORIZED",
    "ERR_CYCLIC_DEPENDENCIES",
    "Condition",
    "ConfigurationError",
    "Ctx",
    "Deployer",
    "DeployerError",
    "Hook",
    "HookInput",
    "HookResult",
    "Invocation",
    "InternalError",
    "Kubernetes",
    "Response",
    "RetryableError",
    "TimeoutProblem",
    "UnauthorizedError",
    "export_deployer",
    "export_hooks",
    "http",
]

WIT_VERSION = "1.5.0"

# ---- the generated bindings (present only inside a componentize-py build) --------------------

try:  # common to both worlds
    from componentize_py_types import Err as _Err
    from wit_world.imports import clock as _clock
    from wit_world.imports import log as _log
    try:  # worlds that import wasi:http too (WIT 1.5): two `types` interfaces, so the full name
        from wit_world.imports import wasm_deployer_plugin_types as _types
    except ImportError:
        from wit_world.imports import types as _types
except ImportError:  # plain CPython (tests, IDEs)
    _Err = None
    _clock = _log = _types = None

try:  # world `deployer-plugin` only
    from wit_world.imports import kubernetes as _kubernetes
    from wit_world.imports import progress as _progress
except ImportError:
    _kubernetes = _progress = None

try:  # `cluster` (list, patch, discover): deployer-plugin world since WIT 1.0
    from wit_world.imports import cluster as _cluster
except ImportError:
    _cluster = None

try:
    from wit_world import exports as _exports
except ImportError:
    _exports = None

try:  # world `hook-plugin`: the hooks interface and its types
    from wit_world.exports import hooks as _hooks
except ImportError:
    _hooks = None

# ---- Landscaper error codes -------------------------------------------------------------------

ERR_UNAUTHORIZED = "ERR_UNAUTHORIZED"
ERR_CONFIGURATION_PROBLEM = "ERR_CONFIGURATION_PROBLEM"
ERR_INTERNAL_PROBLEM = "ERR_INTERNAL_PROBLEM"
ERR_TIMEOUT = "ERR_TIMEOUT"
ERR_CYCLIC_DEPENDENCIES = "ERR_CYCLIC_DEPENDENCIES"
ERR_CLEANUP = "ERR_CLEANUP"
ERR_WEBHOOK = "ERR_WEBHOOK"
ERR_UNFINISHED = "ERR_UNFINISHED"
ERR_FOR_INFO_ONLY = "ERR_FOR_INFO_ONLY"
ERR_NO_RETRY = "ERR_NO_RETRY"

_MAX_MESSAGE = 4000  # keep status.lastError.message readable


# ---- conditions, responses, errors ------------------------------------------------------------

_CONDITION_STATUS = {"True": "TRUE", "False": "FALSE", "Unknown": "UNKNOWN", "Progressing": "PROGRESSING"}


class Condition:
    """A condition to report (WIT `condition-report`). `status` is "True", "False", "Unknown",
    "Progressing" or a bool. The host owns the timestamps."""

    __slots__ = ("type", "status", "reason", "message", "codes")

    def __init__(self, type, status, reason="", message="", codes=None):
        self.type = type
        self.status = status
        self.reason = reason
        self.message = message
        self.codes = list(codes or [])

    def __repr__(self):
        return f"Condition({self.type!r}, {self.status!r}, {self.reason!r}, {self.message!r}, {self.codes!r})"


def _condition(c):
    if isinstance(c, dict):
        c = Condition(c.get("type", ""), c.get("status", "Unknown"), c.get("reason", ""),
                      c.get("message", ""), c.get("codes"))
    status = c.status
    if isinstance(status, bool):
        status = "True" if status else "False"
    key = _CONDITION_STATUS.get(str(status), None) or _CONDITION_STATUS.get(str(status).capitalize())
    if key is None:
        raise ValueError(f"condition {c.type!r}: status must be True, False, Unknown or Progressing, not {status!r}")
    return _types.ConditionReport(
        type=str(c.type),
        status=getattr(_types.ConditionStatus, key),
        reason=str(c.reason),
        message=str(c.message),
        codes=[str(x) for x in c.codes],
    )


def _to_json(value, what):
    if value is None:
        return None
    if isinstance(value, str):  # already JSON
        return value
    try:
        return _json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} is not JSON-serialisable: {e}") from None


class Response:
    """The successful result of a reconcile/delete step (WIT `response`).

    - `phase`: new `status.phase` ("Succeeded", "Progressing", ...), or None to keep it;
    - `provider_status`: dict (needs "apiVersion" and "kind") or None to keep it;
    - `exports`: dict written to the export Secret, or None for no export;
    - `conditions`: list of `Condition` (or dicts with the same keys);
    - `retry_after_ms`: "call me again after this many ms" (unfinished step), or None.
    """

    __slots__ = ("phase", "provider_status", "exports", "conditions", "retry_after_ms")

    def __init__(self, phase=None, exports=None, provider_status=None, conditions=None, retry_after_ms=None):
        self.phase = phase
        self.exports = exports
        self.provider_status = provider_status
        self.conditions = list(conditions or [])
        self.retry_after_ms = retry_after_ms

    def __repr__(self):
        return (f"Response(phase={self.phase!r}, exports={self.exports!r}, provider_status={self.provider_status!r}, "
                f"conditions={self.conditions!r}, retry_after_ms={self.retry_after_ms!r})")

    def _to_wit(self):
        retry = self.retry_after_ms
        if retry is not None:
            retry = int(retry)
            if retry < 0:
                raise ValueError(f"retry_after_ms must not be negative, got {retry}")
        return _types.Response(
            phase=None if self.phase is None else str(self.phase),
            provider_status=_to_json(self.provider_status, "provider_status"),
            exports=_to_json(self.exports, "exports"),
            conditions=[_condition(c) for c in self.conditions],
            retry_after_ms=retry,
        )


class DeployerError(Exception):
    """A failed step (WIT `deployer-error`), mapped by the host onto `status.lastError`.

    Raise it (or a subclass) from reconcile/delete/run. `codes` are Landscaper `ERR_*` codes:
    ERR_CONFIGURATION_PROBLEM, ERR_INTERNAL_PROBLEM, ERR_TIMEOUT, ERR_UNAUTHORIZED and
    ERR_CYCLIC_DEPENDENCIES fail the item; an error without them is retried. An empty
    `operation` is filled with the exported function's name ("reconcile", "delete" or the
    hook type)."""

    default_codes = ()
    default_reason = "Error"

    def __init__(self, message, reason=None, codes=None, operation="", conditions=None):
        super().__init__(message)
        self.message = str(message)
        self.reason = reason or self.default_reason
        self.codes = list(self.default_codes if codes is None else codes)
        self.operation = operation
        self.conditions = list(conditions or [])

    def __str__(self):
        s = f"{self.reason}: {self.message}"
        return f"{s} [{', '.join(self.codes)}]" if self.codes else s

    def has_code(self, code):
        return code in self.codes

    @classmethod
    def _from_wit(cls, e):
        return cls(e.message, reason=e.reason, codes=list(e.codes), operation=e.operation,
                   conditions=[Condition(c.type, c.status.name.capitalize(), c.reason, c.message, c.codes)
                               for c in e.conditions])

    def _to_wit(self, operation):
        return _types.DeployerError(
            codes=[str(c) for c in self.codes],
            operation=self.operation or operation,
            reason=str(self.reason),
            message=self.message[:_MAX_MESSAGE],
            conditions=[_condition(c) for c in self.conditions],
        )


class ConfigurationError(DeployerError):
    """ERR_CONFIGURATION_PROBLEM: the DeployItem (its provider configuration) is wrong; the item fails."""
    default_codes = (ERR_CONFIGURATION_PROBLEM,)
    default_reason = "ConfigurationInvalid"


class InternalError(DeployerError):
    """ERR_INTERNAL_PROBLEM: a bug or an unexpected state; the item fails."""
    default_codes = (ERR_INTERNAL_PROBLEM,)
    default_reason = "InternalProblem"


class TimeoutProblem(DeployerError):
    """ERR_TIMEOUT: something timed out; the item fails."""
    default_codes = (ERR_TIMEOUT,)
    default_reason = "Timeout"


class UnauthorizedError(DeployerError):
    """ERR_UNAUTHORIZED: missing permissions; the item fails."""
    default_codes = (ERR_UNAUTHORIZED,)
    default_reason = "Unauthorized"


class RetryableError(DeployerError):
    """No code: the step is retried (until the item's progressing timeout)."""
    default_codes = ()
    default_reason = "Retry"


def _uncaught(exc, operation):
    """Any other exception -> ERR_INTERNAL_PROBLEM with the exception text and where it was raised."""
    detail = str(exc)
    text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    tb = _traceback.extract_tb(exc.__traceback__)
    if tb:
        last = tb[-1]
        text += f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name})"
    try:
        _log_at("ERROR", f"uncaught exception in {operation}:\n"
                + "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__)))
    except BaseException:
        pass
    return InternalError(text, reason="UncaughtException", operation=operation)


def _wit_error(exc, operation):
    """The `Err(...)` to raise to the bindings for any exception."""
    if _Err is not None and isinstance(exc, _Err):
        if _types is not None and isinstance(exc.value, _types.DeployerError):
            return exc  # a hand-made WIT error: pass through
        exc = InternalError(f"Err({exc.value!r})", reason="UncaughtException")
    if not isinstance(exc, DeployerError):
        exc = _uncaught(exc, operation)
    try:
        return _Err(exc._to_wit(operation))
    except BaseException as e:  # e.g. a condition with a bad status
        return _Err(_uncaught(e, operation)._to_wit(operation))


# ---- the host: logging, clock, progress, Kubernetes ------------------------------------------

def _log_at(level, message):
    if _log is None:
        print(f"[{level.lower()}] {message}", file=_sys.stderr)
        return
    _log.log(getattr(_types.LogLevel, level), str(message))


def _host_call(f, *args):
    """Call an import; its `Err(deployer-error)` becomes a `DeployerError` exception."""
    try:
        return f(*args)
    except _Err as e:
        if isinstance(e.value, _types.DeployerError):
            raise DeployerError._from_wit(e.value) from None
        raise


def _parse_host_json(s, what):
    try:
        return _json.loads(s)
    except ValueError as e:
        raise InternalError(f"host returned invalid JSON for {what}: {e}", reason="InvalidHostResponse") from None


def _http():
    if http is None:
        raise InternalError("wasm_deployer/http.py is missing: copy it next to wasm_deployer/__init__.py",
                            reason="CapabilityUnavailable")
    return http


def _require(mod, what):
    if mod is None:
        raise InternalError(f"{what} is not available in this plugin's world", reason="CapabilityUnavailable")
    return mod


class Kubernetes:
    """Kubernetes on the cluster of the item's resolved Target, with dicts (`ctx.k8s`).

    Errors of the host (with Landscaper codes and the Kubernetes reason, e.g. `NotFound`,
    `Conflict`) are raised as `DeployerError`; let them propagate to fail the step with them."""

    @staticmethod
    def _ref(api_version, kind, name, namespace):
        return _require(_kubernetes, "kubernetes").ObjectRef(
            api_version=api_version, kind=kind, namespace=namespace, name=name)

    def get(self, api_version, kind, name, namespace=None):
        """The object as a dict, or None if it does not exist."""
        out = _host_call(_require(_kubernetes, "kubernetes").get, self._ref(api_version, kind, name, namespace))
        return None if out is None else _parse_host_json(out, f"get {kind} {name}")

    def create(self, obj):
        """Create `obj` (dict with apiVersion, kind, metadata); returns the created object."""
        out = _host_call(_require(_kubernetes, "kubernetes").create, _json.dumps(obj))
        return _parse_host_json(out, "create")

    def update(self, obj):
        """Replace `obj` (metadata.resourceVersion gives optimistic concurrency); returns it."""
        out = _host_call(_require(_kubernetes, "kubernetes").update, _json.dumps(obj))
        return _parse_host_json(out, "update")

    def delete(self, api_version, kind, name, namespace=None):
        """Delete an object; True if it existed, False if it was already gone."""
        return bool(_host_call(_require(_kubernetes, "kubernetes").delete, self._ref(api_version, kind, name, namespace)))

    def list(self, api_version, kind, namespace=None, label_selector=None):
        """The items (dicts with apiVersion and kind) of one kind; all namespaces if namespace is None."""
        out = _host_call(_require(_cluster, "cluster").list, api_version, kind, namespace, label_selector)
        return _parse_host_json(out, f"list {kind}").get("items") or []

    def patch(self, api_version, kind, name, patch, namespace=None, patch_type="merge",
              field_manager=None, force=False):
        """Patch an object ("merge", "json" or "apply"); returns the patched object."""
        c = _require(_cluster, "cluster")
        options = c.PatchOptions(patch_type=getattr(c.PatchType, patch_type.upper()),
                                 field_manager=field_manager, force=bool(force))
        out = _host_call(c.patch, self._ref(api_version, kind, name, namespace), _json.dumps(patch), options)
        return _parse_host_json(out, f"patch {kind} {name}")


class Ctx:
    """What plugin code may call on the host during one invocation."""

    def __init__(self):
        self.k8s = Kubernetes()

    # logging
    def log(self, level, message):
        """Log at `level` ("trace", "debug", "info", "warn", "error") into the host's output."""
        _log_at(str(level).upper(), message)

    def trace(self, message):
        self.log("trace", message)

    def debug(self, message):
        self.log("debug", message)

    def info(self, message):
        self.log("info", message)

    def warn(self, message):
        self.log("warn", message)

    def error(self, message):
        self.log("error", message)

    # clock
    def now_millis(self):
        """Wall clock, milliseconds since the Unix epoch (UTC)."""
        return _require(_clock, "clock").now_unix_millis()

    def now(self):
        """Wall clock as an aware `datetime` (UTC)."""
        return _dt.datetime.fromtimestamp(self.now_millis() / 1000.0, tz=_dt.timezone.utc)

    def now_rfc3339(self):
        """Wall clock as RFC 3339 (e.g. `2026-01-01T00:00:00Z`), as Kubernetes timestamps."""
        return _require(_clock, "clock").now_rfc3339()

    def monotonic_nanos(self):
        return _require(_clock, "clock").monotonic_nanos()

    # progress
    def checkpoint(self, name):
        """Report a progress checkpoint. Raises `DeployerError` (ERR_TIMEOUT) once the item's
        progressing timeout has passed; let it propagate."""
        _host_call(_require(_progress, "progress").checkpoint, str(name))

    def remaining_millis(self):
        """Milliseconds left until the progressing timeout, or None if it has passed."""
        return _require(_progress, "progress").remaining_millis()


# ---- the deployer ----------------------------------------------------------------------------

_MISSING = object()


def _type_name(types_):
    names = {str: "string", bool: "boolean", int: "integer", float: "number", dict: "object", list: "array"}
    return " or ".join(names.get(t, t.__name__) for t in types_)


def _json_type(v):
    return {str: "string", bool: "boolean", int: "integer", float: "number", dict: "object",
            list: "array", type(None): "null"}.get(type(v), type(v).__name__)


class Invocation:
    """One reconcile/delete step, with every JSON string parsed.

    - `deploy_item`: the DeployItem (dict: metadata, spec, status);
    - `name`, `namespace`, `phase`: shorthands into it;
    - `config`: `spec.config` (the ProviderConfiguration) -- raises `ConfigurationError`
      (reason ProviderConfigurationMissing) when absent, null or empty;
    - `config_str/bool/int/value(field, default=...)`: typed fields of it;
    - `target` (the Target object), `target_content` (its resolved content: `spec.config` or the
      Secret data), `context`, `previous_provider_status`: dicts or None.
    """

    def __init__(self, deploy_item, target=None, target_content=None, context=None, previous_provider_status=None):
        self.deploy_item = deploy_item if isinstance(deploy_item, dict) else {}
        self.target = target
        self.target_content = target_content
        self.context = context
        self.previous_provider_status = previous_provider_status

    @classmethod
    def _from_wit(cls, inv):
        def parse(s, what):
            if s is None:
                return None
            try:
                return _json.loads(s)
            except ValueError as e:
                raise InternalError(f"host sent invalid JSON for {what}: {e}", reason="InvalidHostInput") from None

        target = content = None
        if inv.target is not None:
            target = parse(inv.target.target, "target")
            try:
                content = _json.loads(inv.target.content)
            except ValueError:
                content = inv.target.content  # not JSON: give the raw text
        return cls(parse(inv.deploy_item, "deploy-item"), target, content,
                   parse(inv.context, "context"), parse(inv.previous_provider_status, "previous-provider-status"))

    @property
    def metadata(self):
        return self.deploy_item.get("metadata") or {}

    @property
    def name(self):
        return self.metadata.get("name", "")

    @property
    def namespace(self):
        return self.metadata.get("namespace", "")

    @property
    def annotations(self):
        return self.metadata.get("annotations") or {}

    @property
    def phase(self):
        return (self.deploy_item.get("status") or {}).get("phase", "")

    @property
    def config_raw(self):
        """`spec.config`, or None if absent, null or an empty object."""
        c = (self.deploy_item.get("spec") or {}).get("config")
        if c is None or c == {}:
            return None
        return c

    @property
    def config(self):
        c = self.config_raw
        if c is None:
            raise ConfigurationError("provider configuration missing", reason="ProviderConfigurationMissing")
        if not isinstance(c, dict):
            raise ConfigurationError(f"spec.config: expected an object, got {_json_type(c)}",
                                     reason="ParseProviderConfiguration")
        return c

    def config_value(self, field, types_, default=_MISSING):
        """`spec.config.<field>` (dots walk into nested objects) checked against `types_`
        (a type or tuple). Missing/null -> `default`, or ConfigurationError if none is given."""
        types_ = types_ if isinstance(types_, tuple) else (types_,)
        v = self.config
        for part in field.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        want = _type_name(types_)
        if v is None:
            if default is not _MISSING:
                return default
            raise ConfigurationError(f"spec.config.{field}: required {want} is missing",
                                     reason="ParseProviderConfiguration")
        ok = isinstance(v, types_) and not (isinstance(v, bool) and bool not in types_)
        if not ok:
            raise ConfigurationError(f"spec.config.{field}: expected a {want}, got {_json_type(v)}",
                                     reason="ParseProviderConfiguration")
        return v

    def config_str(self, field, default=_MISSING):
        return self.config_value(field, str, default)

    def config_bool(self, field, default=_MISSING):
        return self.config_value(field, bool, default)

    def config_int(self, field, default=_MISSING):
        return self.config_value(field, int, default)

    # HTTP (WIT 1.5): the item's Target of type wasm-deployer.dev/http-api
    def http_base_url(self):
        """`spec.config.url` of the item's Target (`http.target_base_url`): ConfigurationError if
        there is no Target (NoTarget), it is not of type `wasm-deployer.dev/http-api`
        (TargetType) or has no http(s) url (TargetUrl)."""
        return _http().target_base_url(self)

    def http_url(self, path):
        """The Target's url joined with the relative `path` (`http.target_url`):
        ConfigurationError (InvalidPath) for a path that is not a string, absolute or has `..`."""
        return _http().target_url(self, path)


class Deployer:
    """Base class of a deployer plugin. Set `name`, `version`, `deploy_item_types` (or
    override `describe()` returning a dict with those keys), implement
    `reconcile(ctx, inv)` and `delete(ctx, inv)` returning a `Response`, and export the class
    with `Deployer = export_deployer(MyClass)` at module level. A fresh instance may be used
    for every call: keep no state between calls."""

    name = ""
    version = "0.1.0"
    deploy_item_types = []
    hook_types = []

    def describe(self):
        return {"name": self.name, "version": self.version,
                "deploy_item_types": list(self.deploy_item_types), "hook_types": list(self.hook_types)}

    def reconcile(self, ctx, inv):
        raise NotImplementedError("reconcile is not implemented")

    def delete(self, ctx, inv):
        return Response()


def _response(r):
    if r is None:
        r = Response()
    elif isinstance(r, dict):
        r = Response(**r)
    elif not isinstance(r, Response):
        raise TypeError(f"expected a Response, got {type(r).__name__}")
    return r._to_wit()


def _run_step(impl, method, inv, operation):
    try:
        return _response(getattr(impl, method)(Ctx(), Invocation._from_wit(inv)))
    except BaseException as e:
        raise _wit_error(e, operation) from None


def export_deployer(cls):
    """The class componentize-py exports for the `deployer` interface of world
    `deployer-plugin`: assign it to a module-level `Deployer` in the app module."""
    if _exports is None or not hasattr(_exports, "Deployer"):
        raise RuntimeError("export_deployer needs componentize-py bindings of world deployer-plugin "
                           "(componentize-py -d wit -w deployer-plugin componentize ...)")
    impl = cls()

    class _Exported(_exports.Deployer):
        def describe(self):
            d = impl.describe()
            if not isinstance(d, dict):
                d = vars(d)
            return _types.Description(
                name=str(d.get("name", "")),
                version=str(d.get("version", "")),
                deploy_item_types=[str(t) for t in d.get("deploy_item_types", [])],
                hook_types=[str(t) for t in d.get("hook_types", [])],
            )

        def reconcile(self, invocation):
            return _run_step(impl, "reconcile", invocation, "reconcile")

        def delete(self, invocation):
            return _run_step(impl, "delete", invocation, "delete")

    _Exported.__name__ = _Exported.__qualname__ = "Deployer"
    return _Exported


# ---- hooks (world `hook-plugin`) -------------------------------------------------------------

# Landscaper's names (as the Rust SDK's HookType::as_str) in WIT order.
HOOK_TYPES = ["Start", "DuringResponsibilityCheck", "AfterResponsibilityCheck", "ShouldReconcile",
              "BeforeAnyReconcile", "BeforeAbort", "BeforeForceReconcile", "BeforeDelete",
              "BeforeReconcile", "End"]


def _hook_type_to_wit(t):
    if _hooks is not None and isinstance(t, _hooks.HookType):
        return t
    s = str(t)
    if "-" in s or s.islower():  # WIT spelling: before-reconcile
        key = s.replace("-", "_").upper()
    else:  # Landscaper spelling: BeforeReconcile
        key = "".join("_" + ch if ch.isupper() and i else ch for i, ch in enumerate(s)).upper()
    try:
        return getattr(_hooks.HookType, key)
    except AttributeError:
        raise ValueError(f"unknown hook type {t!r}; one of {', '.join(HOOK_TYPES)}") from None


class HookInput:
    """One hook call: `hook_type` (Landscaper's name, e.g. "BeforeReconcile"), `deploy_item`
    (dict, None for Start), `target` (the Target object, None if absent; no credentials)."""

    def __init__(self, hook_type, deploy_item=None, target=None):
        self.hook_type = hook_type
        self.deploy_item = deploy_item
        self.target = target

    @property
    def name(self):
        return ((self.deploy_item or {}).get("metadata") or {}).get("name", "")

    @property
    def namespace(self):
        return ((self.deploy_item or {}).get("metadata") or {}).get("namespace", "")

    @property
    def annotations(self):
        return ((self.deploy_item or {}).get("metadata") or {}).get("annotations") or {}

    @classmethod
    def _from_wit(cls, i):
        def parse(s, what):
            if s is None:
                return None
            try:
                return _json.loads(s)
            except ValueError as e:
                raise InternalError(f"host sent invalid JSON for {what}: {e}", reason="InvalidHostInput") from None
        return cls(HOOK_TYPES[i.hook_type.value], parse(i.deploy_item, "deploy-item"), parse(i.target, "target"))


class HookResult:
    """What a hook says (Landscaper's HookResult). Return None from `run` for "no opinion"."""

    __slots__ = ("abort_reconcile", "requeue", "requeue_after_ms")

    def __init__(self, abort_reconcile=False, requeue=False, requeue_after_ms=None):
        self.abort_reconcile = abort_reconcile
        self.requeue = requeue
        self.requeue_after_ms = requeue_after_ms

    def _to_wit(self):
        after = self.requeue_after_ms
        return _hooks.HookResult(abort_reconcile=bool(self.abort_reconcile), requeue=bool(self.requeue),
                                 requeue_after_ms=None if after is None else int(after))


class Hook:
    """Base class of a hook plugin. Set `name`, `version`, `hook_types` (WIT "before-reconcile"
    or Landscaper "BeforeReconcile" spelling), implement `run(ctx, inp)` returning a
    `HookResult` or None, and export with `Hooks = export_hooks(MyHook)`. `ctx` offers logging
    and the clock (a hook has no Kubernetes access)."""

    name = ""
    version = "0.1.0"
    hook_types = []

    def describe(self):
        return {"name": self.name, "version": self.version, "hook_types": list(self.hook_types)}

    def run(self, ctx, inp):
        return None


def export_hooks(cls):
    """The class componentize-py exports for the `hooks` interface (world `hook-plugin`):
    assign it to a module-level `Hooks` in the app module."""
    if _exports is None or not hasattr(_exports, "Hooks"):
        raise RuntimeError("export_hooks needs componentize-py bindings of a world exporting hooks "
                           "(componentize-py -d wit -w hook-plugin componentize ...)")
    impl = cls()

    class _Exported(_exports.Hooks):
        def describe(self):
            d = impl.describe()
            if not isinstance(d, dict):
                d = vars(d)
            return _hooks.HookSetup(name=str(d.get("name", "")), version=str(d.get("version", "")),
                                    hook_types=[_hook_type_to_wit(t) for t in d.get("hook_types", [])])

        def run(self, input):
            operation = HOOK_TYPES[input.hook_type.value]
            try:
                r = impl.run(Ctx(), HookInput._from_wit(input))
                if r is None:
                    return None
                if isinstance(r, dict):
                    r = HookResult(**r)
                if not isinstance(r, HookResult):
                    raise TypeError(f"expected a HookResult or None, got {type(r).__name__}")
                return r._to_wit()
            except BaseException as e:
                raise _wit_error(e, operation) from None

    _Exported.__name__ = _Exported.__qualname__ = "Hooks"
    return _Exported


# ---- HTTP (WIT 1.5) --------------------------------------------------------------------------

# Imported last: `http` uses the errors above. Imported here (not lazily) so componentize-py
# puts it into the component with its bindings. A project that carries only this file (no
# `wasm_deployer/http.py`) still builds; it just has no HTTP.
try:
    from . import http  # noqa: E402
except ImportError:
    import importlib.util as _importlib_util
    if _importlib_util.find_spec(f"{__name__}.http") is not None:
        raise  # there, but broken
    http = None
