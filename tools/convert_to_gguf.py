#!/usr/bin/env python3
"""Converts a bench checkpoint (tools/make_bench_model.py) to GGUF for llama.cpp, the benchmark peer.

    tools/setup_llamacpp.sh                                   # once: sources, binaries, gguf-py
    .venv-tools/bin/python tools/convert_to_gguf.py --shape qwen2.5-0.5b --outtype bf16,f32,q8_0
    .venv-tools/bin/python tools/convert_to_gguf.py --shape deepseek-v2-lite-4l --outtype bf16

Writes bench/models/gguf/<shape>-random-<outtype>.gguf (git-ignored) with llama.cpp's own
convert_hf_to_gguf.py from the vendored sources that tools/setup_llamacpp.sh unpacked, so the
file matches the binaries. A file newer than its model.safetensors is kept (--force redoes it).

Tokenizers: llama.cpp refuses a model without one, and the random checkpoints borrow real
ones. The Qwen shapes carry Qwen3's (make_bench_model copies it; the vocabulary fits). The
DeepSeek shape has none: its vocab_size (102400, V2's) is smaller than DeepSeek-V3's tokenizer
in ../shared/tokenizers, so a staging directory gets V3's tokenizer cut to the ids below 102400
(the merges whose pieces all survive). Cutting the vocabulary changes the converter's
fingerprint of the pre-tokenizer (a hash of how a fixed text encodes), so for that case the
unrecognised fingerprint is mapped to "deepseek-v3", whose regexes the cut tokenizer keeps
verbatim. Benchmarks feed token ids, never text, so only the shapes matter for speed.

DeepSeek without q LoRA: the GGUF gets attention.q_lora_rank = 0 (see run_converter).
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LLAMACPP_SRC = REPO / "bench" / "llamacpp-src"
SHARED_DEEPSEEK_TOKENIZER = REPO.parent / "shared" / "tokenizers" / "deepseek-v3"
OUTTYPES = ("f32", "bf16", "f16", "q8_0")


def find_llamacpp():
    """The vendored llama.cpp tree unpacked by tools/setup_llamacpp.sh (newest version first)."""
    found = sorted(LLAMACPP_SRC.glob("llama_cpp_python-*/vendor/llama.cpp/convert_hf_to_gguf.py"))
    if not found:
        sys.exit(f"error: no llama.cpp sources under {LLAMACPP_SRC}; run tools/setup_llamacpp.sh first")
    return found[-1].parent


def cut_tokenizer(src, dst, vocab_size):
    """Writes src's tokenizer.json/tokenizer_config.json to dst keeping only ids < vocab_size."""
    tok = json.loads((src / "tokenizer.json").read_text())
    model = tok["model"]
    if model.get("type") != "BPE":
        sys.exit(f"error: {src}/tokenizer.json is not a BPE tokenizer; cannot cut it to {vocab_size} ids")
    vocab = {t: i for t, i in model["vocab"].items() if i < vocab_size}
    merges = []
    for m in model["merges"]:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    model["vocab"], model["merges"] = vocab, merges
    tok["added_tokens"] = [t for t in tok["added_tokens"] if t["id"] < vocab_size]
    (dst / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    cfg = json.loads((src / "tokenizer_config.json").read_text())
    kept = {str(t["id"]) for t in tok["added_tokens"]}
    if "added_tokens_decoder" in cfg:
        cfg["added_tokens_decoder"] = {k: v for k, v in cfg["added_tokens_decoder"].items() if k in kept}
    (dst / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False, indent=1))


