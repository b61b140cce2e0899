"""`deepinfer generate` / `info` on the bundled tiny checkpoints, against transformers goldens."""
import json
import os

import numpy as np
import pytest

from conftest import DATA, load_golden

MODELS = ["tiny-qwen2", "tiny-qwen3", "tiny-qwen3-yarn", "tiny-llama", "tiny-mistral"]


@pytest.mark.parametrize("model", MODELS)
def test_generate_json_matches_transformers_greedy(run_cli, model):
    case = load_golden(model)["cases"][-1]
    ids = ",".join(map(str, case["prompt_ids"]))
    proc = run_cli("generate", "--model", DATA / model, "--prompt-ids", ids, "--max-new-tokens", 32,
                   "--ignore-eos", "--json", "--threads", 2, check=True)
    out = json.loads(proc.stdout)
    assert out["prompt_ids"] == case["prompt_ids"]
    assert out["output_ids"] == case["greedy_ids"]
    assert out["finish_reason"] == "length"


@pytest.mark.parametrize("sampling", [[], ["--temperature", "0.8", "--seed", "5"]])
def test_warmup_runs_are_untimed_and_change_no_token(run_cli, sampling):
    # The greedy loop and the engine (sampling): the warm-up runs share the KV cache and must
    # leave the timed run's tokens as without them (the greedy ones equal transformers').
    case = load_golden("tiny-qwen2")["cases"][-1]
    common = ["generate", "--model", DATA / "tiny-qwen2", "--prompt-ids",
              ",".join(map(str, case["prompt_ids"])), "--max-new-tokens", 12, "--ignore-eos",
              "--json", "--threads", 2, *sampling]
    cold = json.loads(run_cli(*common, check=True).stdout)
    warm = json.loads(run_cli(*common, "--warmup", 2, check=True).stdout)
    assert "warmup_prefill_seconds" not in cold
    assert len(warm["warmup_prefill_seconds"]) == 2
    assert all(s > 0 for s in warm["warmup_prefill_seconds"])
    assert warm["output_ids"] == cold["output_ids"]
    if not sampling:
        assert warm["output_ids"] == case["greedy_ids"][:12]


def test_measure_bandwidth_reads_the_weights_and_changes_no_token(run_cli):
    # --measure-bandwidth reads the packed weights' own memory before and after the run. With
    # q8_0 at load the projections stay as quantized (owned, not repacked: their stored pages
    # cannot be dropped), and the tied lm_head, 16-bit by policy, is packed: at least its f32
    # panels, 512 x 64 x 4 bytes.
    case = load_golden("tiny-qwen2")["cases"][-1]
    common = ["generate", "--model", DATA / "tiny-qwen2", "--prompt-ids",
              ",".join(map(str, case["prompt_ids"])), "--max-new-tokens", 8, "--ignore-eos",
              "--json", "--threads", 2, "--quantization", "q8_0"]
    plain = json.loads(run_cli(*common, check=True).stdout)
    measured = json.loads(run_cli(*common, "--measure-bandwidth", check=True).stdout)
    assert "weights_read_gb_s" not in plain
    assert measured["output_ids"] == plain["output_ids"]
    assert len(measured["weights_read_gb_s"]) == 2
    if os.environ.get("DEEPINFER_ISA") != "scalar":  # scalar packs nothing
        assert measured["weights_read_bytes"] >= 512 * 64 * 4
        assert all(gb_s > 0 for gb_s in measured["weights_read_gb_s"])


@pytest.mark.parametrize("flags, message", [
    (["--warmup", "-1"], "--warmup: expected a count of runs >= 0"),
    (["--prompts-file", "/dev/null", "--warmup", "1"], "--warmup apply to a single prompt"),
])
def test_warmup_errors(run_cli, flags, message):
    args = [] if "--prompts-file" in flags else ["--prompt-ids", "1,2"]
    proc = run_cli("generate", "--model", DATA / "tiny-qwen2", *args, *flags)
    assert proc.returncode != 0 and message in proc.stderr


def test_dump_logits_writes_the_last_prompt_position_as_npy(run_cli, tmp_path):
    case = load_golden("tiny-qwen2")["cases"][1]
    path = tmp_path / "logits.npy"
    run_cli("generate", "--model", DATA / "tiny-qwen2", "--prompt-ids",
            ",".join(map(str, case["prompt_ids"])), "--max-new-tokens", 1, "--dump-logits", path,
            check=True)
    logits = np.load(path)
    ref = np.array(case["last_logits"], dtype=np.float32)
    assert logits.dtype == np.float32 and logits.shape == ref.shape
    assert np.max(np.abs(logits - ref)) / np.max(np.abs(ref)) <= 1e-4


def test_info_reports_layout_and_kv_cost(run_cli):
    proc = run_cli("info", "--model", DATA / "tiny-qwen3", "--json", check=True)
    info = json.loads(proc.stdout)
    config = json.loads((DATA / "tiny-qwen3" / "config.json").read_text())
    assert info["architecture"] == "Qwen3ForCausalLM"
    assert info["layers"] == config["num_hidden_layers"]
    assert info["kv_bytes_per_token"] == (
        2 * config["num_hidden_layers"] * config["num_key_value_heads"] * config["head_dim"] * 4)
    assert info["weight_bytes"] == 4 * info["parameters"]  # float32 checkpoint


def test_version_and_help(run_cli):
    assert run_cli("--version", check=True).stdout.startswith("deepinfer ")
    assert "generate" in run_cli("--help", check=True).stdout
    assert run_cli("generate", "--help", check=True).stdout.startswith("usage:")


@pytest.mark.parametrize("model", ["tiny-qwen2", "tiny-qwen3"])
def test_generate_from_text_prompt_tokenizes_like_transformers(run_cli, model):
    case = next(c for c in load_golden(model)["cases"] if c["name"] == "text")
    proc = run_cli("generate", "--model", DATA / model, "--prompt", case["prompt_text"],
                   "--max-new-tokens", 32, "--ignore-eos", "--json", check=True)
    out = json.loads(proc.stdout)
    assert out["prompt_ids"] == case["prompt_ids"]
    assert out["output_ids"] == case["greedy_ids"]
    assert isinstance(out["text"], str) and out["text"]
    plain = run_cli("generate", "--model", DATA / model, "--prompt", case["prompt_text"],
                    "--max-new-tokens", 32, "--ignore-eos", check=True)
    assert plain.stdout == out["text"] + "\n"
