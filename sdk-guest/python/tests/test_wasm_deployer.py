"""Native tests of the helper and the example plugins (echo, hold-hook, http-api), with plain CPython.

The WIT bindings come from `componentize-py bindings` (stubs whose imports raise
NotImplementedError); the tests replace the imports with fakes and call the exported classes
the way the component would (wasi:http for http-api: fakes of the resources, `FakeHttp`). Run
(after plugins/python/build.sh created the toolchain):

    python3 -m unittest discover -s sdk-guest/python/tests -v

COMPONENTIZE_PY overrides the componentize-py binary (default: the toolchain venv's).
"""

import importlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(SDK))
CPY = os.environ.get("COMPONENTIZE_PY") or os.path.join(
    os.environ.get("TOOLCHAINS") or os.path.join(REPO, "target", "guest-toolchains"),
    "python-venv", "bin", "componentize-py")

_TMP = tempfile.TemporaryDirectory()
_PURGE = ("wit_world", "componentize_py_types", "componentize_py_async_support", "poll_loop",
          "wasm_deployer", "app")


def load(world, plugin):
    """Import plugins/python/<plugin>/app.py against stub bindings of `world`."""
    out = os.path.join(_TMP.name, world)
    if not os.path.isdir(out):
        subprocess.run([CPY, "-q", "-d", os.path.join(REPO, "wit"), "-w", world, "bindings", out],
                       check=True)
    for name in list(sys.modules):
        if name.split(".")[0] in _PURGE:
            del sys.modules[name]
    sys.path[:] = [out, SDK, os.path.join(REPO, "plugins", "python", plugin)] + [
        p for p in sys.path if p not in (out, SDK) and "plugins/python" not in p and _TMP.name not in p]
    app = importlib.import_module("app")
    # WIT 1.5: worlds that import wasi:http have two `types` interfaces; ours gets its full name.
    types_name = "wasm_deployer_plugin_types" if os.path.exists(
        os.path.join(out, "wit_world", "imports", "wasm_deployer_plugin_types.py")) else "types"
    return (app, importlib.import_module(f"wit_world.imports.{types_name}"),
            importlib.import_module("componentize_py_types"))


def item(config, name="hello", annotations=None):
    meta = {"name": name, "namespace": "ns1"}
    if annotations:
        meta["annotations"] = annotations
    return json.dumps({"metadata": meta, "spec": {"type": "examples.wasm-deployer.dev/echo-python",
                                                  "config": config}})


CONFIG = {"apiVersion": "examples.wasm-deployer.dev/v1", "kind": "ProviderConfiguration"}


