#!/usr/bin/env python3
"""Draws a `deepinfer bench` results JSON (what --save-result / --json write) as a PNG.

    python bench/plot_bench.py RESULTS.json OUT.png

Several request rates ({"runs": [...]}): mean and p99 TTFT, TPOT and end-to-end latency
against the request rate. One run: histograms of its per-request TTFT and TPOT. Called by
`deepinfer bench --plot OUT.png`; exits with status 3 when matplotlib is not installed.
"""
import json
import math
import sys


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"plot_bench.py: matplotlib is not installed in {sys.executable}", file=sys.stderr)
        return 3
    with open(argv[1], encoding="utf-8") as f:
        results = json.load(f)
    runs = results["runs"] if "runs" in results else [results]
    title = f"deepinfer bench --mode {runs[0]['mode']}: {runs[0]['model']}"
    if len(runs) > 1:
        def rate(run):
            r = run["request_rate"]
            return math.inf if r == "inf" else float(r)
        finite = [rate(r) for r in runs if rate(r) != math.inf]
        # inf is drawn one step to the right of the largest finite rate.
        top = max(finite) * 1.25 if finite else 1.0
        xs = [rate(r) if rate(r) != math.inf else top for r in runs]
        fig, axes = plt.subplots(1, 3, figsize=(13, 4))
        for ax, key, name in zip(axes, ("ttft_ms", "tpot_ms", "e2e_latency_ms"),
                                 ("TTFT", "TPOT", "end-to-end latency")):
            for stat, style in (("mean", "o-"), ("p99", "s--")):
                ax.plot(xs, [r[key][stat] for r in runs], style, label=stat)
            ax.set_xlabel("request rate (req/s; rightmost = inf)" if len(finite) < len(runs)
                          else "request rate (req/s)")
            ax.set_ylabel(f"{name} (ms)")
            ax.grid(True, alpha=0.3)
            ax.legend()
    else:
        done = [r for r in runs[0]["requests"] if r["status"] == "completed"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, key, name in zip(axes, ("ttft_ms", "tpot_ms"), ("TTFT", "TPOT")):
            values = [r[key] for r in done if key != "tpot_ms" or r["output_tokens"] > 1]
            ax.hist(values, bins=min(30, max(5, len(values) // 3)))
            ax.set_xlabel(f"{name} (ms)")
            ax.set_ylabel("requests")
            ax.grid(True, alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
