#!/usr/bin/env python3
"""Prefill and decode throughput of deepinfer beside llama.cpp (CPU), same weights, same dtype.

    tools/setup_llamacpp.sh                                       # llama.cpp peer (once)
    .venv-tools/bin/python tools/convert_to_gguf.py --shape qwen2.5-0.5b --outtype bf16,f32,q8_0
    scripts/build.sh release
    chrt -f 10 .venv-tools/bin/python bench/llamacpp_bench.py --threads 2 --repeats 5

The two measurements are the same work:
- prefill: one forward pass over a prompt of --prompt-len tokens from an empty cache, logits of
  the last row only (deepinfer `generate --json` prefill_seconds; llama-bench `-p N`, one
  ubatch since N <= 512);
- decode: --new-tokens single-token steps right after that prompt, i.e. at KV depths
  N .. N+M-1 (deepinfer's decode_steps after the first token; llama-bench `-n M -d N`).
Repeats alternate the engines (deepinfer, then llama.cpp, per dtype) so that load changes hit
both; the report is the median of the repeats. Each repeat is a fresh process for both.

Writes bench/out/llamacpp-<shape>.json and prints a Markdown table with ratios (deepinfer / llama.cpp).
"""
import argparse
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OURS_DTYPES = {"bf16", "f32", "f16"}  # GGUF types that `deepinfer generate --dtype` also runs


def prompt_ids(n, vocab):
    # Same deterministic prompt as bench/baseline.py.
    return [(7919 * i + 13) % (vocab - 1000) + 500 for i in range(n)]


