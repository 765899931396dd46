"""python-http-api: the example HTTP API deployer in Python (world `deployer-plugin`, WIT 1.5).

DeployItem `spec.config`: `{"path": "things/a", "body": {...any JSON...}}`, with a Target of type
`wasm-deployer.dev/http-api` (`spec.config.url`; the host adds its credentials):
- reconcile: `PUT <Target url>/<path>` with `body` as JSON; 2xx -> Succeeded, exports
  `{"status": <code>, "body": <the JSON answer, or null>}`;
- delete: `DELETE <Target url>/<path>`; 2xx or 404 -> done.
401/403, other 4xx -> the item fails; 5xx and no answer (refused, timeout) -> retried.
Build: `plugins/python/build.sh OUT_DIR`.
"""

from wasm_deployer import Deployer, Response, export_deployer, http


def item_url(inv):
    """`spec.config.path` as a URL under the Target's `url`; ConfigurationError naming what is
    wrong (path missing, not a string, absolute or with `..`; no Target, or one without `url`)."""
    return inv.http_url(inv.config_str("path"))


class HttpApi(Deployer):
    name = "python-http-api"
    version = "0.1.0"
    deploy_item_types = ["example.wasm-deployer.dev/python-http-api"]
    hook_types = []

    def reconcile(self, ctx, inv):
        url = item_url(inv)
        body = inv.config.get("body")
        ctx.info(f"PUT {url}")
        resp = http.put_json(url, body)  # no answer -> HttpRequestFailed (retried)
        resp.raise_for_status()          # 401/403, other 4xx, 5xx -> the mapped error
        ctx.info(f"PUT {url}: {resp.status}")
        return Response(phase="Succeeded", exports={"status": resp.status, "body": resp.json_or_none()})

    def delete(self, ctx, inv):
        url = item_url(inv)
        ctx.info(f"DELETE {url}")
        resp = http.delete(url).raise_for_status(allow=(404,))  # 404: already gone
        ctx.info(f"DELETE {url}: {resp.status}" + (" (already gone)" if resp.status == 404 else ""))
        return Response()


# componentize-py looks for the class named after the exported interface: `Deployer`.
Deployer = export_deployer(HttpApi)
