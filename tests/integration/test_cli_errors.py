"""Bad input to the CLI: a non-zero exit and one clear line naming the file and the problem."""
import json
import shutil
import struct

import pytest

from conftest import DATA


def copy_model(tmp_path, name="tiny-qwen2"):
    dst = tmp_path / name
    shutil.copytree(DATA / name, dst)
    return dst


def assert_clean_failure(proc, *needles):
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "internal error" not in lines[0]


def generate(run_cli, model_dir, *extra):
    return run_cli("generate", "--model", model_dir, "--prompt-ids", "1,2,3", "--max-new-tokens", 2,
                   "--log-level", "error", *extra)


def test_missing_model_directory(run_cli, tmp_path):
    assert_clean_failure(generate(run_cli, tmp_path / "nope"), "nope")


def test_malformed_config_json(run_cli, tmp_path):
    model = copy_model(tmp_path)
    (model / "config.json").write_text("{ not json")
    assert_clean_failure(generate(run_cli, model), "config.json", "JSON")


def test_unsupported_architecture_lists_supported_ones(run_cli, tmp_path):
    model = copy_model(tmp_path)
    config = json.loads((model / "config.json").read_text())
    config["architectures"] = ["MambaForCausalLM"]
    (model / "config.json").write_text(json.dumps(config))
    assert_clean_failure(generate(run_cli, model), "MambaForCausalLM", "Qwen2ForCausalLM")


def test_truncated_safetensors(run_cli, tmp_path):
    model = copy_model(tmp_path)
    data = (model / "model.safetensors").read_bytes()
    (model / "model.safetensors").write_bytes(data[: len(data) // 2])
    assert_clean_failure(generate(run_cli, model), "model.safetensors")


def test_header_length_beyond_file(run_cli, tmp_path):
    model = copy_model(tmp_path)
    path = model / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[:8] = struct.pack("<Q", len(data) * 4)
    path.write_bytes(bytes(data))
    assert_clean_failure(generate(run_cli, model), "model.safetensors")


def test_config_disagreeing_with_weights_names_the_tensor(run_cli, tmp_path):
    model = copy_model(tmp_path)
    config = json.loads((model / "config.json").read_text())
    config["intermediate_size"] = config["intermediate_size"] * 2
    (model / "config.json").write_text(json.dumps(config))
    assert_clean_failure(generate(run_cli, model), "mlp", "shape")


def test_missing_tensor_is_named(run_cli, tmp_path):
    model = copy_model(tmp_path)
    config = json.loads((model / "config.json").read_text())
    config["num_hidden_layers"] += 1
    (model / "config.json").write_text(json.dumps(config))
    assert_clean_failure(generate(run_cli, model), "model.layers.")


@pytest.mark.parametrize("edit, needles", [
    ({"rotary_dim": 7}, ("rotary_dim", "7")),  # odd
    ({"rotary_dim": 64}, ("rotary_dim", "64")),  # beyond head_dim 16
    ({"num_key_value_heads": 3}, ("num_key_value_heads", "3")),  # does not divide 4 heads
    ({"attn_type_list": [1, 0, 1]}, ("attn_type_list", "0")),  # lightning attention
], ids=["rotary_dim_odd", "rotary_dim_beyond_head_dim", "kv_heads", "attn_type_list"])
def test_minimax_m2_config_that_does_not_fit_names_the_field(run_cli, tmp_path, edit, needles):
    model = copy_model(tmp_path, "tiny-minimax-m2")
    config = json.loads((model / "config.json").read_text())
    if "rotary_dim" in edit:  # the published spelling: rotary_dim instead of the factor
        del config["rope_parameters"]["partial_rotary_factor"]
    config.update(edit)
    (model / "config.json").write_text(json.dumps(config))
    proc = generate(run_cli, model)
    assert proc.returncode == 1
    assert_clean_failure(proc, *needles)


@pytest.mark.parametrize("flags, needle", [
    (["--temperature", "-1"], "temperature"),
    (["--threads", "x"], "--threads"),
    (["--dtype", "f64"], "--dtype"),
    (["--bogus"], "--bogus"),
    (["--max-new-tokens"], "--max-new-tokens"),
])
def test_bad_flags(run_cli, flags, needle):
    assert_clean_failure(generate(run_cli, DATA / "tiny-qwen2", *flags), needle)


def test_prompt_id_outside_vocabulary(run_cli):
    proc = run_cli("generate", "--model", DATA / "tiny-qwen2", "--prompt-ids", "1,999999",
                   "--log-level", "error")
    assert_clean_failure(proc, "999999")


def test_bad_isa_override_is_reported_at_start(deepinfer_bin, tmp_path):
    import os
    import subprocess
    env = dict(os.environ, DEEPINFER_ISA="sse9")
    proc = subprocess.run([deepinfer_bin, "info", "--model", str(DATA / "tiny-qwen2")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert_clean_failure(proc, "sse9")