def stage(model_dir, stage_dir):
    """A directory the converter can read: links to the checkpoint plus tokenizer files.

    Returns the pre-tokenizer name to fall back on when the fingerprint is unknown (or None)."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    for f in model_dir.iterdir():
        link = stage_dir / f.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(f.resolve())
    if (model_dir / "tokenizer.json").exists():
        return None
    config = json.loads((model_dir / "config.json").read_text())
    if not config.get("model_type", "").startswith("deepseek"):
        sys.exit(f"error: {model_dir} has no tokenizer.json and no borrowed tokenizer fits "
                 f"model_type {config.get('model_type')!r}; add tokenizer files to the directory")
    if not (SHARED_DEEPSEEK_TOKENIZER / "tokenizer.json").exists():
        sys.exit(f"error: {SHARED_DEEPSEEK_TOKENIZER} is missing; the DeepSeek bench model borrows its "
                 "tokenizer from there (copy tokenizer.json + tokenizer_config.json of DeepSeek-V3 there)")
    cut_tokenizer(SHARED_DEEPSEEK_TOKENIZER, stage_dir, config["vocab_size"])
    return "deepseek-v3"


def run_converter(llama_dir, fallback_pre, argv):
    """In a child process: llama.cpp's converter, with the pre-tokenizer fallback patched in."""
    sys.path.insert(0, str(llama_dir))
    sys.path.insert(1, str(llama_dir / "gguf-py"))
    import conversion.base as base  # noqa: E402  (llama.cpp's own package)

    original = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            if not fallback_pre:
                raise
            base.logger.warning(f"pre-tokenizer fingerprint unknown (cut vocabulary); using {fallback_pre!r}")
            return fallback_pre

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre

    # llama.cpp's loader decides "no q LoRA" (V2-Lite) from the layer count (26 or 27) and
    # otherwise requires attention.q_lora_rank; our depth-cut V2-Lite has 4 layers, so the
    # key is written as 0, which the tensor loader reads as "plain q_proj" as for the real one.
    import conversion.deepseek as deepseek  # noqa: E402

    original_params = deepseek.DeepseekV2Model.set_gguf_parameters

    def set_gguf_parameters(self):
        original_params(self)
        if self.hparams.get("q_lora_rank") is None:
            self.gguf_writer.add_q_lora_rank(0)

    deepseek.DeepseekV2Model.set_gguf_parameters = set_gguf_parameters
    import convert_hf_to_gguf  # noqa: E402

    sys.argv = ["convert_hf_to_gguf.py", *argv]
    convert_hf_to_gguf.main()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--run-converter":  # internal: see run_converter
        run_converter(Path(sys.argv[2]), sys.argv[3] or None, sys.argv[4:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="qwen2.5-0.5b", help="a tools/make_bench_model.py shape")
    ap.add_argument("--model", help="checkpoint directory (default bench/models/<shape>-random)")
    ap.add_argument("--outtype", default="bf16,f32", help=f"comma-separated, of {', '.join(OUTTYPES)}")
    ap.add_argument("--out-dir", default=str(REPO / "bench" / "models" / "gguf"))
    ap.add_argument("--force", action="store_true", help="convert even when the output is up to date")
    ap.add_argument("--pre", help="pre-tokenizer name to use when the converter does not recognise the "
                    "tokenizer's fingerprint (e.g. qwen2 for the tiny test tokenizer)")
    args = ap.parse_args()

    model_dir = Path(args.model) if args.model else REPO / "bench" / "models" / f"{args.shape}-random"
    if not (model_dir / "config.json").exists():
        if args.model:
            sys.exit(f"error: {model_dir}/config.json not found")
        subprocess.run([sys.executable, str(REPO / "tools" / "make_bench_model.py"), "--shape", args.shape],
                       check=True)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    llama_dir = find_llamacpp()
    weights_mtime = max(f.stat().st_mtime for f in model_dir.glob("*.safetensors"))
    fallback = None
    staged = False
    for outtype in args.outtype.split(","):
        if outtype not in OUTTYPES:
            sys.exit(f"error: --outtype {outtype!r}; expected one of {', '.join(OUTTYPES)}")
        out = out_dir / f"{model_dir.name}-{outtype}.gguf"
        if out.exists() and out.stat().st_mtime > weights_mtime and not args.force:
            print(f"{out}: up to date")
            continue
        stage_dir = out_dir / f"stage-{model_dir.name}"
        if not staged:
            fallback, staged = stage(model_dir, stage_dir) or args.pre, True
        partial = out.with_suffix(".gguf.partial")
        cmd = [sys.executable, __file__, "--run-converter", str(llama_dir), fallback or "", str(stage_dir),
               "--outtype", outtype, "--outfile", str(partial)]
        env = dict(os.environ, NO_LOCAL_GGUF="1")  # run_converter puts the vendored gguf-py first
        subprocess.run(cmd, check=True, env=env)
        partial.rename(out)  # a killed conversion never leaves a plausible-looking .gguf
        print(f"{out}: {out.stat().st_size / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