class EchoTest(unittest.TestCase):
    def setUp(self):
        self.app, self.types, self.cpt = load("deployer-plugin", "echo")
        from wit_world.imports import clock, kubernetes, log, progress
        self.calls, self.logs, self.store = [], [], {}
        log.log = lambda level, msg: self.logs.append((level.name, msg))
        clock.now_unix_millis = lambda: 1767225600000
        progress.checkpoint = lambda name: self.calls.append(("checkpoint", name))

        def get(ref):
            self.calls.append(("get", ref.kind, ref.namespace, ref.name))
            o = self.store.get((ref.namespace, ref.name))
            return None if o is None else json.dumps(o)

        def create(s):
            o = json.loads(s)
            self.calls.append(("create", o))
            self.store[(o["metadata"]["namespace"], o["metadata"]["name"])] = o
            return s

        def update(s):
            o = json.loads(s)
            self.calls.append(("update", o))
            self.store[(o["metadata"]["namespace"], o["metadata"]["name"])] = o
            return s

        def delete(ref):
            self.calls.append(("delete", ref.kind, ref.namespace, ref.name))
            return self.store.pop((ref.namespace, ref.name), None) is not None

        kubernetes.get, kubernetes.create, kubernetes.update, kubernetes.delete = get, create, update, delete
        self.plugin = self.app.Deployer()

    def inv(self, config, **kw):
        return self.types.Invocation(deploy_item=item(config, **kw), target=None, context=None,
                                     previous_provider_status=None)

    def err(self, f, *args):
        with self.assertRaises(self.cpt.Err) as cm:
            f(*args)
        self.assertIsInstance(cm.exception.value, self.types.DeployerError)
        return cm.exception.value

    def test_describe(self):
        d = self.plugin.describe()
        self.assertEqual((d.name, d.version, d.deploy_item_types, d.hook_types),
                         ("python-echo", "0.1.0", ["examples.wasm-deployer.dev/echo-python"], []))

    def test_reconcile_creates_then_updates(self):
        r = self.plugin.reconcile(self.inv(dict(CONFIG, message="hi")))
        self.assertEqual(r.phase, "Succeeded")
        self.assertEqual(json.loads(r.exports), {"message": "hi"})
        self.assertEqual(json.loads(r.provider_status), {"apiVersion": "examples.wasm-deployer.dev/v1",
                                                         "kind": "ProviderStatus", "configMap": "hello-echo"})
        self.assertEqual((r.conditions, r.retry_after_ms), ([], None))
        self.assertEqual([c[0] for c in self.calls], ["get", "create"])
        self.assertEqual(self.calls[1][1], {"apiVersion": "v1", "kind": "ConfigMap", "data": {"message": "hi"},
                                            "metadata": {"name": "hello-echo", "namespace": "ns1"}})
        self.assertIn(("INFO", "echo: writing 'hi' into ConfigMap ns1/hello-echo"), self.logs)
        self.plugin.reconcile(self.inv(dict(CONFIG, message="again")))
        self.assertEqual([c[0] for c in self.calls], ["get", "create", "get", "update"])
        self.assertEqual(self.store[("ns1", "hello-echo")]["data"], {"message": "again"})

    def test_bad_config(self):
        e = self.err(self.plugin.reconcile, self.inv(CONFIG))
        self.assertEqual((e.codes, e.operation, e.reason), (["ERR_CONFIGURATION_PROBLEM"], "reconcile",
                                                            "ParseProviderConfiguration"))
        self.assertEqual(e.message, "spec.config.message: required string is missing")
        e = self.err(self.plugin.reconcile, self.inv(dict(CONFIG, message=3)))
        self.assertEqual(e.message, "spec.config.message: expected a string, got integer")
        e = self.err(self.plugin.reconcile, self.inv({}))
        self.assertEqual((e.codes, e.reason), (["ERR_CONFIGURATION_PROBLEM"], "ProviderConfigurationMissing"))
        self.assertEqual(self.calls, [])

    def test_crash_is_an_internal_problem(self):
        e = self.err(self.plugin.reconcile, self.inv(dict(CONFIG, message="x", crash=True)))
        self.assertEqual((e.codes, e.operation, e.reason), (["ERR_INTERNAL_PROBLEM"], "reconcile",
                                                            "UncaughtException"))
        self.assertTrue(e.message.startswith("RuntimeError: crash requested (at app.py:"), e.message)
        self.assertTrue(any(l == "ERROR" and "Traceback" in m for l, m in self.logs))

    def test_host_errors_pass_through(self):
        from wit_world.imports import kubernetes

        def refuse(ref):
            raise self.cpt.Err(self.types.DeployerError(codes=["ERR_UNAUTHORIZED"], operation="kubernetes",
                                                        reason="Forbidden", message="no", conditions=[]))
        kubernetes.get = refuse
        e = self.err(self.plugin.reconcile, self.inv(dict(CONFIG, message="x")))
        self.assertEqual((e.codes, e.operation, e.reason, e.message),
                         (["ERR_UNAUTHORIZED"], "kubernetes", "Forbidden", "no"))

    def test_delete_is_idempotent(self):
        self.plugin.reconcile(self.inv(dict(CONFIG, message="hi")))
        for _ in range(2):
            r = self.plugin.delete(self.inv(dict(CONFIG, message="hi")))
            self.assertEqual((r.phase, r.exports, r.provider_status, r.conditions, r.retry_after_ms),
                             ("Succeeded", None, None, [], None))
        self.assertEqual([c[0] for c in self.calls], ["get", "create", "delete", "delete"])
        self.assertEqual(self.store, {})


