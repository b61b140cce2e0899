#!/usr/bin/env python3
"""Regenerates tests/data/tiny-qwen3-moe (Qwen3MoeForCausalLM) and tests/data/tiny-glm4-moe
(Glm4MoeForCausalLM, GLM-4.5).

Run from the repository root:

    .venv-tools/bin/python tools/make_tiny_moe_models.py

Same tokenizer, prompts, weight init (stacked experts like Linear weights, the noaux_tc
e_score_correction_bias ~ 0.2 N(0, 1)), seed search, logit margins and golden.json schema as
tools/make_tiny_models.py, whose functions this reuses; only the configs and one extra
acceptance rule differ. Both tiny configs exercise every feature of their family:

- tiny-qwen3-moe: 8 experts, top-2, softmax routing with norm_topk_prob, decoder_sparse_step 1
  and mlp_only_layers [1] (layers 0 and 2 are MoE, layer 1 a dense MLP), Qwen3 q/k norms.
- tiny-glm4-moe: 8 routed experts in n_group 2 groups, topk_group 1, top-2, sigmoid + noaux_tc
  with a nonzero e_score_correction_bias, 1 shared expert, routed_scaling_factor 2.5,
  first_k_dense_replace 1 (layer 0 dense), partial_rotary_factor 0.5, use_qk_norm, q/k/v bias.

The extra acceptance rule: an MoE golden is only as robust as its expert choices, so for every
routed token of every golden sequence (prompt + greedy continuation, recomputed without a KV
cache) the router's chosen experts (and chosen groups) must beat the first rejected one by at
least MIN_ROUTE_GAP in score; float32 differences between engines are ~1e-7 there. For GLM-4.5
the script also requires that the correction bias changes the selected experts of some tokens
(so the bias-for-selection-only rule is really tested) and that group limiting does too; and, as
for GLM, that bf16-rounded expert/attention weights stay within BF16_MAX_REL_L2 of float32.
"""

import copy
import sys
from pathlib import Path

import torch

from transformers import Glm4MoeConfig, Glm4MoeForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM
from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeTopkRouter
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_models as base  # noqa: E402

MIN_ROUTE_GAP = 2e-5
BF16_MAX_REL_L2 = 1.5e-2

