#!/usr/bin/env python3
"""Writes a DeepSeek-V2-Lite-shaped GGUF at full depth directly in 4-bit blocks, for the
"does it load and decode on a 24 GB machine" check of issue #11 (docs/PERFORMANCE.md).

    .venv-tools/bin/python tools/make_v2_lite_int4_gguf.py [--out /work/models/v2-lite-int4.gguf]

The shape is deepseek-ai/DeepSeek-V2-Lite's config.json: hidden 2048, 27 layers (the first
dense, intermediate 10944), 64 routed experts (top-6, softmax scores, no renormalisation) and 2
shared ones of moe_intermediate 1408, MLA with kv_lora_rank 512 and no q_lora, 16 heads of
128 + 64 (rope) query/key dims and 128 value dims, vocab 102400, YaRN rope (factor 40 over
4096). 15.7 B parameters. The weights are random valid blocks, not a trained model: random
bytes (every bit pattern of quants, packed scales and mins is a valid block) with the f16
scales set so that weights have a standard deviation of about 0.02.

Types, as llama.cpp's q4_k_m would pick them where a row allows: Q4_K for matrices whose rows
are whole 256-element super-blocks (attention, expert gate/up, shared experts, the dense
gate/up, the embedding), Q4_0 where they are not (ffn_down_exps: rows of 1408; the dense
ffn_down: 10944), Q6_K for the output, F16 for MLA's kv_b (read by element), F32 for norms and
the router. About 8.7 GB.

Written streaming: the tensor infos first, then one tensor at a time (the largest, an expert
stack, is 185 MB), so the script never holds the model in memory. There is no bf16
intermediate: nothing is quantized, the blocks are made directly.
"""
import argparse
import pathlib
import time

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES

REPO = pathlib.Path(__file__).resolve().parent.parent
TOKENIZER_SOURCE = REPO / "tests" / "data" / "gguf-models" / "tiny-deepseek-v2-lite-f32.gguf"
DEFAULT_OUT = pathlib.Path("/work/models/deepseek-v2-lite-shape-int4.gguf")
SEED = 20261201

HIDDEN, LAYERS, DENSE_FFN, VOCAB = 2048, 27, 10944, 102400
EXPERTS, TOP_K, SHARED, MOE_FFN = 64, 6, 2, 1408
HEADS, NOPE, ROPE, V_DIM, KV_RANK = 16, 128, 64, 128, 512
STD = 0.02


def scale_fields(qtype):
    """(byte offset of the f16 scale, byte offset of the f16 min scale or None, typical size of
    the integer the scale multiplies) of one block."""
    return {
        Q.Q4_0: (0, None, 4.6),    # (q - 8): std of a uniform 0..15 minus 8
        Q.Q4_K: (0, 2, 31.5 * 4.6),  # 6-bit sub-block scale x 4-bit quant
        Q.Q6_K: (208, None, 74.0 * 18.5),  # int8 group scale x (q - 32)
    }[qtype]


