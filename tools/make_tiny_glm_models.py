#!/usr/bin/env python3
"""Regenerates tests/data/tiny-glm (GlmForCausalLM) and tests/data/tiny-glm4 (Glm4ForCausalLM).

Run from the repository root:

    .venv-tools/bin/python tools/make_tiny_glm_models.py

Same tokenizer, prompts, weight init, seed search, separation margins and golden.json schema as
tools/make_tiny_models.py (whose functions this reuses); only the configs differ. Both configs
exercise what sets GLM apart from Qwen: partial rotary (half of each head rotates, interleaved
pairs), q/k/v bias without o_proj bias, the fused gate_up_proj MLP, GLM's small RMSNorm eps, and
for Glm4 the post_self_attn / post_mlp norms. tiny-glm4 uses head_dim != hidden / heads.

Each case also records last_logits_bf16_weights: transformers' float32 forward with every matrix
(nn.Linear and embedding weights) rounded to bfloat16, norms and biases kept float32 -- what
deepinfer computes when it loads the checkpoint with bf16 weights -- so the C++ bf16 path is
checked tightly, not only within the loose bf16-vs-f32 bound. A seed is accepted only if that
bf16-vs-f32 relative L2 stays under BF16_MAX_REL_L2 (3/4 of the C++ test's 2e-2 bound), on top of
make_tiny_models' margins (make_tiny_models.accept_bf16, shared with the Llama script).

Besides the goldens, it checks that transformers reads the checkpoints the same way when
config.json omits keys whose GLM defaults differ from the generic ones (partial_rotary_factor 0.5,
rms_norm_eps, attention_bias, num_key_value_heads), which the C++ tests rely on.
"""

import json
import sys
from pathlib import Path

from transformers import Glm4Config, Glm4ForCausalLM, GlmConfig, GlmForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_models as base  # noqa: E402

MODELS = [
    dict(name="tiny-glm", family="glm", tie=False, head_dim=16, max_pos=256,
         rope={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
         seed=6000),
    dict(name="tiny-glm4", family="glm4", tie=False, head_dim=32, max_pos=256,
         rope={"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
         seed=7000),
]

# GLM-4-9B-chat-hf / GLM-4-0414 ship sampling defaults like these (not used by the goldens).
GLM_GENERATION_DEFAULTS = dict(do_sample=True, temperature=0.8, top_p=0.8)


def make_glm_config(spec, tok):
    cls_config, cls_model = (GlmConfig, GlmForCausalLM) if spec["family"] == "glm" else (
        Glm4Config, Glm4ForCausalLM)
    config = cls_config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=spec["head_dim"],
        max_position_embeddings=spec["max_pos"],
        rms_norm_eps=1.5625e-07,  # GLM's default, far below Qwen's 1e-6
        attention_bias=True,
        tie_word_embeddings=spec["tie"],
        rope_parameters=dict(spec["rope"]),
        pad_token_id=None,
        bos_token_id=tok.token_to_id("<|endoftext|>"),
        eos_token_id=[tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")],
    )
    return config, cls_model


# Keys whose GlmConfig / Glm4Config defaults equal the tiny configs' values (partial_rotary_factor
# 0.5, rms_norm_eps 1.5625e-7, attention_bias true, num_key_value_heads 2) but differ from the
# generic defaults, so dropping them from config.json must not change the model.
DEFAULTED_KEYS = ["rms_norm_eps", "attention_bias", "num_key_value_heads"]


def check_glm_defaults(out, cases):
    """config.json without the DEFAULTED_KEYS and partial_rotary_factor means the same model."""
    data = json.loads((out / "config.json").read_text())
    assert data["rope_parameters"].pop("partial_rotary_factor") == 0.5, out
    for key in DEFAULTED_KEYS:
        data.pop(key)
    tmp = out / "config_glm_defaults.json"
    tmp.write_text(json.dumps(data))
    try:
        base.check_reload(out, cases, tmp.name)
    finally:
        tmp.unlink()


def main():
    for spec in MODELS:
        base.CONFIG_MAKERS[spec["family"]] = make_glm_config
        base.GENERATION_DEFAULTS[spec["family"]] = GLM_GENERATION_DEFAULTS
        spec["accept"] = base.accept_bf16
    base.main(MODELS, script="tools/make_tiny_glm_models.py")
    for spec in MODELS:
        out = base.REPO / "tests" / "data" / spec["name"]
        cases = json.loads((out / "golden.json").read_text())["cases"]
        check_glm_defaults(out, cases)
        print(f"{spec['name']}: reload without partial_rotary_factor, {', '.join(DEFAULTED_KEYS)} ok")


if __name__ == "__main__":
    main()
