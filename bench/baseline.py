#!/usr/bin/env python3
"""Prefill and decode throughput of `deepinfer generate` beside Hugging Face transformers
(PyTorch, CPU) on the same random Qwen2.5-0.5B-shaped checkpoint, same prompt, same threads.

    scripts/setup_tools.sh && scripts/build.sh release
    .venv-tools/bin/python bench/baseline.py [--threads 2] [--prompt-len 128] [--new-tokens 32]

Writes bench/out/baseline.json and prints a Markdown table (docs/PERFORMANCE.md).
"""
import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def ensure_model(path, shape):
    if not (path / "config.json").exists():
        subprocess.run([sys.executable, str(ROOT / "tools" / "make_bench_model.py"), "--shape", shape,
                        "--out", str(path)], check=True)


def prompt_ids(n, vocab):
    # Deterministic, spread over the vocabulary, no special meaning.
    return [(7919 * i + 13) % (vocab - 1000) + 500 for i in range(n)]


def run_deepinfer(args, model, ids, dtype):
    cmd = [str(ROOT / "build" / "deepinfer"), "generate", "--model", str(model), "--prompt-ids",
           ",".join(map(str, ids)), "--max-new-tokens", str(args.new_tokens), "--ignore-eos",
           "--json", "--threads", str(args.threads), "--dtype", dtype, "--log-level", "warn"]
    best = None
    for _ in range(args.repeats):
        out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        result = {"prefill_tok_s": len(ids) / out["prefill_seconds"],
                  "decode_tok_s": out["decode_steps"] / out["decode_seconds"]}
        best = result if best is None else {k: max(best[k], result[k]) for k in result}
    return best


def run_transformers(args, model_dir, ids, dtype):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(args.threads)
    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype).eval()
    input_ids = torch.tensor([ids])
    best = None
    with torch.inference_mode():
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = model(input_ids, use_cache=True)
            prefill = time.perf_counter() - start
            past = out.past_key_values
            token = out.logits[:, -1:].argmax(-1)
            start = time.perf_counter()
            for _ in range(args.new_tokens - 1):
                out = model(token, past_key_values=past, use_cache=True)
                past = out.past_key_values
                token = out.logits[:, -1:].argmax(-1)
            decode = time.perf_counter() - start
            result = {"prefill_tok_s": len(ids) / prefill,
                      "decode_tok_s": (args.new_tokens - 1) / decode}
            best = result if best is None else {k: max(best[k], result[k]) for k in result}
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--dtypes", default="bf16,f32")
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args()

    model = ROOT / "bench" / "models" / f"{args.shape}-random"
    ensure_model(model, args.shape)
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    ids = prompt_ids(args.prompt_len, vocab)
    rows = []
    for dtype in args.dtypes.split(","):
        rows.append({"engine": "deepinfer", "dtype": dtype, **run_deepinfer(args, model, ids, dtype)})
        if not args.no_peer:
            rows.append({"engine": "transformers", "dtype": dtype,
                         **run_transformers(args, model, ids, dtype)})
    report = {"model": args.shape + " (random weights)", "threads": args.threads,
              "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
              "cpu": platform.processor() or platform.machine(), "results": rows}
    out_dir = ROOT / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "baseline.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report))
    print(f"\n| engine | weights | prefill tok/s ({args.prompt_len} tokens) | decode tok/s | threads |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['engine']} | {r['dtype']} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.2f} "
              f"| {args.threads} |")
    peers = {(r["engine"], r["dtype"]): r for r in rows}
    for dtype in args.dtypes.split(","):
        if ("transformers", dtype) in peers:
            d, t = peers[("deepinfer", dtype)], peers[("transformers", dtype)]
            print(f"\n{dtype}: deepinfer / transformers = prefill x{d['prefill_tok_s'] / t['prefill_tok_s']:.2f}, "
                  f"decode x{d['decode_tok_s'] / t['decode_tok_s']:.2f}")


if __name__ == "__main__":
    main()
