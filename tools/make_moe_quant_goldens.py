#!/usr/bin/env python3
"""GGUF goldens for block-quantized MoE expert stacks (src/model/layers/moe/expert_stack.cpp)
and --quantization on MoE models, made with gguf-py 0.19.0's gguf.quants.quantize (bit-exact
ports of ggml's quantize_row_*_ref).

    .venv-tools/bin/python tools/make_moe_quant_goldens.py

Writes tests/data/gguf-models/tiny-deepseek-v2-lite-gguf-py-<type>.gguf: the f32 GGUF of
tiny-deepseek-v2-lite (tools/make_gguf_test_models.py, llama.cpp's converter) with every
matrix that deepinfer's --quantization policy quantizes re-encoded by gguf-py: the attention
projections (attn_q, attn_kv_a_mqa, attn_output), the dense and shared-expert MLPs and the
routed expert stacks ffn_{gate,up,down}_exps (3-D, quantized along their rows), each only if
its rows are whole 32-element blocks (attn_output's 80 are not). Kept f32, as the policy keeps
them (docs/QUANTIZATION.md): token_embd, output, norms, the router ffn_gate_inp and MLA's
attn_k_b / attn_v_b (kv_b_proj, read by element). Loading the safetensors checkpoint with
--quantization <type> must then give bitwise the logits of this file, and the file itself maps
its expert stacks zero-copy.
"""
import importlib.metadata
import pathlib
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "data" / "gguf-models"
GGUF_MODELS = [("tiny-deepseek-v2-lite", [Q.Q8_0, Q.Q4_0])]

# blk.N.<kind>.weight kinds that --quantization quantizes (projections and routed experts).
QUANTIZED_KINDS = {"attn_q", "attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_output", "ffn_gate",
                   "ffn_up", "ffn_down", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp",
                   "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}


def quantized_by_policy(tensor):
    parts = tensor.name.split(".")
    if len(parts) != 4 or parts[0] != "blk" or parts[3] != "weight":
        return False
    shape = tensor.data.shape
    experts = parts[2].endswith("_exps")
    return (parts[2] in QUANTIZED_KINDS and len(shape) == (3 if experts else 2)
            and shape[-1] % 32 == 0)


def write_gguf(model, qtype):
    src = MODELS / f"{model}-f32.gguf"
    if not src.exists():
        sys.exit(f"error: {src} is missing; run tools/make_gguf_test_models.py first")
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    dst = MODELS / f"{model}-gguf-py-{qtype.name.lower()}.gguf"
    writer = gguf.GGUFWriter(dst, arch=arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment"):
            continue
        main = field.types[0]
        sub = field.types[-1] if main == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), main, sub_type=sub)
    quantized = []
    for t in reader.tensors:
        assert t.tensor_type == Q.F32, f"{src}: {t.name} is {t.tensor_type.name}, expected F32"
        data = np.array(t.data, dtype=np.float32)
        if quantized_by_policy(t):
            writer.add_tensor(t.name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
            quantized.append(t.name)
        else:
            writer.add_tensor(t.name, data)
    assert any(n.endswith("_exps.weight") for n in quantized), "no expert stack quantized"
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {dst} ({len(quantized)} of {len(reader.tensors)} tensors in {qtype.name})")


def main():
    version = importlib.metadata.version("gguf")
    if version != "0.19.0":
        sys.exit(f"error: gguf-py {version}; the goldens are made with 0.19.0 (tools/requirements.txt)")
    for model, types in GGUF_MODELS:
        for qtype in types:
            write_gguf(model, qtype)


if __name__ == "__main__":
    main()
