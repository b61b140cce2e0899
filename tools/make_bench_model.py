#!/usr/bin/env python3
"""Writes a random-weight checkpoint with the exact shapes of a real small Qwen model, for benchmarks.

    .venv-tools/bin/python tools/make_bench_model.py                      # Qwen2.5-0.5B shape
    .venv-tools/bin/python tools/make_bench_model.py --shape qwen3-0.6b   # Qwen3-0.6B shape
    .venv-tools/bin/python tools/make_bench_model.py --shape deepseek-v2-lite-4l  # 4-layer V2-Lite
    .venv-tools/bin/python tools/make_bench_model.py --shape deepseek-v32-4l  # 4-layer V3.2 (DSA)

Output (default bench/models/<shape>-random/, git-ignored): config.json and generation_config.json
as the published checkpoints spell them (transformers 4.x style: top-level rope_theta,
torch_dtype), model.safetensors with bf16 weights under the Hugging Face tensor names (lm_head
omitted: embeddings are tied), and, when ../shared/tokenizers/qwen3 exists, a copy of the real
Qwen3 tokenizer files so that the directory runs end to end.

Needs only numpy: the safetensors file is streamed tensor by tensor (the format is an 8-byte
header length, a JSON header, then the raw data), so memory stays at one chunk of one tensor.
Weights ~ N(0, 0.02^2) like Hugging Face's init, biases the same, RMSNorm weights 1.
"""

import argparse
import json
import shutil
import struct
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SHARED_TOKENIZER = REPO.parent / "shared" / "tokenizers" / "qwen3"
STD = 0.02
CHUNK_ELEMS = 1 << 23  # random numbers drawn per step (32 MiB of float32)

