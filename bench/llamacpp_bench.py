#!/usr/bin/env python3
"""Prefill and decode throughput of deepinfer beside llama.cpp (CPU), same weights, same dtype.

    tools/setup_llamacpp.sh                                       # llama.cpp peer (once)
    .venv-tools/bin/python tools/convert_to_gguf.py --shape qwen2.5-0.5b --outtype bf16,f32,q8_0
    scripts/build.sh release
    chrt -f 10 .venv-tools/bin/python bench/llamacpp_bench.py --threads 2 --repeats 5
    tools/setup_llamacpp.sh --avx2 && chrt -f 10 .venv-tools/bin/python bench/llamacpp_bench.py --isa avx2
                                    # AVX2 on both sides of an AVX-512 host (DEEPINFER_ISA=avx2)

The two measurements are the same work:
- prefill: one forward pass over a prompt of --prompt-len tokens from an empty cache, logits of
  the last row only (deepinfer `generate --json` prefill_seconds; llama-bench `-p N`, one
  ubatch since N <= 512);
- decode: --new-tokens single-token steps right after that prompt, i.e. at KV depths
  N .. N+M-1 (deepinfer's decode_steps after the first token; llama-bench `-n M -d N`).
Both sides are timed warm: llama-bench runs the whole prompt once untimed before its timed run
(its warm-up), so deepinfer gets `--warmup 1` (the prompt plus one token, on the same KV cache);
the JSON keeps our cold first prefill too (cold_prefill_tok_s: fresh activation buffers and KV
pages, what the first request after a load pays). --no-warmup times both sides cold
(llama-bench --no-warmup). --decode-only runs no prompt warm-up on either side.
Repeats alternate the engines (deepinfer, then llama.cpp, per dtype) so that load changes hit
both; the report is the median of the repeats. Each repeat is a fresh process for both.

Quantized types (q8_0, q4_0, q4_k, ...) run on both engines from the same GGUF file (deepinfer
`generate --model FILE.gguf`, zero-copy); --gguf TYPE=PATH points at a file outside
bench/models/gguf (e.g. one made with llama-quantize --pure).

Decode is a race for memory bandwidth, so the bench also measures the machine's ceilings itself
(bench/bandwidth_probe.c, compiled with the system C compiler, run with --threads threads):
the DRAM read bandwidth (on huge pages, as deepinfer's weights are) before every repeat and after
every engine's run, and for 4-bit types the integer-dot roofline (q4_0 x int8 dot products on
cache-resident weights, in weight bytes/s) before every repeat. Each decode row then gets
bytes/token (the weights one decode step reads: every tensor except the token embedding unless
it is also the output head, routed experts scaled by experts-per-token / experts) and
bytes/token x tokens/s as % of the bandwidth (the best read probe of the whole bench), for 4-bit
types of the lower of the bandwidth and the roofline, and as % of the paired bandwidth: each run
against the mean of the read probes right before and after it (the median over the repeats).
The paired figure is the fair one on a machine whose bandwidth swings from minute to minute (a
shared VM: 30 to 60 GB/s): the best probe of a run compares a decode with the best minute.
deepinfer also reads its own weights' pages right before and after its run (`generate
--measure-bandwidth`, the packed weights in memory): % of own pages' bandwidth, the same pages
as the decode streams.

Writes bench/out/llamacpp-<shape>.json and prints a Markdown table with ratios (deepinfer / llama.cpp).
"""
import argparse
import json
import os
import pathlib
import platform
import shutil
import shlex
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DENSE_DTYPES = {"bf16", "f32", "f16"}  # run by deepinfer from the checkpoint with --dtype
FOUR_BIT = {"q4_0", "q4_1", "q4_k", "q4_k_m"}


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


ISAS = ("native", "avx2", "avx512")
# Per --isa: the llama.cpp build directory prefix (tools/setup_llamacpp.sh) and its flag.
LLAMA_BUILDS = {"native": ("build", ""), "avx2": ("avx2-build", " --avx2"),
                "avx512": ("noamx-build", " --no-amx")}


def add_isa_argument(parser):
    parser.add_argument("--isa", choices=ISAS, default="native",
                        help="avx2: both engines without AVX-512 on an AVX-512 host (deepinfer under "
                             "DEEPINFER_ISA=avx2, the AVX2-only llama.cpp of tools/setup_llamacpp.sh "
                             "--avx2, the probes compiled for AVX2); avx512: both without AMX on an "
                             "AMX host (DEEPINFER_ISA=avx512, the llama.cpp of --no-amx)")


