#!/usr/bin/env python3
"""Prompt log-probability goldens for the engine's SamplingParams::prompt_logprobs.

For each tiny checkpoint (a dense and an MLA + MoE family) and the prompts of its golden.json
(whose routing margins were vetted when the checkpoint was made), runs transformers in float32
(eager attention) over the whole prompt and records, for every prompt position p >= 1, the
log_softmax logprob of prompt token p given tokens < p, its rank (1 + tokens strictly more
likely, vLLM's definition) and the top-5 (id, logprob). Writes
tests/data/prompt_logprobs_goldens.json.

  /work/main/.venv-tools/bin/python tools/make_prompt_logprob_goldens.py
"""
import json
import pathlib

import torch
import transformers
from transformers import AutoModelForCausalLM

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
MODELS = ["tiny-llama", "tiny-deepseek-v2"]
CASES = ["seven_ids", "text", "chat"]
TOP_N = 5


def score(model, ids):
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    logprobs = torch.log_softmax(logits, dim=-1)
    out = []
    for p in range(1, len(ids)):
        row = logprobs[p - 1]
        chosen = row[ids[p]]
        top = torch.topk(row, TOP_N)
        out.append({
            "logprob": float(chosen),
            "rank": int((row > chosen).sum()) + 1,
            "top": [[int(i), float(v)] for v, i in zip(top.values, top.indices)],
        })
    return out


def main():
    result = {
        "generator": {"transformers": transformers.__version__, "torch": torch.__version__,
                      "script": "tools/make_prompt_logprob_goldens.py"},
        "note": "entry i of 'prompt_logprobs' is prompt token i+1; float32 CPU, eager attention,"
                " log_softmax in float64",
        "top_n": TOP_N,
        "models": {},
    }
    for name in MODELS:
        model = AutoModelForCausalLM.from_pretrained(str(DATA / name), dtype=torch.float32,
                                                     attn_implementation="eager").eval()
        golden = json.loads((DATA / name / "golden.json").read_text())
        cases = []
        for case in golden["cases"]:
            if case["name"] not in CASES:
                continue
            cases.append({"name": case["name"], "prompt_ids": case["prompt_ids"],
                          "prompt_logprobs": score(model, case["prompt_ids"])})
        result["models"][name] = cases
    path = DATA / "prompt_logprobs_goldens.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", path, path.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