class HelperTest(unittest.TestCase):
    def setUp(self):
        self.app, self.types, self.cpt = load("deployer-plugin", "echo")
        import wasm_deployer
        self.wd = wasm_deployer

    def test_response_conversion(self):
        r = self.wd.Response(phase="Progressing", retry_after_ms=500, exports={"a": [1]},
                             conditions=[self.wd.Condition("Ready", False, "Waiting", "not yet"),
                                         {"type": "X", "status": "Progressing", "codes": ["ERR_X"]}])._to_wit()
        self.assertEqual((r.phase, r.retry_after_ms, r.exports, r.provider_status),
                         ("Progressing", 500, '{"a":[1]}', None))
        self.assertEqual([(c.type, c.status.name, c.reason, c.message, c.codes) for c in r.conditions],
                         [("Ready", "FALSE", "Waiting", "not yet", []), ("X", "PROGRESSING", "", "", ["ERR_X"])])

    def test_bad_return_value_is_an_internal_problem(self):
        class Bad(self.wd.Deployer):
            def reconcile(self, ctx, inv):
                return {"exports": {"x": object()}}
        exported = self.wd.export_deployer(Bad)()
        with self.assertRaises(self.cpt.Err) as cm:
            exported.reconcile(self.types.Invocation(deploy_item="{}", target=None, context=None,
                                                     previous_provider_status=None))
        self.assertEqual(cm.exception.value.codes, ["ERR_INTERNAL_PROBLEM"])
        self.assertIn("ValueError: exports is not JSON-serialisable", cm.exception.value.message)

    def test_typed_errors(self):
        class Cfg(self.wd.Deployer):
            def reconcile(self, ctx, inv):
                raise self.wd_.RetryableError("later", reason="NotReady")
        Cfg.wd_ = self.wd
        exported = self.wd.export_deployer(Cfg)()
        with self.assertRaises(self.cpt.Err) as cm:
            exported.reconcile(self.types.Invocation(deploy_item="{}", target=None, context=None,
                                                     previous_provider_status=None))
        v = cm.exception.value
        self.assertEqual((v.codes, v.operation, v.reason, v.message), ([], "reconcile", "NotReady", "later"))


# ---- HTTP (WIT 1.5): fakes of the wasi:http resources --------------------------------------

