#!/usr/bin/env python3
"""Oracle for helm-engine's corpus test and benchmark.

Renders charts with real Go Helm through the PyPI package ``helm-python-sdk``
(it embeds Helm 4 as a shared library and renders offline).

Input (stdin): JSON list of jobs ``{"id", "chart", "name", "namespace", "values", "repeat"}``.
Output (stdout): JSON object ``id -> {"manifest", "files", "notes", "error", "seconds"}`` where
``manifest`` is what ``helm install --dry-run=client`` stores (the ``helm template`` stream
without hooks), ``files`` the per-template render, and ``seconds`` the best time of ``repeat``
full renders (install dry-run). A job with ``"files2": true`` also gets ``files2``, a second
per-template render, made at least one wall-clock second after every first one: where ``files`` and ``files2`` differ, Helm's output is not repeatable
(random passwords, generated certificates, bcrypt salts, ``now``).
"""
import json
import sys
import time


def main() -> int:
    try:
        from helm_python import Chart, Config
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"unavailable": str(e)}))
        return 0
    jobs = json.load(sys.stdin)
    cfg = Config(kube_apiserver="https://127.0.0.1:1", storage_driver="memory")
    out = {}
    second = []
    for job in jobs:
        res = {"manifest": None, "files": None, "notes": None, "error": None, "seconds": None}
        try:
            best = None
            for _ in range(max(1, job.get("repeat", 1))):
                t0 = time.perf_counter()
                rel = cfg.install(job["chart"], job["name"], job["values"], dry_run="client",
                                  namespace=job["namespace"])
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
            res["manifest"] = rel.get("manifest")
            res["notes"] = rel.get("notes")
            res["seconds"] = best
            ch = Chart.load(job["chart"])
            res["files"] = ch.render(values=job["values"], name=job["name"], namespace=job["namespace"])
            if job.get("files2"):
                second.append((job, ch))
        except Exception as e:  # noqa: BLE001
            res["error"] = f"{type(e).__name__}: {e}"
        out[job["id"]] = res
    if second:
        # `now` has one-second resolution: a second render in the same wall-clock second would
        # agree with the first on every timestamp and hide it from the masking
        time.sleep(max(0.0, int(time.time()) + 1.05 - time.time()))
    for job, ch in second:
        try:
            out[job["id"]]["files2"] = ch.render(values=job["values"], name=job["name"],
                                                 namespace=job["namespace"])
        except Exception as e:  # noqa: BLE001
            out[job["id"]]["error"] = f"{type(e).__name__}: {e}"
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
