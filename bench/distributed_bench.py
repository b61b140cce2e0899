#!/usr/bin/env python3
"""Distributed layouts against one process on the same cores (issue #10's benchmark).

For each layout, `mpirun -np R deepinfer bench --mode offline --threads 1 <layout flags>` and
`deepinfer bench --mode offline --threads R` run alternately, `--rounds` times each, on two
workloads: one sequence decoding (decode tok/s) and N sequences batched (output tok/s). Prints
a markdown table and, with --json FILE, writes every run. Ratios are distributed / one process.

    python3 bench/distributed_bench.py -m bench/models/deepseek-v2-lite-4l-random \\
        --layouts ep2,tp2,pp2,pp2-mb2,dp2-ep2 --rounds 2 --json /tmp/dist.json

Layouts: epN, tpN, ppN, ppN-mbM (micro-batches), dpN-epM (attention data parallel + EP),
tpN-epN. A layout this build refuses is reported as refused with its one-line error.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def layout_flags(name):
    """(ranks, flags) of a layout name."""
    parts = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"([a-z]+)(\d+)", name))
    flags, ranks = [], 1
    tp, pp, ep, dp = (parts.get(k, 1) for k in ("tp", "pp", "ep", "dp"))
    if tp > 1:
        flags += ["--tensor-parallel-size", str(tp)]
    if pp > 1:
        flags += ["--pipeline-parallel-size", str(pp)]
    if ep > 1:
        flags += ["--expert-parallel-size", str(ep)]
    if dp > 1:
        flags += ["--data-parallel-size", str(dp)]
    if "mb" in parts:
        flags += ["--num-micro-batches", str(parts["mb"])]
    ranks = pp * max(tp * dp, ep)
    return ranks, flags


def run_bench(binary, model, ranks, flags, threads, requests, input_len, output_len, env):
    command = [str(binary), "bench", "--mode", "offline", "-m", str(model), "--num-prompts",
               str(requests), "--input-len", str(input_len), "--output-len", str(output_len),
               "--warmup", "1", "--json", "--threads", str(threads)] + flags
    if ranks > 1:
        command = [shutil.which("mpirun"), "--allow-run-as-root", "--oversubscribe",
                   "--bind-to", "none", "-np", str(ranks)] + command
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
        return {"error": (lines or proc.stderr.splitlines() or ["exit %d" % proc.returncode])[0]}
    return json.loads(proc.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=ROOT / "bench/models/deepseek-v2-lite-4l-random")
    ap.add_argument("--binary", default=os.environ.get("DEEPINFER_BIN", ROOT / "build/deepinfer"))
    ap.add_argument("--layouts", default="ep2,tp2,pp2,pp2-mb2,dp2-ep2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--json", help="write every run here")
    args = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    runs, rows = [], []
    for layout in args.layouts.split(","):
        ranks, flags = layout_flags(layout)
        result = {}
        for workload, requests in (("decode", 1), ("batched", args.batch)):
            dist, single, mpi_share = [], [], []
            for _ in range(args.rounds):  # alternate: distributed, then one process
                for side, r, f, threads in (("dist", ranks, flags, 1), ("single", 1, [], ranks)):
                    out = run_bench(args.binary, args.model, r, f, threads, requests,
                                    args.input_len, args.output_len, env)
                    runs.append({"layout": layout, "workload": workload, "side": side, **out})
                    if "error" in out:
                        result[workload] = out["error"]
                        break
                    (dist if side == "dist" else single).append(out["output_tokens_per_s"])
                    if side == "dist" and out.get("elapsed_s"):
                        mpi_share.append(out.get("mpi_seconds", 0) / out["elapsed_s"])
                if workload in result:
                    break
            if workload not in result:
                d, s = max(dist), max(single)
                share = f"; {100 * min(mpi_share):.0f} % in MPI" if mpi_share else ""
                result[workload] = f"{d:.1f} vs {s:.1f} tok/s (x{d / s:.2f}{share})"
        rows.append((layout, ranks, result["decode"], result["batched"]))
    print(f"| layout | ranks x 1 thread vs 1 process x ranks threads | decode, 1 sequence | "
          f"{args.batch} sequences batched |")
    print("|---|---|---|---|")
    for layout, ranks, decode, batched in rows:
        print(f"| {layout} | {ranks} | {decode} | {batched} |")
    print("\n% in MPI: rank 0's time inside MPI calls (collectives, messages and waiting for "
          "slower ranks) over the measured run, the best round; the rest is compute.")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
