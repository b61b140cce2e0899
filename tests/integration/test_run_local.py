"""`deepinfer run --mode local`: the chat REPL through a pipe and a pseudo-terminal, --prompt,
start-up log lines, and config errors. Expected answers come from other commands: the chat
template rendered by `render-chat`, its ids from `tokenize`, the greedy continuation from
`generate --prompt-ids`."""
import json
import os
import pty
import select
import signal
import subprocess
import time

import pytest

from conftest import DATA, ROOT

MODEL = DATA / "tiny-qwen3"
MAX_NEW = 12


def write_config(tmp_path, model=MODEL, **inference):
    inference = {"do_sample": False, "max_new_tokens": MAX_NEW, **inference}
    config = {
        "model": {"model_path": str(model)},
        "parallel": {"tensor_parallel_size": 1, "pipeline_parallel_size": 1,
                     "expert_parallel_size": 1},
        "kv_cache": {"use_paged_attention": True, "block_size": 16, "max_num_blocks": 64},
        "atb": {"enable_atb_attention": True, "enable_atb_moe": True, "precision_mode": "fp32"},
        "inference": inference,
    }
    path = tmp_path / "infer_config.json"
    path.write_text(json.dumps(config))
    return path


def expected_answer(run_cli, tmp_path, messages, model=MODEL):
    """The greedy answer to a conversation, computed without `run`."""
    messages_file = tmp_path / "messages.json"
    messages_file.write_text(json.dumps(messages))
    rendered = run_cli("render-chat", "--model", model, "--messages", messages_file,
                       "--add-generation-prompt", check=True).stdout
    text_file = tmp_path / "prompt.txt"
    text_file.write_bytes(rendered.encode("utf-8"))
    ids = json.loads(run_cli("tokenize", "--model", model, "--text-file", text_file,
                             check=True).stdout)
    out = json.loads(run_cli("generate", "--model", model, "--prompt-ids", ",".join(map(str, ids)),
                             "--max-new-tokens", MAX_NEW, "--json", "--threads", 2,
                             check=True).stdout)
    return out["text"]


