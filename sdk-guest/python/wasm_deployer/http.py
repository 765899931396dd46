"""wasm_deployer.http -- outgoing HTTP requests (WIT 1.5, `wasi:http/outgoing-handler`).

A blocking client over the componentize-py bindings of the standard `wasi:http` interface, the
Target URL helpers, and the error mapping every SDK shares:

    from wasm_deployer import http

    def reconcile(self, ctx, inv):
        url = http.target_url(inv, inv.config_str("path"))    # <Target url>/<path>
        resp = http.put_json(url, inv.config["body"])          # transport errors mapped
        resp.raise_for_status()                                # 401/403, 4xx, 5xx mapped
        return Response(phase="Succeeded", exports={"status": resp.status, "body": resp.json_or_none()})

The host sends a request only if its URL lies under the item's Target `url` (a Target of type
`wasm-deployer.dev/http-api`) or a prefix of its configuration's `http.allow`, and adds the
Target's credentials (`Authorization`) itself: a plugin never sees a token. It follows no
redirect: a 3xx comes back as it is.

Error mapping (`status_error`, `transport_error`):
- 401, 403: `UnauthorizedError` (ERR_UNAUTHORIZED, reason `Unauthorized`);
- other 4xx: `ConfigurationError` (ERR_CONFIGURATION_PROBLEM, reason `HttpClientError`);
- 5xx: `RetryableError` (no code, reason `HttpServerError`);
  (all three: message `<METHOD> <URL>: <status> <body, first 500 characters>`)
- no response (refused, timeout, reset, TLS, ...): `RetryableError`, reason `HttpRequestFailed`,
  message `<METHOD> <URL>: wasi:http error <code> (<detail>)`;
- refused by the host (`HTTP-request-denied`): `ConfigurationError`, reason `HttpNotAllowed` (the
  host fails the item so anyway).

Requests need world `deployer-plugin` (or `deployer-hook-plugin`); elsewhere `request` raises
`InternalError` (reason CapabilityUnavailable). The URL helpers and the mapping are pure Python.
"""

import json as _json
import re as _re

from . import (
    ConfigurationError,
    DeployerError,
    InternalError,
    RetryableError,
    UnauthorizedError,
    _json_type,
)

try:  # world `deployer-plugin` (and `deployer-hook-plugin`) since WIT 1.5
    from componentize_py_types import Err as _Err
    from componentize_py_types import Ok as _Ok
    from wit_world.imports import outgoing_handler as _handler
    from wit_world.imports import streams as _streams
    from wit_world.imports import wasi_http_types as _wht
except ImportError:  # another world, or plain CPython
    _Err = _Ok = _handler = _streams = _wht = None

__all__ = [
    "BODY_IN_MESSAGE",
    "HTTP_API_TARGET_TYPE",
    "REQUEST_DENIED",
    "HttpResponse",
    "delete",
    "get",
    "join",
    "patch_json",
    "post_json",
    "put_json",
    "relative_path_problem",
    "request",
    "status_error",
    "target_base_url",
    "target_url",
    "transport_error",
]

#: The Target type that names an HTTP API (`spec.config.url`, optional `caData` and `auth`).
HTTP_API_TARGET_TYPE = "wasm-deployer.dev/http-api"

#: How many characters of a response body an error message quotes.
BODY_IN_MESSAGE = 500

#: The wasi:http error code with which the host refuses a request it does not grant.
REQUEST_DENIED = "HTTP-request-denied"

_WRITE_CHUNK = 4096  # blocking-write-and-flush takes at most 4096 bytes per call
_READ_CHUNK = 64 * 1024


# ---- the Target's URL ------------------------------------------------------------------------

def join(base, path):
    """`base` and a relative `path` joined with exactly one `/` (`https://h/v1` or
    `https://h/v1/` with `things/a` or `/things/a`: `https://h/v1/things/a`). An empty path
    gives `base`."""
    base, path = str(base), str(path)
    if path == "":
        return base
    return base.rstrip("/") + "/" + path.lstrip("/")


def relative_path_problem(path):
    """What is wrong with `path` as a path relative to a base URL (not a string, an absolute URL
    `https://...` or `//host/...`, a `..` segment, also percent-encoded), or None."""
    if not isinstance(path, str):
        return f"path must be a string, got {_json_type(path)}"
    if "://" in path or path.startswith("//"):
        return f"path {_json.dumps(path)} is an absolute URL; it must be relative to the Target's url"
    before_query = _re.split(r"[?#]", path, maxsplit=1)[0]
    if any(seg.lower().replace("%2e", ".") == ".." for seg in _re.split(r"[/\\]", before_query)):
        return f"path {_json.dumps(path)} contains \"..\"; it must stay under the Target's url"
    return None


