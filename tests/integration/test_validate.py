"""deepinfer validate end to end: identical models, bf16 weights and an int8 KV cache against
f32, a checkpoint with one layer scaled (made here, in a temp dir), transformers goldens of
tools/dump_reference.py (tests/data/validate/), and bad input."""
import array
import base64
import json
import shutil
import struct

import pytest

from conftest import DATA

GOLDENS = DATA / "validate"


def report(run_cli, *args):
    proc = run_cli("validate", *args, "--json", "--log-level", "warn")
    assert proc.returncode in (0, 3), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_identical_models_agree_exactly(run_cli):
    m = DATA / "tiny-qwen3"
    rc, r = report(run_cli, "-m", m, "--reference", m, "--preset", "fixed",
                   "--text", ROOT_TEXT, "--max-kl", "0", "--min-agreement", "1")
    assert rc == 0
    assert r["greedy"]["agreement"] == 1.0
    assert all(d == -1 for d in r["greedy"]["first_divergence"])
    assert r["teacher_forcing"]["top1_agreement"] == 1.0
    assert r["teacher_forcing"]["max_kl"] == 0.0
    assert r["perplexity"]["diff"] == 0.0
    assert r["bounds"]["passed"]


ROOT_TEXT = DATA.parent.parent / "data" / "validate" / "gettysburg_address.txt"


@pytest.mark.parametrize("flags", [["--reference-dtype", "bf16"], ["--kv-cache-dtype", "int8"]],
                         ids=["bf16-weights", "int8-kv"])
def test_lower_precision_differs_deterministically(run_cli, flags):
    m = DATA / "tiny-qwen3"
    runs = []
    for threads in ("1", "2"):
        rc, r = report(run_cli, "-m", m, "--reference", m, *flags, "--preset", "fixed",
                       "-t", threads, "--max-kl", "0")
        assert rc == 3 and not r["bounds"]["passed"]  # KL > 0 fails --max-kl 0
        runs.append(r)
    r = runs[0]
    assert r["greedy"]["agreement"] < 1 or r["teacher_forcing"]["max_kl"] > 0
    assert r["teacher_forcing"]["mean_kl"] > 0
    assert runs[0] == runs[1]  # identical across runs and thread counts


def scale_tensor(src, dst, name, factor):
    """Copies a checkpoint directory with one f32 tensor of model.safetensors scaled."""
    shutil.copytree(src, dst)
    path = dst / "model.safetensors"
    raw = bytearray(path.read_bytes())
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + header_len])
    info = header[name]
    assert info["dtype"] == "F32"
    begin, end = (8 + header_len + o for o in info["data_offsets"])
    values = array.array("f")
    values.frombytes(bytes(raw[begin:end]))
    raw[begin:end] = array.array("f", (v * factor for v in values)).tobytes()
    path.write_bytes(bytes(raw))


def test_layers_name_the_broken_layer(run_cli, tmp_path):
    src = DATA / "tiny-qwen3"
    broken = tmp_path / "broken"
    scale_tensor(src, broken, "model.layers.1.mlp.down_proj.weight", 1.5)
    rc, r = report(run_cli, "-m", broken, "--reference", src, "--preset", "random",
                   "--num-prompts", "2", "--prompt-len", "12", "--max-new-tokens", "4",
                   "--layers", "--tolerance", "1e-3")
    first = r["layers"]["first_exceeding"]
    assert (first["layer"], first["block"]) == (1, "mlp")
    assert first["rel_error"] > 0.1
    before = [b for b in r["layers"]["blocks"] if (b["layer"], b["block"]) < (1, "")]
    assert before and all(b["rel_error"] == 0 for b in before if b["layer"] >= 0)


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-deepseek-v2"])
def test_golden_from_transformers_agrees_per_layer(run_cli, model):
    golden = GOLDENS / f"{model}.reference.json"
    rc, r = report(run_cli, "-m", DATA / model, "--golden", golden, "--layers",
                   "--tolerance", "1e-4", "--min-agreement", "1")
    assert rc == 0
    assert r["layers"]["first_exceeding"] is None
    blocks = {(b["layer"], b["block"]) for b in r["layers"]["blocks"]}
    assert (0, "attention") in blocks and (-1, "final_norm") in blocks
    if model == "tiny-deepseek-v2":
        assert (1, "moe") in blocks
    assert max(b["rel_error"] for b in r["layers"]["blocks"]) < 1e-4
    assert r["teacher_forcing"]["top1_agreement"] == 1.0
    assert r["teacher_forcing"]["max_kl"] < 1e-8


def test_table_names_the_metrics(run_cli):
    m = DATA / "tiny-llama"
    proc = run_cli("validate", "-m", m, "--reference", m, "--preset", "random", "--num-prompts",
                   "2", "--max-new-tokens", "4", "--log-level", "warn")
    assert proc.returncode == 0, proc.stderr
    for words in ("greedy agreement", "first divergence", "top-1 agreement", "KL"):
        assert words in proc.stdout


def test_bad_input_gets_one_clear_message(run_cli, tmp_path):
    m = DATA / "tiny-llama"

    def error(*args):
        proc = run_cli("validate", *args, "--log-level", "error")
        assert proc.returncode == 1, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        return lines[0]

    assert "cannot open" in error("-m", m, "--reference", m, "--prompts", tmp_path / "none.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt_token_ids": [1, 2]}\n\n{"prompt": oops}\n')
    assert f"{bad}:3" in error("-m", m, "--reference", m, "--prompts", bad)
    # Another architecture, another vocabulary.
    assert "architecture" in error("-m", m, "--reference", DATA / "tiny-qwen3")
    other_vocab = tmp_path / "vocab.json"
    other_vocab.write_text(json.dumps({
        "format": "deepinfer-reference-v1",
        "model": {"architecture": "LlamaForCausalLM", "vocab_size": 500, "num_hidden_layers": 2,
                  "hidden_size": 64},
        "prompts": [{"name": "p", "prompt_ids": [1, 2], "blocks": [],
                     "logits": base64.b64encode(array.array("f", [0.0] * 1000).tobytes()).decode()}],
    }))
    assert "vocabulary of 500" in error("-m", m, "--golden", other_vocab)
    msg = error("-m", m, "--golden", GOLDENS / "tiny-deepseek-v2.reference.json")
    assert "DeepseekV2ForCausalLM" in msg
    assert "cannot open" in error("-m", m, "--golden", tmp_path / "none.json")


def test_gguf_q8_0_against_its_f32_source(run_cli):
    gguf = DATA / "gguf-models" / "tiny-llama-q8_0.gguf"
    if not gguf.exists():
        pytest.skip(f"{gguf} is absent")
    runs = [report(run_cli, "-m", gguf, "--reference", DATA / "tiny-llama", "--preset", "fixed",
                   "-t", t)[1] for t in ("1", "2")]
    assert runs[0] == runs[1]
    assert runs[0]["greedy"]["agreement"] < 1 and runs[0]["teacher_forcing"]["mean_kl"] > 0


def test_layers_without_prompts_use_the_text(run_cli):
    m = DATA / "tiny-llama"
    rc, r = report(run_cli, "-m", m, "--reference", m, "--reference-dtype", "bf16",
                   "--preset", "dataset", "--layers")
    assert r["num_prompts"] == 0 and r["perplexity"]["tokens"] > 0
    assert r["layers"]["blocks"] and r["layers"]["blocks"][0]["block"] == "embedding"
