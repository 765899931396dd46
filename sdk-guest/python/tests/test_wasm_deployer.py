"""Native tests of the helper and the two example plugins, with plain CPython.

The WIT bindings come from `componentize-py bindings` (stubs whose imports raise
NotImplementedError); the tests replace the imports with fakes and call the exported classes
the way the component would. Run (after plugins/python/build.sh created the toolchain):

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
    return app, importlib.import_module("wit_world.imports.types"), importlib.import_module("componentize_py_types")


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


if __name__ == "__main__":
    unittest.main()