def target_base_url(inv):
    """`spec.config.url` of the invocation's Target, which must have type
    `wasm-deployer.dev/http-api`. `ConfigurationError` if there is no Target (reason NoTarget),
    it has another type (TargetType) or no http(s) `url` (TargetUrl)."""
    target = getattr(inv, "target", None)
    if target is None:
        raise ConfigurationError(
            f"no target defined: the DeployItem needs a Target of type {HTTP_API_TARGET_TYPE}", reason="NoTarget")
    target = target if isinstance(target, dict) else {}
    name = _json.dumps(str((target.get("metadata") or {}).get("name") or ""))
    type_ = (target.get("spec") or {}).get("type") or ""
    if type_ != HTTP_API_TARGET_TYPE:
        raise ConfigurationError(
            f"Target {name} has type {_json.dumps(str(type_))}; HTTP requests need a Target of type "
            f"{_json.dumps(HTTP_API_TARGET_TYPE)}", reason="TargetType")
    content = getattr(inv, "target_content", None)
    if not isinstance(content, dict):
        raise ConfigurationError(f"Target {name}: its config is not a JSON object", reason="TargetUrl")
    url = content.get("url")
    if url is None:
        raise ConfigurationError(f"Target {name} has no url (spec.config.url)", reason="TargetUrl")
    url = url.strip() if isinstance(url, str) else ""
    if url == "":
        raise ConfigurationError(f"Target {name}: spec.config.url must be a non-empty string", reason="TargetUrl")
    m = _re.match(r"(?i)https?://(.*)$", url, _re.S)
    if m is None or m.group(1) == "" or m.group(1).startswith("/"):
        raise ConfigurationError(f"Target {name}: url {_json.dumps(url)} is not an http:// or https:// URL",
                                 reason="TargetUrl")
    return url


def target_url(inv, path):
    """The URL of `path` under the invocation's Target: `target_base_url(inv)` joined with the
    relative `path`. `ConfigurationError` (reason InvalidPath) if `path` is not a string, is an
    absolute URL or has a `..` segment; see `target_base_url` for the Target's errors."""
    problem = relative_path_problem(path)
    if problem is not None:
        raise ConfigurationError(problem, reason="InvalidPath")
    return join(target_base_url(inv), path)


# ---- the error mapping -----------------------------------------------------------------------

def _quote_body(body):
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else str(body or "")
    text = text.strip()
    return text[:BODY_IN_MESSAGE] + "..." if len(text) > BODY_IN_MESSAGE else text


def status_error(method, url, status, body=b""):
    """The error for a 4xx or 5xx answer, None otherwise: 401/403 `UnauthorizedError`
    (Unauthorized), other 4xx `ConfigurationError` (HttpClientError), 5xx `RetryableError`
    (HttpServerError); message `<METHOD> <URL>: <status> <body, first 500 characters>`."""
    status = int(status)
    quoted = _quote_body(body)
    message = f"{str(method).upper()} {url}: {status}" + (f" {quoted}" if quoted else "")
    if status in (401, 403):
        return UnauthorizedError(message, reason="Unauthorized")
    if 400 <= status <= 499:
        return ConfigurationError(message, reason="HttpClientError")
    if 500 <= status <= 599:
        return RetryableError(message, reason="HttpServerError")
    return None


def transport_error(method, url, code, detail=None):
    """The error for a request that got no answer, from its wasi:http `error-code` (WIT
    spelling, e.g. `connection-refused`): `HTTP-request-denied` -> `ConfigurationError`
    (HttpNotAllowed), anything else -> `RetryableError` (HttpRequestFailed); the message names
    `method`, `url`, the code and `detail`."""
    m = str(method).upper()
    said = f"wasi:http error {code}" + (f" ({detail})" if detail else "")
    if code == REQUEST_DENIED:
        return ConfigurationError(
            f"{m} {url}: not allowed by the host ({said}): a plugin may send requests only under its "
            "item's Target url or a prefix of the host's http.allow", reason="HttpNotAllowed")
    return RetryableError(f"{m} {url}: {said}", reason="HttpRequestFailed")


# ---- the response ----------------------------------------------------------------------------

