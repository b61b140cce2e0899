#!/usr/bin/env python3
"""Reference outputs of a Hugging Face checkpoint for `deepinfer validate --golden FILE`.

Runs transformers in float32 on CPU (eager attention) over each prompt and writes, per prompt,
the token ids, the next-token logits of every position and the output of every block, under
the names deepinfer's model::ForwardObserver reports:
  embedding, final_norm (layer -1); per layer input_norm, attention, post_attention_norm,
  mlp | moe, layer (the residual stream after it), and GLM-4's post_self_attn_norm /
  post_mlp_norm. Arrays are base64 of little-endian float32 (format deepinfer-reference-v1).

  python tools/dump_reference.py --model DIR --prompts prompts.jsonl --out golden.json
  python tools/dump_reference.py --model DIR --prompt-ids 1,2,3 --prompt-ids 4,5 --out g.json

Prompts: jsonl lines {"prompt": text} (encoded with the tokenizer's special tokens, as
tokenizer(text) does) or {"prompt_token_ids": [...]}. Keep them short: the file holds
tokens x (vocab + blocks x hidden) floats per prompt.
"""
import argparse
import base64
import json
import pathlib
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

FORMAT = "deepinfer-reference-v1"


def b64(tensor):
    array = tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4")
    return base64.b64encode(array.tobytes()).decode("ascii")


def first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


class BlockRecorder:
    """Forward hooks that record each block's output, in the order they fire."""

    def __init__(self, model):
        self.records = []
        self.handles = []
        inner = model.model
        self._hook(inner.embed_tokens, -1, "embedding")
        for i, layer in enumerate(inner.layers):
            self._hook(layer.input_layernorm, i, "input_norm")
            self._hook(layer.self_attn, i, "attention")
            if hasattr(layer, "post_self_attn_layernorm"):
                self._hook(layer.post_self_attn_layernorm, i, "post_self_attn_norm")
            self._hook(layer.post_attention_layernorm, i, "post_attention_norm")
            self._hook(layer.mlp, i, "moe" if hasattr(layer.mlp, "experts") else "mlp")
            if hasattr(layer, "post_mlp_layernorm"):
                self._hook(layer.post_mlp_layernorm, i, "post_mlp_norm")
            self._hook(layer, i, "layer")
        self._hook(inner.norm, -1, "final_norm")

    def _hook(self, module, layer, block):
        def record(_module, _inputs, output):
            self.records.append({"layer": layer, "block": block, "data": b64(first(output)[0])})
        self.handles.append(module.register_forward_hook(record))

    def take(self):
        out, self.records = self.records, []
        return out

    def close(self):
        for h in self.handles:
            h.remove()


def load_prompts(args, model_dir):
    prompts = []
    tokenizer = None
    if args.prompts:
        for number, line in enumerate(pathlib.Path(args.prompts).read_text().splitlines(), 1):
            if not line.strip():
                continue
            item = json.loads(line)
            if "prompt_token_ids" in item:
                ids = [int(x) for x in item["prompt_token_ids"]]
            else:
                if tokenizer is None:
                    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir))
                ids = tokenizer(item["prompt"])["input_ids"]
            prompts.append({"name": f"{args.prompts}:{number}", "prompt_ids": ids})
    for k, text in enumerate(args.prompt_ids or []):
        prompts.append({"name": f"ids-{k}", "prompt_ids": [int(x) for x in text.split(",")]})
    if not prompts:
        sys.exit("dump_reference.py: give --prompts FILE and/or --prompt-ids LIST")
    return prompts


def dump(model_dir, prompts):
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    config = model.config
    recorder = BlockRecorder(model)
    out_prompts = []
    try:
        for p in prompts:
            with torch.no_grad():
                logits = model(torch.tensor([p["prompt_ids"]])).logits[0]
            out_prompts.append({"name": p["name"], "prompt_ids": p["prompt_ids"],
                                "logits": b64(logits), "blocks": recorder.take()})
    finally:
        recorder.close()
    return {
        "format": FORMAT,
        "generator": {"script": "tools/dump_reference.py", "transformers": transformers.__version__,
                      "torch": torch.__version__, "dtype": "float32", "attention": "eager"},
        "model": {"path": model_dir.name, "architecture": config.architectures[0],
                  "vocab_size": config.vocab_size, "num_hidden_layers": config.num_hidden_layers,
                  "hidden_size": config.hidden_size},
        "prompts": out_prompts,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    parser.add_argument("--prompts", help="jsonl: {\"prompt\": ...} or {\"prompt_token_ids\": [...]}")
    parser.add_argument("--prompt-ids", action="append", help="comma-separated ids (repeatable)")
    parser.add_argument("--out", required=True, help="output JSON file")
    args = parser.parse_args()
    model_dir = pathlib.Path(args.model)
    result = dump(model_dir, load_prompts(args, model_dir))
    pathlib.Path(args.out).write_text(json.dumps(result) + "\n")
    print(f"wrote {args.out}: {len(result['prompts'])} prompts", file=sys.stderr)


if __name__ == "__main__":
    main()
