"""`deepinfer convert` (docs/CONVERT.md): convert then load equals quantize-at-load bit for bit,
lossless precisions round-trip exactly, per-rank shards hold exactly their rank's experts, and
bad input (unknown precision, existing output, npu, corrupted / truncated output, a full disk)
gives one clear error and nothing that looks finished. Safetensors files are read here with
struct + json (not our reader), values compared as raw bytes."""
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import DATA, ROOT, load_golden


def convert(run_cli, src, out, *flags, check=True):
    return run_cli("convert", "--input_dir", src, "--output_dir", out, *flags, check=check)


def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)} and the data section offset of one file."""
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}, 8 + n, header


def read_dir(path):
    out = {}
    for f in sorted(pathlib.Path(path).glob("*.safetensors")):
        out.update(read_safetensors(f)[0])
    return out


def last_logits(run_cli, model, tmp_path, tag, *flags):
    case = load_golden("tiny-qwen3")["cases"][-1]
    path = tmp_path / f"{tag}.npy"
    run_cli("generate", "--model", model, "--prompt-ids", ",".join(map(str, case["prompt_ids"])),
            "--max-new-tokens", 1, "--dump-logits", path, "--threads", 2, *flags, check=True)
    return np.load(path)


@pytest.mark.parametrize("precision", ["q8_0", "q4_0"])
def test_convert_then_load_equals_quantize_at_load_bit_for_bit(run_cli, tmp_path, precision):
    out = tmp_path / precision
    convert(run_cli, DATA / "tiny-qwen3", out, "--precision", precision)
    at_load = last_logits(run_cli, DATA / "tiny-qwen3", tmp_path, "at-load", "--quantization", precision)
    converted = last_logits(run_cli, out, tmp_path, "converted")
    assert np.array_equal(at_load, converted)
    tensors, data_offset, header = read_safetensors(next(out.glob("model-*.safetensors")))
    assert data_offset % 64 == 0
    blocks = {k: v for k, v in header.items() if v["dtype"] == precision.upper()}
    assert len(blocks) == 14  # the projections; embeddings, lm_head and norms keep f32
    for name, v in blocks.items():
        assert v["data_offsets"][0] % 64 == 0, name
        rows, cols = v["shape"]  # logical shape; 34 (q8_0) / 18 (q4_0) bytes per 32 weights
        assert v["data_offsets"][1] - v["data_offsets"][0] == rows * cols // 32 * (34 if precision == "q8_0" else 18)
    manifest = json.loads((out / "deepinfer_manifest.json").read_text())
    assert manifest["format_version"] == 1 and manifest["precision"] == precision
    assert set(manifest["files"]) == {p.name for p in out.iterdir()} - {"deepinfer_manifest.json"}


@pytest.mark.parametrize("model, precision, at_load", [
    ("tiny-deepseek-v3-fp8", "bf16", ["--dtype", "bf16"]),  # FP8 blocks dequantized as the loader does
    ("tiny-deepseek-v3-fp8", "q8_0", ["--quantization", "q8_0"]),  # quantized from the exact FP8 values
    ("tiny-qwen3-moe", "q8_0", ["--quantization", "q8_0"]),  # experts kept by the policy
    ("tiny-deepseek-v2-lite", "fp16", ["--dtype", "f16"]),
    ("tiny-qwen3", "q4_k_m", ["--quantization", "q4_k_m"]),  # llama.cpp's mix, with its fallbacks
    ("tiny-qwen3-moe", "int4", ["--quantization", "int4"]),
    ("tiny-llama", "q6_k", ["--quantization", "q6_k"]),
    ("tiny-minimax-m2", "q8_0", ["--quantization", "q8_0"]),  # Mixtral-named experts (w1/w3/w2)
])
def test_other_families_convert_then_load_equal_the_load_setting(run_cli, tmp_path, model, precision, at_load):
    out = tmp_path / "o"
    convert(run_cli, DATA / model, out, "--precision", precision)
    assert np.array_equal(last_logits(run_cli, DATA / model, tmp_path, "ref", *at_load),
                          last_logits(run_cli, out, tmp_path, "converted"))
    assert not any("F8_E4M3" == v[0] for v in read_dir(out).values())


def info_bytes(run_cli, model):
    out = json.loads(run_cli("info", "--model", model, "--json", "--log-level", "error", check=True).stdout)
    return out["loaded_weight_bytes_by_dtype"]


@pytest.mark.parametrize("model, precision, flags", [
    ("tiny-qwen3", "w8a8", []),
    ("tiny-qwen3", "fp8", []),
    ("tiny-qwen3-moe", "w8a8", []),  # per-expert int8 matrices, each with its row scales
    ("tiny-qwen3-moe", "w8a8", ["--enable_moe_optimization"]),  # stacks + stacked row scales
    ("tiny-qwen3-moe", "fp8", []),  # experts as FP8 matrices with their block scales
    ("tiny-deepseek-v3-fp8", "w8a8", []),  # quantized from the exact FP8 values
    ("tiny-deepseek-v3", "fp8", []),  # MLA: kv_b stays as stored (read by element)
    ("tiny-minimax-m2", "fp8", []),  # experts.{e}.w1.weight_scale_inv, as MiniMax-M2 ships FP8
])
def test_scaled_precisions_convert_then_load_equal_quantize_at_load(run_cli, tmp_path, model, precision, flags):
    out = tmp_path / "o"
    convert(run_cli, DATA / model, out, "--precision", precision, *flags)
    assert np.array_equal(last_logits(run_cli, DATA / model, tmp_path, "ref", "--quantization", precision),
                          last_logits(run_cli, out, tmp_path, "converted"))
    tensors = read_dir(out)
    scaled = 0
    for name, (dtype, shape, raw) in tensors.items():
        if dtype == "I8":  # SGLang's layout: weight_scale [rows, 1] (stacks: [E, rows, 1])
            scale = tensors[(name + "_scale")]
            assert scale[:2] == ("F32", shape[:-1] + [1]), name
            scaled += 1
        elif dtype == "F8_E4M3":  # DeepSeek-V3's: weight_scale_inv per 128 x 128 block
            scale = tensors[name + "_scale_inv"]
            assert scale[:2] == ("F32", [-(-shape[0] // 128), -(-shape[1] // 128)]), name
            scaled += 1
    assert scaled > 0
    assert ("gate_up_proj" in " ".join(tensors)) == bool(flags)
    config = json.loads((out / "config.json").read_text())["quantization_config"]
    assert config["quant_method"] == {"w8a8": "w8a8_int8", "fp8": "fp8"}[precision]
    # Loaded as stored: int8 (FP8) bytes plus their f32 scales, nothing widened.
    kept = {"w8a8": ("I8", "i8"), "fp8": ("F8_E4M3", "f8_e4m3")}[precision]
    want = sum(len(raw) + len(tensors[name + ("_scale" if kept[0] == "I8" else "_scale_inv")][2])
               for name, (dtype, _, raw) in tensors.items() if dtype == kept[0])
    assert info_bytes(run_cli, out)[kept[1]] == want


def test_fp8_checkpoint_converted_to_fp8_keeps_its_bytes(run_cli, tmp_path):
    src = DATA / "tiny-deepseek-v3-fp8"
    out = tmp_path / "o"
    convert(run_cli, src, out, "--precision", "fp8", "--enable_moe_optimization")
    source, converted = read_dir(src), read_dir(out)
    kept = [name for name, (dtype, _, _) in source.items()
            if dtype == "F8_E4M3" and "kv_b_proj" not in name and not name.startswith("model.layers.3.")]
    assert kept
    for name in kept:  # the FP8 bytes and their 32 x 32 block scales, unchanged
        assert converted[name] == source[name], name
        assert converted[name + "_scale_inv"] == source[name + "_scale_inv"], name
    config = json.loads((out / "config.json").read_text())["quantization_config"]
    assert config["weight_block_size"] == [32, 32]
    assert np.array_equal(last_logits(run_cli, src, tmp_path, "ref"), last_logits(run_cli, out, tmp_path, "converted"))


def test_w8a8_ep_shards_hold_each_ranks_experts_with_their_scales(run_cli, tmp_path):
    out = tmp_path / "ep"
    convert(run_cli, DATA / "tiny-qwen3-moe", out, "--precision", "w8a8", "--ep-size", 2,
            "--enable_moe_optimization")
    for rank in range(2):
        tensors = read_dir(out / f"rank{rank}")
        manifest = json.loads((out / f"rank{rank}" / "deepinfer_manifest.json").read_text())
        slices = manifest["sliced_tensors"]
        for name in ("model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.experts.down_proj"):
            assert tensors[name][0] == "I8" and tensors[name][1][0] == 4, name  # 4 of 8 experts
            assert tensors[name + "_scale"][1] == tensors[name][1][:-1] + [1]
            # The scales are the same rows of the layer as their weights.
            assert slices[name + "_scale"] == slices[name] == {"dim": 0, "begin": 4 * rank, "end": 4 * rank + 4, "full": 8}


def bf16_bits(f32_bytes):
    """Round-to-nearest-even f32 -> bf16, as torch does (no NaNs in these weights)."""
    words = np.frombuffer(f32_bytes, dtype=np.uint32).astype(np.uint64)
    return ((words + 0x7FFF + ((words >> 16) & 1)) >> 16).astype(np.uint16).tobytes()


def test_lossless_precisions_round_trip_exactly(run_cli, tmp_path):
    src = read_dir(DATA / "tiny-qwen2")
    convert(run_cli, DATA / "tiny-qwen2", tmp_path / "f32", "--precision", "fp32")
    assert read_dir(tmp_path / "f32") == src  # f32 -> fp32: the same bytes
    convert(run_cli, DATA / "tiny-qwen2", tmp_path / "bf16", "--precision", "bf16")
    bf16 = read_dir(tmp_path / "bf16")
    for name, (dtype, shape, raw) in src.items():
        got = bf16[name]
        if len(shape) == 1:  # norms and biases stay as stored (read as f32 anyway)
            assert got == (dtype, shape, raw), name
        else:
            assert got == ("BF16", shape, bf16_bits(raw)), name
    convert(run_cli, tmp_path / "bf16", tmp_path / "bf16-again", "--precision", "bf16")
    assert read_dir(tmp_path / "bf16-again") == bf16  # bf16 -> bf16: the same bytes


def test_pytorch_bin_converts_like_its_safetensors(run_cli, tmp_path):
    convert(run_cli, DATA / "convert" / "tiny-qwen2-bin", tmp_path / "from-bin", "--precision", "fp32")
    assert read_dir(tmp_path / "from-bin") == read_dir(DATA / "tiny-qwen2")


def test_malicious_pickle_is_refused_without_running(run_cli, tmp_path):
    sentinel = pathlib.Path("/tmp/deepinfer-malicious-pickle-ran")
    sentinel.unlink(missing_ok=True)
    src = tmp_path / "evil"
    src.mkdir()
    shutil.copy(DATA / "tiny-qwen2" / "config.json", src)
    shutil.copy(DATA / "convert" / "malicious.bin", src / "pytorch_model.bin")
    proc = convert(run_cli, src, tmp_path / "out", "--precision", "fp32", check=False)
    assert proc.returncode != 0
    assert "refused global 'os.system'" in proc.stderr
    assert not sentinel.exists()
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stacked", [False, True])
def test_ep_shards_hold_exactly_each_ranks_experts(run_cli, tmp_path, stacked):
    out = tmp_path / "ep"
    flags = ["--enable_moe_optimization"] if stacked else []
    convert(run_cli, DATA / "tiny-qwen3-moe", out, "--precision", "fp32", "--ep-size", 2, *flags)
    src = read_dir(DATA / "tiny-qwen3-moe")
    top = json.loads((out / "deepinfer_manifest.json").read_text())
    assert top["ranks"] == ["rank0", "rank1"] and top["ep_size"] == 2
    for rank in range(2):
        shard = read_dir(out / f"rank{rank}")
        manifest = json.loads((out / f"rank{rank}" / "deepinfer_manifest.json").read_text())
        assert manifest["rank"] == rank
        local = range(4 * rank, 4 * rank + 4)  # 8 experts over 2 ranks
        for name, value in src.items():
            parts = name.split(".")
            if ".mlp.experts." not in name:
                assert shard[name] == value, name  # attention, norms, dense layer: replicated
            elif not stacked:
                assert (name in shard) == (int(parts[5]) in local), name
                if name in shard:
                    assert shard[name] == value, name
        if stacked:
            for layer in (0, 2):
                prefix = f"model.layers.{layer}.mlp.experts"
                gate_up = b"".join(src[f"{prefix}.{e}.gate_proj.weight"][2] + src[f"{prefix}.{e}.up_proj.weight"][2]
                                   for e in local)
                down = b"".join(src[f"{prefix}.{e}.down_proj.weight"][2] for e in local)
                assert shard[f"{prefix}.gate_up_proj"] == ("F32", [4, 64, 64], gate_up)
                assert shard[f"{prefix}.down_proj"] == ("F32", [4, 64, 32], down)
                assert manifest["sliced_tensors"][f"{prefix}.gate_up_proj"] == {
                    "dim": 0, "begin": 4 * rank, "end": 4 * rank + 4, "full": 8}
    proc = run_cli("generate", "--model", out, "--prompt-ids", "1,2,3", "--max-new-tokens", 1)
    assert proc.returncode != 0 and "2 per-rank shards" in proc.stderr and "mpirun -n 2" in proc.stderr


def test_moe_optimization_single_rank_loads_and_equals_the_source(run_cli, tmp_path):
    out = tmp_path / "stacked"
    convert(run_cli, DATA / "tiny-qwen3-moe", out, "--precision", "fp32", "--enable-moe-optimization")
    assert all("experts." not in k or k.endswith(("gate_up_proj", "down_proj")) for k in read_dir(out))
    ref = last_logits(run_cli, DATA / "tiny-qwen3-moe", tmp_path, "src")
    got = last_logits(run_cli, out, tmp_path, "stacked")
    assert np.array_equal(ref, got)


def one_error_line(proc):
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("precision, needle", [
    ("q3_x", "unknown precision (expected one of fp32, fp16, bf16, q8_0"),
    ("w4a8", "not available yet"),
])
def test_bad_precision_is_one_clear_line(run_cli, tmp_path, precision, needle):
    line = one_error_line(convert(run_cli, DATA / "tiny-qwen3", tmp_path / "o", "--precision", precision, check=False))
    assert f"--precision {precision}" in line and needle in line
    assert not (tmp_path / "o").exists()


def test_npu_is_refused_with_a_pointer_to_the_recipe_converter(run_cli, tmp_path):
    line = one_error_line(convert(run_cli, DATA / "tiny-qwen3", tmp_path / "o", "--precision", "fp16",
                                  "--target_platform", "npu", check=False))
    assert "deepinfer runs on CPUs" in line and "cann-recipes-infer" in line


def test_existing_output_needs_force(run_cli, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep").write_text("x")
    line = one_error_line(convert(run_cli, DATA / "tiny-qwen3", out, "--precision", "bf16", check=False))
    assert "already exists; pass --force" in line
    assert (out / "keep").exists()
    convert(run_cli, DATA / "tiny-qwen3", out, "--precision", "bf16", "--force")
    assert not (out / "keep").exists() and (out / "deepinfer_manifest.json").exists()


def test_corrupted_and_truncated_output_is_refused(run_cli, deepinfer_bin, tmp_path):
    out = tmp_path / "o"
    convert(run_cli, DATA / "tiny-qwen3", out, "--precision", "q8_0")
    assert run_cli("convert", "--verify", out, check=True).returncode == 0
    shard = next(out.glob("model-*.safetensors"))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # same size, one bit pattern changed: only the hash sees it
    shard.write_bytes(bytes(data))
    line = one_error_line(run_cli("convert", "--verify", out))
    assert shard.name in line and "sha256" in line and "does not match" in line
    load = [deepinfer_bin, "generate", "--model", out, "--prompt-ids", "1,2", "-n", "1", "--log-level", "error"]
    assert subprocess.run(load, capture_output=True).returncode == 0  # sizes match: loads
    proc = subprocess.run(load, capture_output=True, text=True,
                          env=dict(os.environ, DEEPINFER_VERIFY_CHECKPOINT="1"))
    assert "does not match" in one_error_line(proc)
    shard.write_bytes(bytes(data[:-100]))  # truncated: every load refuses it (sizes are checked)
    line = one_error_line(run_cli("generate", "--model", out, "--prompt-ids", "1,2", "-n", 1, "--log-level", "error"))
    assert shard.name in line and "truncated or modified" in line
    shard.write_bytes(bytes(data))
    (out / "deepinfer_manifest.json").unlink()  # an incomplete copy: shards without a manifest
    line = one_error_line(run_cli("generate", "--model", out, "--prompt-ids", "1,2", "-n", 1, "--log-level", "error"))
    assert "no deepinfer_manifest.json" in line


def test_full_disk_is_a_clear_error_and_leaves_nothing_finished(deepinfer_bin, tmp_path):
    # A 200 KiB file-size limit (ulimit -f): the first shard cannot be written.
    out = tmp_path / "o"
    proc = subprocess.run(["prlimit", "--fsize=204800", deepinfer_bin, "convert", "--input_dir",
                           DATA / "tiny-qwen3", "--output_dir", out, "--precision", "fp32"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    line = [l for l in proc.stderr.splitlines() if l.strip()][-1]
    assert "failed, nothing written" in line and "File too large" in line
    assert list(tmp_path.iterdir()) == []


def test_convert_model_py_is_the_articles_spelling(tmp_path, deepinfer_bin):
    out = tmp_path / "o"
    env = dict(os.environ, DEEPINFER_BIN=deepinfer_bin)
    proc = subprocess.run([sys.executable, ROOT / "convert_model.py", "--input_dir", DATA / "tiny-qwen3",
                           "--output_dir", out, "--target_platform", "cpu", "--precision", "fp16"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "config.json").read_text())["dtype"] == "float16"
    assert (out / "tokenizer.json").read_bytes() == (DATA / "tiny-qwen3" / "tokenizer.json").read_bytes()


def test_fp16_overflows_are_clamped_and_counted(run_cli, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(DATA / "tiny-qwen2", src)
    path = src / "model.safetensors"
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    name = "model.layers.0.mlp.down_proj.weight"
    begin = 8 + n + json.loads(data[8:8 + n])[name]["data_offsets"][0]
    data[begin:begin + 12] = struct.pack("<3f", 1e6, -7e4, 65504.0)  # two overflow, one fits
    path.write_bytes(bytes(data))
    proc = convert(run_cli, src, tmp_path / "o", "--precision", "fp16")
    assert "fp16 overflows clamped: 2" in proc.stdout
    _, shape, raw = read_dir(tmp_path / "o")[name]
    assert struct.unpack("<3H", raw[:6]) == (0x7BFF, 0xFBFF, 0x7BFF)
    assert json.loads((tmp_path / "o" / "deepinfer_manifest.json").read_text())["fp16_overflows"] == 2


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed (openmpi-bin)")
@pytest.mark.parametrize("stacked, precision", [(False, "fp32"), (True, "fp32"), (True, "w8a8")])
def test_each_mpi_rank_maps_its_own_shard_and_computes_what_the_source_gives(deepinfer_bin, tmp_path, stacked,
                                                                             precision):
    from test_mpi_ep import mpirun, ok
    out = tmp_path / "ep"
    flags = ["--enable_moe_optimization"] if stacked else []
    subprocess.run([deepinfer_bin, "convert", "--input_dir", DATA / "tiny-qwen3-moe", "--output_dir", out,
                    "--precision", precision, "--ep-size", "2", *flags], check=True, capture_output=True)
    case = load_golden("tiny-qwen3-moe")["cases"][-1]
    ids = ",".join(map(str, case["prompt_ids"]))
    dumps = {}
    # w8a8: each rank quantizes its experts at load; the converted shards hold those bytes.
    at_load = [] if precision == "fp32" else ["--quantization", precision]
    for tag, model, extra in (("source", DATA / "tiny-qwen3-moe", at_load), ("converted", out, [])):
        dumps[tag] = tmp_path / f"{tag}.npy"
        ok(mpirun(2, deepinfer_bin, "generate", "-m", model, "--prompt-ids", ids, "-n", 4, "--ignore-eos",
                  "--dump-logits", dumps[tag], "--threads", 1, "--expert-parallel-size", 2,
                  "--log-level", "warn", *extra))
    assert np.array_equal(np.load(dumps["source"]), np.load(dumps["converted"]))


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed (openmpi-bin)")
def test_fp8_tp_shards_load_and_equal_quantize_at_load(deepinfer_bin, tmp_path):
    """--precision fp8 --tp-size 2 of an FP8 checkpoint: each rank's shard holds its parts in FP8
    (a part re-quantized by itself, with its own block scales, in the checkpoint's own block size)
    and loads; the logits are bitwise those of --quantization fp8 -tp 2 on the source."""
    from test_mpi_ep import mpirun, ok
    src, out = DATA / "tiny-deepseek-v3-fp8", tmp_path / "fp8tp"
    subprocess.run([deepinfer_bin, "convert", "--input_dir", src, "--output_dir", out, "--precision", "fp8",
                    "--tp-size", "2"], check=True, capture_output=True)
    shard = read_dir(out / "rank0")
    name = "model.layers.0.self_attn.q_b_proj.weight"
    assert shard[name][0] == "F8_E4M3" and shard[name + "_scale_inv"][0] == "F32"
    sliced = json.loads((out / "rank0" / "deepinfer_manifest.json").read_text())["sliced_tensors"]
    assert name in sliced
    block = json.loads((src / "config.json").read_text())["quantization_config"]["weight_block_size"]
    assert json.loads((out / "config.json").read_text())["quantization_config"]["weight_block_size"] == block
    rows, cols = shard[name][1]
    assert shard[name + "_scale_inv"][1] == [-(-rows // block[0]), -(-cols // block[1])]
    dumps = {}
    for tag, model, extra in (("source", src, ["--quantization", "fp8"]), ("converted", out, [])):
        dumps[tag] = tmp_path / f"{tag}.npy"
        ok(mpirun(2, deepinfer_bin, "generate", "-m", model, "--prompt-ids", "1,2,3", "-n", 4, "--ignore-eos",
                  "--dump-logits", dumps[tag], "--threads", 1, "-tp", 2, "--log-level", "warn", *extra))
    assert np.array_equal(np.load(dumps["source"]), np.load(dumps["converted"]))


# Tensor-parallel shards (docs/DISTRIBUTED.md, "Tensor parallelism"): (model, convert flags,
# the layout of the run they are for).
TP_LAYOUTS = [
    ("tiny-qwen2", ("--tp-size", 2), ("-tp", 2)),  # tied embedding, q/k/v biases, 1 KV head each
    ("tiny-deepseek-v3", ("--tp-size", 2), ("-tp", 2)),  # MLA heads, every expert split (moe_tp 2)
    ("tiny-deepseek-v3", ("--tp-size", 2, "--ep-size", 2),
     ("-tp", 2, "--enable-expert-parallel")),  # ep 2 x tp 2: whole experts, attention split
]


def tp_part(config, name, shape, tp, ep, rank):
    """What rank `rank` of a tp x ep run holds of source tensor `name`: None (all of it), "none"
    (another rank's expert, or not loaded), or (dim, begin, end). Written from the layout as DISTRIBUTED.md
    states it, not from the loader."""
    world = max(tp, ep)
    moe_tp = world // ep

    def even(dim, parts, index):
        each = shape[dim] // parts
        return (dim, index * each, (index + 1) * each)

    parts = name.split(".")
    if name.startswith("model.layers.") and int(parts[2]) >= config["num_hidden_layers"]:
        return "none"  # DeepSeek-V3's multi-token-prediction layer: not loaded, not written
    if ".mlp.experts." in name or ".shared_experts." in name:
        if ".mlp.experts." in name:
            per = config["n_routed_experts"] // ep
            if not rank // moe_tp * per <= int(parts[5]) < (rank // moe_tp + 1) * per:
                return "none"
        if moe_tp == 1:
            return None
        return even(1 if "down_proj" in name else 0, moe_tp, rank % moe_tp)
    t = rank % tp
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        per = -(-shape[0] // tp)
        return (0, t * per, min(shape[0], (t + 1) * per))
    if any(p in name for p in ("q_proj.", "k_proj.", "v_proj.", "q_b_proj.", "kv_b_proj.",
                               "mlp.gate_proj.", "mlp.up_proj.")):
        return even(0, tp, t)  # column parallel: heads / intermediate rows (and their bias)
    if "o_proj." in name or "mlp.down_proj." in name:
        return even(1, tp, t)  # row parallel: input columns
    return None  # norms, MLA's down projections, the router: replicated


def tp_slice(raw, shape, part):
    """Elements [begin, end) along dim of an F32 tensor's raw bytes (as 4-byte words: bits kept)."""
    dim, begin, end = part
    return np.frombuffer(raw, dtype="<u4").reshape(shape).take(range(begin, end), axis=dim).tobytes()


@pytest.mark.parametrize("case", TP_LAYOUTS, ids=lambda c: c[0] + "".join(map(str, c[1])))
@pytest.mark.parametrize("stacked", [False, True])
def test_tp_shards_hold_exactly_the_slices_each_rank_loads(run_cli, tmp_path, case, stacked):
    model, flags, _ = case
    if stacked and "moe" not in model and "deepseek" not in model:
        pytest.skip("no experts to stack")
    tp = flags[flags.index("--tp-size") + 1]
    ep = flags[flags.index("--ep-size") + 1] if "--ep-size" in flags else 1
    out = tmp_path / "tp"
    convert(run_cli, DATA / model, out, "--precision", "fp32", *flags,
            *(["--enable_moe_optimization"] if stacked else []))
    config = json.loads((DATA / model / "config.json").read_text())
    src = read_dir(DATA / model)
    top = json.loads((out / "deepinfer_manifest.json").read_text())
    assert top["ranks"] == ["rank0", "rank1"] and (top["tp_size"], top["ep_size"]) == (tp, ep)
    for rank in range(2):
        shard = read_dir(out / f"rank{rank}")
        sliced = json.loads((out / f"rank{rank}" / "deepinfer_manifest.json").read_text())["sliced_tensors"]
        expected = {}
        stacks = {}
        for name, (dtype, shape, raw) in src.items():
            part = tp_part(config, name, shape, tp, ep, rank)
            if part == "none":
                continue
            if stacked and ".mlp.experts." in name and max(tp, ep) // ep == 1:
                # Whole experts, one run per rank: fused [E/ep, 2I, H] / [E/ep, H, I] stacks.
                prefix = name.rsplit(".", 3)[0]
                stacks.setdefault(prefix, []).append(name)
                continue
            value = raw if part is None else tp_slice(raw, shape, part)
            new_shape = list(shape)
            if part is not None:
                new_shape[part[0]] = part[2] - part[1]
                assert sliced.pop(name) == {"dim": part[0], "begin": part[1], "end": part[2],
                                            "full": shape[part[0]]}, name
            expected[name] = (dtype, new_shape, value)
        for prefix, names in stacks.items():
            experts = sorted({int(n.split(".")[5]) for n in names})
            gate_up = b"".join(src[f"{prefix}.{e}.gate_proj.weight"][2] + src[f"{prefix}.{e}.up_proj.weight"][2]
                               for e in experts)
            down = b"".join(src[f"{prefix}.{e}.down_proj.weight"][2] for e in experts)
            i, h = src[f"{prefix}.0.gate_proj.weight"][1]
            expected[f"{prefix}.gate_up_proj"] = ("F32", [len(experts), 2 * i, h], gate_up)
            expected[f"{prefix}.down_proj"] = ("F32", [len(experts), h, i], down)
            for tensor in ("gate_up_proj", "down_proj"):
                assert sliced.pop(f"{prefix}.{tensor}") == {
                    "dim": 0, "begin": experts[0], "end": experts[-1] + 1,
                    "full": config["n_routed_experts"]}
        assert sliced == {}, f"rank {rank}: sliced but not expected: {sorted(sliced)}"
        assert sorted(shard) == sorted(expected), f"rank {rank}"
        for name in expected:
            assert shard[name] == expected[name], f"rank {rank}: {name}"


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed (openmpi-bin)")
@pytest.mark.parametrize("case", TP_LAYOUTS, ids=lambda c: c[0] + "".join(map(str, c[1])))
def test_tp_shard_runs_give_the_unconverted_tp_runs_logits_bit_for_bit(deepinfer_bin, tmp_path, case):
    from test_mpi_ep import mpirun, ok
    model, flags, layout = case
    out = tmp_path / "tp"
    subprocess.run([deepinfer_bin, "convert", "--input_dir", DATA / model, "--output_dir", out,
                    "--precision", "fp32", *map(str, flags)], check=True, capture_output=True)
    ids = ",".join(map(str, load_golden(model)["cases"][-1]["prompt_ids"]))
    dumps = {}
    for tag, path in (("source", DATA / model), ("converted", out)):
        dumps[tag] = tmp_path / f"{tag}.npy"
        proc = ok(mpirun(2, deepinfer_bin, "generate", "-m", path, "--prompt-ids", ids, "-n", 4,
                         "--ignore-eos", "--dump-logits", dumps[tag], "--threads", 1, *layout,
                         "--log-level", "info"))
        if tag == "converted":  # each rank mapped its own shard
            for rank in (0, 1):
                assert f"tp/rank{rank}" in proc.stderr, proc.stderr
    assert np.array_equal(np.load(dumps["source"]), np.load(dumps["converted"]))
    if model == "tiny-deepseek-v3" and layout == ("-tp", 2):
        # Shards of tp 2 (each expert split) under ep 2 x tp 2: refused up front, saying how.
        proc = mpirun(2, deepinfer_bin, "generate", "-m", out, "--prompt-ids", ids, "-n", 1,
                      "--threads", 1, "-tp", 2, "--enable-expert-parallel", "--log-level", "warn")
        assert proc.returncode != 0
        assert "converted for --tp-size 2 --ep-size 1" in proc.stderr, proc.stderr
        assert "mpirun -n 2 -tp 2 (docs/DISTRIBUTED.md)" in proc.stderr, proc.stderr


def test_leftovers_of_an_interrupted_run_never_look_finished_and_are_cleaned(run_cli, tmp_path):
    dead = next(p for p in range(4_000_000, 4_100_000) if not pathlib.Path(f"/proc/{p}").exists())
    leftover = tmp_path / f"o.tmp-{dead}"  # what a killed run leaves: shards, no rename
    convert(run_cli, DATA / "tiny-qwen3", tmp_path / "first", "--precision", "q8_0")
    shutil.copytree(tmp_path / "first", leftover)
    (leftover / "deepinfer_manifest.json").unlink()  # killed before the manifest was written
    line = one_error_line(run_cli("generate", "--model", leftover, "--prompt-ids", "1,2", "-n", 1,
                                  "--log-level", "error"))
    assert "no deepinfer_manifest.json" in line
    convert(run_cli, DATA / "tiny-qwen3", tmp_path / "o", "--precision", "q8_0")
    assert not leftover.exists() and (tmp_path / "o" / "deepinfer_manifest.json").exists()
