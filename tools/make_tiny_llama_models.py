#!/usr/bin/env python3
"""Regenerates tests/data/tiny-llama, tiny-llama-bias (LlamaForCausalLM) and tiny-mistral
(MistralForCausalLM).

Run from the repository root:

    .venv-tools/bin/python tools/make_tiny_llama_models.py

Same tokenizer, prompts, weight init, seed search, separation margins and golden.json schema as
tools/make_tiny_models.py (whose functions this reuses); only the configs differ:

- tiny-llama: Llama-3 style -- GQA (4 heads, 2 kv heads), untied lm_head, rope_theta 500000 and
  llama3 rope scaling (factor 8, low/high_freq_factor 1/4, original context 64, so the prompts
  run past it and head_dim 16 puts frequencies in all three bands), no biases.
- tiny-llama-bias: Llama-2 style -- MHA (kv heads = heads), tied embeddings, default rope
  (theta 10000), attention_bias (q/k/v AND o_proj bias in LlamaAttention) and mlp_bias
  (gate/up/down bias in LlamaMLP).
- tiny-mistral: MistralForCausalLM with sliding_window null (Mistral-7B-v0.2/v0.3 style, rope_theta
  1e6) and an explicit head_dim 32 != hidden / heads (as Mistral-Nemo), GQA, untied.

Each case also records last_logits_bf16_weights (make_tiny_models.accept_bf16: transformers on
bf16-rounded matrices, biases and norms kept float32), which the C++ bf16 test matches tightly.

It also checks that transformers computes the same logits for tiny-mistral when sliding_window
equals max_position_embeddings (a window that long masks nothing inside the model's context,
which is why deepinfer accepts such a window and refuses shorter ones) and when the config says
attention_bias / mlp_bias true (Mistral's layers never have biases).
"""

import json
import sys
from pathlib import Path

from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_models as base  # noqa: E402

MODELS = [
    dict(name="tiny-llama", family="llama", tie=False, kv_heads=2, max_pos=256, bias=False,
         rope={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}, seed=8000),
    dict(name="tiny-llama-bias", family="llama", tie=True, kv_heads=4, max_pos=256, bias=True,
         rope={"rope_type": "default", "rope_theta": 10000.0}, seed=9000),
    dict(name="tiny-mistral", family="mistral", tie=False, kv_heads=2, head_dim=32, max_pos=256,
         rope={"rope_type": "default", "rope_theta": 1000000.0}, seed=10000),
]

# Sampling defaults as the published instruct checkpoints ship them (not used by the goldens):
# Llama-3.1-8B-Instruct samples at 0.6 / 0.9; Mistral-7B-Instruct-v0.3 sets none.
LLAMA_GENERATION_DEFAULTS = {
    "llama": dict(do_sample=True, temperature=0.6, top_p=0.9),
    "mistral": dict(),
}


def make_llama_config(spec, tok):
    common = dict(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=spec["kv_heads"],
        max_position_embeddings=spec["max_pos"],
        rms_norm_eps=1e-5,  # Llama 2/3's value (the class default is 1e-6)
        tie_word_embeddings=spec["tie"],
        rope_parameters=dict(spec["rope"]),
        pad_token_id=None,
        bos_token_id=tok.token_to_id("<|endoftext|>"),
        eos_token_id=tok.token_to_id("<|im_end|>"),
    )
    if spec["family"] == "llama":
        config = LlamaConfig(attention_bias=spec["bias"], mlp_bias=spec["bias"], **common)
        return config, LlamaForCausalLM
    return MistralConfig(head_dim=spec["head_dim"], sliding_window=None, **common), MistralForCausalLM


def check_reload_with(out, cases, changes):
    """config.json with `changes` applied must still mean the same model to transformers."""
    data = json.loads((out / "config.json").read_text())
    data.update(changes)
    tmp = out / "config_changed.json"
    tmp.write_text(json.dumps(data))
    try:
        base.check_reload(out, cases, tmp.name)
    finally:
        tmp.unlink()


# Variants of tiny-mistral's config.json that transformers reads as the same model (and the C++
# tests therefore expect to give the same logits): a window as long as the context masks nothing;
# MistralAttention / MistralMLP hard-code bias=False, so the Llama bias keys are ignored.
MISTRAL_SAME_MODEL = [
    {"sliding_window": 256},
    {"attention_bias": True, "mlp_bias": True},
]


def main():
    for spec in MODELS:
        base.CONFIG_MAKERS[spec["family"]] = make_llama_config
        base.GENERATION_DEFAULTS[spec["family"]] = LLAMA_GENERATION_DEFAULTS[spec["family"]]
        spec["accept"] = base.accept_bf16
    base.main(MODELS, script="tools/make_tiny_llama_models.py")
    out = base.REPO / "tests" / "data" / "tiny-mistral"
    cases = json.loads((out / "golden.json").read_text())["cases"]
    assert json.loads((out / "config.json").read_text())["max_position_embeddings"] == 256
    for changes in MISTRAL_SAME_MODEL:
        check_reload_with(out, cases, changes)
        print(f"tiny-mistral: reload with {changes} gives the goldens")


if __name__ == "__main__":
    main()
