#!/usr/bin/env python3
"""Regenerates the tiny DeepSeek-V2 / V3 / V3.2, GLM-4.7-Flash and GLM-5 checkpoints and goldens.

Run from the repository root:

    .venv-tools/bin/python tools/make_tiny_deepseek_models.py

Same tokenizer, prompts, golden format, seed search and separation policy as
tools/make_tiny_models.py (whose functions this script imports), plus two DeepSeek-specific
things:

- Routing margins: an expert choice that a rounding difference could flip would make the goldens
  fragile, so every router call of every golden run is hooked and the model is rejected (next
  seed) when the chosen experts (or groups) beat the first unchosen one by less than
  MIN_ROUTE_GAP in the score that selects them.
- Indexer margins (DeepSeek-V3.2 / GLM-5 sparse attention): likewise every top-k the lightning
  indexer takes must separate its k-th and (k+1)-th scores by MIN_INDEX_GAP of the row's largest
  score (ties, such as several exact zeros after the ReLU, would make the chosen set arbitrary).
- bf16 goldens: each case also records `bf16_last_logits`, transformers' logits with every matrix
  rounded to bf16 except the router (which the engine keeps in f32, as transformers does for
  DeepSeek-V3), so that a bf16 load can be checked as tightly as float32; the routing margin rule
  applies to the rounded model as well.
- Extra checkpoint content the published checkpoints carry and transformers does not write:
  DeepSeek-V3's multi-token-prediction layer (model.layers.{num_hidden_layers}.*: a full decoder
  layer plus enorm, hnorm, eh_proj, embed_tokens, shared_head.{norm,head}) and, for the FP8
  variant, F8_E4M3 weights with per-block `weight_scale_inv` (dequantized = fp8 x scale_inv of
  block (row // block_rows, col // block_cols), the DeepSeek-V3 convention; partial blocks at the
  edges, as in V3's kv_a_proj_with_mqa with its 576 rows).

The FP8 golden is transformers' DeepseekV3ForCausalLM run on the dequantized weights (loaded
from a float32 checkpoint written from them), not on the original float32 weights.
"""

import argparse
import copy
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DeepseekV2Config,
    DeepseekV2ForCausalLM,
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    DeepseekV32Config,
    DeepseekV32ForCausalLM,
    GenerationConfig,
    Glm4MoeLiteConfig,
    Glm4MoeLiteForCausalLM,
    GlmMoeDsaConfig,
    GlmMoeDsaForCausalLM,
)
from transformers.models.deepseek_v32.modeling_deepseek_v32 import DeepseekV32Indexer
from transformers.models.kimi_k25.configuration_kimi_k25 import Kimi_K25Config
from transformers.models.kimi_k25.modeling_kimi_k25 import Kimi_K25ForConditionalGeneration

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_models as tiny  # noqa: E402
import tiny_tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MIN_ROUTE_GAP = 2e-5  # float32 differences between engines are ~1e-7 there
MIN_INDEX_GAP = 1e-5  # relative to the largest |score| of the row
SEED_TRIES = 256  # the routing and bf16 rules reject more seeds than make_tiny_models.py's
FP8_BLOCK = [32, 32]  # tiny dims: 32x32 blocks (the config's weight_block_size says so)
FP8_MAX = 448.0  # largest finite float8_e4m3fn

# Shapes shared by all: 4 heads, qk_nope 16 + qk_rope 8 = qk_head 24, v_head 20 (differs from
# both), kv_lora 32 (kv_a_proj_with_mqa has 40 rows: a partial 32-block in the FP8 variant).
COMMON = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=32, qk_nope_head_dim=16,
              qk_rope_head_dim=8, v_head_dim=20, n_routed_experts=8, num_experts_per_tok=3,
              rms_norm_eps=1e-6, tie_word_embeddings=False)
V2_YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32,
           "mscale": 0.707, "mscale_all_dim": 0.707, "beta_fast": 32, "beta_slow": 1}