def select_isa(isa):
    """Runs deepinfer on `isa` (the child processes inherit DEEPINFER_ISA)."""
    if isa != "native":
        os.environ["DEEPINFER_ISA"] = isa


def find_llama_tool(explicit, name="llama-bench", flag="--llama-bench", isa="native"):
    """The llama.cpp tool `name`: `explicit` when given, else the one tools/setup_llamacpp.sh built
    (`--avx2` builds the AVX2-only copy in avx2-build-<version>, `--no-amx` the copy without AMX
    in noamx-build-<version>)."""
    if explicit:
        return pathlib.Path(explicit)
    prefix, flag_of_setup = LLAMA_BUILDS[isa]
    found = sorted((ROOT / "bench" / "llamacpp-src").glob(f"{prefix}-*/bin/{name}"))
    if not found:
        setup = "tools/setup_llamacpp.sh" + flag_of_setup
        sys.exit(f"error: {name} not found under bench/llamacpp-src; run {setup} (or pass {flag} PATH)")
    return found[-1]


def build_probe(isa="native"):
    """bench/bandwidth_probe.c compiled into bench/out (rebuilt when the source is newer); for
    --isa avx2 without AVX-512, so that its FMA peak is the 256-bit one."""
    src = ROOT / "bench" / "bandwidth_probe.c"
    exe = ROOT / "bench" / "out" / ("bandwidth_probe" if isa == "native" else f"bandwidth_probe_{isa}")
    exe.parent.mkdir(parents=True, exist_ok=True)
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        cc = os.environ.get("CC", "cc")
        no_avx512 = ["-mno-avx512f"] if isa == "avx2" else []
        run([cc, "-O3", "-march=native", *no_avx512, "-pthread", str(src), "-o", str(exe)])
    return exe


def probe(exe, kind, threads):
    return float(run([str(exe), kind, str(threads)]).strip())


def gguf_tensors(gguf):
    """(tensors, their names, the share of routed experts one token uses) of a GGUF (gguf-py)."""
    import gguf as gguf_py
    reader = gguf_py.GGUFReader(str(gguf))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()

    def field(key, default):
        f = reader.fields.get(f"{arch}.{key}")
        return float(f.parts[-1][0]) if f else default

    names = {t.name for t in reader.tensors}
    return reader.tensors, names, field("expert_used_count", 1) / field("expert_count", 1)


def bytes_per_token(gguf):
    """Weight bytes one decode step reads (see the module docstring), or the file size when gguf-py
    is missing."""
    try:
        tensors, names, expert_share = gguf_tensors(gguf)
    except ImportError:
        return gguf.stat().st_size
    total = 0
    for t in tensors:
        if t.name == "token_embd.weight" and "output.weight" in names:
            continue  # only one row per token is read; tied heads read it whole
        total += int(t.n_bytes) * (expert_share if "_exps." in t.name else 1)
    return int(total)


def run_deepinfer(args, model, ids, dtype, gguf):
    source = ["--model", str(model), "--dtype", dtype] if dtype in DENSE_DTYPES else ["--model", str(gguf)]
    warmup = [] if args.no_warmup or args.decode_only else ["--warmup", "1"]
    cmd = [str(args.deepinfer), "generate", *source, "--prompt-ids", ",".join(map(str, ids)),
           "--max-new-tokens", str(args.new_tokens + 1), "--ignore-eos", "--json", "--threads",
           str(args.threads), "--log-level", "warn", "--measure-bandwidth", *warmup, *args.deepinfer_args]
    out = json.loads(run(cmd))
    assert out["decode_steps"] == args.new_tokens, out
    result = {"decode_tok_s": out["decode_steps"] / out["decode_seconds"]}
    if out.get("weights_read_bytes"):  # its weights' own pages, right before and after the run
        result["own_read_gb_s"] = statistics.mean(out["weights_read_gb_s"])
    if not args.decode_only:
        result["prefill_tok_s"] = len(ids) / out["prefill_seconds"]
    if warmup:
        result["cold_prefill_tok_s"] = len(ids) / out["warmup_prefill_seconds"][0]
    return result


def run_llama(args, bench, gguf):
    # -d 0,<N>: pp at depth 0 is our prefill, tg at depth N is our decode (the other two
    # combinations come along and are kept in the JSON for reference).
    # --decode-only: only tg at depth N (a long prompt's pp at depth N would double the run).
    pp, depths = ("0", str(args.prompt_len)) if args.decode_only else (str(args.prompt_len),
                                                                        f"0,{args.prompt_len}")
    cmd = [str(bench), "-m", str(gguf), "-p", pp, "-n", str(args.new_tokens), "-d", depths, "-t",
           str(args.threads), "-r", "1", "-o", "json", *(["--no-warmup"] if args.no_warmup else []),
           *args.llama_args]
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


