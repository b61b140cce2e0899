#!/usr/bin/env python3
"""Tiny int8 channel-wise (W8A8) checkpoints in the two published layouts, and their goldens.

    .venv-tools/bin/python tools/make_w8a8_checkpoints.py

Writes, from the committed float32 tiny models:

- tests/data/tiny-deepseek-v3-w8a8-int8/: SGLang's "w8a8_int8" layout (the one of
  meituan/DeepSeek-R1-Channel-INT8): quantization_config {"quant_method": "w8a8_int8",
  "activation_scheme": "dynamic"}; every Linear of the decoder layers (attention projections,
  kv_b_proj included, the dense MLP, the shared experts and every routed expert's
  gate/up/down_proj) as an I8 `weight` [out, in] with an F32 `weight_scale` [out, 1]; the router
  `gate`, embeddings, lm_head and norms stay float32. The multi-token-prediction layer is copied
  as it is (the engine skips it).
- tests/data/tiny-qwen2-compressed-int8/: compressed-tensors "int-quantized" (llm-compressor's
  W8A8 recipe): config_groups with int8 symmetric "channel" weights and dynamic "token" int8
  input activations, ignore ["lm_head"]; `weight` I8 with a BF16 `weight_scale` [out, 1] (the
  model dtype, as llm-compressor writes it); biases float32.

Weights: s[r] = max_c |w[r, c]| / 127 (as stored: bf16-rounded for compressed-tensors),
q = clamp(round(w / s), -127, 127) (torch.round: ties to even).

Golden (golden.json, same prompts as the source model's): transformers' model with each
quantized Linear replaced by the format's arithmetic, in float32:
  x_q = round(x * 127 / max|x|) per token (dynamic, symmetric), s_x = max|x| / 127
  y = (x_q @ q^T) * s_x * s[r] (+ bias)
(SGLang's int8_scaled_mm / vLLM's cutlass_scaled_mm epilogue), for every projection but
DeepSeek's kv_b_proj, which SGLang absorbs into the attention as the dequantized weights
q * s (floating-point activations; the engine reads it by element the same way). The routed
experts (transformers 5's fused DeepseekV3Experts) get the same arithmetic per expert.
"""

import json
import shutil
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
COPIED = ["generation_config.json", "tokenizer.json", "tokenizer_config.json"]


def quantize_rows(w, scale_dtype):
    """int8 rows and their [rows, 1] scale (stored in scale_dtype) of a float matrix."""
    w = w.to(torch.float32)
    scale = (w.abs().amax(dim=1, keepdim=True) / 127.0).to(scale_dtype)
    s = scale.to(torch.float32)
    q = torch.where(s > 0, torch.round(w / torch.where(s > 0, s, 1.0)), 0.0).clamp(-127, 127)
    return q.to(torch.int8), scale


def quantize_tokens(x):
    amax = x.abs().amax(dim=-1, keepdim=True)
    inv = torch.where(amax > 0, 127.0 / torch.where(amax > 0, amax, 1.0), 0.0)
    return torch.round(x * inv).clamp(-127, 127), amax / 127.0


def w8a8_linear(x, q, scale, bias=None):
    """The format's y = (x_q q^T) s_x s_w (+ b): integer sums exact in float32 (|sum| < 2^24)."""
    xq, sx = quantize_tokens(x.to(torch.float32))
    y = (xq @ q.to(torch.float32).t()) * sx * scale.to(torch.float32).reshape(1, -1)
    return y if bias is None else y + bias


class W8a8Linear(torch.nn.Module):
    def __init__(self, q, scale, bias):
        super().__init__()
        self.q, self.scale, self.bias = q, scale, bias

    def forward(self, x):
        return w8a8_linear(x, self.q, self.scale, self.bias)


def is_quantized(name, ignore):
    """Decoder-layer Linear weights of the engine's policy: not the router, norms or biases."""
    if not name.startswith("model.layers.") or not name.endswith(".weight"):
        return False
    module = name[: -len(".weight")]
    if module.endswith(".gate") or "norm" in module.rsplit(".", 1)[-1]:
        return False
    return not any(module.endswith(i) for i in ignore)


def quantize_checkpoint(src, scale_dtype, ignore, skip_layer=None):
    """{name: tensor} to write and {module name: (q, scale)} for the reference."""
    tensors = load_file(src / "model.safetensors")
    out, quantized = {}, {}
    for name, t in tensors.items():
        in_mtp = skip_layer is not None and name.startswith(f"model.layers.{skip_layer}.")
        if t.ndim == 2 and is_quantized(name, ignore) and not in_mtp:
            q, scale = quantize_rows(t, scale_dtype)
            out[name] = q
            out[name + "_scale"] = scale
            quantized[name[: -len(".weight")]] = (q, scale)
        else:
            out[name] = t
    return out, quantized


