#!/usr/bin/env python3
"""Block goldens from llama.cpp's own quantizer: per-tensor sha256 of the blocks that
`llama-quantize` writes for q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (--pure) and for
the q4_k_m mix, so CI checks deepinfer's quantizers and its q4_k_m choice against llama.cpp
without building it (tests/unit/model/llamacpp_blocks_test.cpp).

    tools/setup_llamacpp.sh                                   # builds llama-quantize (once)
    .venv-tools/bin/python tools/make_kquant_goldens.py       # writes the JSON below

Writes tests/data/quantize/llamacpp_blocks.json. The source tensors are not committed: they
come from a counter-based generator that the C++ test reimplements (splitmix64 of
seed + (i + 1) * 0x9E3779B97F4A7C15 per element i; the value is the sum of the four 16-bit
chunks of that word, / 65536 - 2, times the tensor's scale, times 8 when the top byte is 0x5a
(outliers), then rounded to f32 and truncated to bf16 as a real checkpoint holds; "sparse"
tensors keep only the elements whose low three bits are 0, so that whole groups and
super-blocks are zero). Every step is exact or one IEEE rounding, so numpy and C++ agree bit
for bit without torch.

The tensors have the row lengths of the two bench shapes, Qwen2.5-0.5B (896: q / k / v / o /
gate / up; 4864: down) and DeepSeek-V2-Lite (2048 and 1408, the hidden and MoE intermediate
sizes), with few rows each (the blocks of a row do not depend on the other rows), in a GGUF
that llama-quantize reads as a 24-layer Qwen2 (the layer count of Qwen2.5-0.5B, so that the
q4_k_m mix picks its q6_k layers as it does for that model). 896 and 1408 are not whole
256-element super-blocks: llama-quantize falls back to q5_0 / q5_1 / q8_0 there, and so does
deepinfer.

"heads" holds what llama-quantize (without --pure) makes of an lm_head, deepinfer's
--quantize-lm-head: output.weight of an untied model and token_embd.weight of a tied one (a
model without output.weight), with rows of 2048 (whole super-blocks) and 896 (not), each in a
source file of its own, for q8_0, q4_0, q4_k and q4_k_m.
"""

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
VERSION = "0.3.36"  # tools/setup_llamacpp.sh's llama-cpp-python sdist
LLAMA = REPO / "bench" / "llamacpp-src" / f"llama_cpp_python-{VERSION}" / "vendor" / "llama.cpp"
BIN = REPO / "bench" / "llamacpp-src" / f"build-{VERSION}" / "bin"
OUT = REPO / "tests" / "data" / "quantize" / "llamacpp_blocks.json"

LAYERS = 24  # Qwen2.5-0.5B
HIDDEN, FFN, HEADS, KV_HEADS = 896, 4864, 14, 2
BASE_SEED = 20261201
MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)

# llama-quantize's type names; "pure": every tensor the same type (with its fallback).
TYPES = [
    ("q8_0", "Q8_0", True), ("q4_0", "Q4_0", True), ("q4_1", "Q4_1", True),
    ("q5_0", "Q5_0", True), ("q5_1", "Q5_1", True), ("q4_k", "Q4_K", True),
    ("q5_k", "Q5_K", True), ("q6_k", "Q6_K", True), ("q4_k_m", "Q4_K_M", False),
]