def isa_suffix(isa):
    return "" if isa == "native" else f"-{isa}"


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
                        help="GGUF types (bf16, f32, f16 from the checkpoint; block types from the GGUF)")
    parser.add_argument("--gguf", action="append", default=[], metavar="TYPE=PATH",
                        help="GGUF file of TYPE (default bench/models/gguf/<shape>-random-<type>.gguf)")
    parser.add_argument("--no-probe", action="store_true", help="skip the bandwidth / roofline probes")
    parser.add_argument("--no-warmup", action="store_true",
                        help="time both engines cold: no untimed prompt run first "
                             "(llama-bench --no-warmup)")
    parser.add_argument("--deepinfer", default=str(ROOT / "build" / "deepinfer"))
    parser.add_argument("--llama-bench", help="llama-bench binary (default: bench/llamacpp-src/build-*/bin)")
    parser.add_argument("--deepinfer-args", default="",
                        help="extra deepinfer generate flags, e.g. '--kv-cache-dtype f16' (with "
                             "--llama-args '-ctk f16 -ctv f16': the same KV dtype on both sides)")
    parser.add_argument("--llama-args", default="",
                        help="extra llama-bench flags, e.g. '-fa off' or '-ctk bf16 -ctv bf16'")
    parser.add_argument("--decode-only", action="store_true",
                        help="long depths: compare decode at depth --prompt-len only (llama-bench "
                             "-p 0 -d N); prefill rates are not reported")
    add_isa_argument(parser)
    parser.add_argument("--out", help="JSON report (default bench/out/llamacpp-<shape>[-avx2].json)")
    args = parser.parse_args()
    select_isa(args.isa)
    args.llama_args = shlex.split(args.llama_args)
    args.deepinfer_args = shlex.split(args.deepinfer_args)

    model = ROOT / "bench" / "models" / f"{args.shape}-random"
    gguf_dir = ROOT / "bench" / "models" / "gguf"
    dtypes = args.dtypes.split(",")
    ggufs = {d: gguf_dir / f"{model.name}-{d}.gguf" for d in dtypes}
    for spec in args.gguf:
        kind, sep, path = spec.partition("=")
        if not sep or kind not in ggufs:
            sys.exit(f"error: --gguf {spec}: expected TYPE=PATH with TYPE one of --dtypes ({args.dtypes})")
        ggufs[kind] = pathlib.Path(path)
    missing = [str(p) for p in ggufs.values() if not p.exists()]
    if missing or not (model / "config.json").exists():
        sys.exit(f"error: missing {', '.join(missing) or model}; run .venv-tools/bin/python "
                 f"tools/convert_to_gguf.py --shape {args.shape} --outtype {args.dtypes}")
    if not pathlib.Path(args.deepinfer).exists():
        sys.exit(f"error: {args.deepinfer} not found; run scripts/build.sh release (or pass --deepinfer)")
    bench = find_llama_tool(args.llama_bench, isa=args.isa)
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    ids = prompt_ids(args.prompt_len, vocab)

    ours = {d: [] for d in dtypes}
    peer = {d: [] for d in dtypes}
    raw, info, gguf_info = {d: [] for d in dtypes}, {}, {}
    exe = None if args.no_probe else build_probe(args.isa)
    probes = {"read_gb_s": [], "q4dot_gb_s": []}

    def pair_with_probes(result):
        # The run that just ended, between two read probes, gets their mean: the bandwidth of its
        # minute (this VM's swings by up to 2x from one minute to the next).
        if exe:
            before = probes["read_gb_s"][-1]
            probes["read_gb_s"].append(probe(exe, "read", args.threads))
            result["paired_read_gb_s"] = (before + probes["read_gb_s"][-1]) / 2

    for rep in range(args.repeats):
        if exe:
            probes["q4dot_gb_s"].append(probe(exe, "q4dot", args.threads))
            probes["read_gb_s"].append(probe(exe, "read", args.threads))
            print(f"repeat {rep + 1}/{args.repeats} probes: {probes['read_gb_s'][-1]:.1f} GB/s read, "
                  f"{probes['q4dot_gb_s'][-1]:.1f} GB/s q4 integer dot", file=sys.stderr, flush=True)
        for d in dtypes:
            if d in ours:
                ours[d].append(run_deepinfer(args, model, ids, d, ggufs[d]))
                pair_with_probes(ours[d][-1])
            result, r, info, gguf_info[d] = run_llama(args, bench, ggufs[d])
            pair_with_probes(result)
            peer[d].append(result)
            raw[d].append(r)
            print(f"repeat {rep + 1}/{args.repeats} {d}: deepinfer {ours[d][-1] if d in ours else '-'} "
                  f"llama.cpp {result}", file=sys.stderr, flush=True)

    bandwidth = max(probes["read_gb_s"]) if exe else None
    roofline = max(probes["q4dot_gb_s"]) if exe else None
    rows = []
    for d in dtypes:
        per_token = bytes_per_token(ggufs[d])
        ceiling = min(bandwidth, roofline) if bandwidth and d in FOUR_BIT else bandwidth
        for engine, samples in (("deepinfer", ours[d]), ("llama.cpp", peer[d])):
            for s in samples:  # decode against the probes right before and after this run
                for probe_key, pct_key in (("paired_read_gb_s", "pct_of_paired_bandwidth"),
                                           ("own_read_gb_s", "pct_of_own_bandwidth")):
                    if probe_key in s:
                        s[pct_key] = 100 * s["decode_tok_s"] * per_token * 1e-9 / s[probe_key]
            row = {"engine": engine, "dtype": d, **median_row(samples), "bytes_per_token": per_token}
            if bandwidth:
                achieved = row["decode_tok_s"] * per_token * 1e-9
                row["decode_gb_s"] = achieved
                row["pct_of_bandwidth"] = 100 * achieved / bandwidth
                row["pct_of_ceiling"] = 100 * achieved / ceiling
            if engine == "llama.cpp":
                row.update({"gguf": gguf_info[d], "llama_bench_tests": raw[d]})
            rows.append(row)
    by_key = {(r["engine"], r["dtype"]): r for r in rows}
    ratios = {d: {k: by_key[("deepinfer", d)][k] / by_key[("llama.cpp", d)][k]
                  for k in ("prefill_tok_s", "decode_tok_s") if k in by_key[("deepinfer", d)]}
              for d in ours}
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    report = {"model": args.shape + " (random weights)", "isa": args.isa, "threads": args.threads, "prompt_len": args.prompt_len,
              "new_tokens": args.new_tokens, "repeats": args.repeats, "statistic": "median",
              "cpu": platform.processor() or platform.machine(), "deepinfer_commit": git,
              "realtime": os.sched_getscheduler(0) == os.SCHED_FIFO, "llama_cpp": info,
              "warmup": not args.no_warmup,
              "llama_bench_args": args.llama_args, "deepinfer_args": args.deepinfer_args, "ggufs": {d: str(p) for d, p in ggufs.items()},
              "read_bandwidth_gb_s": bandwidth, "q4_integer_dot_roofline_gb_s": roofline, "probes": probes,
              "results": rows, "ratios_deepinfer_over_llamacpp": ratios}
    out = pathlib.Path(args.out or ROOT / "bench" / "out" / f"llamacpp-{args.shape}{isa_suffix(args.isa)}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report))
    if bandwidth:
        print(f"\nmeasured: read bandwidth {bandwidth:.1f} GB/s, q4 integer-dot roofline {roofline:.1f} GB/s "
              f"({args.threads} threads)")
    print(f"\n| engine | weights | prefill tok/s ({args.prompt_len} tokens) | decode tok/s (depth "
          f"{args.prompt_len}) | MB/token | decode GB/s | % of bandwidth | % of ceiling | % of paired "
          f"bandwidth | % of own pages' bandwidth | threads |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        own = f"{r['pct_of_own_bandwidth']:.0f} %" if "pct_of_own_bandwidth" in r else "-"
        pct = (f"{r['decode_gb_s']:.1f} | {r['pct_of_bandwidth']:.0f} % | {r['pct_of_ceiling']:.0f} % "
               f"| {r['pct_of_paired_bandwidth']:.0f} % | {own}" if bandwidth else "- | - | - | - | -")
        print(f"| {r['engine']} | {r['dtype']} | {r.get('prefill_tok_s', float('nan')):.1f} | {r['decode_tok_s']:.2f} "
              f"| {r['bytes_per_token'] / 1e6:.0f} | {pct} | {args.threads} |")
    print()
    for d, r in ratios.items():
        prefill = f"prefill x{r['prefill_tok_s']:.2f}, " if "prefill_tok_s" in r else ""
        print(f"{d}: deepinfer / llama.cpp = {prefill}decode x{r['decode_tok_s']:.2f}")
        cold = by_key[("deepinfer", d)].get("cold_prefill_tok_s")
        if cold:
            print(f"{d}: deepinfer's cold first prefill (before its warm-up) {cold:.1f} tok/s")
    if shutil.which("uptime"):
        print("\n" + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), file=sys.stderr)


if __name__ == "__main__":
    main()
