#!/usr/bin/env python3
"""Regenerates the tiny random checkpoints and their transformers goldens under tests/data/.

Run from the repository root:

    scripts/setup_tools.sh && .venv-tools/bin/python tools/make_tiny_models.py

Each tests/data/tiny-*/ directory holds what a real Hugging Face checkpoint directory holds
(config.json, generation_config.json, model.safetensors, tokenizer.json, tokenizer_config.json)
plus golden.json: for several prompts, the float32 logits of the last prompt position and the
32 greedy tokens transformers generates. The greedy continuation ignores EOS (the model's eos ids
are not stop tokens while the goldens are made), so it is exactly 32 pure-argmax tokens, EOS
included if it happens to be the argmax.

Everything is deterministic: fixed seeds, torch deterministic algorithms, one CPU thread,
float32, eager attention. Weights are re-initialised with large scales (see init_weights) so
that logits are well separated; the script asserts that every greedy step has a top-1/top-2 gap
of at least MIN_REL_GAP * max|logit| and that no continuation is one repeated token, and moves to
the next seed when a model fails that. The seed used is recorded in golden.json.
"""

import argparse
import copy
import json
import math
import random
import shutil
import sys
from pathlib import Path

import torch
import tokenizers
import transformers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tiny_tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
NEW_TOKENS = 32
MIN_REL_GAP = 1e-3
MIN_DISTINCT_GREEDY = 4
SEED_TRIES = 64
LINEAR_GAIN = 2.0  # linear weights ~ N(0, (gain / sqrt(fan_in))^2)

# Rope variants exercise our RoPE code beyond the default; the prompts reach position ~90 so
# the yarn model (original context 32) and the llama3 model (original context 64) go past it.
MODELS = [
    dict(name="tiny-qwen2", family="qwen2", tie=True, max_pos=256,
         rope={"rope_type": "default", "rope_theta": 10000.0}, seed=1000),
    dict(name="tiny-qwen3", family="qwen3", tie=False, head_dim=32, max_pos=256,
         rope={"rope_type": "default", "rope_theta": 1000000.0}, seed=2000),
    # max_position_embeddings = factor * original, so transformers' yarn sees no implicit/explicit
    # factor mismatch.
    dict(name="tiny-qwen3-yarn", family="qwen3", tie=False, head_dim=32, max_pos=128,
         rope={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
               "original_max_position_embeddings": 32}, seed=3000),
    dict(name="tiny-qwen2-linear", family="qwen2", tie=True, max_pos=256,
         rope={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}, seed=4000),
    dict(name="tiny-qwen2-llama3", family="qwen2", tie=True, max_pos=256,
         rope={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}, seed=5000),
]

# Sampling defaults written to generation_config.json, as the published instruct checkpoints
# ship them. They are NOT used for the goldens (those are pure greedy).
GENERATION_DEFAULTS = {
    "qwen2": dict(do_sample=True, temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05),
    "qwen3": dict(do_sample=True, temperature=0.6, top_p=0.95, top_k=20),
}

TEXT_PROMPT = "The fox said: 你好! 😀 x = 2"
CHAT_MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "你好! What is 2+2? 😀"},
]


def make_config(spec, tok):
    common = dict(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=spec["max_pos"],
        rms_norm_eps=1e-6,
        tie_word_embeddings=spec["tie"],
        rope_parameters=dict(spec["rope"]),
        bos_token_id=tok.token_to_id("<|endoftext|>"),
        eos_token_id=tok.token_to_id("<|im_end|>"),
    )
    if spec["family"] == "qwen2":
        return Qwen2Config(**common), Qwen2ForCausalLM
    return Qwen3Config(head_dim=spec["head_dim"], **common), Qwen3ForCausalLM


