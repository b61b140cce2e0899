#!/usr/bin/env python3
"""Writes tests/data/gguf-models/tiny-qwen2-kquants.gguf: a 2-layer Qwen2 whose matrices are
Q5_0, Q5_1, Q4_K, Q5_K and Q6_K blocks, for the native block-kernel tests.

    .venv-tools/bin/python tools/make_kquant_gguf_model.py

gguf-py 0.19 cannot quantize the k-quants, and our own quantizer must not make test data (it
would not be independent), so the weights are random blocks: random bytes (every pattern of
quants, high bits, packed 6-bit scales / mins and int8 group scales is a valid block) with the
f16 super-block scales set to sane values. The reference for the native kernels is then the
same blocks dequantized, which deepinfer does at load with --dtype f32 bit-exactly as gguf-py's
dequantize (tests/unit/io/gguf_test.cpp checks that on the golden file); this script checks
that every tensor it writes reads back through gguf-py's dequantize with finite values.
Hidden size 256 and intermediate size 512 are whole k-quant super-blocks. The tokenizer and
general metadata are those of tiny-qwen2-f32.gguf (make_gguf_test_models.py).
"""

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFWriter, GGUFValueType
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests" / "data" / "gguf-models" / "tiny-qwen2-f32.gguf"
OUT = REPO / "tests" / "data" / "gguf-models" / "tiny-qwen2-kquants.gguf"

HIDDEN, FFN, HEADS, KV_HEADS, LAYERS = 256, 512, 4, 2, 2
HEAD_DIM = HIDDEN // HEADS
# Each type appears in both layers on matrices with rows of 256 and of 512 (ffn_down).
LAYER_TYPES = [
    {"attn_q": Q.Q4_K, "attn_k": Q.Q5_K, "attn_v": Q.Q6_K, "attn_output": Q.Q5_0,
     "ffn_gate": Q.Q5_1, "ffn_up": Q.Q4_K, "ffn_down": Q.Q6_K},
    {"attn_q": Q.Q5_1, "attn_k": Q.Q6_K, "attn_v": Q.Q4_K, "attn_output": Q.Q5_K,
     "ffn_gate": Q.Q6_K, "ffn_up": Q.Q5_0, "ffn_down": Q.Q5_K},
]
EMBEDDING_TYPE = Q.Q6_K  # tied: the lm_head runs it too


def f16_bytes(values):
    return np.asarray(values, dtype=np.float16).view(np.uint8).reshape(-1, 2)


def random_blocks(rng, qtype, rows, cols, scale):
    """rows x cols weights of qtype as raw blocks [rows, row bytes]. `scale` sets the typical
    weight magnitude; mins are chosen so that the weights are roughly centred."""
    block, size = GGML_QUANT_SIZES[qtype]
    n = rows * cols // block
    blocks = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    sign = rng.choice([-1.0, 1.0], n)
    if qtype == Q.Q5_0:  # d; q - 16 in [-16, 15]
        blocks[:, 0:2] = f16_bytes(sign * rng.uniform(0.5, 1.5, n) * scale / 8)
    elif qtype == Q.Q5_1:  # d, m; q in [0, 31]
        d = rng.uniform(0.5, 1.5, n) * scale / 8
        blocks[:, 0:2] = f16_bytes(d)
        blocks[:, 2:4] = f16_bytes(-15.5 * d)
    elif qtype in (Q.Q4_K, Q.Q5_K):  # d * 6-bit scale * q - dmin * 6-bit min
        levels = 7.5 if qtype == Q.Q4_K else 15.5
        d = sign * rng.uniform(0.5, 1.5, n) * scale / (32 * levels)
        blocks[:, 0:2] = f16_bytes(d)
        blocks[:, 2:4] = f16_bytes(d * levels)
    elif qtype == Q.Q6_K:  # d * int8 group scale * (q - 32)
        blocks[:, 208:210] = f16_bytes(sign * rng.uniform(0.5, 1.5, n) * scale / (64 * 32))
    else:
        raise ValueError(qtype)
    out = blocks.reshape(rows, cols // block * size)
    values = dequantize(out, qtype)
    assert values.shape == (rows, cols) and np.isfinite(values).all(), qtype
    return out


def copy_metadata(reader, writer):
    skip = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count", "general.architecture",
            "general.file_type", "general.name"}
    for key, field in reader.fields.items():
        if key in skip or key.startswith("qwen2."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)


def main():
    rng = np.random.default_rng(20261201)
    reader = GGUFReader(SOURCE)
    vocab = len(reader.fields["tokenizer.ggml.tokens"].contents())
    writer = GGUFWriter(OUT, "qwen2")
    writer.add_name("tiny-qwen2-kquants")
    writer.add_block_count(LAYERS)
    writer.add_context_length(256)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    copy_metadata(reader, writer)

    def matrix(name, qtype, rows, cols, scale):
        raw = random_blocks(rng, qtype, rows, cols, scale)
        writer.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)

    def vector(name, values):
        writer.add_tensor(name, np.asarray(values, dtype=np.float32))

    matrix("token_embd.weight", EMBEDDING_TYPE, vocab, HIDDEN, 0.05)
    shapes = {"attn_q": (HIDDEN, HIDDEN), "attn_k": (KV_HEADS * HEAD_DIM, HIDDEN),
              "attn_v": (KV_HEADS * HEAD_DIM, HIDDEN), "attn_output": (HIDDEN, HIDDEN),
              "ffn_gate": (FFN, HIDDEN), "ffn_up": (FFN, HIDDEN), "ffn_down": (HIDDEN, FFN)}
    for layer, types in enumerate(LAYER_TYPES):
        prefix = f"blk.{layer}."
        vector(prefix + "attn_norm.weight", rng.uniform(0.8, 1.2, HIDDEN))
        vector(prefix + "ffn_norm.weight", rng.uniform(0.8, 1.2, HIDDEN))
        for kind, (rows, cols) in shapes.items():
            matrix(prefix + kind + ".weight", types[kind], rows, cols, 1.0 / np.sqrt(cols))
        for kind in ("attn_q", "attn_k", "attn_v"):
            vector(prefix + kind + ".bias", rng.normal(0.0, 0.02, shapes[kind][0]))
    vector("output_norm.weight", rng.uniform(0.8, 1.2, HIDDEN))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
