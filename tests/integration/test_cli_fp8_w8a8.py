"""FP8 checkpoints kept in FP8, --quantization fp8 and w8a8 through the CLI
(docs/QUANTIZATION.md)."""
import json
import shutil
import struct

import pytest

from conftest import DATA, load_golden


def safetensors_header(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(size))


def test_info_counts_fp8_bytes_plus_their_scales(run_cli):
    model = DATA / "tiny-deepseek-v3-fp8"
    out = json.loads(run_cli("info", "--model", model, "--json", "--log-level", "error",
                             check=True).stdout)
    header = safetensors_header(model / "model.safetensors")
    want = 0
    for name, t in header.items():
        # Kept: every F8_E4M3 matrix but MLA's kv_b_proj (read by element, widened) and the
        # multi-token-prediction layer 3 (skipped); with its f32 block scales.
        if name == "__metadata__" or t["dtype"] != "F8_E4M3":
            continue
        if "kv_b_proj" in name or name.startswith("model.layers.3."):
            continue
        scale = header[name + "_scale_inv"]
        assert scale["dtype"] == "F32"
        want += (t["data_offsets"][1] - t["data_offsets"][0]) + (
            scale["data_offsets"][1] - scale["data_offsets"][0])
    assert out["loaded_weight_bytes_by_dtype"]["f8_e4m3"] == want


@pytest.mark.parametrize("quantization, needle", [
    ("w8a8", "quantized at load to w8a8: 14 matrices"),
    ("fp8", "quantized at load to fp8: 14 matrices"),
])
def test_generate_quantized_to_w8a8_and_fp8_runs(run_cli, quantization, needle):
    case = load_golden("tiny-qwen3")["cases"][-1]
    proc = run_cli("generate", "--model", DATA / "tiny-qwen3", "--prompt-ids",
                   ",".join(map(str, case["prompt_ids"])), "--max-new-tokens", 4, "--ignore-eos",
                   "--json", "--threads", 2, "--quantization", quantization, "--log-level", "info",
                   check=True)
    assert len(json.loads(proc.stdout)["output_ids"]) == 4
    assert needle in proc.stderr


def test_int8_checkpoints_keep_their_int8_bytes_and_scales(run_cli):
    # tools/make_w8a8_checkpoints.py: SGLang's w8a8_int8 (f32 scales) and compressed-tensors
    # (bf16 scales, widened to f32 in memory: 4 bytes a row either way).
    for name in ("tiny-deepseek-v3-w8a8-int8", "tiny-qwen2-compressed-int8"):
        model = DATA / name
        out = json.loads(run_cli("info", "--model", model, "--json", "--log-level", "error",
                                 check=True).stdout)
        header = safetensors_header(model / "model.safetensors")
        want = 0
        for tensor, t in header.items():
            # Kept: every I8 matrix but MLA's kv_b_proj (read by element, widened to f32) and the
            # multi-token-prediction layer 3 (skipped).
            if tensor == "__metadata__" or t["dtype"] != "I8":
                continue
            if "kv_b_proj" in tensor or tensor.startswith("model.layers.3."):
                continue
            rows, cols = t["shape"]
            want += rows * cols + 4 * rows
        assert out["loaded_weight_bytes_by_dtype"]["i8"] == want, name


def test_int8_checkpoint_with_group_wise_scales_is_one_clear_error(run_cli, tmp_path):
    model = tmp_path / "grouped"
    shutil.copytree(DATA / "tiny-qwen2-compressed-int8", model)
    config = json.loads((model / "config.json").read_text())
    config["quantization_config"]["config_groups"]["group_0"]["weights"].update(
        strategy="group", group_size=128)
    (model / "config.json").write_text(json.dumps(config))
    proc = run_cli("generate", "--model", model, "--prompt-ids", "1,2", "--max-new-tokens", 1)
    assert proc.returncode != 0
    assert ("quantization_config.config_groups.group_0.weights.strategy: \"group\" is not supported"
            in proc.stderr), proc.stderr


def test_int8_checkpoint_quantized_to_fp8_runs_its_experts_in_fp8(run_cli):
    # The int8 experts are dequantized (q * scale) and quantized to FP8 blocks like the rest;
    # they used to be stacked as FP8 without their scales and stop at the first forward.
    proc = run_cli("generate", "--model", DATA / "tiny-deepseek-v3-w8a8-int8", "--prompt-ids",
                   "1,2,3", "--max-new-tokens", 2, "--ignore-eos", "--json", "--threads", 2,
                   "--quantization", "fp8", "--log-level", "info", check=True)
    assert len(json.loads(proc.stdout)["output_ids"]) == 2
    assert "quantized at load to fp8: 69 matrices (69 from i8)" in proc.stderr
