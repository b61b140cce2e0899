#!/usr/bin/env python3
"""Which bf16 precision is closer to transformers? Measures issue #15's precision policy.

A bf16 checkpoint of a real trained model (SmolLM2-135M-Instruct: the Q4_1 GGUF of
tools/make_smollm2_goldens.py, dequantized by transformers and saved in bf16) runs through
  - transformers in bfloat16 (what "the checkpoint's dtype" computes: bf16 activations, bf16
    residual stream, f32 accumulation inside each matmul) and in float32 (the same bf16 weights
    widened: the exact function of the checkpoint);
  - deepinfer with bf16 weights and `--matmul-precision f32` (activations stay f32: exact
    products of bf16 weights) and `--matmul-precision bf16` (each matmul's input rounded to
    bf16, as vdpbf16ps takes it).
For prefixes of a fixed English text, the next-token logits at the last position are compared:
mean KL(reference || candidate) in nats, max |diff| / max |ref|, and top-1 agreement.

    .venv-tools/bin/python tools/precision_policy.py [--deepinfer build/deepinfer] [--json OUT]

Needs torch + transformers (tools/requirements.txt) and a built deepinfer; ~1 min on 2 cores.
CI never runs it: the numbers go to docs/PERFORMANCE.md ("Precision policy").
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from make_smollm2_goldens import fetch_gguf  # noqa: E402  (the same real checkpoint)

TEXT = (
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
    "combined movable metal type, oil-based ink and a wooden screw press into a system that could "
    "produce books quickly and cheaply. Within fifty years, presses were operating in more than two "
    "hundred cities across Europe, and the number of books in circulation rose from thousands to "
    "millions. Scholars could compare identical copies of a text, errors were corrected in later "
    "editions, and ideas travelled faster than ever before. Historians still debate how much the "
    "press caused the scientific revolution, but few doubt that it changed how knowledge spread."
)
PREFIXES = list(range(8, 113, 8))


def log_softmax(x):
    x = x.astype(np.float64)
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def compare(ref, cand):
    lr, lc = log_softmax(ref), log_softmax(cand)
    return {
        "kl": float((np.exp(lr) * (lr - lc)).sum()),
        "rel_max": float(np.abs(ref - cand).max() / np.abs(ref).max()),
        "top1": bool(ref.argmax() == cand.argmax()),
    }


def summary(pairs):
    return {
        "mean_kl": float(np.mean([p["kl"] for p in pairs])),
        "max_rel": float(np.max([p["rel_max"] for p in pairs])),
        "top1_agreement": float(np.mean([p["top1"] for p in pairs])),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", help="SmolLM2-135M-Instruct.Q4_1.gguf (default: fetched)")
    ap.add_argument("--deepinfer", default=str(ROOT / "build" / "deepinfer"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    gguf = fetch_gguf(args.gguf)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "smollm2-bf16"
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, attn_implementation="eager")
        # The bf16 checkpoint everyone runs (save_pretrained refuses a GGUF-loaded model).
        from safetensors.torch import save_file
        ckpt.mkdir()
        state = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
        if model.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        save_file(state, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        config["architectures"] = [type(model).__name__]
        config["torch_dtype"] = config["dtype"] = "bfloat16"
        (ckpt / "config.json").write_text(json.dumps(config, indent=1))
        tok.save_pretrained(ckpt)
        del model
        ids = tok(TEXT)["input_ids"][: PREFIXES[-1]]
        assert len(ids) == PREFIXES[-1], f"text gives only {len(ids)} tokens"

        refs = {}
        for name, dtype in (("transformers bf16", torch.bfloat16), ("transformers f32", torch.float32)):
            m = AutoModelForCausalLM.from_pretrained(ckpt, dtype=dtype, attn_implementation="eager").eval()
            with torch.no_grad():
                logits = m(torch.tensor([ids])).logits[0].float().numpy()
            refs[name] = [logits[p - 1] for p in PREFIXES]  # causal: row p-1 sees ids[:p]
            del m

        ours = {}
        for precision in ("f32", "bf16"):
            rows = []
            for p in PREFIXES:
                out = Path(tmp) / f"{precision}-{p}.npy"
                run = subprocess.run([args.deepinfer, "generate", "--model", str(ckpt), "--prompt-ids",
                                ",".join(map(str, ids[:p])), "--max-new-tokens", "1", "--dtype", "bf16",
                                "--matmul-precision", precision, "--threads", str(args.threads),
                                "--dump-logits", str(out), "--log-level", "warn"],
                               check=False, capture_output=True, text=True)
                if run.returncode != 0:
                    sys.exit(f"deepinfer failed: {run.stderr.strip()[-2000:]}")
                rows.append(np.load(out).astype(np.float32).reshape(-1))
            ours[f"deepinfer bf16 weights, --matmul-precision {precision}"] = rows

    candidates = {**ours, "transformers f32": refs["transformers f32"]}
    report = {"model": "SmolLM2-135M-Instruct (Q4_1 GGUF dequantized, saved in bf16)",
              "prefixes": PREFIXES, "results": {}}
    for ref_name in refs:
        for cand_name, rows in candidates.items():
            if cand_name == ref_name:
                continue
            pairs = [compare(r, c) for r, c in zip(refs[ref_name], rows)]
            report["results"][f"{cand_name} vs {ref_name}"] = summary(pairs)
    print("| candidate | reference | mean KL (nats) | max \\|diff\\| / max \\|ref\\| | top-1 agreement |")
    print("|---|---|---|---|---|")
    for key, s in report["results"].items():
        cand, ref = key.split(" vs ")
        print(f"| {cand} | {ref} | {s['mean_kl']:.2e} | {s['max_rel']:.2e} | {s['top1_agreement']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
