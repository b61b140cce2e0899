#!/usr/bin/env python3
"""Converts tiny test checkpoints to GGUF with llama.cpp's own converter, for the GGUF tests.

    tools/setup_llamacpp.sh                              # once: the vendored llama.cpp sources
    .venv-tools/bin/python tools/make_gguf_test_models.py

Writes tests/data/gguf-models/<model>-<outtype>.gguf. The C++ tests load each file and compare
it with the safetensors checkpoint it came from (bitwise for f32) and with that checkpoint's
transformers golden. The tiny tokenizer is Qwen2's split rule on a 512-token vocabulary, whose
fingerprint the converter does not know, so it is named explicitly (--pre qwen2).
tiny-qwen3-moe is left out: its dense layer (mlp_only_layers) has no GGUF form (llama.cpp's
qwen3moe graph has experts in every layer).
"""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "gguf-models"
# (checkpoint, outtypes): f32 proves the mapping bit for bit; q8_0 the block path end to end.
MODELS = [
    ("tiny-qwen2", "f32,q8_0"),
    ("tiny-qwen3", "f32"),
    ("tiny-llama", "f32,q8_0"),
    ("tiny-llama-bias", "f32"),
    ("tiny-deepseek-v2", "f32"),
    ("tiny-deepseek-v2-lite", "f32"),
    ("tiny-deepseek-v3", "f32"),
]


def main():
    only = set(sys.argv[1:])  # optional: just these checkpoints
    for name, outtypes in MODELS:
        if only and name not in only:
            continue
        model = REPO / "tests" / "data" / name
        if not (model / "config.json").exists():
            sys.exit(f"error: {model} is missing; make the tiny models first (tools/README.md)")
        subprocess.run([sys.executable, str(REPO / "tools" / "convert_to_gguf.py"), "--model", str(model),
                        "--outtype", outtypes, "--out-dir", str(OUT), "--pre", "qwen2", "--force"], check=True)
    for stage in OUT.glob("stage-*"):
        for f in stage.iterdir():
            f.unlink()
        stage.rmdir()


if __name__ == "__main__":
    main()