MODELS = [
    dict(name="tiny-qwen3-moe", family="qwen3_moe", tie=False, head_dim=32, max_pos=256,
         rope={"rope_type": "default", "rope_theta": 1000000.0}, seed=8000),
    dict(name="tiny-glm4-moe", family="glm4_moe", tie=False, head_dim=32, max_pos=256,
         rope={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
         seed=9000),
]

# What the published instruct checkpoints ship (not used by the goldens).
GENERATION_DEFAULTS = {
    "qwen3_moe": dict(do_sample=True, temperature=0.6, top_p=0.95, top_k=20),
    "glm4_moe": dict(do_sample=True, temperature=0.6, top_p=0.95),
}


def make_moe_config(spec, tok):
    common = dict(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=spec["head_dim"],
        num_experts_per_tok=2,
        norm_topk_prob=True,
        max_position_embeddings=spec["max_pos"],
        tie_word_embeddings=spec["tie"],
        rope_parameters=dict(spec["rope"]),
        bos_token_id=tok.token_to_id("<|endoftext|>"),
        eos_token_id=tok.token_to_id("<|im_end|>"),
    )
    if spec["family"] == "qwen3_moe":
        return Qwen3MoeConfig(num_experts=8, decoder_sparse_step=1, mlp_only_layers=[1],
                              rms_norm_eps=1e-6, **common), Qwen3MoeForCausalLM
    return Glm4MoeConfig(n_routed_experts=8, n_group=2, topk_group=1, n_shared_experts=1,
                         first_k_dense_replace=1, routed_scaling_factor=2.5, use_qk_norm=True,
                         attention_bias=True, rms_norm_eps=1e-5, **common), Glm4MoeForCausalLM


def top(scores, k):
    """Per row: the k-th largest score minus the (k+1)-th (how clearly the top k win)."""
    s = scores.sort(dim=-1, descending=True).values
    return s[:, k - 1] - s[:, k]


def route_stats(gate, hidden):
    """(smallest winning margin, #tokens, #whose experts the bias changed, #changed by groups)."""
    x = hidden.reshape(-1, gate.hidden_dim).float()
    logits = x @ gate.weight.float().t()
    k, e = gate.top_k, gate.num_experts
    if isinstance(gate, Qwen3MoeTopKRouter):
        return float(top(logits.softmax(dim=-1), k).min()), len(x), 0, 0
    scores = logits.sigmoid()

    def select(choice):
        groups = choice.view(-1, gate.num_group, e // gate.num_group).topk(2, dim=-1)[0].sum(-1)
        keep = groups.topk(gate.topk_group, dim=-1).indices
        mask = torch.zeros_like(groups).scatter_(1, keep, 1).bool()
        mask = mask.unsqueeze(-1).expand(-1, gate.num_group, e // gate.num_group).reshape(-1, e)
        masked = choice.masked_fill(~mask, float("-inf"))
        gap = torch.minimum(top(groups, gate.topk_group), top(masked, k))
        return set_of(masked.topk(k, dim=-1).indices), gap

    def set_of(idx):
        return [frozenset(r) for r in idx.tolist()]

    chosen, gap = select(scores + gate.e_score_correction_bias)
    unbiased, _ = select(scores)
    plain = set_of((scores + gate.e_score_correction_bias).topk(k, dim=-1).indices)
    by_bias = sum(a != b for a, b in zip(chosen, unbiased))
    by_group = sum(a != b for a, b in zip(chosen, plain))
    return float(gap.min()), len(x), by_bias, by_group


def accept_moe(model, cases):
    stats = []
    routers = [m for m in model.modules() if isinstance(m, (Qwen3MoeTopKRouter, Glm4MoeTopkRouter))]
    handles = [r.register_forward_hook(lambda m, args, _out: stats.append(route_stats(m, args[0])))
               for r in routers]
    try:
        with torch.no_grad():
            for c in cases:
                model(torch.tensor([c["prompt_ids"] + c["greedy_ids"]]), use_cache=False)
    finally:
        for h in handles:
            h.remove()
    gap = min(s[0] for s in stats)
    tokens = sum(s[1] for s in stats)
    by_bias = sum(s[2] for s in stats)
    by_group = sum(s[3] for s in stats)
    print(f"  {len(routers)} MoE layers, {tokens} routed tokens, min route gap {gap:.2e}, "
          f"bias changed {by_bias}, groups changed {by_group}")
    if gap < MIN_ROUTE_GAP:
        return False
    if isinstance(routers[0], Glm4MoeTopkRouter) and (by_bias == 0 or by_group == 0):
        return False

    rounded = copy.deepcopy(model)
    worst = 0.0
    with torch.no_grad():
        for name, p in rounded.named_parameters():  # the engine keeps the router in f32
            if p.dim() in (2, 3) and not name.endswith("mlp.gate.weight"):
                p.copy_(p.to(torch.bfloat16).float())
        for c in cases:
            ref = torch.tensor(c["last_logits"])
            got = rounded(torch.tensor([c["prompt_ids"]])).logits[0, -1].float()
            worst = max(worst, float((got - ref).norm() / ref.norm()))
    print(f"  bf16-weights rel L2 (worst case) {worst:.4f}")
    for c in cases:
        c["min_route_gap"] = gap
    return worst <= BF16_MAX_REL_L2


def main():
    for spec in MODELS:
        base.CONFIG_MAKERS[spec["family"]] = make_moe_config
        base.GENERATION_DEFAULTS[spec["family"]] = GENERATION_DEFAULTS[spec["family"]]
        spec["accept"] = accept_moe
    base.main(MODELS, script="tools/make_tiny_moe_models.py")


if __name__ == "__main__":
    main()
