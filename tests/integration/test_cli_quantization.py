"""--quantization: quantize a checkpoint's projections while loading (docs/QUANTIZATION.md)."""
import json

import pytest

from conftest import DATA, load_golden


def generate(run_cli, model, *extra, check=False):
    case = load_golden(model)["cases"][-1]
    return run_cli("generate", "--model", DATA / model, "--prompt-ids",
                   ",".join(map(str, case["prompt_ids"])), "--max-new-tokens", 8, "--ignore-eos",
                   "--json", "--threads", 2, *extra, check=check)


@pytest.mark.parametrize("model", ["tiny-qwen3", "tiny-llama"])
def test_generate_with_q4_0_runs_and_logs_what_it_quantized(run_cli, model):
    proc = generate(run_cli, model, "--quantization", "q4_0", "--log-level", "info", check=True)
    out = json.loads(proc.stdout)
    assert len(out["output_ids"]) == 8
    assert out["finish_reason"] == "length"
    assert "quantized at load to q4_0: 14 matrices (14 from f32)" in proc.stderr
    assert "1 embedding, 1 lm_head" in proc.stderr
    assert "weights in memory: f32" in proc.stderr and "q4_0" in proc.stderr


def test_q8_0_and_int8_are_one_type(run_cli):
    a = json.loads(generate(run_cli, "tiny-qwen3", "--quantization", "q8_0", check=True).stdout)
    b = json.loads(generate(run_cli, "tiny-qwen3", "--quantization", "int8", check=True).stdout)
    assert a["output_ids"] == b["output_ids"]


@pytest.mark.parametrize("name, needle", [
    ("q3_x", "unknown weight quantization (expected q8_0 (alias int8), q4_0, q4_1, q5_0, q5_1, "
             "q4_k, q5_k, q6_k, q4_k_m (alias int4), w8a8, fp8 or none"),
    ("w4a8", "not built yet: this build quantizes weights at load to q8_0 (alias int8), q4_0, q4_1, "
             "q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m (alias int4), w8a8, fp8"),
])
def test_bad_quantization_is_one_clear_line(run_cli, name, needle):
    proc = generate(run_cli, "tiny-qwen3", "--quantization", name, "--log-level", "error")
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "--quantization" in lines[0] and name in lines[0] and needle in lines[0], lines[0]


def test_info_reports_bytes_per_type_after_quantization(run_cli):
    info = json.loads(run_cli("info", "--model", DATA / "tiny-qwen3", "--quantization", "q8_0",
                              "--json", check=True).stdout)
    config = json.loads((DATA / "tiny-qwen3" / "config.json").read_text())
    by_type = info["loaded_weight_bytes_by_dtype"]
    assert info["quantization_at_load"] == "q8_0"
    assert set(by_type) == {"f32", "q8_0"}
    # Kept in f32: embeddings and lm_head (vocab x hidden each) plus the norms.
    hidden, vocab, layers = config["hidden_size"], config["vocab_size"], config["num_hidden_layers"]
    norms = layers * (2 * hidden + 2 * config["head_dim"]) + hidden
    assert by_type["f32"] == 4 * (2 * vocab * hidden + norms)
    # Everything else in q8_0: 34 bytes per 32 weights.
    projections = info["parameters"] - 2 * vocab * hidden - norms
    assert by_type["q8_0"] == projections // 32 * 34
    assert info["loaded_weight_bytes"] < info["weight_bytes"]
