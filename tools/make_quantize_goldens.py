#!/usr/bin/env python3
"""Goldens for the reference quantizers (src/core/quantize_blocks.cpp) and quantize-at-load
(--quantization), made with gguf-py 0.19.0's gguf.quants.quantize, whose Q8_0 / Q4_0 / Q4_1 /
Q5_0 / Q5_1 are bit-exact ports of ggml's quantize_row_*_ref.

    .venv-tools/bin/python tools/make_quantize_goldens.py

Writes:
  tests/data/quantize/rows.json
      cases of f32 rows (rows x cols, cols a multiple of 32: ggml blocks never have tails), the
      input as little-endian f32 hex and, per type, the quantized bytes as hex. Cases: random
      rows of varied scale with outliers and exact zeros, an all-zero row, rows with one huge
      value (a scale that overflows f16 to inf, and one just below 65504), a negative largest
      magnitude (Q4_0 / Q5_0 take the signed max: d = max / -8), a constant row (Q4_1 / Q5_1:
      d = 0), tiny values (subnormal f16 scales) and exact halves (roundf rounds them away from
      zero, truncation of x + 8.5 moves them up). No -0.0 and no NaN: ggml's C and gguf-py's
      numpy differ there (see quantize_blocks.cpp).
  tests/data/gguf-models/<model>-gguf-py-<type>.gguf
      the f32 GGUF of a tiny model (tools/make_gguf_test_models.py) with the matrices that
      deepinfer's --quantization policy quantizes (attention and MLP projections: 2-D
      attn_* / ffn_* weights whose rows are whole 32-element blocks) re-encoded by gguf-py;
      token_embd, output, norms and biases stay f32, as the policy keeps them
      (docs/QUANTIZATION.md). Loading the safetensors checkpoint with --quantization <type>
      must give bitwise the logits of this file.
  tests/data/gguf-models/<model>-gguf-py-<type>-head.gguf
      the same with --quantize-lm-head: output.weight (untied) or token_embd.weight (tied,
      no output.weight) re-encoded too, in Q8_0, llama-quantize's output type for rows that
      are not whole 256-element super-blocks (the tiny models' 64; gguf-py has no Q6_K
      quantizer, tests/data/quantize/llamacpp_blocks.json covers that case).
"""
import importlib.metadata
import json
import pathlib
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

SEED = 20261211
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "quantize"
MODELS = ROOT / "tests" / "data" / "gguf-models"
TYPES = [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1]
# (model, types) for the quantize-at-load equality tests (tests/unit/model/quantize_at_load_test.cpp).
GGUF_MODELS = [("tiny-qwen3", [Q.Q8_0, Q.Q4_0, Q.Q5_1]), ("tiny-llama", [Q.Q8_0])]
# (model, type) with --quantize-lm-head: tiny-qwen2 ties its lm_head to the embedding.
HEAD_MODELS = [("tiny-qwen2", Q.Q4_0), ("tiny-qwen3", Q.Q4_0)]


def cases(rng):
    out = []
    x = rng.standard_normal((4, 256)).astype(np.float32)
    x *= np.array([[1e-3], [0.05], [1.0], [30.0]], dtype=np.float32)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, 20, replace=False)] = 0.0
    flat[rng.choice(flat.size, 10, replace=False)] *= np.float32(40.0)
    out.append(("random", x))
    out.append(("zeros", np.zeros((1, 64), np.float32)))
    huge = rng.uniform(-1, 1, (2, 64)).astype(np.float32)
    huge[0, 5] = np.float32(1e30)    # d = 1e30 / 127 overflows f16: the stored scale is inf
    huge[1, 40] = np.float32(-6e5)   # Q8_0's d (4724) fits f16, Q4_0's (75000) overflows
    out.append(("huge_value", huge))
    neg = rng.uniform(-1, 1, (1, 64)).astype(np.float32)
    neg[0, 3] = np.float32(-5.0)
    neg[0, 40] = np.float32(-3.5)
    neg[0, 41] = np.float32(3.5)     # a tie of magnitudes: the first one is the max
    out.append(("negative_max", neg))
    out.append(("constant", np.full((1, 64), np.float32(0.75))))
    out.append(("tiny", (rng.standard_normal((1, 64)) * 1e-6).astype(np.float32)))
    # Row 0: Q8_0 with d = 1 (amax 127) rounds the exact halves k + 0.5 away from zero. Row 1:
    # Q4_0 with d = 2 (max -16) maps odd integers to x * id + 8.5 = 1 ... 16 exactly, and 16
    # is clamped to 15.
    halves = np.zeros((2, 64), np.float32)
    halves[0] = np.tile(np.arange(32, dtype=np.float32) - np.float32(15.5), 2)
    halves[0, 0] = np.float32(127.0)
    odd = np.arange(-15, 16, 2, dtype=np.float32)
    halves[1] = np.tile(np.concatenate([[-16.0], odd, odd[:-1]]).astype(np.float32), 2)
    out.append(("halves", halves))
    return out


