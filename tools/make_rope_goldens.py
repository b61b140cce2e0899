#!/usr/bin/env python3
"""Inverse frequencies and attention factors of every rope_type we implement, computed by
transformers' own ROPE_INIT_FUNCTIONS, for tests/unit/model/rotary_embedding_test.cpp.

Rerun: scripts/setup_tools.sh && .venv-tools/bin/python tools/make_rope_goldens.py
"""
import json
import pathlib

import torch
import transformers
from transformers import Qwen2Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

CASES = [
    ("default", 10000.0, 64, 32, None),
    ("linear", 10000.0, 64, 32, {"rope_type": "linear", "factor": 2.0}),
    ("yarn", 1000000.0, 64, 2048,
     {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512}),
    ("yarn_mscale", 10000.0, 64, 4096,
     {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
      "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}),
    ("llama3", 500000.0, 128, 131072,
     {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192}),
]


def main():
    out = {"generator": {"transformers": transformers.__version__, "torch": torch.__version__},
           "cases": []}
    for name, theta, head_dim, max_pos, scaling in CASES:
        params = {"rope_type": "default", "rope_theta": theta}
        if scaling:
            params.update(scaling)
        config = Qwen2Config(hidden_size=head_dim * 4, num_attention_heads=4,
                             max_position_embeddings=max_pos, rope_parameters=params)
        rope_type = params["rope_type"]
        if rope_type == "default":
            inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
            factor = 1.0
        else:
            inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu")
        out["cases"].append({
            "name": name, "rope_theta": theta, "head_dim": head_dim,
            "max_position_embeddings": max_pos, "rope_scaling": scaling,
            "inv_freq": [float(x) for x in inv_freq.tolist()],
            "attention_factor": float(factor),
        })
    path = pathlib.Path(__file__).resolve().parent.parent / "tests/data/rope_goldens.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