class HttpResponse:
    """An answer, whatever its status: `status` (int), `headers` (list of (lower-case name,
    value)), `body` (bytes), and the `method` and `url` it answers."""

    __slots__ = ("status", "headers", "body", "method", "url")

    def __init__(self, status, headers=None, body=b"", method="GET", url=""):
        self.status = int(status)
        self.headers = list(headers or [])
        self.body = bytes(body or b"")
        self.method = str(method).upper()
        self.url = url

    def __repr__(self):
        return f"HttpResponse({self.method} {self.url}: {self.status}, {len(self.body)} bytes)"

    @property
    def ok(self):
        """2xx."""
        return 200 <= self.status <= 299

    def header(self, name, default=None):
        """The first value of header `name` (case-insensitive)."""
        name = name.lower()
        for n, v in self.headers:
            if n.lower() == name:
                return v
        return default

    @property
    def text(self):
        """The body as text (invalid UTF-8 replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self):
        """The body as JSON (ValueError if it is not)."""
        return _json.loads(self.body)

    def json_or_none(self):
        """The body as JSON; None if it is empty or not JSON."""
        try:
            return _json.loads(self.body) if self.body.strip() else None
        except ValueError:
            return None

    def raise_for_status(self, allow=()):
        """Raise the mapped error (`status_error`) for a 4xx or 5xx status not in `allow` (e.g.
        `allow=(404,)` on DELETE); return self otherwise."""
        if self.status in tuple(allow):
            return self
        err = status_error(self.method, self.url, self.status, self.body)
        if err is not None:
            raise err
        return self


# ---- sending (wasi:http) ---------------------------------------------------------------------

class _Transport(Exception):
    """Internal: a wasi:http failure, its code (WIT spelling) and detail."""

    def __init__(self, code, detail=None):
        super().__init__(code)
        self.code = code
        self.detail = detail


_ACRONYMS = {"dns": "DNS", "ip": "IP", "tls": "TLS", "http": "HTTP", "uri": "URI"}


def _code_name(code):
    """`ErrorCode_HttpRequestDenied()` -> `HTTP-request-denied`, its payload as detail."""
    cls = type(code).__name__
    words = _re.findall(r"[A-Z][a-z0-9]*", cls.split("_", 1)[-1])
    name = "-".join(_ACRONYMS.get(w.lower(), w.lower()) for w in words)
    value = getattr(code, "value", None)
    if value is None:
        detail = None
    elif hasattr(value, "__dataclass_fields__"):
        parts = [f"{k}={getattr(value, k)!r}" for k in value.__dataclass_fields__ if getattr(value, k) is not None]
        detail = ", ".join(parts) or None
    else:
        detail = str(value)
    return name, detail


def _from_code(code):
    return _Transport(*_code_name(code))


def _from_stream(e):
    if isinstance(e, _streams.StreamError_Closed):
        return _Transport("connection-terminated")
    io = getattr(e, "value", None)
    try:
        code = _wht.http_error_code(io)
    except BaseException:
        code = None
    if code is not None:
        return _from_code(code)
    try:
        detail = io.to_debug_string()
    except BaseException:
        detail = repr(io)
    return _Transport("internal-error", detail)


def _split_url(url):
    """`scheme://authority/path?query` -> (scheme, authority, path-with-query); the fragment
    is dropped, an empty path is `/`."""
    m = _re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)([^#]*)", url)
    if m is None or m.group(1).lower() not in ("http", "https") or m.group(2) == "":
        raise _Transport("HTTP-request-URI-invalid", url)
    path = m.group(3) or "/"
    if path.startswith("?"):
        path = "/" + path
    return m.group(1).lower(), m.group(2), path


def _method(m):
    cls = getattr(_wht, "Method_" + m.capitalize(), None)
    if cls is not None and m in ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"):
        return cls()
    return _wht.Method_Other(m)


def _send(method, url, headers, body, timeout):
    scheme, authority, path = _split_url(url)
    entries = [(str(n), str(v).encode("utf-8")) for n, v in headers]
    sends_body = bool(body) or method in ("PUT", "POST", "PATCH")
    if sends_body and not any(n.lower() == "content-length" for n, _ in entries):
        entries.append(("content-length", str(len(body)).encode()))
    try:
        fields = _wht.Fields.from_list(entries)
    except _Err as e:
        raise _Transport("internal-error", f"invalid request header: {e.value!r}") from None
    outgoing = _wht.OutgoingRequest(fields)
    for setter, value, what in ((outgoing.set_method, _method(method), "method"),
                                (outgoing.set_scheme, _wht.Scheme_Https() if scheme == "https" else _wht.Scheme_Http(),
                                 "scheme"),
                                (outgoing.set_authority, authority, "authority"),
                                (outgoing.set_path_with_query, path, "path")):
        try:
            setter(value)
        except _Err:
            if what == "method":
                raise _Transport("HTTP-request-method-invalid", method) from None
            raise _Transport("HTTP-request-URI-invalid", f"{what} of {url}") from None
    out_body = outgoing.body()
    options = None
    if timeout is not None:
        nanos = max(0, int(float(timeout) * 1e9))
        options = _wht.RequestOptions()
        try:
            options.set_connect_timeout(nanos)
            options.set_first_byte_timeout(nanos)
        except _Err:
            raise _Transport("internal-error", "the host does not take request timeouts") from None
    try:
        future = _handler.handle(outgoing, options)
    except _Err as e:
        raise _from_code(e.value) from None
    # The body goes out while the host sends the request; a failure of the exchange shows up in
    # the response too, and its error code is the response's.
    write_error = _write_body(out_body, body)
    with future:
        with future.subscribe() as pollable:
            pollable.block()
        got = future.get()
        if got is None:
            raise _Transport("internal-error", "no response although ready")
        if isinstance(got, _Err):
            raise _Transport("internal-error", "the response was taken twice")
        inner = got.value if isinstance(got, _Ok) else got
        if isinstance(inner, _Err):
            raise _from_code(inner.value)
        response = inner.value if isinstance(inner, _Ok) else inner
    if write_error is not None:
        raise write_error
    with response:
        status = response.status()
        with response.headers() as h:
            got_headers = [(n.lower(), v.decode("utf-8", "replace")) for n, v in h.entries()]
        incoming = response.consume()
        data = _read_body(incoming)
        trailers = _wht.IncomingBody.finish(incoming)
        trailers.__exit__(None, None, None)
    return status, got_headers, data


def _write_body(out_body, body):
    """Writes and finishes the request body; the failure as a `_Transport`, or None."""
    try:
        if body:
            with out_body.write() as stream:
                for i in range(0, len(body), _WRITE_CHUNK):
                    stream.blocking_write_and_flush(body[i:i + _WRITE_CHUNK])
        _wht.OutgoingBody.finish(out_body, None)
    except _Err as e:
        if e.value is None:
            return _Transport("internal-error", "the request body's stream was taken")
        if isinstance(e.value, (_streams.StreamError_Closed, _streams.StreamError_LastOperationFailed)):
            return _from_stream(e.value)
        return _from_code(e.value)
    return None


def _read_body(incoming):
    chunks = []
    with incoming.stream() as stream:
        while True:
            try:
                chunks.append(stream.blocking_read(_READ_CHUNK))
            except _Err as e:
                if isinstance(e.value, _streams.StreamError_Closed):
                    break
                raise _from_stream(e.value) from None
    return b"".join(chunks)


_NO_JSON = object()


def request(method, url, headers=None, body=None, json=_NO_JSON, timeout=None):
    """Send one request and wait for the whole answer (blocking).

    `headers`: a dict or a list of (name, value); `body`: bytes or str; `json`: a value sent as
    JSON with `Content-Type: application/json` (and `Accept`, unless set); `timeout`: seconds
    for connect and first byte (default: the host's; always cut to the invocation deadline).

    Returns an `HttpResponse` whatever its status (see `raise_for_status`). A request that gets
    no answer raises the mapped `DeployerError` (`transport_error`: HttpRequestFailed, retryable;
    HttpNotAllowed)."""
    if _handler is None:
        raise InternalError("HTTP is not available in this plugin's world (WIT 1.5 deployer-plugin imports "
                            "wasi:http/outgoing-handler)", reason="CapabilityUnavailable")
    method = str(method).upper()
    header_list = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    if json is not _NO_JSON:
        body = _json.dumps(json, separators=(",", ":"))
        header_list = [(n, v) for n, v in header_list if str(n).lower() != "content-type"]
        header_list.append(("content-type", "application/json"))
        if not any(str(n).lower() == "accept" for n, _ in header_list):
            header_list.append(("accept", "application/json"))
    if isinstance(body, str):
        body = body.encode("utf-8")
    body = bytes(body or b"")
    try:
        status, got_headers, data = _send(method, url, header_list, body, timeout)
    except _Transport as t:
        raise transport_error(method, url, t.code, t.detail) from None
    return HttpResponse(status, got_headers, data, method, url)


def get(url, **kwargs):
    """`GET url` (see `request`)."""
    return request("GET", url, **kwargs)


def delete(url, **kwargs):
    """`DELETE url` (see `request`)."""
    return request("DELETE", url, **kwargs)


def put_json(url, value, **kwargs):
    """`PUT url` with `value` as JSON (see `request`)."""
    return request("PUT", url, json=value, **kwargs)


def post_json(url, value, **kwargs):
    """`POST url` with `value` as JSON (see `request`)."""
    return request("POST", url, json=value, **kwargs)


def patch_json(url, value, **kwargs):
    """`PATCH url` with `value` as JSON (see `request`)."""
    return request("PATCH", url, json=value, **kwargs)