def random_blocks(rng, qtype, rows, cols):
    block, block_bytes = GGML_QUANT_SIZES[qtype]
    assert cols % block == 0, (qtype, cols)
    blocks = rows * cols // block
    data = np.frombuffer(rng.bytes(blocks * block_bytes), dtype=np.uint8).reshape(blocks, block_bytes).copy()
    d_at, m_at, typical = scale_fields(qtype)
    d = (STD / typical * rng.uniform(0.5, 1.5, blocks) * rng.choice([-1.0, 1.0], blocks)).astype(np.float16)
    data[:, d_at:d_at + 2] = d.view(np.uint8).reshape(blocks, 2)
    if m_at is not None:
        # dmin about 7.5 x d keeps the sub-blocks roughly centred (q4_k: x = d sc q - dmin m).
        dmin = (np.abs(d.astype(np.float32)) * 7.5 * rng.uniform(0.5, 1.5, blocks)).astype(np.float16)
        data[:, m_at:m_at + 2] = dmin.view(np.uint8).reshape(blocks, 2)
    return data.reshape(rows, cols // block * block_bytes)


def plan():
    """(name, numpy shape [.., rows, cols], type) of every tensor, in file order."""
    t = [("token_embd.weight", (VOCAB, HIDDEN), Q.Q4_K)]
    for layer in range(LAYERS):
        p = f"blk.{layer}."
        t += [
            (p + "attn_norm.weight", (HIDDEN,), Q.F32),
            (p + "attn_q.weight", (HEADS * (NOPE + ROPE), HIDDEN), Q.Q4_K),
            (p + "attn_kv_a_mqa.weight", (KV_RANK + ROPE, HIDDEN), Q.Q4_K),
            (p + "attn_kv_a_norm.weight", (KV_RANK,), Q.F32),
            (p + "attn_kv_b.weight", (HEADS * (NOPE + V_DIM), KV_RANK), Q.F16),
            (p + "attn_output.weight", (HIDDEN, HEADS * V_DIM), Q.Q4_K),
            (p + "ffn_norm.weight", (HIDDEN,), Q.F32),
        ]
        if layer == 0:
            t += [
                (p + "ffn_gate.weight", (DENSE_FFN, HIDDEN), Q.Q4_K),
                (p + "ffn_up.weight", (DENSE_FFN, HIDDEN), Q.Q4_K),
                (p + "ffn_down.weight", (HIDDEN, DENSE_FFN), Q.Q4_0),
            ]
            continue
        t += [
            (p + "ffn_gate_inp.weight", (EXPERTS, HIDDEN), Q.F32),
            (p + "ffn_gate_exps.weight", (EXPERTS, MOE_FFN, HIDDEN), Q.Q4_K),
            (p + "ffn_up_exps.weight", (EXPERTS, MOE_FFN, HIDDEN), Q.Q4_K),
            (p + "ffn_down_exps.weight", (EXPERTS, HIDDEN, MOE_FFN), Q.Q4_0),
            (p + "ffn_gate_shexp.weight", (SHARED * MOE_FFN, HIDDEN), Q.Q4_K),
            (p + "ffn_up_shexp.weight", (SHARED * MOE_FFN, HIDDEN), Q.Q4_K),
            (p + "ffn_down_shexp.weight", (HIDDEN, SHARED * MOE_FFN), Q.Q4_K),
        ]
    t += [("output_norm.weight", (HIDDEN,), Q.F32), ("output.weight", (VOCAB, HIDDEN), Q.Q6_K)]
    return t


def nbytes(shape, qtype):
    block, block_bytes = GGML_QUANT_SIZES[qtype]
    return int(np.prod(shape)) // block * block_bytes


def make(rng, name, shape, qtype):
    if qtype == Q.F32:
        if name.endswith("norm.weight"):
            return np.ones(shape, np.float32)
        return (rng.standard_normal(shape) * STD).astype(np.float32)  # the router
    if qtype == Q.F16:
        return (rng.standard_normal(shape) * STD).astype(np.float16)
    rows = int(np.prod(shape[:-1]))
    return random_blocks(rng, qtype, rows, shape[-1]).reshape(*shape[:-1], -1)


def add_metadata(w):
    a = "deepseek2"
    w.add_string("general.name", "DeepSeek-V2-Lite shape, random int4 blocks (deepinfer test)")
    for key, value in [("block_count", LAYERS), ("context_length", 163840),
                       ("embedding_length", HIDDEN), ("feed_forward_length", DENSE_FFN),
                       ("attention.head_count", HEADS), ("attention.head_count_kv", HEADS),
                       ("rope.scaling.original_context_length", 4096), ("expert_count", EXPERTS),
                       ("expert_used_count", TOP_K), ("expert_group_count", 1),
                       ("expert_group_used_count", 1), ("attention.key_length", NOPE + ROPE),
                       ("attention.value_length", V_DIM), ("leading_dense_block_count", 1),
                       ("vocab_size", VOCAB), ("attention.kv_lora_rank", KV_RANK),
                       ("expert_feed_forward_length", MOE_FFN), ("expert_shared_count", SHARED),
                       ("rope.dimension_count", ROPE), ("attention.q_lora_rank", 0)]:
        w.add_uint32(f"{a}.{key}", value)
    for key, value in [("rope.scaling.factor", 40.0), ("rope.scaling.yarn_beta_fast", 32.0),
                       ("rope.scaling.yarn_beta_slow", 1.0), ("rope.freq_base", 10000.0),
                       ("attention.layer_norm_rms_epsilon", 1e-6), ("expert_weights_scale", 1.0),
                       ("rope.scaling.yarn_log_multiplier", 0.0707)]:
        w.add_float32(f"{a}.{key}", value)
    w.add_string(f"{a}.rope.scaling.type", "yarn")
    # The tiny model's byte-level BPE tokenizer, its vocabulary padded to 102400 with plain
    # tokens so that every id the random model emits decodes.
    src = GGUFReader(TOKENIZER_SOURCE)
    tokens = list(src.fields["tokenizer.ggml.tokens"].contents())
    types = list(src.fields["tokenizer.ggml.token_type"].contents())
    tokens += [f"<pad_{i}>" for i in range(len(tokens), VOCAB)]
    types += [1] * (VOCAB - len(types))
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", src.fields["tokenizer.ggml.pre"].contents())
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_array("tokenizer.ggml.merges", list(src.fields["tokenizer.ggml.merges"].contents()))
    for key in ("eos_token_id", "bos_token_id", "padding_token_id"):
        w.add_uint32(f"tokenizer.ggml.{key}", src.fields[f"tokenizer.ggml.{key}"].contents())
    w.add_bool("tokenizer.ggml.add_bos_token", False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    tensors = plan()
    params = sum(int(np.prod(s)) for _, s, _ in tensors)
    total = sum(nbytes(s, q) for _, s, q in tensors)
    print(f"{len(tensors)} tensors, {params / 1e9:.2f} B parameters, {total / 2**30:.2f} GiB")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".gguf.partial")
    w = GGUFWriter(partial, arch="deepseek2")
    add_metadata(w)
    for name, shape, qtype in tensors:
        if qtype in (Q.F32, Q.F16):
            dtype = np.float32 if qtype == Q.F32 else np.float16
            w.add_tensor_info(name, shape, np.dtype(dtype), nbytes(shape, qtype))
        else:
            block, block_bytes = GGML_QUANT_SIZES[qtype]
            byte_shape = (*shape[:-1], shape[-1] // block * block_bytes)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes(shape, qtype),
                              raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(SEED)
    start, written = time.time(), 0
    for name, shape, qtype in tensors:
        data = make(rng, name, shape, qtype)
        w.write_tensor_data(data)
        written += data.nbytes
        del data
        if name.endswith("ffn_down_exps.weight") or name == "output.weight":
            print(f"  {name}: {written / 2**30:.2f} GiB in {time.time() - start:.0f} s", flush=True)
    w.close()
    partial.rename(args.out)  # only a complete file gets the final name
    print(f"wrote {args.out} ({total / 2**30:.2f} GiB)")


if __name__ == "__main__":
    main()
