"""The articles' convert_model.py: `python convert_model.py --input_dir DIR --output_dir DIR
--target_platform cpu --precision fp16 [--enable_moe_optimization]` runs `deepinfer convert` with
the same flags (docs/CONVERT.md; `deepinfer convert --help` lists them). The command is
DEEPINFER_BIN, else build/deepinfer of this checkout, else `deepinfer` on PATH.
"""
import subprocess
import sys

from cann_recipes_infer.benchmark import find_cli


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip(), end="\n\n", flush=True)
    return subprocess.call([find_cli(), "convert", *args])


if __name__ == "__main__":
    sys.exit(main())
