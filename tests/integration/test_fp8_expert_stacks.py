"""--quantization fp8 of a checkpoint whose routed experts are transformers 5's fused 3-D stacks
(docs/QUANTIZATION.md): tiny-qwen3-moe rewritten here with each MoE layer's experts as
<prefix>.gate_up_proj [E, 2I, H] and <prefix>.down_proj [E, H, I] (the same values, written with
struct + json + numpy, not our writer). Quantized at load, it must give bitwise the logits of the
per-expert original quantized at load, with the FP8 bytes plus scales counted by `info`;
`deepinfer convert --precision fp8` of it then load must equal quantize-at-load bit for bit; and
expert parallelism (and EPLB moving FP8 experts with their scales) must give what one process
gives."""
import json
import re
import struct

import numpy as np
import pytest

from conftest import DATA, load_golden
from test_convert import convert, read_dir, read_safetensors
from test_mpi_ep import MPIRUN, mpirun, ok, plain, rel_diff

MODEL = "tiny-qwen3-moe"
EXPERT = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$")


def write_safetensors(path, tensors):
    """{name: (dtype, shape, raw bytes)} as one safetensors file (header padded to 8 bytes)."""
    header, offset = {}, 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, raw in tensors.values():
            f.write(raw)


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    """tiny-qwen3-moe with every MoE layer's experts as fused f32 stacks."""
    src = DATA / MODEL
    out = tmp_path_factory.mktemp("fused") / f"{MODEL}-fused"
    out.mkdir()
    for f in src.iterdir():
        if f.suffix != ".safetensors":
            (out / f.name).write_bytes(f.read_bytes())
    tensors, _, _ = read_safetensors(src / "model.safetensors")
    experts, kept = {}, {}
    for name, value in tensors.items():
        m = EXPERT.match(name)
        if m:
            experts.setdefault(m[1], {})[(int(m[2]), m[3])] = value
        else:
            kept[name] = value
    assert experts, "tiny-qwen3-moe stores its experts one matrix each"
    matrix = lambda v: np.frombuffer(v[2], dtype="<f4").reshape(v[1])
    for prefix, parts in experts.items():
        count = 1 + max(e for e, _ in parts)
        assert all(parts[(e, "gate")][0] == "F32" for e in range(count))
        gate_up = np.stack([np.concatenate([matrix(parts[(e, "gate")]), matrix(parts[(e, "up")])])
                            for e in range(count)])
        down = np.stack([matrix(parts[(e, "down")]) for e in range(count)])
        kept[f"{prefix}.gate_up_proj"] = ("F32", list(gate_up.shape), gate_up.tobytes())
        kept[f"{prefix}.down_proj"] = ("F32", list(down.shape), down.tobytes())
    write_safetensors(out / "model.safetensors", kept)
    return out


def prompt():
    return ",".join(map(str, load_golden(MODEL)["cases"][-1]["prompt_ids"]))


def generate(run_cli, model, dump, *flags):
    proc = run_cli("generate", "--model", model, "--prompt-ids", prompt(), "-n", 4, "--ignore-eos",
                   "--json", "--dump-logits", dump, "--threads", 2, "--log-level", "info", *flags,
                   check=True)
    return json.loads(proc.stdout)["output_ids"], np.load(dump), proc.stderr


def info_bytes(run_cli, model, *flags):
    out = run_cli("info", "--model", model, "--json", "--log-level", "error", *flags, check=True)
    return json.loads(out.stdout)["loaded_weight_bytes_by_dtype"]


def test_fused_stacks_quantize_to_the_per_expert_fp8_bits(run_cli, fused, tmp_path):
    ref_ids, ref, _ = generate(run_cli, DATA / MODEL, tmp_path / "ref.npy", "--quantization", "fp8")
    ids, got, log = generate(run_cli, fused, tmp_path / "fused.npy", "--quantization", "fp8")
    assert ids == ref_ids
    assert np.array_equal(got, ref)
    assert "routed-expert" not in log, "the fused stacks were kept instead of quantized"
    # Every projection, routed experts included, in FP8 with its 128x128 block scales (f32).
    header = read_safetensors(DATA / MODEL / "model.safetensors")[2]
    shapes = [v["shape"] for n, v in header.items()
              if n.startswith("model.layers.") and n.endswith("_proj.weight") and len(v["shape"]) == 2]
    want = sum(r * c + 4 * -(-r // 128) * -(-c // 128) for r, c in shapes)
    got_bytes = info_bytes(run_cli, fused, "--quantization", "fp8")
    assert got_bytes["f8_e4m3"] == want
    assert got_bytes == info_bytes(run_cli, DATA / MODEL, "--quantization", "fp8")


def test_fused_stacks_convert_to_fp8_then_load_equal_quantize_at_load(run_cli, fused, tmp_path):
    out = tmp_path / "fp8"
    convert(run_cli, fused, out, "--precision", "fp8")
    _, at_load, _ = generate(run_cli, fused, tmp_path / "at-load.npy", "--quantization", "fp8")
    _, converted, _ = generate(run_cli, out, tmp_path / "converted.npy")
    assert np.array_equal(converted, at_load)
    # Written as the per-expert FP8 matrices the stacks were cut into, with their scales.
    tensors = read_dir(out)
    assert not any(name.endswith(("gate_up_proj", "experts.down_proj")) for name in tensors)
    experts = [name for name in tensors if EXPERT.match(name)]
    assert len(experts) == 2 * 8 * 3  # 2 MoE layers x 8 experts x gate / up / down
    for name in experts:
        assert tensors[name][0] == "F8_E4M3", name
        assert tensors[name + "_scale_inv"][:2] == ("F32", [1, 1]), name  # 32 x 64: one block
    assert info_bytes(run_cli, out) == info_bytes(run_cli, fused, "--quantization", "fp8")


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (openmpi-bin)")
def test_fused_fp8_experts_under_expert_parallelism_and_eplb(deepinfer_bin, fused, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(
        json.dumps({"prompt_ids": [5 + i, 17, 42, 99, 3 + i], "max_tokens": 12,
                    "ignore_eos": True, "logprobs": 2}) + "\n" for i in range(3)))
    args = ("generate", "-m", fused, "--prompts-file", prompts, "--threads", 1,
            "--quantization", "fp8", "--log-level", "warn")
    lines = lambda proc: [json.loads(line) for line in proc.stdout.splitlines()]
    ref = lines(ok(plain(deepinfer_bin, *args)))
    ep = lines(ok(mpirun(2, deepinfer_bin, *args, "--enable-expert-parallel")))
    values = lambda out: [v for t in out["logprobs"]
                          for v in [t["logprob"]] + [p[1] for p in t["top_logprobs"]]]
    assert len(ep) == len(ref) == 3
    for r, e in zip(ref, ep):
        assert e["output_ids"] == r["output_ids"]
        assert rel_diff(values(e), values(r)) <= 1e-5
    # A redundant slot per rank, re-placed every 2 forward calls: FP8 experts (and their block
    # scales, parts of the stack) move between ranks and the outputs stay those of one process.
    proc = ok(mpirun(2, deepinfer_bin, *args, "--enable-expert-parallel",
                     "--num-redundant-experts", 2, "--eplb-interval", 2, "--eplb-window", 2,
                     "--log-level", "info"))
    assert "re-balanced at forward call 2" in proc.stderr
    eplb = lines(proc)
    for r, e in zip(ref, eplb):
        assert e["output_ids"] == r["output_ids"]
        assert rel_diff(values(e), values(r)) <= 1e-5