def write_rows():
    rng = np.random.default_rng(SEED)
    entries = []
    for name, x in cases(rng):
        assert x.dtype == np.float32 and x.shape[-1] % 32 == 0
        assert not np.any(np.signbit(x) & (x == 0)), "no -0.0 (C and numpy differ)"
        entry = {"name": name, "rows": int(x.shape[0]), "cols": int(x.shape[1]),
                 "input_f32_le": x.astype("<f4").tobytes().hex(), "quantized": {}}
        for qtype in TYPES:
            q = gguf.quants.quantize(x, qtype)
            assert q.dtype == np.uint8
            entry["quantized"][qtype.name] = q.tobytes().hex()
        entries.append(entry)
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"generator": f"gguf-py {importlib.metadata.version('gguf')} gguf.quants.quantize",
           "seed": SEED, "cases": entries}
    (OUT / "rows.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT / 'rows.json'} ({len(entries)} cases x {len(TYPES)} types)")


QUANTIZED_PARTS = ("attn_q.", "attn_k.", "attn_v.", "attn_output.", "ffn_gate.", "ffn_up.",
                   "ffn_down.")


def quantized_by_policy(tensor):
    """What --quantization quantizes: a 2-D projection weight with whole 32-element rows."""
    name = tensor.name
    shape = tensor.data.shape
    return (name.startswith("blk.") and name.endswith(".weight") and len(shape) == 2
            and any(part in name for part in QUANTIZED_PARTS) and shape[-1] % 32 == 0)


def is_lm_head(tensor, names):
    """--quantize-lm-head's matrix: output.weight, or token_embd.weight when there is none."""
    return tensor.name == "output.weight" or (tensor.name == "token_embd.weight"
                                              and "output.weight" not in names)


def write_gguf(model, qtype, head=False):
    src = MODELS / f"{model}-f32.gguf"
    if not src.exists():
        sys.exit(f"error: {src} is missing; run tools/make_gguf_test_models.py first")
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    dst = MODELS / f"{model}-gguf-py-{qtype.name.lower()}{'-head' if head else ''}.gguf"
    writer = gguf.GGUFWriter(dst, arch=arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment"):
            continue
        main = field.types[0]
        sub = field.types[-1] if main == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), main, sub_type=sub)
    quantized = 0
    names = {t.name for t in reader.tensors}
    for t in reader.tensors:
        assert t.tensor_type == Q.F32, f"{src}: {t.name} is {t.tensor_type.name}, expected F32"
        data = np.array(t.data, dtype=np.float32)
        if quantized_by_policy(t):
            writer.add_tensor(t.name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
            quantized += 1
        elif head and is_lm_head(t, names):
            assert data.shape[-1] % 256 != 0, "a Q6_K head: gguf-py cannot quantize it"
            writer.add_tensor(t.name, gguf.quants.quantize(data, Q.Q8_0), raw_dtype=Q.Q8_0)
            quantized += 1
        else:
            writer.add_tensor(t.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {dst} ({quantized} of {len(reader.tensors)} tensors in {qtype.name}"
          f"{', the lm_head in Q8_0' if head else ''})")


def main():
    version = importlib.metadata.version("gguf")
    if version != "0.19.0":
        sys.exit(f"error: gguf-py {version}; the goldens are made with 0.19.0 (tools/requirements.txt)")
    write_rows()
    for model, types in GGUF_MODELS:
        for qtype in types:
            write_gguf(model, qtype)
    for model, qtype in HEAD_MODELS:
        write_gguf(model, qtype, head=True)


if __name__ == "__main__":
    main()
