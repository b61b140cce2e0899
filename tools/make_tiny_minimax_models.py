#!/usr/bin/env python3
"""Regenerates tests/data/tiny-minimax-m2 (MiniMaxM2ForCausalLM, MiniMax-M2) and its goldens.

Run from the repository root:

    .venv-tools/bin/python tools/make_tiny_minimax_models.py

Same tokenizer, prompts, weight init (norm weights 1 + 0.2 N(0, 1), including the whole-projection
q_norm / k_norm; e_score_correction_bias 0.2 N(0, 1)), seed search, logit margins and golden.json
schema as tools/make_tiny_models.py, whose functions this reuses. The tiny config exercises every
feature of the family: q/k RMSNorm over all heads at once (4 query heads, 2 KV heads, head_dim
16), partial rotary over the first 8 features of each head (config.json: rope_parameters'
partial_rotary_factor 0.5; config_v4.json: the published spelling, top-level rope_theta and
rotary_dim 8, plus the published keys transformers reads no further), 3 layers, each an MoE of 8
experts, top-2, sigmoid + e_score_correction_bias routing without groups, no shared experts.
The checkpoint is what transformers writes back: Mixtral names (block_sparse_moe.gate,
block_sparse_moe.e_score_correction_bias, block_sparse_moe.experts.{e}.w1 / w2 / w3).

Extra acceptance rules (as tools/make_tiny_moe_models.py): for every routed token of every golden
sequence (prompt + greedy continuation, without a KV cache) the chosen experts must beat the first
rejected one by at least MIN_ROUTE_GAP in the biased score (also with bf16-rounded weights), and
the correction bias must change the selected experts of some tokens. Each case also records
last_logits_bf16_weights: transformers with every matrix rounded to bf16 but the router (which
the engine keeps in f32), for the bf16 load test.
"""

import copy
import sys
from pathlib import Path

import torch

from transformers import MiniMaxM2Config, MiniMaxM2ForCausalLM
from transformers.models.minimax_m2.modeling_minimax_m2 import MiniMaxM2TopKRouter

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_models as base  # noqa: E402

MIN_ROUTE_GAP = 2e-5
BF16_MAX_REL_L2 = 1.5e-2
HEAD_DIM = 16

MODELS = [
    dict(name="tiny-minimax-m2", family="minimax_m2", tie=False, max_pos=256,
         rope={"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.5},
         seed=12000),
]

# What MiniMax-M2's generation_config.json ships (not used by the goldens).
GENERATION_DEFAULTS = {"minimax_m2": dict(do_sample=True, temperature=1.0, top_p=0.95, top_k=40)}

# Keys of the published config.json that transformers keeps as plain attributes, with the values
# the engine accepts (config_v4.json carries them).
PUBLISHED_KEYS = dict(use_qk_norm=True, qk_norm_type="per_layer", scoring_func="sigmoid",
                      use_routing_bias=True, shared_intermediate_size=0)


def make_minimax_config(spec, tok):
    return MiniMaxM2Config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        intermediate_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD_DIM,
        num_local_experts=8,
        num_experts_per_tok=2,
        rms_norm_eps=1e-6,
        max_position_embeddings=spec["max_pos"],
        tie_word_embeddings=spec["tie"],
        rope_parameters=dict(spec["rope"]),
        bos_token_id=tok.token_to_id("<|endoftext|>"),
        eos_token_id=tok.token_to_id("<|im_end|>"),
    ), MiniMaxM2ForCausalLM


def top_gap(scores, k):
    """Per row: the k-th largest score minus the (k+1)-th (how clearly the top k win)."""
    s = scores.sort(dim=-1, descending=True).values
    return s[:, k - 1] - s[:, k]


def route_stats(gate, hidden, bias):
    """(smallest winning margin, #tokens, #tokens whose experts the bias changed)."""
    x = hidden.reshape(-1, gate.hidden_dim).float()
    scores = (x @ gate.weight.float().t()).sigmoid()
    k = gate.top_k
    chosen = (scores + bias).topk(k, dim=-1).indices.sort(dim=-1).values
    unbiased = scores.topk(k, dim=-1).indices.sort(dim=-1).values
    changed = int((chosen != unbiased).any(dim=-1).sum())
    return float(top_gap(scores + bias, k).min()), len(x), changed


def routed_run(model, cases, logits_of=None):
    """Runs every golden sequence through `model` with its routers hooked: the route stats."""
    stats = []
    routers = [m for m in model.modules() if isinstance(m, MiniMaxM2TopKRouter)]
    handles = [r.register_forward_hook(lambda m, args, _out: stats.append(route_stats(m, *args)))
               for r in routers]
    try:
        with torch.no_grad():
            for c in cases:
                model(torch.tensor([c["prompt_ids"] + c["greedy_ids"]]), use_cache=False)
                if logits_of is not None:
                    logits_of(c)
    finally:
        for h in handles:
            h.remove()
    gap = min(s[0] for s in stats)
    tokens = sum(s[1] for s in stats)
    changed = sum(s[2] for s in stats)
    return len(routers), gap, tokens, changed


def accept_minimax(model, cases):
    layers, gap, tokens, changed = routed_run(model, cases)
    print(f"  {layers} MoE layers, {tokens} routed tokens, min route gap {gap:.2e}, "
          f"bias changed {changed}")
    if gap < MIN_ROUTE_GAP or changed == 0:
        return False

    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in rounded.named_parameters():  # the engine keeps the router in f32
            if p.dim() in (2, 3) and not name.endswith("mlp.gate.weight"):
                p.copy_(p.to(torch.bfloat16).float())
    worst = [0.0]

    def bf16_logits(c):
        ref = torch.tensor(c["last_logits"])
        got = rounded(torch.tensor([c["prompt_ids"]])).logits[0, -1].float()
        c["last_logits_bf16_weights"] = [float(x) for x in got.tolist()]
        worst[0] = max(worst[0], float((got - ref).norm() / ref.norm()))

    _, rounded_gap, _, _ = routed_run(rounded, cases, bf16_logits)
    print(f"  bf16-weights rel L2 (worst case) {worst[0]:.4f}, route gap {rounded_gap:.2e}")
    for c in cases:
        c["min_route_gap"] = min(gap, rounded_gap)
    return worst[0] <= BF16_MAX_REL_L2 and rounded_gap >= MIN_ROUTE_GAP


def published_v4_config(config_json):
    """The 4.x spelling as MiniMax publishes it: rotary_dim instead of partial_rotary_factor."""
    cfg = V4_CONFIG(config_json)
    factor = cfg.pop("partial_rotary_factor")
    cfg["rotary_dim"] = int(cfg["head_dim"] * factor)
    cfg["attn_type_list"] = [1] * cfg["num_hidden_layers"]
    cfg.update(PUBLISHED_KEYS)
    return dict(sorted(cfg.items()))


V4_CONFIG = base.v4_config


def main():
    for spec in MODELS:
        base.CONFIG_MAKERS[spec["family"]] = make_minimax_config
        base.GENERATION_DEFAULTS[spec["family"]] = GENERATION_DEFAULTS[spec["family"]]
        spec["accept"] = accept_minimax
    base.v4_config = published_v4_config
    base.main(MODELS, script="tools/make_tiny_minimax_models.py")


if __name__ == "__main__":
    main()