def splitmix64(seed: int, n: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(1, n + 1, dtype=np.uint64) * GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def generate(seed: int, rows: int, cols: int, scale: float, sparse: bool) -> np.ndarray:
    z = splitmix64(seed, rows * cols)
    chunks = sum(((z >> np.uint64(16 * k)) & np.uint64(0xFFFF)).astype(np.float64)
                 for k in range(4))
    v = (chunks / 65536.0 - 2.0) * scale
    v = np.where((z >> np.uint64(56)) == np.uint64(0x5A), v * 8.0, v)
    if sparse:
        v = np.where((z & np.uint64(7)) == np.uint64(0), v, 0.0)
    f = v.astype(np.float32)
    bits = f.view(np.uint32) & np.uint32(0xFFFF0000)  # bf16, truncated
    return bits.view(np.float32).reshape(rows, cols)


def tensor_specs() -> list:
    """(GGUF name, rows, cols, scale, sparse): the projections of every layer, few rows each."""
    specs = []
    per_layer = [("attn_q", 4, HIDDEN), ("attn_k", 2, HIDDEN), ("attn_v", 2, HIDDEN),
                 ("attn_output", 2, HIDDEN), ("ffn_gate", 2, HIDDEN), ("ffn_up", 2, HIDDEN),
                 ("ffn_down", 4, FFN)]
    for layer in range(LAYERS):
        for kind, rows, cols in per_layer:
            scale = 0.02 * (1 + (layer % 5)) if kind != "ffn_down" else 0.015
            specs.append((f"blk.{layer}.{kind}.weight", rows, cols, scale, False))
    # DeepSeek-V2-Lite's row lengths, under names llama.cpp quantizes with the base type (not
    # ffn_down: in a model without experts llama.cpp counts ffn_down tensors to find the layer,
    # and a second one in a layer would shift the count; in real models it equals the layer).
    specs.append(("blk.0.ffn_gate_shexp.weight", 8, 2048, 0.03, False))
    specs.append(("blk.1.ffn_gate_shexp.weight", 8, 1408, 0.03, False))
    specs.append(("blk.2.ffn_gate_shexp.weight", 8, 2048, 0.05, True))
    specs.append(("blk.3.ffn_up_shexp.weight", 8, 1408, 0.0004, False))
    return specs


# The lm_head cases: (file stem, GGUF name, rows, cols, tied). A tied model has no output.weight.
LM_HEADS = [("head-2048", "output.weight", 4, 2048, False), ("head-896", "output.weight", 4, 896, False),
         ("tied-2048", "token_embd.weight", 4, 2048, True)]
LM_HEAD_TYPES = [("q8_0", "Q8_0"), ("q4_0", "Q4_0"), ("q4_k", "Q4_K"), ("q4_k_m", "Q4_K_M")]
LM_HEAD_SEED = 20261202


def write_source(path: Path, specs: list, seeds: list) -> None:
    sys.path.insert(0, str(LLAMA / "gguf-py"))
    from gguf import GGUFWriter  # noqa: E402  (the vendored gguf-py of the same commit)

    writer = GGUFWriter(str(path), "qwen2")
    writer.add_name("deepinfer-kquant-goldens")
    writer.add_context_length(4096)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1000000.0)
    writer.add_file_type(0)  # ALL_F32
    for seed, (name, rows, cols, scale, sparse) in zip(seeds, specs):
        writer.add_tensor(name, generate(seed, rows, cols, scale, sparse))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def head_goldens(quantize: Path, work: Path) -> dict:
    tensors, types = [], {ours: {} for ours, _ in LM_HEAD_TYPES}
    for i, (stem, name, rows, cols, tied) in enumerate(LM_HEADS):
        seed, scale = LM_HEAD_SEED + 7919 * i, 0.03
        source = work / f"{stem}-f32.gguf"
        write_source(source, [(name, rows, cols, scale, False)], [seed])
        tensors.append({"file": stem, "name": name, "rows": rows, "cols": cols, "seed": seed,
                        "scale": scale, "sparse": False, "tied": tied})
        for ours, theirs in LM_HEAD_TYPES:
            out = work / f"llamacpp-{stem}-{ours}.gguf"
            cmd = [str(quantize), str(source), str(out), theirs, "1"]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            types[ours][stem] = read_blocks(out)[name]
    return {"tensors": tensors, "types": types}


def read_blocks(path: Path) -> dict:
    from gguf import GGUFReader  # noqa: E402

    out = {}
    for t in GGUFReader(str(path)).tensors:
        out[t.name] = {"type": t.tensor_type.name,
                       "sha256": hashlib.sha256(np.ascontiguousarray(t.data).tobytes()).hexdigest()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", help="directory to keep the GGUF files in")
    args = parser.parse_args()
    quantize = BIN / "llama-quantize"
    if not quantize.exists():
        sys.exit(f"{quantize} is missing: run tools/setup_llamacpp.sh first")
    specs = tensor_specs()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        source = work / "source-f32.gguf"
        write_source(source, specs, [BASE_SEED + 7919 * i for i in range(len(specs))])
        types = {}
        for ours, theirs, pure in TYPES:
            out = work / f"llamacpp-{ours}.gguf"
            cmd = [str(quantize)] + (["--pure"] if pure else []) + [str(source), str(out), theirs, "1"]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            types[ours] = {"pure": pure, "tensors": read_blocks(out)}
            print(f"{ours}: {len(types[ours]['tensors'])} tensors", file=sys.stderr)
        heads = head_goldens(quantize, work)
    commit = ""
    commit_file = LLAMA / "build-info.txt"
    if commit_file.exists():
        commit = commit_file.read_text().strip()
    doc = {
        "generator": "tools/make_kquant_goldens.py with llama-quantize of llama-cpp-python "
                     f"{VERSION}'s vendored llama.cpp {commit}".strip(),
        "layers": LAYERS,
        "experts": 0,
        "tensors": [{"name": n, "rows": r, "cols": c, "seed": BASE_SEED + 7919 * i, "scale": s,
                     "sparse": sp} for i, (n, r, c, s, sp) in enumerate(specs)],
        "types": types,
        "heads": heads,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
