"""The articles' benchmark.py: `python benchmark.py --config FILE --dataset FILE --num_samples N
--warmup W` runs `deepinfer bench` with the same flags (it accepts the articles' spelling, the
kebab-case one and vLLM's; `deepinfer bench --help` lists them). The command is DEEPINFER_BIN,
else build/deepinfer of this checkout, else `deepinfer` on PATH.
"""
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def find_cli():
    if os.environ.get("DEEPINFER_BIN"):
        return os.environ["DEEPINFER_BIN"]
    built = ROOT / "build" / "deepinfer"
    if built.exists():
        return str(built)
    found = shutil.which("deepinfer")
    if found:
        return found
    sys.exit("benchmark.py: the deepinfer command is not built: run `make run` or "
             "scripts/build.sh, or set DEEPINFER_BIN")


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip(), end="\n\n", flush=True)
    return subprocess.call([find_cli(), "bench", *args])


if __name__ == "__main__":
    sys.exit(main())
