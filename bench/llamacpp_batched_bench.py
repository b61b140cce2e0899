#!/usr/bin/env python3
"""Continuous batching beside llama.cpp's llama-batched-bench: N sequences at once, same weights.

    tools/setup_llamacpp.sh                                       # builds llama-batched-bench too
    .venv-tools/bin/python tools/convert_to_gguf.py --shape qwen2.5-0.5b --outtype bf16
    scripts/build.sh release
    chrt -f 10 .venv-tools/bin/python bench/llamacpp_batched_bench.py --threads 2 --repeats 3

The same work on both sides: --sequences prompts of --prompt-len tokens each (distinct prompts),
all submitted at once, then --new-tokens tokens generated per sequence, every sequence decoding
in the same steps:
- deepinfer: `deepinfer bench --mode offline --num-prompts N --input-len P --output-len M
  --max-num-seqs N` (random prompts, greedy, eos ignored): elapsed_s from the first request to
  the last token, output tokens/s = N x M / elapsed_s;
- llama.cpp: `llama-batched-bench -npp P -ntg M -npl N` (a prompt per sequence, -pps off):
  t = t_pp + t_tg, output tokens/s = N x M / t (its own speed_tg, decode only, is kept too).
deepinfer's first output token comes out of the prefill step (its M-1 decode steps follow);
llama-batched-bench samples nothing and runs M decode steps after the prompts, one step more.

Compute is the ceiling here, not memory: the bench measures the f32 FMA peak itself
(bench/bandwidth_probe.c fma) and reports each engine's matmul FLOP/s (2 x weights x tokens:
every prompt token through the layers, the lm_head on the last prompt row and every generated
token; routed experts scaled by experts-per-token / experts; attention not counted) as % of it.
Repeats alternate the engines; the report is the median. Writes bench/out/batched-<shape>.json
and prints a Markdown table.
"""
import argparse
import json
import os
import pathlib
import platform
import shlex
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from llamacpp_bench import (ROOT, add_isa_argument, build_probe, find_llama_tool, gguf_tensors,  # noqa: E402
                            isa_suffix, probe, run, select_isa)


def matmul_weights(gguf):
    """(body, head): weights one token multiplies by in the layers, and in the lm_head."""
    tensors, names, expert_share = gguf_tensors(gguf)
    body = head = 0.0
    for t in tensors:
        n = int(t.n_elements)
        if t.name == "output.weight" or (t.name == "token_embd.weight" and "output.weight" not in names):
            head += n
        elif t.name != "token_embd.weight" and len(t.shape) >= 2:
            body += n * (expert_share if "_exps." in t.name else 1)
    return body, head


def run_deepinfer(args, model):
    cmd = [str(args.deepinfer), "bench", "--mode", "offline", "--model", str(model), "--num-prompts",
           str(args.sequences), "--input-len", str(args.prompt_len), "--output-len", str(args.new_tokens),
           "--max-num-seqs", str(args.sequences), "--threads", str(args.threads), "--json",
           "--log-level", "warn", *args.deepinfer_args]
    out = json.loads(run(cmd))
    assert out["completed"] == args.sequences, out["failure_reasons"]
    return {"seconds": out["elapsed_s"], "output_tok_s": out["output_tokens_per_s"],
            "ttft_ms": out["ttft_ms"]["mean"], "tpot_ms": out["tpot_ms"]["mean"],
            "peak_rss_mb": out["peak_rss_mb"]}


