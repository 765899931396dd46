"""python-hold-hook: the example hook plugin in Python (world `hook-plugin`).

Holds DeployItems annotated `examples.wasm-deployer.dev/hold: "true"` before their reconcile
and asks the host to look again after a second. Build: `plugins/python/build.sh OUT_DIR`.
"""

from wasm_deployer import Hook, HookResult, export_hooks

HOLD_ANNOTATION = "examples.wasm-deployer.dev/hold"


class HoldHook(Hook):
    name = "python-hold-hook"
    version = "0.1.0"
    hook_types = ["before-reconcile"]

    def run(self, ctx, inp):
        if inp.annotations.get(HOLD_ANNOTATION) != "true":
            return None  # no opinion
        ctx.info(f"holding {inp.name}")
        # `requeue: False` + `requeue_after_ms`: look again in a second (`requeue: True` would mean
        # "now", a busy loop).
        return HookResult(abort_reconcile=True, requeue=False, requeue_after_ms=1000)


# componentize-py calls the class named after the exported interface (`hooks` -> `Hooks`).
Hooks = export_hooks(HoldHook)
