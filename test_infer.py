#!/usr/bin/env python3
"""The articles' test_infer.py, from the repository root: load a recipe config and generate.

    python test_infer.py

The config is the demo model's (configs/demo/infer_config.json: SmolLM2-135M-Instruct, which
`make run` puts in .venv); DEEPINFER_CONFIG names another (e.g. configs/deepseek/...).
"""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent
# The package and the module the build makes, when not run from the .venv that has them.
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "build" / "python")]

from cann_recipes_infer import InferenceEngine  # noqa: E402

config_path = os.environ.get("DEEPINFER_CONFIG", str(ROOT / "configs" / "demo" / "infer_config.json"))
engine = InferenceEngine(config_path=config_path)
output = engine.generate(prompt="The capital of France is", max_new_tokens=64,
                         temperature=0.7, top_p=0.95, stream=False)
print(output)
