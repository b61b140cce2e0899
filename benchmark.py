#!/usr/bin/env python3
"""The articles' benchmark script, from the repository root:

    python benchmark.py --config configs/demo/infer_config.json --dataset data/bench/prompts.json \
        --num_samples 100 --warmup 10

A thin entry point: the work is `deepinfer bench` (cann_recipes_infer.benchmark; docs/BENCH.md).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "python"))

from cann_recipes_infer.benchmark import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