class _Res:
    """A fake resource: a context manager whose exit records the drop."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.dropped = True
        return None


class FakeHttp:
    """Installs fakes of wasi:http's resources into the stub bindings. `answer(req)` gives
    (status, headers, body) or raises `Code(error_code)`; `deny` makes `handle` refuse at once;
    `break_body` makes the response body fail with an error code after its first chunk."""

    class Code(Exception):
        def __init__(self, code):
            self.code = code

    def __init__(self, answer):
        from componentize_py_types import Err, Ok
        from wit_world.imports import outgoing_handler, streams
        from wit_world.imports import wasi_http_types as wht
        self.requests, self.answer, self.deny, self.break_body = [], answer, None, None
        fake = self

        class Fields(_Res):
            def __init__(self, entries=()):
                self._entries = list(entries)

            @classmethod
            def from_list(cls, entries):
                return cls(entries)

            def entries(self):
                return list(self._entries)

        class OutStream(_Res):
            def __init__(self, sink):
                self.sink = sink

            def blocking_write_and_flush(self, data):
                assert len(data) <= 4096, "blocking-write-and-flush takes at most 4096 bytes"
                self.sink.append(bytes(data))

        class OutgoingBody(_Res):
            def __init__(self, req):
                self.req = req

            def write(self):
                return OutStream(self.req["chunks"])

            @staticmethod
            def finish(body, trailers):
                body.req["finished"] = True

        class OutgoingRequest(_Res):
            def __init__(self, fields):
                self.req = {"headers": fields.entries(), "chunks": [], "finished": False}
                fake.requests.append(self.req)

            def set_method(self, m):
                self.req["method"] = m

            def set_scheme(self, s):
                self.req["scheme"] = s

            def set_authority(self, a):
                self.req["authority"] = a

            def set_path_with_query(self, p):
                self.req["path"] = p

            def body(self):
                return OutgoingBody(self.req)

        class RequestOptions(_Res):
            def set_connect_timeout(self, ns):
                fake.requests[-1]["connect_timeout"] = ns

            def set_first_byte_timeout(self, ns):
                fake.requests[-1]["first_byte_timeout"] = ns

        class InStream(_Res):
            def __init__(self, body):
                self.chunks = [body[i:i + 3] for i in range(0, len(body), 3)]

            def blocking_read(self, n):
                if self.chunks:
                    return self.chunks.pop(0)
                if fake.break_body is not None:
                    raise Err(streams.StreamError_LastOperationFailed(("io", fake.break_body)))
                raise Err(streams.StreamError_Closed())

        class IncomingBody(_Res):
            def __init__(self, body):
                self.body = body

            def stream(self):
                return InStream(self.body)

            @staticmethod
            def finish(body):
                return _Res()

        class IncomingResponse(_Res):
            def __init__(self, status, headers, body):
                self._status, self._headers, self._body = status, headers, body

            def status(self):
                return self._status

            def headers(self):
                return Fields([(n, v.encode()) for n, v in self._headers])

            def consume(self):
                return IncomingBody(self._body)

        class Future(_Res):
            def __init__(self, req):
                self.req = req

            def subscribe(self):
                return _Res()

            def get(self):
                try:
                    status, headers, body = fake.answer(self.req)
                except FakeHttp.Code as c:
                    return Ok(Err(c.code))
                return Ok(Ok(IncomingResponse(status, headers, body)))

        def handle(request, options):
            if fake.deny is not None:
                raise Err(fake.deny)
            request.req["options"] = options
            return Future(request.req)

        _Res.block = lambda self: None
        wht.Fields, wht.OutgoingRequest, wht.OutgoingBody, wht.RequestOptions = (
            Fields, OutgoingRequest, OutgoingBody, RequestOptions)
        wht.IncomingBody = IncomingBody
        wht.http_error_code = lambda io: io[1]
        outgoing_handler.handle = handle
        self.wht = wht

    def body_of(self, i=-1):
        return b"".join(self.requests[i]["chunks"])

    def header(self, name, i=-1):
        return [v.decode() for n, v in self.requests[i]["headers"] if n.lower() == name]


API_TARGET = {"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
              "metadata": {"name": "api", "namespace": "ns1"},
              "spec": {"type": "wasm-deployer.dev/http-api", "config": {"url": "https://api.example.com/v1/"}}}


class HttpApiTest(unittest.TestCase):
    def setUp(self):
        self.app, self.types, self.cpt = load("deployer-plugin", "http-api")
        from wit_world.imports import log
        import wasm_deployer
        self.wd, self.logs = wasm_deployer, []
        log.log = lambda level, msg: self.logs.append((level.name, msg))
        self.answers = []  # (status, headers, body) or FakeHttp.Code, in order
        self.http = FakeHttp(self._answer)
        self.plugin = self.app.Deployer()

    def _answer(self, req):
        a = self.answers.pop(0)
        if isinstance(a, FakeHttp.Code):
            raise a
        return a

    def inv(self, config, target=API_TARGET, content=None):
        t = None
        if target is not None:
            content = json.dumps(target["spec"]["config"]) if content is None else content
            t = self.types.ResolvedTarget(target=json.dumps(target), content=content)
        return self.types.Invocation(
            deploy_item=json.dumps({"metadata": {"name": "a", "namespace": "ns1"},
                                    "spec": {"type": "example.wasm-deployer.dev/python-http-api", "config": config}}),
            target=t, context=None, previous_provider_status=None)

    def err(self, f, *args):
        with self.assertRaises(self.cpt.Err) as cm:
            f(*args)
        return cm.exception.value

    def test_describe(self):
        d = self.plugin.describe()
        self.assertEqual((d.name, d.deploy_item_types), ("python-http-api", ["example.wasm-deployer.dev/python-http-api"]))

    def test_put_json_and_export_the_answer(self):
        self.answers.append((201, [("Content-Type", "application/json")], b'{"id": 7, "size": 3}'))
        r = self.plugin.reconcile(self.inv({"path": "/things/a", "body": {"size": 3, "text": "x" * 5000}}))
        self.assertEqual(r.phase, "Succeeded")
        self.assertEqual(json.loads(r.exports), {"status": 201, "body": {"id": 7, "size": 3}})
        req = self.http.requests[0]
        self.assertEqual((type(req["method"]).__name__, type(req["scheme"]).__name__, req["authority"], req["path"]),
                         ("Method_Put", "Scheme_Https", "api.example.com", "/v1/things/a"))
        self.assertEqual(json.loads(self.http.body_of()), {"size": 3, "text": "x" * 5000})
        self.assertGreater(len(req["chunks"]), 1)  # written in chunks of <= 4096 bytes
        self.assertTrue(req["finished"])
        self.assertEqual(self.http.header("content-type"), ["application/json"])
        self.assertEqual(self.http.header("accept"), ["application/json"])
        self.assertEqual(self.http.header("content-length"), [str(len(self.http.body_of()))])
        self.assertIsNone(req["options"])
        self.assertIn(("INFO", "PUT https://api.example.com/v1/things/a: 201"), self.logs)

    def test_empty_or_non_json_answer_exports_null(self):
        self.answers += [(204, [], b""), (200, [], b"<html>ok</html>")]
        for _ in range(2):
            r = self.plugin.reconcile(self.inv({"path": "things/a", "body": None}))
            self.assertEqual(json.loads(r.exports)["body"], None)
        self.assertEqual(self.http.body_of(0), b"null")

    def test_status_mapping(self):
        cases = [
            (401, ["ERR_UNAUTHORIZED"], "Unauthorized"),
            (403, ["ERR_UNAUTHORIZED"], "Unauthorized"),
            (404, ["ERR_CONFIGURATION_PROBLEM"], "HttpClientError"),
            (422, ["ERR_CONFIGURATION_PROBLEM"], "HttpClientError"),
            (500, [], "HttpServerError"),
            (503, [], "HttpServerError"),
        ]
        for status, codes, reason in cases:
            self.answers.append((status, [], b' {"error": "nope"} '))
            e = self.err(self.plugin.reconcile, self.inv({"path": "things/a", "body": {}}))
            self.assertEqual((e.codes, e.reason, e.operation), (codes, reason, "reconcile"), status)
            self.assertEqual(e.message, f'PUT https://api.example.com/v1/things/a: {status} {{"error": "nope"}}')

    def test_long_body_is_cut_in_the_message(self):
        self.answers.append((400, [], b"y" * 2000))
        e = self.err(self.plugin.reconcile, self.inv({"path": "things/a", "body": {}}))
        self.assertEqual(e.message, "PUT https://api.example.com/v1/things/a: 400 " + "y" * 500 + "...")

    def test_delete(self):
        self.answers += [(204, [], b""), (404, [], b"gone"), (409, [], b"busy"), (502, [], b"")]
        for _ in range(2):  # 2xx, then 404: done
            r = self.plugin.delete(self.inv({"path": "things/a"}))
            self.assertEqual((r.phase, r.exports), (None, None))
        self.assertEqual(type(self.http.requests[0]["method"]).__name__, "Method_Delete")
        self.assertEqual(self.http.body_of(0), b"")
        self.assertEqual(self.http.header("content-length", 0), [])
        e = self.err(self.plugin.delete, self.inv({"path": "things/a"}))
        self.assertEqual((e.codes, e.reason, e.operation, e.message),
                         (["ERR_CONFIGURATION_PROBLEM"], "HttpClientError", "delete",
                          "DELETE https://api.example.com/v1/things/a: 409 busy"))
        e = self.err(self.plugin.delete, self.inv({"path": "things/a"}))
        self.assertEqual((e.codes, e.reason, e.message),
                         ([], "HttpServerError", "DELETE https://api.example.com/v1/things/a: 502"))

    def test_transport_errors(self):
        wht = self.http.wht
        self.answers.append(FakeHttp.Code(wht.ErrorCode_ConnectionRefused()))
        e = self.err(self.plugin.reconcile, self.inv({"path": "things/a", "body": {}}))
        self.assertEqual((e.codes, e.reason, e.message), ([], "HttpRequestFailed",
                         "PUT https://api.example.com/v1/things/a: wasi:http error connection-refused"))
        self.answers.append(FakeHttp.Code(wht.ErrorCode_InternalError("tls handshake eof")))
        e = self.err(self.plugin.reconcile, self.inv({"path": "things/a", "body": {}}))
        self.assertEqual(e.message, "PUT https://api.example.com/v1/things/a: wasi:http error internal-error "
                                    "(tls handshake eof)")
        # the body breaks off while being read
        self.http.break_body = wht.ErrorCode_HttpResponseTimeout()
        self.answers.append((200, [], b"{}{}"))
        e = self.err(self.plugin.reconcile, self.inv({"path": "things/a", "body": {}}))
        self.assertEqual((e.codes, e.reason, e.message), ([], "HttpRequestFailed",
                         "PUT https://api.example.com/v1/things/a: wasi:http error HTTP-response-timeout"))

    def test_denied_by_the_host(self):
        self.http.deny = self.http.wht.ErrorCode_HttpRequestDenied()
        e = self.err(self.plugin.delete, self.inv({"path": "things/a"}))
        self.assertEqual((e.codes, e.reason), (["ERR_CONFIGURATION_PROBLEM"], "HttpNotAllowed"))
        self.assertTrue(e.message.startswith("DELETE https://api.example.com/v1/things/a: not allowed by the host "
                                             "(wasi:http error HTTP-request-denied)"), e.message)

    def test_configuration_problems(self):
        other = dict(API_TARGET, spec={"type": "landscaper.gardener.cloud/kubernetes-cluster", "config": {}})
        cases = [
            (self.inv({"body": {}}), "ParseProviderConfiguration", "spec.config.path: required string is missing"),
            (self.inv({"path": 3}), "ParseProviderConfiguration", "spec.config.path: expected a string, got integer"),
            (self.inv({"path": "https://evil.example/x"}), "InvalidPath",
             'path "https://evil.example/x" is an absolute URL; it must be relative to the Target\'s url'),
            (self.inv({"path": "a/../../admin"}), "InvalidPath",
             'path "a/../../admin" contains ".."; it must stay under the Target\'s url'),
            (self.inv({"path": "a/%2e%2E/x"}), "InvalidPath",
             'path "a/%2e%2E/x" contains ".."; it must stay under the Target\'s url'),
            (self.inv({"path": "a"}, target=None), "NoTarget",
             "no target defined: the DeployItem needs a Target of type wasm-deployer.dev/http-api"),
            (self.inv({"path": "a"}, target=other), "TargetType",
             'Target "api" has type "landscaper.gardener.cloud/kubernetes-cluster"; HTTP requests need a Target '
             'of type "wasm-deployer.dev/http-api"'),
            (self.inv({"path": "a"}, content="{}"), "TargetUrl", 'Target "api" has no url (spec.config.url)'),
            (self.inv({"path": "a"}, content='{"url": 5}'), "TargetUrl",
             'Target "api": spec.config.url must be a non-empty string'),
            (self.inv({"path": "a"}, content='{"url": "ftp://h/x"}'), "TargetUrl",
             'Target "api": url "ftp://h/x" is not an http:// or https:// URL'),
            (self.inv({"path": "a"}, content="not json"), "TargetUrl", 'Target "api": its config is not a JSON object'),
        ]
        for inv, reason, message in cases:
            for op in (self.plugin.reconcile, self.plugin.delete):
                e = self.err(op, inv)
                self.assertEqual((e.codes, e.reason, e.message), (["ERR_CONFIGURATION_PROBLEM"], reason, message))
        self.assertEqual(self.http.requests, [])


class HttpHelperTest(unittest.TestCase):
    def setUp(self):
        load("deployer-plugin", "http-api")
        from wasm_deployer import http
        import wasm_deployer
        self.http, self.wd = http, wasm_deployer

    def test_join(self):
        for base in ("https://h/v1", "https://h/v1/", "https://h/v1//"):
            for path in ("things/a", "/things/a"):
                self.assertEqual(self.http.join(base, path), "https://h/v1/things/a")
        self.assertEqual(self.http.join("https://h/v1/", ""), "https://h/v1/")
        self.assertEqual(self.http.join("https://h", "a?b=c"), "https://h/a?b=c")

    def test_relative_path_problem(self):
        p = self.http.relative_path_problem
        for ok in ("a", "/a/b", "a..b/c", "a/b?x=../y", "a/.../b"):
            self.assertIsNone(p(ok), ok)
        for bad in ("..", "a/..", "..\\x", "http://x/y", "//x/y", "a/%2E%2e/b", None, 1.5):
            self.assertIsNotNone(p(bad), bad)

    def test_target_url_from_an_invocation(self):
        inv = self.wd.Invocation({}, API_TARGET, {"url": " https://h/v1 "})
        self.assertEqual((inv.http_base_url(), inv.http_url("/x/y")), ("https://h/v1", "https://h/v1/x/y"))
        self.assertEqual(self.http.target_url(inv, "things/a"), "https://h/v1/things/a")

    def test_status_error(self):
        e = self.http.status_error
        self.assertIsNone(e("GET", "u", 200, b"x"))
        self.assertIsNone(e("GET", "u", 302, b""))
        self.assertIsInstance(e("get", "u", 401), self.wd.UnauthorizedError)
        self.assertEqual(e("get", "u", 401).message, "GET u: 401")
        self.assertEqual(str(e("put", "u", 418, "short and stout")),
                         "HttpClientError: PUT u: 418 short and stout [ERR_CONFIGURATION_PROBLEM]")
        self.assertEqual(str(e("put", "u", 599, b"\xff")), "HttpServerError: PUT u: 599 \ufffd")

    def test_transport_error_and_code_names(self):
        wht = importlib.import_module("wit_world.imports.wasi_http_types")
        names = [self.http._code_name(c) for c in (
            wht.ErrorCode_HttpRequestDenied(), wht.ErrorCode_DnsTimeout(), wht.ErrorCode_DestinationIpProhibited(),
            wht.ErrorCode_HttpRequestUriInvalid(), wht.ErrorCode_TlsCertificateError(),
            wht.ErrorCode_DnsError(wht.DnsErrorPayload(rcode="NXDOMAIN", info_code=None)),
            wht.ErrorCode_HttpResponseBodySize(None), wht.ErrorCode_ConnectionTimeout())]
        self.assertEqual(names, [("HTTP-request-denied", None), ("DNS-timeout", None),
                                 ("destination-IP-prohibited", None), ("HTTP-request-URI-invalid", None),
                                 ("TLS-certificate-error", None), ("DNS-error", "rcode='NXDOMAIN'"),
                                 ("HTTP-response-body-size", None), ("connection-timeout", None)])
        t = self.http.transport_error("get", "https://h/x", "connection-timeout", "after 5s")
        self.assertEqual((type(t).__name__, t.codes, t.reason, t.message),
                         ("RetryableError", [], "HttpRequestFailed",
                          "GET https://h/x: wasi:http error connection-timeout (after 5s)"))
        d = self.http.transport_error("GET", "https://e/x", "HTTP-request-denied")
        self.assertEqual((type(d).__name__, d.reason), ("ConfigurationError", "HttpNotAllowed"))

    def test_response(self):
        r = self.http.HttpResponse(404, [("content-type", "text/plain")], b"nope", "delete", "https://h/a")
        self.assertIs(r.raise_for_status(allow=(404,)), r)
        self.assertEqual((r.ok, r.header("Content-Type"), r.text, r.json_or_none()),
                         (False, "text/plain", "nope", None))
        with self.assertRaises(self.wd.ConfigurationError) as cm:
            r.raise_for_status()
        self.assertEqual(cm.exception.message, "DELETE https://h/a: 404 nope")
        self.assertEqual(self.http.HttpResponse(200, body=b'{"a":1}').json(), {"a": 1})

    def test_request_options_and_bad_urls(self):
        fake = FakeHttp(lambda req: (200, [], b""))
        self.http.request("GET", "http://h:8080?x=1", headers={"X-A": "b"}, timeout=2.5)
        req = fake.requests[0]
        self.assertEqual((type(req["scheme"]).__name__, req["authority"], req["path"]), ("Scheme_Http", "h:8080", "/?x=1"))
        self.assertEqual((req["connect_timeout"], req["first_byte_timeout"]), (2_500_000_000, 2_500_000_000))
        self.assertEqual(fake.header("x-a"), ["b"])
        self.assertEqual(fake.header("content-length"), [])  # GET without a body
        self.http.request("PURGE", "https://h/a#frag")
        self.assertEqual((fake.requests[1]["method"], fake.requests[1]["path"]), (fake.wht.Method_Other("PURGE"), "/a"))
        for bad in ("ftp://h/a", "https:///a", "h/a"):
            with self.assertRaises(self.wd.RetryableError) as cm:
                self.http.request("GET", bad)
            self.assertIn("wasi:http error HTTP-request-URI-invalid", cm.exception.message)
        self.assertEqual(len(fake.requests), 2)


class HoldHookTest(unittest.TestCase):
    def setUp(self):
        self.app, self.types, self.cpt = load("hook-plugin", "hold-hook")
        from wit_world.exports import hooks
        from wit_world.imports import log
        self.hooks, self.logs = hooks, []
        log.log = lambda level, msg: self.logs.append((level.name, msg))
        self.plugin = self.app.Hooks()

    def test_describe(self):
        d = self.plugin.describe()
        self.assertEqual((d.name, d.version, d.hook_types),
                         ("python-hold-hook", "0.1.0", [self.hooks.HookType.BEFORE_RECONCILE]))

    def test_holds_annotated_items_only(self):
        held = item({}, name="h1", annotations={"examples.wasm-deployer.dev/hold": "true"})
        r = self.plugin.run(self.hooks.HookInput(self.hooks.HookType.BEFORE_RECONCILE, held, None))
        self.assertEqual((r.abort_reconcile, r.requeue, r.requeue_after_ms), (True, False, 1000))
        self.assertEqual(self.logs, [("INFO", "holding h1")])
        for annotations in (None, {"examples.wasm-deployer.dev/hold": "false"}):
            free = item({}, name="h2", annotations=annotations)
            self.assertIsNone(self.plugin.run(self.hooks.HookInput(self.hooks.HookType.BEFORE_RECONCILE, free, None)))
        self.assertIsNone(self.plugin.run(self.hooks.HookInput(self.hooks.HookType.START, None, None)))

    def test_no_http_in_a_hook_world(self):
        from wasm_deployer import InternalError, http
        with self.assertRaises(InternalError) as cm:
            http.get("https://h/a")
        self.assertEqual(cm.exception.reason, "CapabilityUnavailable")


if __name__ == "__main__":
    unittest.main()
