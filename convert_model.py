#!/usr/bin/env python3
"""The articles' converter script, from the repository root:

    python convert_model.py --input_dir models/DeepSeek-V2-Lite --output_dir models/V2-Lite-q8 \
        --target_platform cpu --precision q8_0 --enable_moe_optimization

A thin entry point: the work is `deepinfer convert` (cann_recipes_infer.convert; docs/CONVERT.md).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "python"))

from cann_recipes_infer.convert import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