# mscale != mscale_all_dim: cos/sin carry mscale(4, 1.0) / mscale(4, 0.8) and the softmax scale
# mscale(4, 0.8)^2, so both corrections are visible.
V3_YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32,
           "mscale": 1.0, "mscale_all_dim": 0.8, "beta_fast": 32, "beta_slow": 1}

MODELS = [
    # q LoRA, softmax + group_limited_greedy (4 groups of 2, 2 groups kept), 2 shared experts,
    # attention biases (q_a_proj, kv_a_proj_with_mqa, o_proj), default rope.
    dict(name="tiny-deepseek-v2", family="deepseek_v2", max_pos=256, seed=11000,
         cfg=dict(q_lora_rank=48, topk_method="group_limited_greedy", n_group=4, topk_group=2,
                  n_shared_experts=2, routed_scaling_factor=1.5, first_k_dense_replace=1,
                  attention_bias=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    # V2-Lite: no q LoRA (q_proj), softmax + greedy, yarn with mscale == mscale_all_dim.
    dict(name="tiny-deepseek-v2-lite", family="deepseek_v2", max_pos=128, seed=12000,
         cfg=dict(q_lora_rank=None, topk_method="greedy", n_group=1, topk_group=1, n_shared_experts=2,
                  routed_scaling_factor=1.0, first_k_dense_replace=1, rope_parameters=V2_YARN)),
    # V3: sigmoid + noaux_tc (e_score_correction_bias), 4 groups / 2 kept, norm_topk_prob,
    # yarn with mscale != mscale_all_dim, interleaved rope, one MTP layer in the checkpoint.
    dict(name="tiny-deepseek-v3", family="deepseek_v3", max_pos=128, seed=13000, mtp=True,
         cfg=dict(q_lora_rank=48, n_group=4, topk_group=2, n_shared_experts=1, routed_scaling_factor=2.5,
                  first_k_dense_replace=1, norm_topk_prob=True, num_nextn_predict_layers=1,
                  rope_interleave=True, rope_parameters=V3_YARN)),
    # The same architecture stored as DeepSeek-V3's published FP8 checkpoints are.
    dict(name="tiny-deepseek-v3-fp8", family="deepseek_v3", max_pos=128, seed=14000, mtp=True, fp8=True,
         cfg=dict(q_lora_rank=48, n_group=4, topk_group=2, n_shared_experts=1, routed_scaling_factor=2.5,
                  first_k_dense_replace=1, norm_topk_prob=True, num_nextn_predict_layers=1,
                  rope_interleave=True, rope_parameters=V3_YARN)),
    # DeepSeek-V3.2: V3 + DeepSeek Sparse Attention (half-split indexer rope); index_topk 8 is
    # below the longer prompts and the decode positions, so tokens attend to selections.
    dict(name="tiny-deepseek-v32", family="deepseek_v32", max_pos=128, seed=16000,
         cfg=dict(q_lora_rank=48, n_group=4, topk_group=2, n_shared_experts=1, routed_scaling_factor=2.5,
                  first_k_dense_replace=1, norm_topk_prob=True, index_topk=8, index_head_dim=16,
                  index_n_heads=8, rope_parameters=V3_YARN)),
    # GLM-5: the same indexer with interleaved rope; layer 1 reuses layer 0's top-k.
    dict(name="tiny-glm-moe-dsa", family="glm_moe_dsa", max_pos=128, seed=17000,
         cfg=dict(q_lora_rank=48, n_group=1, topk_group=1, n_shared_experts=1, routed_scaling_factor=2.5,
                  first_k_dense_replace=1, norm_topk_prob=True, index_topk=8, index_head_dim=16,
                  index_n_heads=8, indexer_types=["full", "shared", "full"], rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    # GLM-4.7-Flash: V3-style MLA + noaux routing, mlp_layer_types, rope_interleave false.
    dict(name="tiny-glm4-moe-lite", family="glm4_moe_lite", max_pos=128, seed=18000,
         cfg=dict(q_lora_rank=48, n_group=1, topk_group=1, n_shared_experts=1, routed_scaling_factor=1.8,
                  mlp_layer_types=["dense", "sparse", "sparse"], norm_topk_prob=True, rope_interleave=False,
                  rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    # Kimi-K2.5: a DeepSeek-V3 text model under a vision wrapper (text_config), stored as Moonshot
    # ships it (language_model.model.*, language_model.lm_head.weight, vision_tower.*, mm_projector.*).
    dict(name="tiny-kimi-k25", family="kimi_k25", max_pos=128, seed=19000,
         cfg=dict(q_lora_rank=48, n_group=4, topk_group=2, n_shared_experts=1, routed_scaling_factor=2.827,
                  first_k_dense_replace=1, norm_topk_prob=True, rope_interleave=True, rope_parameters=V3_YARN)),
    # All-dense V3 without q LoRA and with rope_interleave false (rotate_half on q_pe / k_pe).
    dict(name="tiny-deepseek-v3-dense", family="deepseek_v3", max_pos=128, seed=15000,
         cfg=dict(q_lora_rank=None, n_group=1, topk_group=1, n_shared_experts=1, first_k_dense_replace=3,
                  num_nextn_predict_layers=0, rope_interleave=False, rope_parameters=V3_YARN)),
]

# As the published chat checkpoints ship them (DeepSeek-V2-Chat, DeepSeek-V3); not used by goldens.
tiny.GENERATION_DEFAULTS.setdefault("deepseek_v2", dict(do_sample=True, temperature=0.3, top_p=0.95))
tiny.GENERATION_DEFAULTS.setdefault("deepseek_v3", dict(do_sample=True, temperature=0.6, top_p=0.95))
for _family in ("deepseek_v32", "glm_moe_dsa", "glm4_moe_lite"):
    tiny.GENERATION_DEFAULTS.setdefault(_family, dict(do_sample=True, temperature=1.0, top_p=0.95))

CONFIG_CLASSES = {
    "deepseek_v2": (DeepseekV2Config, DeepseekV2ForCausalLM),
    "deepseek_v3": (DeepseekV3Config, DeepseekV3ForCausalLM),
    "deepseek_v32": (DeepseekV32Config, DeepseekV32ForCausalLM),
    "glm_moe_dsa": (GlmMoeDsaConfig, GlmMoeDsaForCausalLM),
    "glm4_moe_lite": (Glm4MoeLiteConfig, Glm4MoeLiteForCausalLM),
}
# The smallest vision tower Kimi-K2.5's wrapper builds (not served; its weights ride along).
KIMI_VISION = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                   pos_emb_height=4, pos_emb_width=4, pos_emb_time=2)
tiny.GENERATION_DEFAULTS.setdefault("kimi_k25", dict(do_sample=True, temperature=1.0, top_p=0.95))


def make_config(spec, tok, num_layers=None):
    kwargs = dict(COMMON)
    kwargs.update(spec["cfg"])
    if num_layers is not None:
        kwargs["num_hidden_layers"] = num_layers
    kwargs.update(vocab_size=tok.get_vocab_size(), max_position_embeddings=spec["max_pos"],
                  bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=tok.token_to_id("<|im_end|>"))
    if spec["family"] == "kimi_k25":
        text = DeepseekV3Config(**kwargs).to_dict()
        text["model_type"] = "kimi_k2"  # as Moonshot's config.json says (transformers maps it to V3)
        config = Kimi_K25Config(text_config=text, vision_config=KIMI_VISION, projection_hidden_size=32,
                                tie_word_embeddings=False, bos_token_id=kwargs["bos_token_id"],
                                eos_token_id=kwargs["eos_token_id"])
        return config, Kimi_K25ForConditionalGeneration
    config_class, model_class = CONFIG_CLASSES[spec["family"]]
    return config_class(**kwargs), model_class


def route_gap(gate, hidden):
    """Smallest margin, over the tokens, by which the router's choices beat the first loser."""
    x = hidden.reshape(-1, gate.hidden_dim).float()
    logits = x @ gate.weight.float().t()
    k, e = gate.top_k, gate.weight.shape[0]
    if hasattr(gate, "e_score_correction_bias"):  # V3 noaux_tc
        scores = logits.sigmoid() + gate.e_score_correction_bias
        group_score = lambda s: s.view(-1, gate.num_group, e // gate.num_group).topk(2, dim=-1)[0].sum(-1)
        fill = float("-inf")
    else:
        scores = logits.softmax(dim=-1)
        group_score = lambda s: s.view(-1, gate.num_group, e // gate.num_group).max(dim=-1).values
        fill = 0.0
    gaps = []
    if getattr(gate, "topk_method", "noaux_tc") != "greedy":
        g = group_score(scores).sort(dim=-1, descending=True).values
        if gate.topk_group < gate.num_group:
            gaps.append(g[:, gate.topk_group - 1] - g[:, gate.topk_group])
        keep = group_score(scores).topk(gate.topk_group, dim=-1).indices
        mask = torch.zeros_like(g).scatter_(1, keep, 1).bool()
        mask = mask.unsqueeze(-1).expand(-1, gate.num_group, e // gate.num_group).reshape(-1, e)
        scores = scores.masked_fill(~mask, fill)
    s = scores.sort(dim=-1, descending=True).values
    gaps.append(s[:, k - 1] - s[:, k])
    return float(torch.cat(gaps).min())


class RouteGapRecorder:
    def __init__(self, model):
        self.min_gap = float("inf")
        self.handles = [m.register_forward_hook(self._hook) for n, m in model.named_modules()
                        if n.endswith("mlp.gate")]

    def _hook(self, module, args, _output):
        self.min_gap = min(self.min_gap, route_gap(module, args[0]))

    def close(self):
        for h in self.handles:
            h.remove()


class IndexGapRecorder:
    """Smallest relative margin between the k-th and (k+1)-th lightning-indexer scores."""

    def __init__(self):
        self.min_gap = float("inf")
        self.original = torch.Tensor.topk
        recorder = self

        def topk(tensor, k, *args, **kwargs):
            caller = sys._getframe(1).f_locals.get("self")
            if isinstance(caller, DeepseekV32Indexer) and k < tensor.shape[-1]:
                recorder.record(tensor, k)
            return recorder.original(tensor, k, *args, **kwargs)

        torch.Tensor.topk = topk

    def record(self, scores, k):
        rows = scores.reshape(-1, scores.shape[-1]).float()
        top = rows.sort(dim=-1, descending=True).values
        for row, s in zip(rows, top):
            if float(s[k]) < -1e30:  # fewer unmasked positions than k: all of them are chosen
                continue
            finite = row[row > -1e30]
            scale = max(float(finite.abs().max()), 1e-30)
            self.min_gap = min(self.min_gap, float(s[k - 1] - s[k]) / scale)

    def close(self):
        torch.Tensor.topk = self.original


def prepare(model):
    model.config._attn_implementation = "eager"
    model.eval()
    model.generation_config = GenerationConfig(
        do_sample=False, max_new_tokens=tiny.NEW_TOKENS, eos_token_id=None, pad_token_id=None,
        bos_token_id=None, repetition_penalty=1.0, return_dict_in_generate=True, output_logits=True,
    )
    return model


def build_model(spec, tok, seed, num_layers=None):
    config, cls = make_config(spec, tok, num_layers)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = cls(config).to(torch.float32)
    if spec["family"] == "kimi_k25":  # the text model only (the vision tower keeps its init)
        tiny.init_weights(model.model.language_model, seed)
        tiny.init_weights(model.lm_head, seed + 1)
        return prepare(model)
    tiny.init_weights(model, seed)  # incl. stacked experts and the V3 router bias
    return prepare(model)


def kimi_original_layout(out, spec):
    """Rewrites a transformers-saved Kimi-K2.5 directory as Moonshot ships it and checks that
    transformers reads it back to the same logits."""
    model = Kimi_K25ForConditionalGeneration.from_pretrained(str(out), dtype=torch.float32)
    renames = [("model.language_model.", "language_model.model."), ("lm_head.", "language_model.lm_head."),
               ("model.vision_tower.", "vision_tower."), ("model.mm_projector.", "mm_projector.")]
    tensors = {}
    for name, t in model.state_dict().items():
        for old, new in renames:
            if name.startswith(old):
                name = new + name[len(old):]
                break
        tensors[name] = t.contiguous()
    save_file(dict(sorted(tensors.items())), str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((out / "config.json").read_text())
    cfg["architectures"] = ["KimiK25ForConditionalGeneration"]
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def mtp_tensors(spec, tok, seed, tmp):
    """Layer num_hidden_layers of a one-layer-deeper model, as saved, plus the MTP head parts."""
    n = COMMON["num_hidden_layers"]
    deeper = build_model(spec, tok, seed + 7919, num_layers=n + 1)
    deeper.save_pretrained(tmp / "mtp")
    prefix = f"model.layers.{n}."
    out = {k: v for k, v in load_file(str(tmp / "mtp" / "model.safetensors")).items() if k.startswith(prefix)}
    gen = torch.Generator().manual_seed(seed + 104729)
    h, v = COMMON["hidden_size"], tok.get_vocab_size()
    rnd = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float32)
    out[prefix + "enorm.weight"] = 1.0 + 0.2 * rnd(h)
    out[prefix + "hnorm.weight"] = 1.0 + 0.2 * rnd(h)
    out[prefix + "eh_proj.weight"] = rnd(h, 2 * h) * (tiny.LINEAR_GAIN / math.sqrt(2 * h))
    out[prefix + "embed_tokens.weight"] = rnd(v, h)
    out[prefix + "shared_head.norm.weight"] = 1.0 + 0.2 * rnd(h)
    out[prefix + "shared_head.head.weight"] = rnd(v, h) * (tiny.LINEAR_GAIN / math.sqrt(h))
    return out


def fp8_eligible(name, t):
    """What DeepSeek-V3's FP8 release quantizes: the Linear weights of attention and MLP/experts
    (not the router's gate.weight, the norms, the embeddings or the heads)."""
    if t.dim() != 2 or not name.endswith(".weight") or name.endswith(".mlp.gate.weight"):
        return False
    return ".self_attn." in name or ".mlp." in name


def quantize_fp8(w, block):
    rows, cols = w.shape
    br, bc = block
    scale = torch.empty(math.ceil(rows / br), math.ceil(cols / bc), dtype=torch.float32)
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(scale.shape[0]):
        for j in range(scale.shape[1]):
            blk = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc]
            s = float(blk.abs().max()) / FP8_MAX
            s = s if s > 0 else 1.0
            scale[i, j] = s
            q[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = (blk / scale[i, j]).to(torch.float8_e4m3fn)
    return q, scale


def dequantize_fp8(q, scale, block):
    br, bc = block
    full = scale.repeat_interleave(br, 0)[: q.shape[0]].repeat_interleave(bc, 1)[:, : q.shape[1]]
    return q.to(torch.float32) * full


def golden_cases(model, prompts):
    """run_case for every prompt, or None when separation / routing margins are too small."""
    recorder = RouteGapRecorder(model)
    index_gaps = IndexGapRecorder()
    cases = []
    try:
        for p in prompts:
            last_logits, greedy, gap = tiny.run_case(model, p["prompt_ids"])
            if gap < tiny.MIN_REL_GAP or len(set(greedy)) < tiny.MIN_DISTINCT_GREEDY:
                print(f"    case {p['name']} rejected (min rel gap {gap:.2e}, {len(set(greedy))} distinct)")
                return None, recorder.min_gap
            case = dict(p)
            case["last_logits"] = [float(x) for x in last_logits.tolist()]
            case["greedy_ids"] = greedy
            case["min_rel_top2_gap"] = gap
            cases.append(case)
    finally:
        recorder.close()
        index_gaps.close()
    if index_gaps.min_gap < MIN_INDEX_GAP:
        print(f"    rejected: indexer top-k margin {index_gaps.min_gap:.2e}")
        return None, index_gaps.min_gap
    gap = recorder.min_gap
    if gap < MIN_ROUTE_GAP:
        print(f"    rejected: routing margin {gap:.2e}")
        return None, gap
    rounded = bf16_rounded(model)
    recorder = RouteGapRecorder(rounded)
    try:
        with torch.no_grad():
            for c in cases:
                logits = rounded(torch.tensor([c["prompt_ids"]])).logits[0, -1].float()
                c["bf16_last_logits"] = [float(x) for x in logits.tolist()]
    finally:
        recorder.close()
    if recorder.min_gap < MIN_ROUTE_GAP:
        print(f"    rejected: routing margin {recorder.min_gap:.2e} with bf16-rounded weights")
        return None, recorder.min_gap
    return cases, min(gap, recorder.min_gap)


def bf16_rounded(model):
    """A copy with every matrix rounded to bf16 but the routers' gate.weight (kept f32)."""
    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in rounded.named_parameters():
            if p.dim() in (2, 3) and not name.endswith("mlp.gate.weight"):
                p.copy_(p.to(torch.bfloat16).float())
    return rounded


def try_seed(spec, tok, prompts, seed, tmp):
    """(model as saved, extra tensors, fp8 file tensors or None, cases, route gap) or None."""
    model = build_model(spec, tok, seed)
    extra = mtp_tensors(spec, tok, seed, tmp) if spec.get("mtp") else {}
    if not spec.get("fp8"):
        cases, gap = golden_cases(model, prompts)
        return None if cases is None else (model, extra, None, cases, gap)
    # FP8: quantize what save_pretrained writes, then run transformers on the dequantized weights.
    model.save_pretrained(tmp / "f32")
    tensors = load_file(str(tmp / "f32" / "model.safetensors"))
    tensors.update(extra)
    stored, dequant = {}, {}
    for name, t in sorted(tensors.items()):
        if fp8_eligible(name, t):
            q, s = quantize_fp8(t, FP8_BLOCK)
            stored[name], stored[name + "_scale_inv"] = q, s
            dequant[name] = dequantize_fp8(q, s, FP8_BLOCK)
        else:
            stored[name] = dequant[name] = t
    deq_dir = tmp / "dequant"
    deq_dir.mkdir(exist_ok=True)
    shutil.copy(tmp / "f32" / "config.json", deq_dir / "config.json")
    mtp_prefix = f"model.layers.{COMMON['num_hidden_layers']}."
    save_file({k: v for k, v in dequant.items() if not k.startswith(mtp_prefix)},
              str(deq_dir / "model.safetensors"), metadata={"format": "pt"})
    deq_model = prepare(AutoModelForCausalLM.from_pretrained(str(deq_dir), dtype=torch.float32,
                                                             attn_implementation="eager"))
    cases, gap = golden_cases(deq_model, prompts)
    return None if cases is None else (deq_model, {}, stored, cases, gap)


def check_kimi_reload(out, cases):
    """The original layout, loaded by transformers, reproduces the goldens."""
    model = Kimi_K25ForConditionalGeneration.from_pretrained(str(out), dtype=torch.float32).eval()
    for c in cases:
        with torch.no_grad():
            logits = model(torch.tensor([c["prompt_ids"] + c["greedy_ids"]])).logits[0]
        n = len(c["prompt_ids"])
        want = torch.tensor(c["last_logits"])
        assert torch.allclose(logits[n - 1], want, rtol=0, atol=1e-5 * float(want.abs().max())), out
        assert logits[n - 1 : -1].argmax(-1).tolist() == c["greedy_ids"], out


def write_dir(out, spec, model, extra, fp8_tensors, tok_json, tok_cfg, seed, cases, gap):
    tiny.write_model_dir(out, dict(spec), model, tok_json, tok_cfg, seed, cases,
                         script="tools/make_tiny_deepseek_models.py")
    golden = json.loads((out / "golden.json").read_text())
    golden["min_route_gap"] = gap if math.isfinite(gap) else None  # None: no MoE layer
    if fp8_tensors is not None:
        golden["generator"]["note"] = ("transformers on the dequantized weights: fp8 x weight_scale_inv of block "
                                       f"(row // {FP8_BLOCK[0]}, col // {FP8_BLOCK[1]})")
    (out / "golden.json").write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    path = out / "model.safetensors"
    if extra or fp8_tensors is not None:
        tensors = fp8_tensors if fp8_tensors is not None else {**load_file(str(path)), **extra}
        save_file(dict(sorted(tensors.items())), str(path), metadata={"format": "pt"})
    path.chmod(0o644)
    if fp8_tensors is not None:
        cfg = json.loads((out / "config.json").read_text())
        cfg["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                      "weight_block_size": FP8_BLOCK}
        (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "tests" / "data"), help="parent directory of the tiny-* dirs")
    ap.add_argument("--only", nargs="*", help="model names to regenerate (default: all)")
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    out_root = Path(args.out)
    tok = tiny_tokenizer.build_tokenizer()
    tok_json = tiny_tokenizer.tokenizer_json(tok)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        tok_cfg = tiny_tokenizer.tokenizer_config(tok, model_max_length=256)
        (tmp / "tokenizer.json").write_text(json.dumps(tok_json, ensure_ascii=False), encoding="utf-8")
        (tmp / "tokenizer_config.json").write_text(json.dumps(tok_cfg, ensure_ascii=False), encoding="utf-8")
        prompts = tiny.make_prompts(AutoTokenizer.from_pretrained(str(tmp)), tok)

        for spec in MODELS:
            if args.only and spec["name"] not in args.only:
                continue
            for seed in range(spec["seed"], spec["seed"] + SEED_TRIES):
                print(f"  {spec['name']} seed {seed}")
                found = try_seed(spec, tok, prompts, seed, tmp)
                if found:
                    break
            else:
                raise RuntimeError(f"{spec['name']}: no seed in {SEED_TRIES} tries gives separated logits")
            model, extra, fp8_tensors, cases, gap = found
            out = out_root / spec["name"]
            cfg = tiny_tokenizer.tokenizer_config(tok, model_max_length=spec["max_pos"])
            write_dir(out, spec, model, extra, fp8_tensors, tok_json, cfg, seed, cases, gap)
            if spec["family"] == "kimi_k25":
                kimi_original_layout(out, spec)
                check_kimi_reload(out, cases)
            elif fp8_tensors is None:
                tiny.check_reload(out, cases)
                v4 = tiny.v4_config(json.loads((out / "config.json").read_text()))
                (out / "config_v4.json").write_text(json.dumps(v4, indent=2) + "\n")
                tiny.check_reload(out, cases, "config_v4.json")
            size = sum(f.stat().st_size for f in out.iterdir())
            gaps = ", ".join(f"{c['min_rel_top2_gap']:.3f}" for c in cases)
            print(f"{spec['name']}: seed {seed}, {size / 1024:.0f} KiB, min rel gaps [{gaps}], "
                  f"min route gap {gap:.2e}")


if __name__ == "__main__":
    main()