def patch_linears(model, quantized, dequantized_only=()):
    """Each quantized nn.Linear becomes W8a8Linear (or, for dequantized_only, a float Linear
    holding q * s)."""
    for module_name, (q, scale) in quantized.items():
        if ".experts." in module_name and ".shared_experts." not in module_name:
            continue  # routed experts: patch_experts
        parent_name, child = module_name.rsplit(".", 1)
        parent = model.get_submodule(parent_name)
        old = getattr(parent, child)
        assert isinstance(old, torch.nn.Linear), module_name
        if any(module_name.endswith(d) for d in dequantized_only):
            with torch.no_grad():
                old.weight.copy_(q.to(torch.float32) * scale.to(torch.float32))
            continue
        setattr(parent, child, W8a8Linear(q, scale, old.bias))


def patch_experts(model, quantized):
    """transformers 5's fused DeepseekV3Experts: each expert's gate_up / down in W8A8."""
    for layer_index, layer in enumerate(model.model.layers):
        experts = getattr(layer.mlp, "experts", None)
        if experts is None:
            continue
        prefix = f"model.layers.{layer_index}.mlp.experts"
        per_expert = []
        for e in range(experts.num_experts):
            g, gs = quantized[f"{prefix}.{e}.gate_proj"]
            u, us = quantized[f"{prefix}.{e}.up_proj"]
            d, ds = quantized[f"{prefix}.{e}.down_proj"]
            per_expert.append((torch.cat([g, u]), torch.cat([gs, us]), d, ds))

        def forward(hidden_states, top_k_index, top_k_weights, experts=experts, per_expert=per_expert):
            out = torch.zeros_like(hidden_states)
            for e, (gu, gus, d, ds) in enumerate(per_expert):
                token_idx, pos = torch.where(top_k_index == e)
                if token_idx.numel() == 0:
                    continue
                gate, up = w8a8_linear(hidden_states[token_idx], gu, gus).chunk(2, dim=-1)
                h = w8a8_linear(experts.act_fn(gate) * up, d, ds)
                out.index_add_(0, token_idx, h * top_k_weights[token_idx, pos, None])
            return out

        experts.forward = forward


def last_logits(model, prompt_ids):
    with torch.no_grad():
        return model(torch.tensor([prompt_ids])).logits[0, -1].tolist()


def make(src_name, dst_name, quant_config, scale_dtype, ignore, dequantized_only=()):
    src, dst = DATA / src_name, DATA / dst_name
    config = json.loads((src / "config.json").read_text())
    skip = config["num_hidden_layers"] if config.get("num_nextn_predict_layers") else None
    tensors, quantized = quantize_checkpoint(src, scale_dtype, ignore, skip)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    patch_linears(model, quantized, dequantized_only)
    patch_experts(model, quantized)
    source_golden = json.loads((src / "golden.json").read_text())
    cases = [{"name": c["name"], "prompt_ids": c["prompt_ids"],
              "last_logits": last_logits(model, c["prompt_ids"])} for c in source_golden["cases"]]
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    config["quantization_config"] = quant_config
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for f in COPIED:
        shutil.copy(src / f, dst / f)
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    golden = {"generator": {"script": "tools/make_w8a8_checkpoints.py", "source": f"tests/data/{src_name}",
                            "transformers": transformers.__version__, "torch": torch.__version__,
                            "note": "transformers float32 with each quantized Linear computing the "
                                    "format's W8A8 arithmetic (per-token int8 activations)"},
              "cases": cases}
    (dst / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    print(f"{dst}: {len(quantized)} int8 matrices, {len(cases)} cases")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    make("tiny-deepseek-v3", "tiny-deepseek-v3-w8a8-int8",
         {"quant_method": "w8a8_int8", "activation_scheme": "dynamic"}, torch.float32, ignore=(),
         dequantized_only=(".kv_b_proj",))
    args = {"num_bits": 8, "type": "int", "symmetric": True, "group_size": None}
    make("tiny-qwen2", "tiny-qwen2-compressed-int8",
         {"quant_method": "compressed-tensors", "format": "int-quantized",
          "quantization_status": "compressed", "ignore": ["lm_head"],
          "config_groups": {"group_0": {
              "targets": ["Linear"],
              "weights": dict(args, strategy="channel", dynamic=False),
              "input_activations": dict(args, strategy="token", dynamic=True)}}},
         torch.bfloat16, ignore=("lm_head",))


if __name__ == "__main__":
    sys.exit(main())
