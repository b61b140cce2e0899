"""A tiny Qwen2 checkpoint whose projections are whole k-quant super-blocks (hidden 256,
intermediate 512), written with numpy alone from a counter-based generator, so the fidelity
test (test_quantization_fidelity.py) and the script that made its llama.cpp goldens
(tools/make_kl_goldens.py) build the same bytes without committing them or needing torch.

Weights: splitmix64 of seed + (i + 1) * 0x9E3779B97F4A7C15 per element i, the four 16-bit
chunks summed (an Irwin-Hall(4) variate: mean 2, variance 1/3), centred and scaled to the
tensor's standard deviation, stored as bf16 (truncated), as a real checkpoint is; norms 1.
The tokenizer is tiny-qwen2's (vocab 512). Random weights: the numbers measure rounding, not
quality.
"""

import json
import shutil
import struct
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data"
NAME = "tiny-qwen2-kq"
HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, VOCAB = 256, 512, 4, 4, 2, 512
HEAD_DIM = HIDDEN // HEADS
SEED = 20261202
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _values(seed: int, n: int, std: float) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + np.arange(1, n + 1, dtype=np.uint64) * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    chunks = sum(((z >> np.uint64(16 * k)) & np.uint64(0xFFFF)).astype(np.float64)
                 for k in range(4))
    return ((chunks / 65536.0 - 2.0) * (std / np.sqrt(1.0 / 3.0))).astype(np.float32)


def tensors() -> list:
    """(name, shape, std or None for ones) in checkpoint order."""
    out = [("model.embed_tokens.weight", (VOCAB, HIDDEN), 0.08)]
    kv = KV_HEADS * HEAD_DIM
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (HIDDEN,), None),
            (p + "self_attn.q_proj.weight", (HIDDEN, HIDDEN), 1.0 / HIDDEN ** 0.5),
            (p + "self_attn.q_proj.bias", (HIDDEN,), 0.02),
            (p + "self_attn.k_proj.weight", (kv, HIDDEN), 1.0 / HIDDEN ** 0.5),
            (p + "self_attn.k_proj.bias", (kv,), 0.02),
            (p + "self_attn.v_proj.weight", (kv, HIDDEN), 1.0 / HIDDEN ** 0.5),
            (p + "self_attn.v_proj.bias", (kv,), 0.02),
            (p + "self_attn.o_proj.weight", (HIDDEN, HIDDEN), 1.0 / HIDDEN ** 0.5),
            (p + "post_attention_layernorm.weight", (HIDDEN,), None),
            (p + "mlp.gate_proj.weight", (FFN, HIDDEN), 1.0 / HIDDEN ** 0.5),
            (p + "mlp.up_proj.weight", (FFN, HIDDEN), 1.0 / HIDDEN ** 0.5),
            (p + "mlp.down_proj.weight", (HIDDEN, FFN), 1.0 / FFN ** 0.5),
        ]
    out.append(("model.norm.weight", (HIDDEN,), None))
    return out


def config() -> dict:
    base = json.loads((DATA / "tiny-qwen2" / "config.json").read_text())
    base.update({
        "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "layer_types": ["full_attention"] * LAYERS, "max_position_embeddings": 512,
        "dtype": "bfloat16",
    })
    return base


def write(out: Path) -> Path:
    """Writes the checkpoint directory `out` (config, tokenizer, bf16 model.safetensors)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config(), indent=2) + "\n")
    for name in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(DATA / "tiny-qwen2" / name, out / name)
    header, blobs, offset = {}, [], 0
    for i, (name, shape, std) in enumerate(tensors()):
        n = int(np.prod(shape))
        f = np.ones(n, np.float32) if std is None else _values(SEED + 104729 * i, n, std)
        blob = (f.view(np.uint32) >> np.uint32(16)).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(out / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    return out