def init_weights(model, seed):
    """Re-draws every parameter with scales that make norm/bias/projection bugs visible."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):  # tied lm_head appears once
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name.endswith("embed_tokens.weight"):
                p.copy_(noise)
            elif name.endswith("norm.weight"):  # input/post_attention/final norms, q_norm, k_norm
                p.copy_(1.0 + 0.2 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.1 * noise)
            elif p.dim() in (2, 3):  # nn.Linear weight [out, in]; stacked MoE experts [E, out, in]
                p.copy_(noise * (LINEAR_GAIN / math.sqrt(p.shape[-1])))
            else:
                raise RuntimeError(f"init_weights: no rule for parameter {name} {tuple(p.shape)}")
        for name, b in sorted(model.named_buffers()):
            if name.endswith("e_score_correction_bias"):  # noaux_tc router bias (selection only)
                b.copy_(0.2 * torch.randn(b.shape, generator=gen, dtype=torch.float32))


def make_prompts(hf_tok, tok):
    """The golden prompts: 1 token, 7 arbitrary ids, ~20 text tokens, a rendered chat."""
    single_text = next(w for w in ["The", "Hello", "def", "the"] if len(tok.encode(w).ids) == 1)
    rng = random.Random(1234)
    seven = [rng.randrange(tok.get_vocab_size() - len(tiny_tokenizer.SPECIAL_TOKENS)) for _ in range(7)]
    chat_text = hf_tok.apply_chat_template(CHAT_MESSAGES, tokenize=False, add_generation_prompt=True)
    cases = [
        {"name": "one_token", "prompt_text": single_text, "prompt_ids": tok.encode(single_text).ids},
        {"name": "seven_ids", "prompt_ids": seven},
        {"name": "text", "prompt_text": TEXT_PROMPT, "prompt_ids": tok.encode(TEXT_PROMPT).ids},
        {"name": "chat", "messages": CHAT_MESSAGES, "prompt_text": chat_text,
         "prompt_ids": tok.encode(chat_text).ids},
    ]
    for c in cases:
        if "prompt_text" in c:
            # transformers' tokenizer (loaded from the written files) must agree with ours.
            hf_ids = hf_tok(c["prompt_text"], add_special_tokens=True)["input_ids"]
            assert hf_ids == c["prompt_ids"], (c["name"], hf_ids, c["prompt_ids"])
    return cases


def rel_gap(logits):
    top = torch.topk(logits, 2).values
    return float((top[0] - top[1]) / logits.abs().max())


def run_case(model, prompt_ids):
    """Last-position logits, 32 greedy ids (EOS ignored) and the smallest relative top-2 gap."""
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    with torch.no_grad():
        last_logits = model(ids).logits[0, -1].float()
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            generation_config=model.generation_config,
        )
    greedy = out.sequences[0, len(prompt_ids):].tolist()
    assert len(greedy) == NEW_TOKENS, f"generate stopped early: {greedy}"
    step_logits = [l[0].float() for l in out.logits]
    tol = 1e-4 * float(last_logits.abs().max())  # cached vs uncached sum in different orders
    assert torch.allclose(step_logits[0], last_logits, rtol=0, atol=tol)
    # Independent check of the cached generate loop: recompute every step without a KV cache.
    with torch.no_grad():
        full = model(torch.tensor([prompt_ids + greedy], dtype=torch.long), use_cache=False).logits[0]
    n = len(prompt_ids)
    for k in range(NEW_TOKENS):
        ref = full[n - 1 + k]
        assert int(ref.argmax()) == greedy[k], f"step {k}: cached vs uncached argmax differ"
        assert torch.allclose(ref, step_logits[k], rtol=0, atol=tol), f"step {k} logits differ"
    gap = min(min(rel_gap(l) for l in step_logits), min(rel_gap(full[n - 1 + k]) for k in range(NEW_TOKENS)))
    return last_logits, greedy, gap


# Other generator scripts register their families here: family -> make_config(spec, tok).
CONFIG_MAKERS = {}


def build_model(spec, tok, seed):
    config, cls = CONFIG_MAKERS.get(spec["family"], make_config)(spec, tok)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = cls(config).to(torch.float32).eval()
    init_weights(model, seed)
    if spec["tie"]:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    # Pure greedy, no stop token, no penalties: generate() fills unset values from this.
    model.generation_config = GenerationConfig(
        do_sample=False, max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=None,
        bos_token_id=None, repetition_penalty=1.0, return_dict_in_generate=True, output_logits=True,
    )
    return model


def make_goldens(spec, tok, prompts):
    for seed in range(spec["seed"], spec["seed"] + SEED_TRIES):
        model = build_model(spec, tok, seed)
        cases, ok = [], True
        for p in prompts:
            last_logits, greedy, gap = run_case(model, p["prompt_ids"])
            if gap < MIN_REL_GAP or len(set(greedy)) < MIN_DISTINCT_GREEDY:
                print(f"  {spec['name']} seed {seed}: case {p['name']} rejected "
                      f"(min rel gap {gap:.2e}, {len(set(greedy))} distinct greedy ids)")
                ok = False
                break
            case = dict(p)
            case["last_logits"] = [float(x) for x in last_logits.tolist()]
            case["greedy_ids"] = greedy
            case["min_rel_top2_gap"] = gap
            cases.append(case)
        # A family script may add its own acceptance rule (and per-case fields) via spec["accept"].
        if ok and "accept" in spec and not spec["accept"](model, cases):
            print(f"  {spec['name']} seed {seed}: rejected by the family's own check")
            ok = False
        if ok:
            return model, seed, cases
    raise RuntimeError(f"{spec['name']}: no seed in {SEED_TRIES} tries gives separated logits")


# deepinfer's `info` / `generate` say "random-weight test model" for a config.json with this
# key; transformers keeps unknown config keys as attributes, so the model means the same.
TEST_MODEL_KEY = "deepinfer_test_model"


def mark_test_model(config_path):
    """Adds TEST_MODEL_KEY to a config.json written by save_pretrained (sorted keys, indent 2)."""
    data = json.loads(config_path.read_text())
    data[TEST_MODEL_KEY] = True
    config_path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


# Family scripts that check the bf16 path set spec["accept"] = accept_bf16: a seed is accepted only
# if transformers on bf16-rounded matrices stays this close (relative L2) to the f32 logits, 3/4 of
# the C++ tests' 2e-2 bound.
BF16_MAX_REL_L2 = 1.5e-2


def accept_bf16(model, cases):
    """Adds last_logits_bf16_weights to every case; rejects seeds too sensitive to bf16."""
    rounded = copy.deepcopy(model)
    worst = 0.0
    with torch.no_grad():
        for p in rounded.parameters():  # a tied lm_head is the embedding, rounded once
            if p.dim() == 2:
                p.copy_(p.to(torch.bfloat16).float())
        for c in cases:
            ref = torch.tensor(c["last_logits"])
            got = rounded(torch.tensor([c["prompt_ids"]])).logits[0, -1].float()
            c["last_logits_bf16_weights"] = [float(x) for x in got.tolist()]
            worst = max(worst, float((got - ref).norm() / ref.norm()))
    print(f"  bf16-weights rel L2 (worst case) {worst:.4f}")
    return worst <= BF16_MAX_REL_L2


def write_model_dir(out, spec, model, tok_json, tok_cfg, seed, cases, script="tools/make_tiny_models.py"):
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    eos = [tok_cfg_id(tok_json, "<|im_end|>"), tok_cfg_id(tok_json, "<|endoftext|>")]
    model.generation_config = GenerationConfig(
        bos_token_id=eos[1], pad_token_id=eos[1], eos_token_id=eos, **GENERATION_DEFAULTS[spec["family"]]
    )
    model.save_pretrained(out)
    mark_test_model(out / "config.json")
    (out / "tokenizer.json").write_text(json.dumps(tok_json, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg, ensure_ascii=False, indent=2) + "\n",
                                               encoding="utf-8")
    golden = {
        "generator": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "tokenizers": tokenizers.__version__,
            "script": script,
            "seed": seed,
        },
        "greedy": {
            "max_new_tokens": NEW_TOKENS,
            "ignore_eos": True,
            "note": "greedy_ids are the 32 argmax tokens after the prompt; EOS does not stop "
                    "generation; no repetition penalty; float32 CPU, eager attention",
        },
        "cases": cases,
    }
    # json writes Python floats with repr(), i.e. the exact value of each float32 logit.
    (out / "golden.json").write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


# How transformers 4.x and most published checkpoints spell the rope settings; the key inside
# rope_scaling is "type" in older files (Qwen2.5's yarn recipe) and "rope_type" in newer ones
# (Llama 3.1), so the variants use both.
V4_ROPE_TYPE_KEY = {"linear": "type", "yarn": "type", "llama3": "rope_type"}


def v4_config(config_json):
    """config.json rewritten in transformers 4.x spelling: rope_theta + rope_scaling, torch_dtype."""
    cfg = {k: v for k, v in config_json.items() if k not in ("rope_parameters", "dtype", "layer_types")}
    rope = dict(config_json["rope_parameters"])
    cfg["rope_theta"] = rope.pop("rope_theta")
    if "partial_rotary_factor" in rope:  # a top-level key in 4.x (GLM, Phi)
        cfg["partial_rotary_factor"] = rope.pop("partial_rotary_factor")
    kind = rope.pop("rope_type")
    cfg["rope_scaling"] = None if kind == "default" else {V4_ROPE_TYPE_KEY[kind]: kind, **rope}
    cfg["torch_dtype"] = config_json["dtype"]
    cfg["transformers_version"] = "4.51.0"
    return dict(sorted(cfg.items()))


def check_reload(out, cases, config_file="config.json"):
    """The files on disk, loaded the ordinary way, must reproduce the goldens."""
    config = AutoConfig.from_pretrained(str(out)) if config_file == "config.json" else None
    if config is None:
        data = json.loads((out / config_file).read_text())
        config = AutoConfig.for_model(data.pop("model_type"), **data)
    model = AutoModelForCausalLM.from_pretrained(
        str(out), config=config, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    for c in cases:
        with torch.no_grad():
            logits = model(torch.tensor([c["prompt_ids"] + c["greedy_ids"]])).logits[0]
        n = len(c["prompt_ids"])
        want = torch.tensor(c["last_logits"])
        assert torch.allclose(logits[n - 1], want, rtol=0, atol=1e-5 * float(want.abs().max())), out
        assert logits[n - 1 : -1].argmax(-1).tolist() == c["greedy_ids"], out


def tok_cfg_id(tok_json, content):
    return next(t["id"] for t in tok_json["added_tokens"] if t["content"] == content)


def main(models=MODELS, script="tools/make_tiny_models.py"):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "tests" / "data"), help="parent directory of the tiny-* dirs")
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    out_root = Path(args.out)

    tok = tiny_tokenizer.build_tokenizer()
    tok_json = tiny_tokenizer.tokenizer_json(tok)
    print(f"tokenizer: {tok.get_vocab_size()} tokens, {len(tok_json['model']['merges'])} merges")

    # Load the tokenizer through transformers once, from files, to render the chat prompt the
    # way transformers does and to check both tokenizers agree.
    tmp = out_root / ".tokenizer-check"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    tok_cfg = tiny_tokenizer.tokenizer_config(tok, model_max_length=256)
    (tmp / "tokenizer.json").write_text(json.dumps(tok_json, ensure_ascii=False), encoding="utf-8")
    (tmp / "tokenizer_config.json").write_text(json.dumps(tok_cfg, ensure_ascii=False), encoding="utf-8")
    hf_tok = AutoTokenizer.from_pretrained(str(tmp))
    prompts = make_prompts(hf_tok, tok)
    shutil.rmtree(tmp)
    for p in prompts:
        print(f"prompt {p['name']}: {len(p['prompt_ids'])} tokens")

    for spec in models:
        model, seed, cases = make_goldens(spec, tok, prompts)
        cfg = tiny_tokenizer.tokenizer_config(tok, model_max_length=spec["max_pos"])
        out = out_root / spec["name"]
        write_model_dir(out, spec, model, tok_json, cfg, seed, cases, script)
        (out / "model.safetensors").chmod(0o644)
        check_reload(out, cases)
        # The same checkpoint with a 4.x-style config must mean the same model to transformers.
        v4 = v4_config(json.loads((out / "config.json").read_text()))
        (out / "config_v4.json").write_text(json.dumps(v4, indent=2) + "\n")
        check_reload(out, cases, "config_v4.json")
        size = sum(f.stat().st_size for f in out.iterdir())
        gaps = ", ".join(f"{c['min_rel_top2_gap']:.3f}" for c in cases)
        print(f"{spec['name']}: seed {seed}, {size / 1024:.0f} KiB, min rel gaps [{gaps}]")


if __name__ == "__main__":
    main()
