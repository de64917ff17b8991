"""Plots docs/benchmarks.json (written by tools/bench): throughput and p99 latency against
connections, one panel per operation (throughput panels first, then p99 panels in the same
order), one line per server.

usage: plot.py benchmarks.json benchmarks.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TITLES = {"etcd": "etcd (raw)", "zetcd": "zetcd", "zookeeper": "ZooKeeper"}
STYLES = {"etcd": ("#7f7f7f", "s", "--"), "zetcd": ("#1f77b4", "o", "-"), "zookeeper": ("#d62728", "^", "-")}


def main(src, dst):
    with open(src) as f:
        data = json.load(f)
    results = data["results"]
    ops = list(dict.fromkeys(r["op"] for r in results))
    targets = list(dict.fromkeys(r["target"] for r in results))
    # Throughput of every op in the first rows, their p99 latency in as many rows below.
    cols = min(4, len(ops))
    rows = (len(ops) + cols - 1) // cols
    fig, axes = plt.subplots(2 * rows, cols, figsize=(4 * cols, 3.4 * 2 * rows), squeeze=False)
    for i, op in enumerate(ops):
        tput, lat = axes[i // cols][i % cols], axes[rows + i // cols][i % cols]
        for target in targets:
            cells = sorted((r for r in results if r["op"] == op and r["target"] == target), key=lambda r: r["conns"])
            conns = [r["conns"] for r in cells]
            color, marker, line = STYLES.get(target, (None, "o", "-"))
            kw = dict(color=color, marker=marker, linestyle=line, label=TITLES.get(target, target))
            tput.plot(conns, [r["report"]["opsPerSec"] for r in cells], **kw)
            lat.plot(conns, [r["report"]["latencyMs"]["p99"] for r in cells], **kw)
        tput.set_title("%s: requests/s" % op)
        lat.set_title("%s: p99 latency (ms)" % op)
        for ax in (tput, lat):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({r["conns"] for r in results}))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.grid(True, alpha=0.3)
            ax.set_xlabel("connections")
            ax.set_ylim(bottom=0)
    for i in range(len(ops), rows * cols):  # empty cells of the last row
        axes[i // cols][i % cols].axis("off")
        axes[rows + i // cols][i % cols].axis("off")
    axes[0][0].legend()
    machine = data.get("machine", {})
    fig.suptitle("zkboom, one run: %s cpus, %s" % (machine.get("cpus (nproc)", "?"), machine.get("cpu", "")))
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(dst, dpi=80)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
