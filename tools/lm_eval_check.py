#!/usr/bin/env python3
"""lm-evaluation-harness against `deepinfer serve`, checked against a direct computation.

Starts `deepinfer serve MODEL`, runs lm-eval's `local-completions` model (echo + logprobs
loglikelihood requests) on a small multiple-choice task read from a local file
(tools/lm_eval_mc.jsonl), and compares every per-choice log-likelihood lm-eval got from the
server with one computed directly by transformers (float32) on the same token ids (lm-eval's
own split: context tokens, then the continuation's). Not part of CI; needs the venv of
tools/setup_lm_eval.sh:

  tools/setup_lm_eval.sh
  .venv-lm-eval/bin/python tools/lm_eval_check.py --deepinfer build/deepinfer \
      --model tests/data/tiny-qwen3 [--tolerance 1e-4]
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import requests
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
ITEMS = ROOT / "tools" / "lm_eval_mc.jsonl"

TASK = """task: deepinfer_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {items}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
"""


def start_server(binary, model):
    proc = subprocess.Popen([binary, "serve", "--model", str(model), "--port", "0",
                             "--threads", "2"], stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        match = re.search(r"listening on http://[^:]+:(\d+)", line)
        if match:
            url = f"http://127.0.0.1:{match.group(1)}"
            break
    else:
        sys.exit(f"serve exited early ({proc.wait()})")
    for _ in range(600):
        try:
            if requests.get(url + "/health", timeout=5).status_code == 200:
                return proc, url
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    proc.kill()
    sys.exit("serve never became ready")


def encode_pair(tok, context, continuation):
    """lm-eval's split (api/model.py _encode_pair): trailing spaces move to the continuation,
    the whole string is encoded once and the context's tokens cut off."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = tok(context + continuation, add_special_tokens=False).input_ids
    context_enc = tok(context, add_special_tokens=False).input_ids
    return context_enc, whole[len(context_enc):]


def direct_loglikelihood(model, tok, context, continuation):
    ctx, cont = encode_pair(tok, context, continuation)
    ids = torch.tensor([ctx + cont])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits[0].double(), dim=-1)
    return sum(float(logprobs[len(ctx) + i - 1, t]) for i, t in enumerate(cont))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deepinfer", default=str(ROOT / "build" / "deepinfer"))
    parser.add_argument("--model", default=str(ROOT / "tests" / "data" / "tiny-qwen3"))
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()

    import lm_eval
    from lm_eval.tasks import TaskManager

    proc, url = start_server(args.deepinfer, args.model)
    try:
        served_name = requests.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]
        with tempfile.TemporaryDirectory() as tmp:
            (pathlib.Path(tmp) / "deepinfer_mc.yaml").write_text(TASK.format(items=ITEMS))
            results = lm_eval.simple_evaluate(
                model="local-completions",
                model_args=(f"base_url={url}/v1/completions,model={served_name},"
                            f"tokenizer={args.model},tokenizer_backend=huggingface,"
                            "tokenized_requests=True,num_concurrent=1,max_retries=1"),
                tasks=["deepinfer_mc"], task_manager=TaskManager(include_path=tmp),
                log_samples=True)
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(args.model)
    worst = 0.0
    rows = []
    for sample in results["samples"]["deepinfer_mc"]:
        for (context, continuation), resp in zip(sample["arguments"], sample["resps"]):
            served = float(resp[0][0])
            direct = direct_loglikelihood(model, tok, context, continuation)
            worst = max(worst, abs(served - direct))
            rows.append((context[:40], continuation, served, direct))
    for context, continuation, served, direct in rows:
        print(f"{context!r:44} {continuation!r:24} server {served:12.6f}  direct {direct:12.6f}"
              f"  diff {served - direct:+.2e}")
    acc = results["results"]["deepinfer_mc"]["acc,none"]
    print(json.dumps({"items": len(results["samples"]["deepinfer_mc"]), "choices": len(rows),
                      "acc": acc, "max_abs_diff": worst, "tolerance": args.tolerance}))
    if worst > args.tolerance:
        sys.exit(f"lm_eval_check: log-likelihoods differ by {worst:.3g} > {args.tolerance}")


if __name__ == "__main__":
    main()
