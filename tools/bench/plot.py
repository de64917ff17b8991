"""Plots docs/benchmarks.json (written by tools/bench): throughput and p99 latency against
connections, one column per operation, one line per server.

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
    fig, axes = plt.subplots(2, len(ops), figsize=(4 * len(ops), 7), squeeze=False)
    for col, op in enumerate(ops):
        for target in targets:
            rows = sorted((r for r in results if r["op"] == op and r["target"] == target), key=lambda r: r["conns"])
            conns = [r["conns"] for r in rows]
            color, marker, line = STYLES.get(target, (None, "o", "-"))
            kw = dict(color=color, marker=marker, linestyle=line, label=TITLES.get(target, target))
            axes[0][col].plot(conns, [r["report"]["opsPerSec"] for r in rows], **kw)
            axes[1][col].plot(conns, [r["report"]["latencyMs"]["p99"] for r in rows], **kw)
        axes[0][col].set_title(op)
        for row in (0, 1):
            ax = axes[row][col]
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({r["conns"] for r in results}))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.grid(True, alpha=0.3)
            ax.set_xlabel("connections")
        axes[0][col].set_ylim(bottom=0)
        axes[1][col].set_ylim(bottom=0)
    axes[0][0].set_ylabel("requests/s")
    axes[1][0].set_ylabel("p99 latency (ms)")
    axes[0][0].legend()
    machine = data.get("machine", {})
    fig.suptitle("zkboom, one run: %s cpus, %s" % (machine.get("cpus (nproc)", "?"), machine.get("cpu", "")))
    fig.tight_layout()
    fig.savefig(dst, dpi=90)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