def run_llama(args, exe, gguf):
    n_kv = args.sequences * (args.prompt_len + args.new_tokens) + 256
    cmd = [str(exe), "-m", str(gguf), "-c", str(n_kv), "-b", "2048", "-ub", "512", "-npp",
           str(args.prompt_len), "-ntg", str(args.new_tokens), "-npl", str(args.sequences), "-t",
           str(args.threads), "--output-format", "jsonl", *args.llama_args]
    lines = [json.loads(l) for l in run(cmd).splitlines() if l.startswith("{")]
    r = lines[-1]
    return {"seconds": r["t"], "output_tok_s": args.sequences * args.new_tokens / r["t"],
            "prefill_s": r["t_pp"], "decode_tok_s": r["speed_tg"],
            "flash_attn": r.get("flash_attn"), "n_ubatch": r.get("n_ubatch")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sequences", type=int, default=32)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--dtype", default="bf16", help="the GGUF's type; deepinfer runs the same file")
    parser.add_argument("--deepinfer", default=str(ROOT / "build" / "deepinfer"))
    parser.add_argument("--batched-bench", help="llama-batched-bench binary")
    parser.add_argument("--deepinfer-args", default="", help="extra `deepinfer bench` flags, e.g. "
                        "'--matmul-precision bf16'")
    parser.add_argument("--llama-args", default="", help="extra llama-batched-bench flags")
    add_isa_argument(parser)
    parser.add_argument("--out", help="JSON report (default bench/out/batched-<shape>[-avx2].json)")
    args = parser.parse_args()
    select_isa(args.isa)
    args.deepinfer_args = shlex.split(args.deepinfer_args)
    args.llama_args = shlex.split(args.llama_args)

    gguf = ROOT / "bench" / "models" / "gguf" / f"{args.shape}-random-{args.dtype}.gguf"
    if not gguf.exists():
        sys.exit(f"error: missing {gguf}; run .venv-tools/bin/python tools/convert_to_gguf.py "
                 f"--shape {args.shape} --outtype {args.dtype}")
    if not pathlib.Path(args.deepinfer).exists():
        sys.exit(f"error: {args.deepinfer} not found; run scripts/build.sh release (or pass --deepinfer)")
    exe = find_llama_tool(args.batched_bench, "llama-batched-bench", "--batched-bench", args.isa)
    probe_exe = build_probe(args.isa)
    body, head = matmul_weights(gguf)
    flop = 2 * (body * args.sequences * (args.prompt_len + args.new_tokens - 1)
                + head * args.sequences * args.new_tokens)

    ours, peer, peaks = [], [], []
    for rep in range(args.repeats):
        peaks.append(probe(probe_exe, "fma", args.threads))
        ours.append(run_deepinfer(args, gguf))
        peer.append(run_llama(args, exe, gguf))
        print(f"repeat {rep + 1}/{args.repeats}: f32 FMA peak {peaks[-1]:.0f} GFLOP/s; deepinfer "
              f"{ours[-1]['output_tok_s']:.1f} tok/s, llama.cpp {peer[-1]['output_tok_s']:.1f} tok/s",
              file=sys.stderr, flush=True)

    peak = max(peaks)
    rows = []
    for engine, samples in (("deepinfer", ours), ("llama.cpp", peer)):
        row = {k: statistics.median(s[k] for s in samples) for k in samples[0]
               if isinstance(samples[0][k], (int, float))}
        row["engine"] = engine
        row["samples"] = samples
        row["gflop_s"] = flop / row["seconds"] * 1e-9
        row["pct_of_fma_peak"] = 100 * row["gflop_s"] / peak
        rows.append(row)
    ratio = rows[0]["output_tok_s"] / rows[1]["output_tok_s"]
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    report = {"model": f"{args.shape} (random weights), {gguf.name}", "isa": args.isa, "threads": args.threads,
              "sequences": args.sequences, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
              "repeats": args.repeats, "statistic": "median", "cpu": platform.processor() or platform.machine(),
              "deepinfer_commit": git, "realtime": os.sched_getscheduler(0) == os.SCHED_FIFO,
              "deepinfer_args": args.deepinfer_args, "llama_args": args.llama_args,
              "matmul_gflop": flop * 1e-9, "fma_peak_gflop_s": peak, "fma_peaks": peaks, "results": rows,
              "ratio_output_tok_s": ratio}
    out = pathlib.Path(args.out or ROOT / "bench" / "out" / f"batched-{args.shape}{isa_suffix(args.isa)}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report))
    print(f"\n{args.sequences} sequences x ({args.prompt_len} prompt + {args.new_tokens} output tokens), "
          f"{args.threads} threads, f32 FMA peak {peak:.0f} GFLOP/s, {flop * 1e-9:.0f} GFLOP of matmuls")
    print("\n| engine | output tok/s | seconds | matmul GFLOP/s | % of FMA peak |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['engine']} | {r['output_tok_s']:.1f} | {r['seconds']:.2f} | {r['gflop_s']:.0f} "
              f"| {r['pct_of_fma_peak']:.0f} % |")
    print(f"\ndeepinfer / llama.cpp = x{ratio:.2f} output tokens/s")
    if shutil.which("uptime"):
        print("\n" + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), file=sys.stderr)


if __name__ == "__main__":
    main()