def test_pipe_two_turns_reset_exit_match_generate(run_cli, deepinfer_bin, tmp_path):
    config = write_config(tmp_path)
    proc = subprocess.run(
        [deepinfer_bin, "run", "--config", config, "--mode", "local", "--threads", "2"],
        input="hello there\nwhat is two plus two?\n/reset\nhello there\n/exit\nnever read\n",
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr

    u1, u2 = "hello there", "what is two plus two?"
    a1 = expected_answer(run_cli, tmp_path, [{"role": "user", "content": u1}])
    a2 = expected_answer(run_cli, tmp_path, [{"role": "user", "content": u1},
                                             {"role": "assistant", "content": a1},
                                             {"role": "user", "content": u2}])
    # After /reset the conversation starts over: the first answer again. Nothing after /exit.
    assert proc.stdout == f"{a1}\n{a2}\n{a1}\n"
    assert a1 != a2


def test_prompt_answers_once(run_cli, deepinfer_bin, tmp_path):
    config = write_config(tmp_path)
    proc = run_cli("run", "--config", config, "--prompt", "hello there", "--threads", 2,
                   check=True)
    assert proc.stdout == expected_answer(
        run_cli, tmp_path, [{"role": "user", "content": "hello there"}]) + "\n"


def test_startup_log_lines_in_order(run_cli):
    # The shipped tiny MoE recipe (its model_path is relative to the config's directory).
    proc = run_cli("run", "--config", ROOT / "configs/tiny-qwen3-moe/infer_config.json",
                   "--prompt", "hi", "--npu_devices", "0,1", check=True)
    log = proc.stderr
    expected = ["loading model from", "model loaded in", "CPU build: there are no NPUs",
                "initializing parallel layout", "experts distributed: 8 per device",
                "loading fused operators", "attention fusion: enabled, MoE fusion: enabled",
                "warming up", "warm-up completed in"]
    positions = [log.find(line) for line in expected]
    assert all(p >= 0 for p in positions), log
    assert positions == sorted(positions), log
    assert "2 compute threads" in log


def test_yaml_recipe_runs(run_cli, tmp_path):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(f"""
model_config:
  model_name: "tiny"
  model_path: "{MODEL}"
  exe_mode: "eager"
  with_ckpt: True
data_config:
  dataset: "default"
  input_truncated_len: 64
parallel_config:
  world_size: 1
  attn_tp_size: 1
  moe_tp_size: 1
scheduler_config:
  batch_size: 4
  max_new_tokens: {MAX_NEW}
  block_size: 16
""")
    # generation_config.json samples (do_sample true): greedy via the flag.
    proc = run_cli("run", "--config", recipe, "--prompt", "hello there", "--temperature", 0,
                   "--threads", 2, check=True)
    assert proc.stdout == expected_answer(
        run_cli, tmp_path, [{"role": "user", "content": "hello there"}]) + "\n"


def test_flags_override_the_config(run_cli, tmp_path):
    config = write_config(tmp_path)
    proc = run_cli("run", "--config", config, "--prompt", "hello there", "--max-new-tokens", 3,
                   "--block-size", 8, "--max-num-blocks", 40, "--threads", 1, check=True)
    assert "40 blocks of 8 tokens" in proc.stderr
    full = expected_answer(run_cli, tmp_path, [{"role": "user", "content": "hello there"}])
    assert full.startswith(proc.stdout.rstrip("\n"))


@pytest.mark.parametrize("section,key,value,fragments", [
    ("parallel", "expert_parallel_size", 8,
     ["parallel.expert_parallel_size = 8", "mpirun -np 8 deepinfer"]),
    ("parallel", "tensor_parallel_size", 2, ["parallel.tensor_parallel_size = 2"]),
    ("atb", "enable_atb_attention", "no", ["atb.enable_atb_attention", "expected true or false"]),
    ("model", "hidden_size", 4096, ["model.hidden_size = 4096", "hidden_size = 64"]),
    ("model", "model_type", "deepseek_v2", ["model.model_type", "\"qwen3\""]),
    ("inference", "top_p", 0.5, ["inference.top_p = 0.5", "do_sample"]),
    ("kv_cache", "page_size", 16, ["unknown key 'kv_cache.page_size'"]),
])
def test_config_errors_name_the_key(run_cli, tmp_path, section, key, value, fragments):
    path = write_config(tmp_path)
    config = json.loads(path.read_text())
    config.setdefault(section, {})[key] = value
    path.write_text(json.dumps(config))
    proc = run_cli("run", "--config", path, "--prompt", "hi")
    assert proc.returncode == 1
    assert str(path) in proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr
    assert "loading model" not in proc.stderr  # refused before loading


def test_kv_quant_conflict_and_sibling_files(run_cli, tmp_path):
    config = write_config(tmp_path)
    (tmp_path / "model_config.json").write_text(
        json.dumps({"kv_cache_dtype": "fp16", "enable_kv_cache_quant": True}))
    proc = run_cli("run", "--config", config, "--prompt", "hi")
    assert proc.returncode == 1
    assert "model_config.json" in proc.stderr and "int8" in proc.stderr
    (tmp_path / "model_config.json").write_text(json.dumps({"block_size": 32}))
    proc = run_cli("run", "--config", config, "--prompt", "hi")
    assert proc.returncode == 1
    assert "conflicting values" in proc.stderr and "model_config.json: block_size = 32" in proc.stderr


def test_command_line_errors(run_cli, tmp_path):
    config = write_config(tmp_path)
    assert "--config FILE" in run_cli("run", "--help", check=True).stdout
    proc = run_cli("run")
    assert proc.returncode == 1 and "--config FILE" in proc.stderr
    proc = run_cli("run", "--config", config, "--mode", "batch")
    assert proc.returncode == 1 and "expected local or api" in proc.stderr
    proc = run_cli("run", "--config", config, "--npu_devices", "0,0", "--prompt", "hi")
    assert proc.returncode == 1 and "listed twice" in proc.stderr
    proc = run_cli("run", "--config", config, "--port", "1", "--prompt", "hi")
    assert proc.returncode == 1 and "--mode api" in proc.stderr
    proc = run_cli("run", "--config", tmp_path / "nope.json")
    assert proc.returncode == 1 and "nope.json" in proc.stderr


def read_until(fd, marker, timeout=60):
    data = b""
    deadline = time.time() + timeout
    while marker not in data:
        remaining = deadline - time.time()
        if remaining <= 0:
            raise AssertionError(f"timed out waiting for {marker!r}; got {data!r}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    return data


def spawn_in_terminal(binary, config):
    master, slave = pty.openpty()
    proc = subprocess.Popen([binary, "run", "--config", str(config), "--threads", "2"],
                            stdin=slave, stdout=slave, stderr=subprocess.PIPE, close_fds=True)
    os.close(slave)
    return proc, master


def test_terminal_session_two_turns_reset_interrupt_exit(deepinfer_bin, tmp_path):
    config = write_config(tmp_path)
    proc, master = spawn_in_terminal(deepinfer_bin, config)
    try:
        read_until(master, b">>> ")
        os.write(master, b"hello there\n")
        first = read_until(master, b">>> ")
        os.write(master, b"what is two plus two?\n")
        second = read_until(master, b">>> ")
        os.write(master, b"/reset\n")
        read_until(master, b">>> ")
        os.write(master, b"hello there\n")
        again = read_until(master, b">>> ")
        # The echo of the line, the streamed answer, a new prompt.
        assert first.startswith(b"hello there\r\n") and len(first) > len(b"hello there\r\n>>> ")
        assert second.startswith(b"what is two plus two?\r\n") and second != first
        assert first == again  # greedy, and /reset forgot the first two turns
        proc.send_signal(signal.SIGINT)  # Ctrl-C at the prompt does not quit
        time.sleep(0.2)
        os.write(master, b"/exit\n")
        assert proc.wait(timeout=30) == 0
        assert b"use /exit or Ctrl-D to quit" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_terminal_session_quits_on_ctrl_d(deepinfer_bin, tmp_path):
    proc, master = spawn_in_terminal(deepinfer_bin, write_config(tmp_path))
    try:
        read_until(master, b">>> ")
        os.write(master, b"\x04")  # Ctrl-D at an empty prompt
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
