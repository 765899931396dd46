"""python-echo: the example deployer plugin in Python (world `deployer-plugin`).

Writes the provider configuration's `message` into a ConfigMap `<item>-echo` next to the
DeployItem and exports it. Build: `plugins/python/build.sh OUT_DIR`.
"""

from wasm_deployer import Deployer, Response, export_deployer

API_VERSION = "examples.wasm-deployer.dev/v1"


def config_map_name(inv):
    return f"{inv.name}-echo"


class Echo(Deployer):
    name = "python-echo"
    version = "0.1.0"
    deploy_item_types = ["examples.wasm-deployer.dev/echo-python"]
    hook_types = []

    def reconcile(self, ctx, inv):
        # ConfigurationError (ERR_CONFIGURATION_PROBLEM) naming the field if missing or not a string.
        message = inv.config_str("message")
        if inv.config_bool("crash", default=False):
            # Uncaught on purpose: the helper turns it into ERR_INTERNAL_PROBLEM.
            raise RuntimeError("crash requested")

        name, namespace = config_map_name(inv), inv.namespace
        ctx.info(f"echo: writing {message!r} into ConfigMap {namespace}/{name}")
        existing = ctx.k8s.get("v1", "ConfigMap", name, namespace)
        if existing is None:
            ctx.k8s.create({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace},
                "data": {"message": message},
            })
        else:
            existing["data"] = {"message": message}
            ctx.k8s.update(existing)

        return Response(
            phase="Succeeded",
            provider_status={"apiVersion": API_VERSION, "kind": "ProviderStatus", "configMap": name},
            exports={"message": message},
        )

    def delete(self, ctx, inv):
        name = config_map_name(inv)
        existed = ctx.k8s.delete("v1", "ConfigMap", name, inv.namespace)
        ctx.info(f"echo: ConfigMap {inv.namespace}/{name} " + ("deleted" if existed else "was already gone"))
        return Response(phase="Succeeded")


# componentize-py calls the class named after the exported interface (`deployer` -> `Deployer`).
Deployer = export_deployer(Echo)
