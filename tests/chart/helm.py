#!/usr/bin/env python3
"""Real Go Helm (PyPI ``helm-python-sdk``) for the chart stories: one operation per call.

Input: one JSON object as argv[1]:
  {"op": "lint" | "render" | "push" | "install" | "upgrade" | "uninstall" | "history" | "list"
         | "status" | "rollback" | "values",
   "chart" (a directory, or oci://… with "version"), "name", "namespace", "values",
   "kubeconfig" (text), "wait" (bool), "destination" + "remote" (push), "revision" (rollback,
   status)}
Output (stdout): a JSON object; {"error": "..."} when Helm refused, {"unavailable": "..."} when
helm-python-sdk is not installed.
"""
import json
import sys


def main() -> int:
    try:
        import helm_python
        from helm_python import Config
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"unavailable": str(e)}))
        return 0
    job = json.loads(sys.argv[1])
    op = job["op"]
    values = job.get("values") or {}
    try:
        if op == "lint":
            out = helm_python.lint(job["chart"], values, strict=True)
        elif op == "push":
            # helm package + helm push (plain HTTP: a registry on loopback)
            tgz = helm_python.package(job["chart"], destination=job["destination"])
            pushed = helm_python.RegistryClient(plain_http=True).push(tgz, job["remote"])
            out = {"archive": tgz, "pushed": pushed}
        elif op == "render":
            cfg = Config(kube_apiserver="https://127.0.0.1:1", storage_driver="memory")
            extra = {}
            if job["chart"].startswith("oci://"):
                cfg.set_registry_client(helm_python.RegistryClient(plain_http=True))
                extra = {"chart_version": job.get("version"), "plain_http": True}
            rel = cfg.install(job["chart"], job["name"], values, dry_run="client",
                              namespace=job["namespace"], **extra)
            out = {"manifest": rel.get("manifest")}
        else:
            cfg = Config(kubeconfig_content=job["kubeconfig"], namespace=job["namespace"],
                         storage_driver="secret")
            wait = "watcher" if job.get("wait") else None
            if op == "install":
                rel = cfg.install(job["chart"], job["name"], values, namespace=job["namespace"],
                                  create_namespace=True, wait=wait, timeout=60)
            elif op == "upgrade":
                rel = cfg.upgrade(job["chart"], job["name"], values, namespace=job["namespace"],
                                  wait=wait, timeout=60)
            elif op == "uninstall":
                rel = cfg.uninstall(job["name"], wait=wait, timeout=60)
            elif op == "history":
                rel = {"history": [{"revision": r.get("revision"), "status": r.get("status"),
                                    "description": r.get("description")}
                                   for r in cfg.history(job["name"])]}
            elif op == "list":
                rel = {"releases": [{"name": r.get("name"), "namespace": r.get("namespace"),
                                     "revision": r.get("revision"), "status": r.get("status"),
                                     "chart": r.get("chart")}
                                    for r in cfg.list(all_states=True)]}
            elif op == "status":
                rel = cfg.status(job["name"], revision=job.get("revision"))
                rel = {"status": rel.get("status"), "revision": rel.get("revision"),
                       "manifest": rel.get("manifest")}
            elif op == "values":
                rel = {"values": cfg.get_values(job["name"])}
            elif op == "rollback":
                cfg.rollback(job["name"], version=job.get("revision"), timeout=60)
                rel = {"history": [{"revision": r.get("revision"), "status": r.get("status")}
                                   for r in cfg.history(job["name"])]}
            else:
                raise ValueError(f"unknown op {op}")
            keys = ("revision", "status", "history", "releases", "manifest", "values")
            out = {k: rel.get(k) for k in keys if k in rel}
    except Exception as e:  # noqa: BLE001
        out = {"error": f"{type(e).__name__}: {e}"}
    json.dump(out, sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
