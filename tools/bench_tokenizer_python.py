#!/usr/bin/env python3
"""Single-thread encode throughput of the Python `tokenizers` package (Rust) — the peer of
bench/tokenizer_bench.cpp, on the same ~10 MB of mixed text.

    .venv-tools/bin/python tools/bench_tokenizer_python.py --model ../shared/tokenizers/qwen3
        [--text bench/out/tokenizer_bench.txt] [--chunk 4096] [--repeat 3]

Writes the text file (from tools/tokenizer_corpus.py) when it does not exist yet, then
encodes it chunk by chunk (one encode() call per chunk, never encode_batch) with Rayon held
to one thread, and prints the tokenizer.json load time and MB/s (wall and CPU time) as JSON.
"""

import os

# Before tokenizers is imported: one thread, no parallel batch paths.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_CPUS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import tokenizers  # noqa: E402

import tokenizer_corpus  # noqa: E402


def chunks(text, size):
    """Pieces of about `size` bytes cut at line ends (the C++ bench cuts the same way)."""
    data = text.encode("utf-8")
    out, start = [], 0
    while start < len(data):
        end = min(len(data), start + size)
        nl = data.find(b"\n", end)
        end = len(data) if nl < 0 else nl + 1
        out.append(data[start:end].decode("utf-8"))
        start = end
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="directory with tokenizer.json")
    parser.add_argument("--text", default=os.path.join(ROOT, "bench", "out", "tokenizer_bench.txt"))
    parser.add_argument("--chunk", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    if not os.path.exists(args.text):
        os.makedirs(os.path.dirname(args.text), exist_ok=True)
        with open(args.text, "w", encoding="utf-8", newline="") as f:
            f.write(tokenizer_corpus.bench_text())
    with open(args.text, encoding="utf-8", newline="") as f:
        text = f.read()
    pieces = chunks(text, args.chunk)
    total = len(text.encode("utf-8"))

    load = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        tok = tokenizers.Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
        load.append(time.perf_counter() - start)

    best_wall = best_cpu = float("inf")
    ids = 0
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        ids = 0
        for piece in pieces:
            ids += len(tok.encode(piece, add_special_tokens=False).ids)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)

    result = {
        "impl": f"python tokenizers {tokenizers.__version__}",
        "model": os.path.basename(os.path.normpath(args.model)),
        "bytes": total, "chunks": len(pieces), "ids": ids,
        "load_ms": round(min(load) * 1000, 1),
        "mb_per_s_wall": round(total / best_wall / 1e6, 2),
        "mb_per_s_cpu": round(total / best_cpu / 1e6, 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
