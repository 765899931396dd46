"""Draws docs/images/dashboard.png: one chart per dashboard panel, from the series
tests/monitoring.rs' story dumps (MONITORING_DUMP_DIR=dir: dir/panels.json, Prometheus range
queries of every panel's expressions). docs/operations.md says how to run it.

Usage: python dashboard.py panels.json dashboard.png   (needs matplotlib)
"""
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def legend(fmt, metric):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt) or str(metric)


def main(src, dst):
    panels = json.load(open(src))
    charts = [p for p in panels if p["type"] == "timeseries"]
    tables = [p for p in panels if p["type"] == "table"]
    cols = 2
    rows = (len(charts) + cols - 1) // cols + (1 if tables else 0)
    fig = plt.figure(figsize=(14, 3.0 * rows))
    t0 = None
    for i, p in enumerate(charts):
        ax = fig.add_subplot(rows, cols, i + 1)
        for t in p["targets"]:
            for s in t["result"]:
                pts = [(float(v[0]), float(v[1])) for v in s["values"] if v[1] not in ("NaN", "+Inf")]
                if not pts:
                    continue
                xs, ys = zip(*pts)
                t0 = xs[0] if t0 is None else min(t0, xs[0])
                ax.plot(xs, ys, label=legend(t["legendFormat"], s["metric"]), linewidth=1.2)
        ax.set_title(p["title"], fontsize=10)
        ax.set_ylabel(p.get("unit") or "", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=6, loc="upper left")
    for ax in fig.axes:
        if not ax.lines:
            ax.text(0.5, 0.5, "no finite values in this run", ha="center", transform=ax.transAxes)
            ax.set_xticks([])
            continue
        ticks = ax.get_xticks()
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{int(x - t0)}s" for x in ticks])
        ax.set_xlim(left=t0)
    for p in tables:
        ax = fig.add_subplot(rows, 1, rows)
        ax.axis("off")
        ax.set_title(p["title"], fontsize=10)
        cells = []
        for t in p["targets"]:
            for s in t["result"]:
                m = s["metric"]
                cells.append([m.get("pod", ""), m.get("name", ""), m.get("version", ""),
                              m.get("digest", "")[:24] + "…"])
        if cells:
            ax.table(cellText=cells[-4:], colLabels=["pod", "name", "version", "digest"],
                     loc="upper center", fontsize=8)
    fig.suptitle("wasm-deployer (charts/wasm-deployer/files/dashboard.json), from tests/monitoring.rs' story",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(dst, dpi=80)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