def run(cmd):
    """stdout of cmd; on failure, exits naming the command and the end of its stderr."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        sys.exit(f"error: exit status {proc.returncode} from\n  {' '.join(cmd)}\n{tail}")
    return proc.stdout


def find_llama_bench(explicit):
    if explicit:
        return pathlib.Path(explicit)
    found = sorted((ROOT / "bench" / "llamacpp-src").glob("build-*/bin/llama-bench"))
    if not found:
        sys.exit("error: llama-bench not found under bench/llamacpp-src; run tools/setup_llamacpp.sh "
                 "(or pass --llama-bench PATH)")
    return found[-1]


def run_deepinfer(args, model, ids, dtype):
    cmd = [str(args.deepinfer), "generate", "--model", str(model), "--prompt-ids", ",".join(map(str, ids)),
           "--max-new-tokens", str(args.new_tokens + 1), "--ignore-eos", "--json", "--threads",
           str(args.threads), "--dtype", dtype, "--log-level", "warn"]
    out = json.loads(run(cmd))
    assert out["decode_steps"] == args.new_tokens, out
    return {"prefill_tok_s": len(ids) / out["prefill_seconds"],
            "decode_tok_s": out["decode_steps"] / out["decode_seconds"]}


def run_llama(args, bench, gguf):
    # -d 0,<N>: pp at depth 0 is our prefill, tg at depth N is our decode (the other two
    # combinations come along and are kept in the JSON for reference).
    cmd = [str(bench), "-m", str(gguf), "-p", str(args.prompt_len), "-n", str(args.new_tokens), "-d",
           f"0,{args.prompt_len}", "-t", str(args.threads), "-r", "1", "-o", "json", *args.llama_args]
    tests = json.loads(run(cmd))
    result, raw = {}, {}
    for t in tests:
        kind = "pp" if t["n_prompt"] > 0 else "tg"
        raw[f"{kind}{t['n_prompt'] or t['n_gen']}@d{t['n_depth']}"] = t["avg_ts"]
        if kind == "pp" and t["n_depth"] == 0:
            result["prefill_tok_s"] = t["avg_ts"]
        if kind == "tg" and t["n_depth"] == args.prompt_len:
            result["decode_tok_s"] = t["avg_ts"]
    info = {k: tests[0].get(k) for k in ("build_commit", "build_number", "cpu_info", "backends", "type_k",
                                          "type_v", "flash_attn", "n_batch", "n_ubatch", "repack")}
    model = {k: tests[0].get(k) for k in ("model_type", "model_size", "model_n_params")}
    return result, raw, info, model


def median_row(samples):
    keys = samples[0].keys()
    row = {k: statistics.median(s[k] for s in samples) for k in keys}
    row["samples"] = {k: [round(s[k], 3) for s in samples] for k in keys}
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--dtypes", default="bf16,f32,q8_0",
                        help="GGUF types; deepinfer runs those it supports (bf16, f32, f16)")
    parser.add_argument("--deepinfer", default=str(ROOT / "build" / "deepinfer"))
    parser.add_argument("--llama-bench", help="llama-bench binary (default: bench/llamacpp-src/build-*/bin)")
    parser.add_argument("--llama-args", default="",
                        help="extra llama-bench flags, e.g. '-fa off' or '-ctk bf16 -ctv bf16'")
    parser.add_argument("--out", help="JSON report (default bench/out/llamacpp-<shape>.json)")
    args = parser.parse_args()
    args.llama_args = args.llama_args.split()

    model = ROOT / "bench" / "models" / f"{args.shape}-random"
    gguf_dir = ROOT / "bench" / "models" / "gguf"
    dtypes = args.dtypes.split(",")
    ggufs = {d: gguf_dir / f"{model.name}-{d}.gguf" for d in dtypes}
    missing = [str(p) for p in ggufs.values() if not p.exists()]
    if missing or not (model / "config.json").exists():
        sys.exit(f"error: missing {', '.join(missing) or model}; run .venv-tools/bin/python "
                 f"tools/convert_to_gguf.py --shape {args.shape} --outtype {args.dtypes}")
    if not pathlib.Path(args.deepinfer).exists():
        sys.exit(f"error: {args.deepinfer} not found; run scripts/build.sh release (or pass --deepinfer)")
    bench = find_llama_bench(args.llama_bench)
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    ids = prompt_ids(args.prompt_len, vocab)

    ours = {d: [] for d in dtypes if d in OURS_DTYPES}
    peer = {d: [] for d in dtypes}
    raw, info, gguf_info = {d: [] for d in dtypes}, {}, {}
    for rep in range(args.repeats):
        for d in dtypes:
            if d in ours:
                ours[d].append(run_deepinfer(args, model, ids, d))
            result, r, info, gguf_info[d] = run_llama(args, bench, ggufs[d])
            peer[d].append(result)
            raw[d].append(r)
            print(f"repeat {rep + 1}/{args.repeats} {d}: deepinfer {ours[d][-1] if d in ours else '-'} "
                  f"llama.cpp {result}", file=sys.stderr, flush=True)

    rows = []
    for d in dtypes:
        if d in ours:
            rows.append({"engine": "deepinfer", "dtype": d, **median_row(ours[d])})
        rows.append({"engine": "llama.cpp", "dtype": d, **median_row(peer[d]), "gguf": gguf_info[d],
                     "llama_bench_tests": raw[d]})
    by_key = {(r["engine"], r["dtype"]): r for r in rows}
    ratios = {d: {k: by_key[("deepinfer", d)][k] / by_key[("llama.cpp", d)][k]
                  for k in ("prefill_tok_s", "decode_tok_s")} for d in ours}
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    report = {"model": args.shape + " (random weights)", "threads": args.threads, "prompt_len": args.prompt_len,
              "new_tokens": args.new_tokens, "repeats": args.repeats, "statistic": "median",
              "cpu": platform.processor() or platform.machine(), "deepinfer_commit": git,
              "realtime": os.sched_getscheduler(0) == os.SCHED_FIFO, "llama_cpp": info,
              "llama_bench_args": args.llama_args, "results": rows, "ratios_deepinfer_over_llamacpp": ratios}
    out = pathlib.Path(args.out or ROOT / "bench" / "out" / f"llamacpp-{args.shape}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report))
    print(f"\n| engine | weights | prefill tok/s ({args.prompt_len} tokens) | decode tok/s (depth "
          f"{args.prompt_len}) | threads |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['engine']} | {r['dtype']} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.2f} "
              f"| {args.threads} |")
    print()
    for d, r in ratios.items():
        print(f"{d}: deepinfer / llama.cpp = prefill x{r['prefill_tok_s']:.2f}, decode x{r['decode_tok_s']:.2f}")
    if shutil.which("uptime"):
        print("\n" + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), file=sys.stderr)


if __name__ == "__main__":
    main()
