#!/usr/bin/env python3
"""Regenerates tests/data/tiny-glm (GlmForCausalLM) and tests/data/tiny-glm4 (Glm4ForCausalLM).

Run from the repository root:

    .venv-tools/bin/python tools/make_tiny_glm_models.py

Same tokenizer, prompts, weight init, seed search, separation margins and golden.json schema as
tools/make_tiny_models.py (whose functions this reuses); only the configs differ. Both configs
exercise what sets GLM apart from Qwen: partial rotary (half of each head rotates, interleaved
pairs), q/k/v bias without o_proj bias, the fused gate_up_proj MLP, GLM's small RMSNorm eps, and
for Glm4 the post_self_attn / post_mlp norms. tiny-glm4 uses head_dim != hidden / heads.

Besides the goldens, it checks that transformers reads the checkpoints the same way when
config.json omits partial_rotary_factor (GLM's 0.5 default), which the C++ tests rely on.
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


def check_default_partial_rotary(out, cases):
    """config.json without partial_rotary_factor must mean the same model (default 0.5)."""
    data = json.loads((out / "config.json").read_text())
    assert data["rope_parameters"].pop("partial_rotary_factor") == 0.5, out
    tmp = out / "config_no_prf.json"
    tmp.write_text(json.dumps(data))
    try:
        base.check_reload(out, cases, tmp.name)
    finally:
        tmp.unlink()


def main():
    for spec in MODELS:
        base.CONFIG_MAKERS[spec["family"]] = make_glm_config
        base.GENERATION_DEFAULTS[spec["family"]] = GLM_GENERATION_DEFAULTS
    base.main(MODELS, script="tools/make_tiny_glm_models.py")
    for spec in MODELS:
        out = base.REPO / "tests" / "data" / spec["name"]
        cases = json.loads((out / "golden.json").read_text())["cases"]
        check_default_partial_rotary(out, cases)
        print(f"{spec['name']}: default partial_rotary_factor reload ok")


if __name__ == "__main__":
    main()
