"""`deepinfer run --config RECIPE --mode api`: the recipe's model behind the HTTP API, with the
recipe's name and request defaults; stopped with SIGTERM."""
import json
import re
import signal
import subprocess
import threading
import time

import requests

from conftest import DATA

MODEL = DATA / "tiny-qwen3"


def start(binary, recipe, timeout=120):
    proc = subprocess.Popen([binary, "run", "--config", str(recipe), "--mode", "api", "--port", "0",
                             "--threads", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    log = []
    port = None
    while port is None:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"run exited early ({proc.wait()}): {''.join(log)}")
        log.append(line)
        match = re.search(r"listening on http://[^:]+:(\d+)", line)
        if match:
            port = int(match.group(1))
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, "".join(log)
        try:
            if requests.get(url + "/health", timeout=5).status_code == 200:
                break
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline, "never ready: " + "".join(log)
        time.sleep(0.05)
    return proc, url, log


def test_recipe_served_with_its_name_and_defaults(deepinfer_bin, run_cli, tmp_path):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(f"""
model_config:
  model_name: "tiny-recipe"
  model_path: "{MODEL}"
  exe_mode: "eager"
data_config:
  temperature: 0
scheduler_config:
  batch_size: 4
  max_new_tokens: 9
  block_size: 16
""")
    proc, url, log = start(deepinfer_bin, recipe)
    try:
        models = requests.get(url + "/v1/models", timeout=30).json()
        assert [m["id"] for m in models["data"]] == ["tiny-recipe"]
        # No temperature / max_tokens in the request: the recipe's greedy 9 tokens.
        body = {"model": "tiny-recipe", "messages": [{"role": "user", "content": "hello there"}]}
        reply = requests.post(url + "/v1/chat/completions", json=body, timeout=60).json()
        messages = tmp_path / "m.json"
        messages.write_text(json.dumps(body["messages"]))
        rendered = run_cli("render-chat", "--model", MODEL, "--messages", messages,
                           "--add-generation-prompt", check=True).stdout
        (tmp_path / "p.txt").write_bytes(rendered.encode())
        ids = json.loads(run_cli("tokenize", "--model", MODEL, "--text-file", tmp_path / "p.txt",
                                 check=True).stdout)
        expected = json.loads(run_cli("generate", "--model", MODEL, "--prompt-ids",
                                      ",".join(map(str, ids)), "--max-new-tokens", 9, "--json",
                                      check=True).stdout)["text"]
        assert reply["choices"][0]["message"]["content"] == expected
        assert reply["usage"]["completion_tokens"] <= 9
        text = "".join(log)
        assert "warm-up completed" in text and "service started, ready to accept requests" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