SHAPES = {
    "qwen2.5-0.5b": dict(
        config={
            "architectures": ["Qwen2ForCausalLM"],
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "hidden_act": "silu",
            "hidden_size": 896,
            "initializer_range": 0.02,
            "intermediate_size": 4864,
            "max_position_embeddings": 32768,
            "max_window_layers": 21,
            "model_type": "qwen2",
            "num_attention_heads": 14,
            "num_hidden_layers": 24,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000.0,
            "sliding_window": 32768,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.43.1",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": 151936,
        },
        generation={
            "bos_token_id": 151643,
            "pad_token_id": 151643,
            "do_sample": True,
            "eos_token_id": [151645, 151643],
            "repetition_penalty": 1.1,
            "temperature": 0.7,
            "top_p": 0.8,
            "top_k": 20,
            "transformers_version": "4.37.0",
        },
        qkv_bias=True,
        qk_norm=False,
    ),
    "qwen3-0.6b": dict(
        config={
            "architectures": ["Qwen3ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 1024,
            "initializer_range": 0.02,
            "intermediate_size": 3072,
            "max_position_embeddings": 40960,
            "max_window_layers": 28,
            "model_type": "qwen3",
            "num_attention_heads": 16,
            "num_hidden_layers": 28,
            "num_key_value_heads": 8,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 1000000,
            "sliding_window": None,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.51.0",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": 151936,
        },
        generation={
            "bos_token_id": 151643,
            "do_sample": True,
            "eos_token_id": [151645, 151643],
            "pad_token_id": 151643,
            "temperature": 0.6,
            "top_k": 20,
            "top_p": 0.95,
            "transformers_version": "4.51.0",
        },
        qkv_bias=False,
        qk_norm=True,
    ),
    # DeepSeek-V2-Lite's shapes (MLA without q LoRA, 64 routed + 2 shared experts, top-6) with
    # the depth cut to 4 layers: 1 dense + 3 MoE (the real model has 27).
    "deepseek-v2-lite-4l": dict(
        config={
            "architectures": ["DeepseekV2ForCausalLM"],
            "model_type": "deepseek_v2",
            "attention_bias": False,
            "bos_token_id": 100000,
            "eos_token_id": 100001,
            "first_k_dense_replace": 1,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "intermediate_size": 10944,
            "kv_lora_rank": 512,
            "max_position_embeddings": 163840,
            "moe_intermediate_size": 1408,
            "moe_layer_freq": 1,
            "n_group": 1,
            "n_routed_experts": 64,
            "n_shared_experts": 2,
            "norm_topk_prob": False,
            "num_attention_heads": 16,
            "num_experts_per_tok": 6,
            "num_hidden_layers": 4,
            "num_key_value_heads": 16,
            "q_lora_rank": None,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "rms_norm_eps": 1e-06,
            "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                             "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
            "rope_theta": 10000,
            "routed_scaling_factor": 1.0,
            "scoring_func": "softmax",
            "tie_word_embeddings": False,
            "topk_group": 1,
            "topk_method": "greedy",
            "torch_dtype": "bfloat16",
            "v_head_dim": 128,
            "vocab_size": 102400,
        },
        generation={"bos_token_id": 100000, "eos_token_id": 100001, "do_sample": False},
    ),
    # DeepSeek-V3.2's attention exactly (hidden 7168, 128 MLA heads, q LoRA 1536, latent 512 + 64,
    # the lightning indexer's 64 heads of 128 and top-2048) and its expert shape (2048 wide, top-8
    # + 1 shared), with 4 layers (1 dense + 3 MoE) and 16 routed experts instead of 256 so that
    # the checkpoint fits a 24 GiB machine: per-token work is the real model's per layer.
    "deepseek-v32-4l": dict(
        config={
            "architectures": ["DeepseekV32ForCausalLM"],
            "model_type": "deepseek_v32",
            "attention_bias": False,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "first_k_dense_replace": 1,
            "hidden_act": "silu",
            "hidden_size": 7168,
            "index_head_dim": 128,
            "index_n_heads": 64,
            "index_topk": 2048,
            "intermediate_size": 18432,
            "kv_lora_rank": 512,
            "max_position_embeddings": 163840,
            "moe_intermediate_size": 2048,
            "moe_layer_freq": 1,
            "n_group": 1,
            "n_routed_experts": 16,
            "n_shared_experts": 1,
            "norm_topk_prob": True,
            "num_attention_heads": 128,
            "num_experts_per_tok": 8,
            "num_hidden_layers": 4,
            "num_key_value_heads": 128,
            "num_nextn_predict_layers": 0,
            "q_lora_rank": 1536,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "rms_norm_eps": 1e-06,
            "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                             "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
            "rope_theta": 10000,
            "routed_scaling_factor": 2.5,
            "scoring_func": "sigmoid",
            "tie_word_embeddings": False,
            "topk_group": 1,
            "topk_method": "noaux_tc",
            "torch_dtype": "bfloat16",
            "v_head_dim": 128,
            "vocab_size": 129280,
        },
        generation={"bos_token_id": 0, "eos_token_id": 1, "do_sample": False},
    ),
}


def deepseek_tensor_specs(c):
    """(name, shape, kind) for a DeepSeek-V2 / V3 / V3.2 checkpoint; HF names."""
    h, vocab, heads = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    nope, rope, v, rank = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    specs = [("model.embed_tokens.weight", (vocab, h), "normal"), ("lm_head.weight", (vocab, h), "normal")]

    def mlp(prefix, inter):
        return [(prefix + "gate_proj.weight", (inter, h), "normal"), (prefix + "up_proj.weight", (inter, h), "normal"),
                (prefix + "down_proj.weight", (h, inter), "normal")]

    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        q_lora = c.get("q_lora_rank")
        if q_lora:
            specs += [(p + "self_attn.q_a_proj.weight", (q_lora, h), "normal"),
                      (p + "self_attn.q_a_layernorm.weight", (q_lora,), "ones"),
                      (p + "self_attn.q_b_proj.weight", (heads * (nope + rope), q_lora), "normal")]
        else:
            specs.append((p + "self_attn.q_proj.weight", (heads * (nope + rope), h), "normal"))
        if "index_topk" in c:
            ih, idim = c["index_n_heads"], c["index_head_dim"]
            specs += [(p + "self_attn.indexer.wq_b.weight", (ih * idim, q_lora), "normal"),
                      (p + "self_attn.indexer.wk.weight", (idim, h), "normal"),
                      (p + "self_attn.indexer.k_norm.weight", (idim,), "ones"),
                      (p + "self_attn.indexer.k_norm.bias", (idim,), "zeros"),
                      (p + "self_attn.indexer.weights_proj.weight", (ih, h), "normal")]
        specs += [
            (p + "input_layernorm.weight", (h,), "ones"),
            (p + "post_attention_layernorm.weight", (h,), "ones"),
            (p + "self_attn.kv_a_proj_with_mqa.weight", (rank + rope, h), "normal"),
            (p + "self_attn.kv_a_layernorm.weight", (rank,), "ones"),
            (p + "self_attn.kv_b_proj.weight", (heads * (nope + v), rank), "normal"),
            (p + "self_attn.o_proj.weight", (h, heads * v), "normal"),
        ]
        if i < c["first_k_dense_replace"]:
            specs += mlp(p + "mlp.", c["intermediate_size"])
            continue
        specs.append((p + "mlp.gate.weight", (c["n_routed_experts"], h), "normal"))
        if c.get("topk_method") == "noaux_tc":
            specs.append((p + "mlp.gate.e_score_correction_bias", (c["n_routed_experts"],), "zeros"))
        for e in range(c["n_routed_experts"]):
            specs += mlp(p + f"mlp.experts.{e}.", c["moe_intermediate_size"])
        specs += mlp(p + "mlp.shared_experts.", c["moe_intermediate_size"] * c["n_shared_experts"])
    specs.append(("model.norm.weight", (h,), "ones"))
    return sorted(specs)


def tensor_specs(shape):
    """(name, shape, kind) for every tensor, kind in {"normal", "ones"}; HF Qwen2/Qwen3 names."""
    c = SHAPES[shape]["config"]
    if c["model_type"].startswith("deepseek"):
        return deepseek_tensor_specs(c)
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim", h // heads)
    specs = [("model.embed_tokens.weight", (vocab, h), "normal")]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        specs += [
            (p + "input_layernorm.weight", (h,), "ones"),
            (p + "self_attn.q_proj.weight", (heads * hd, h), "normal"),
            (p + "self_attn.k_proj.weight", (kv * hd, h), "normal"),
            (p + "self_attn.v_proj.weight", (kv * hd, h), "normal"),
            (p + "self_attn.o_proj.weight", (h, heads * hd), "normal"),
            (p + "post_attention_layernorm.weight", (h,), "ones"),
            (p + "mlp.gate_proj.weight", (inter, h), "normal"),
            (p + "mlp.up_proj.weight", (inter, h), "normal"),
            (p + "mlp.down_proj.weight", (h, inter), "normal"),
        ]
        if SHAPES[shape]["qkv_bias"]:
            specs += [
                (p + "self_attn.q_proj.bias", (heads * hd,), "normal"),
                (p + "self_attn.k_proj.bias", (kv * hd,), "normal"),
                (p + "self_attn.v_proj.bias", (kv * hd,), "normal"),
            ]
        if SHAPES[shape]["qk_norm"]:
            specs += [(p + "self_attn.q_norm.weight", (hd,), "ones"), (p + "self_attn.k_norm.weight", (hd,), "ones")]
    specs.append(("model.norm.weight", (h,), "ones"))
    return sorted(specs)  # safetensors writers order by name; readers must not care


def f32_to_bf16_bits(x):
    """Round-to-nearest-even float32 -> bfloat16 bit patterns (no NaNs arise from N(0, s))."""
    u = x.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype("<u2")


def write_safetensors(path, specs, seed):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shp, _ in specs:
        nbytes = 2 * int(np.prod(shp))
        header[name] = {"dtype": "BF16", "shape": list(shp), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # data section starts 8-byte aligned, as safetensors pads
    rng = np.random.default_rng(seed)
    ones = np.full(1, 0x3F80, dtype="<u2")  # bf16 1.0
    zeros = np.zeros(1, dtype="<u2")
    tmp = path.with_suffix(".safetensors.partial")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for _, shp, kind in specs:
            n = int(np.prod(shp))
            if kind in ("ones", "zeros"):
                np.repeat(ones if kind == "ones" else zeros, n).tofile(f)
                continue
            for start in range(0, n, CHUNK_ELEMS):
                x = rng.standard_normal(min(CHUNK_ELEMS, n - start), dtype=np.float32)
                x *= np.float32(STD)
                f32_to_bf16_bits(x).tofile(f)
    tmp.rename(path)  # never leave a half-written model.safetensors behind
    return offset


def verify(out):
    """Loads the directory with transformers and runs a few tokens (slow; needs torch)."""
    import torch
    from transformers import AutoModelForCausalLM

    # Our bf16 rounding must be the same as torch's float32 -> bfloat16 cast.
    x = np.random.default_rng(1).standard_normal(1 << 16, dtype=np.float32)
    ours = torch.from_numpy(f32_to_bf16_bits(x).view(np.int16)).view(torch.bfloat16)
    assert torch.equal(ours, torch.from_numpy(x).to(torch.bfloat16)), "bf16 rounding differs from torch"

    model, info = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.bfloat16, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    assert not bad, f"transformers reports {bad}"
    n = sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        logits = model(torch.tensor([[9707, 11, 1879, 0]])).logits
    assert torch.isfinite(logits).all()
    print(f"verify: transformers loaded {type(model).__name__} with {n / 1e6:.1f}M parameters, logits finite")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-0.5b")
    ap.add_argument("--out", help="output directory (default bench/models/<shape>-random)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-tokenizer", action="store_true", help="do not copy ../shared/tokenizers/qwen3")
    ap.add_argument("--verify", action="store_true", help="load the result with transformers afterwards")
    args = ap.parse_args()

    out = Path(args.out) if args.out else REPO / "bench" / "models" / f"{args.shape}-random"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    nbytes = write_safetensors(out / "model.safetensors", tensor_specs(args.shape), args.seed)
    # Random weights: deepinfer's info / generate say so ("random-weight test model").
    config = {**SHAPES[args.shape]["config"], "deepinfer_test_model": True}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(SHAPES[args.shape]["generation"], indent=2) + "\n")
    # The shared Qwen3 tokenizer only fits the Qwen vocabularies.
    if not args.no_tokenizer and SHAPES[args.shape]["config"]["model_type"].startswith("qwen"):
        if SHARED_TOKENIZER.is_dir():
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copyfile(SHARED_TOKENIZER / f, out / f)
        else:
            print(f"note: {SHARED_TOKENIZER} not found; no tokenizer copied")
    print(f"{out}: {nbytes / 2 / 1e6:.1f}M bf16 parameters, {nbytes / 2**20:.0f} MiB, {time.time() - t0:.1f} s")
    if args.verify:
        verify(out)


if __name__ == "__main__":
    main()
