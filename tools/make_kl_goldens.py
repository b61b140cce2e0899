#!/usr/bin/env python3
"""Fidelity goldens from llama.cpp: the mean KL divergence of the next-token distributions of
each quantized type from the 16-bit model, measured by `llama-perplexity --kl-divergence` on
the same model and text as tests/integration/test_quantization_fidelity.py measures ours.

    tools/setup_llamacpp.sh                                  # llama-quantize, llama-perplexity
    .venv-tools/bin/python tools/make_kl_goldens.py [--deepinfer build/deepinfer]

The model is tests/integration/kquant_model.py's tiny-qwen2-kq (a numpy-generated Qwen2 whose
projections are whole 256-element super-blocks, so the k-quants are what they say), converted
to an f32 GGUF with llama.cpp's converter (tools/convert_to_gguf.py); the text is
data/validate/gettysburg_address.txt in chunks of 128 tokens (llama-perplexity scores the
second half of each chunk; deepinfer validate --window 128 --stride 64 scores the tokens after
a context of 64..127 the same way, plus the first window's).

For each type llama-quantize runs twice:
  "same_policy"  token_embd and output kept f32 (--token-embedding-type / --output-tensor-type
                 f32), the projections in the type (--pure; q4_k_m its mix): what deepinfer's
                 --quantization does (docs/QUANTIZATION.md). The blocks are bit-identical to
                 ours, so the KL difference is the kernels'. This is the golden CI compares with.
  "llamacpp_default" llama-quantize's own choice (--pure for the single types, which then
                 quantizes the tied embedding too; q4_k_m with its q6_k output): for the table.
Writes tests/data/quantize/llamacpp_kl.json; with --deepinfer, also measures ours and prints
the table of docs/QUANTIZATION.md.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
import kquant_model  # noqa: E402

VERSION = "0.3.36"
BIN = REPO / "bench" / "llamacpp-src" / f"build-{VERSION}" / "bin"
TEXT = REPO / "data" / "validate" / "gettysburg_address.txt"
OUT = REPO / "tests" / "data" / "quantize" / "llamacpp_kl.json"
CTX = 128
THREADS = 2
TYPES = [("q8_0", "Q8_0"), ("q4_0", "Q4_0"), ("q4_1", "Q4_1"), ("q5_0", "Q5_0"),
         ("q5_1", "Q5_1"), ("q4_k", "Q4_K"), ("q5_k", "Q5_K"), ("q6_k", "Q6_K"),
         ("q4_k_m", "Q4_K_M")]


def run(cmd: list) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def perplexity_kl(model: Path, base: Path) -> dict:
    # llama.cpp logs from a thread that does not always flush the summary before exit into a
    # pipe: a run without it is repeated.
    for _ in range(5):
        out = run([BIN / "llama-perplexity", "-m", model, "--kl-divergence-base", base,
                   "--kl-divergence", "-c", CTX, "-b", CTX, "-t", THREADS])
        mean = re.search(r"Mean\s+KLD:\s+([0-9.eE+-]+)\s+±\s+([0-9.eE+-]+)", out)
        top = re.search(r"Maximum KLD:\s+([0-9.eE+-]+)", out)
        if mean and top:
            return {"mean_kl": float(mean.group(1)), "mean_kl_error": float(mean.group(2)),
                    "max_kl": float(top.group(1))}
    sys.exit(f"no KLD in llama-perplexity's output for {model}:\n{out[-2000:]}")


def ours(deepinfer: str, model: Path, qtype: str) -> dict:
    out = run([deepinfer, "validate", "--log-level", "error", "-m", model, "--dtype", "f32", "--quantization", qtype,
               "--reference", model, "--reference-dtype", "f32", "--text", TEXT,
               "--window", CTX, "--stride", CTX // 2, "--threads", THREADS, "--json"])
    t = json.JSONDecoder().raw_decode(out[out.index("{"):])[0]["teacher_forcing"]
    return {"mean_kl": t["mean_kl"], "max_kl": t["max_kl"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", help="directory for the checkpoint and GGUF files (default: a temp dir)")
    ap.add_argument("--deepinfer", help="a deepinfer binary: also measure ours and print the table")
    args = ap.parse_args()
    for tool in ("llama-quantize", "llama-perplexity"):
        if not (BIN / tool).exists():
            sys.exit(f"{BIN / tool} is missing: run tools/setup_llamacpp.sh first")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        ckpt = kquant_model.write(work / kquant_model.NAME)
        run([sys.executable, REPO / "tools" / "convert_to_gguf.py", "--model", ckpt,
             "--outtype", "f32", "--pre", "qwen2", "--out-dir", work, "--force"])
        f32 = work / f"{kquant_model.NAME}-f32.gguf"
        base = work / "base.kld"
        run([BIN / "llama-perplexity", "-m", f32, "-f", TEXT, "-c", CTX, "-b", CTX, "-t", THREADS,
             "--kl-divergence-base", base])
        types = {}
        for name, theirs in TYPES:
            pure = [] if name == "q4_k_m" else ["--pure"]
            same = work / f"{name}-same-policy.gguf"
            run([BIN / "llama-quantize", *pure, "--token-embedding-type", "f32",
                 "--output-tensor-type", "f32", f32, same, theirs, THREADS])
            default = work / f"{name}-default.gguf"
            run([BIN / "llama-quantize", *pure, f32, default, theirs, THREADS])
            types[name] = {"same_policy": perplexity_kl(same, base),
                           "llamacpp_default": perplexity_kl(default, base)}
            if args.deepinfer:
                types[name]["deepinfer"] = ours(args.deepinfer, ckpt, name)
            print(name, json.dumps(types[name]), file=sys.stderr)
    doc = {
        "generator": f"tools/make_kl_goldens.py, llama.cpp of llama-cpp-python {VERSION}",
        "model": f"tests/integration/kquant_model.py ({kquant_model.NAME})",
        "text": str(TEXT.relative_to(REPO)),
        "n_ctx": CTX,
        "types": {k: {"same_policy": v["same_policy"], "llamacpp_default": v["llamacpp_default"]}
                  for k, v in types.items()},
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    if args.deepinfer:
        print("| type | deepinfer mean KL | llama.cpp, same policy | llama.cpp, its defaults |")
        print("| --- | --- | --- | --- |")
        for name, v in types.items():
            print(f"| {name} | {v['deepinfer']['mean_kl']:.3e} | "
                  f"{v['same_policy']['mean_kl']:.3e} ± {v['same_policy']['mean_kl_error']:.1e} | "
                  f"{v['llamacpp_default']['mean_kl']:.3e} |")


if __name__ == "__main__":
    main()
