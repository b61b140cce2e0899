"""Start-up and shutdown of `deepinfer serve`: /health before ready, SIGTERM lets in-flight
requests finish (streamed and not) while refusing new connections, a short
--shutdown-timeout aborts what is left, and the process exits 0."""
import json
import signal
import socket
import subprocess
import threading
import time

import requests

from conftest import DATA
from serve_util import ServeProcess, raw_stream, sample

LONG = {"prompt": "Once", "max_tokens": 7000, "temperature": 0, "ignore_eos": True}


def read_events(sock):
    """Reads an SSE response to its end on a raw socket; returns the JSON events."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        if b"data: [DONE]" in data:
            break
    events = []
    for line in data.split(b"\n"):
        line = line.strip()
        if line.startswith(b"data: {"):
            events.append(json.loads(line[len(b"data: "):]))
    return events, b"data: [DONE]" in data


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except OSError:
        return True


def test_health_is_503_or_200_only(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--kv-cache-memory", 0.5, wait_ready=False)
    try:
        seen = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = requests.get(s.url + "/health", timeout=10)
            seen.append(r.status_code)
            if r.status_code == 503:
                assert r.json()["error"]["message"]
                # Until ready, the API answers 503 too.
                api = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
                assert api.status_code in (200, 503)
            if r.status_code == 200:
                break
        assert seen[-1] == 200 and set(seen) <= {200, 503}, seen
    finally:
        assert s.stop() == 0


def test_sigterm_finishes_in_flight_requests(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--max-model-len", 8192, "--allow-long-max-model-len",
                     "--shutdown-timeout", 600)
    results = {}
    body = {**LONG, "max_tokens": 3000}

    def non_streamed():
        results["plain"] = s.post("/v1/completions", body, timeout=600)

    sock, first = raw_stream(s, "/v1/completions",
                             {**body, "stream_options": {"include_usage": True}})
    plain = threading.Thread(target=non_streamed)
    plain.start()
    deadline = time.monotonic() + 30
    while sample(s.metrics(), "deepinfer:num_requests_running") < 2:
        assert time.monotonic() < deadline, "the two requests never ran together"
        time.sleep(0.01)
    s.proc.send_signal(signal.SIGTERM)

    # New connections are refused while the two requests keep going.
    deadline = time.monotonic() + 10
    while not refused(s.port):
        assert time.monotonic() < deadline, "still accepting connections after SIGTERM"
        time.sleep(0.02)
    events, done = read_events(sock)
    sock.close()
    plain.join(timeout=600)
    assert s.proc.wait(timeout=120) == 0
    log = "".join(s.log)
    assert "2 requests in flight" in log, log

    assert done
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 3000
    finishes = [c["finish_reason"] for e in [first, *events] for c in e["choices"]]
    assert finishes[-1] == "length"
    r = results["plain"]
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 3000
    assert r.json()["choices"][0]["finish_reason"] == "length"


def test_shutdown_timeout_aborts_the_rest(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--max-model-len", 8192, "--allow-long-max-model-len",
                     "--shutdown-timeout", 0.2)
    sock, _ = raw_stream(s, "/v1/completions", LONG)
    start = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    events, done = read_events(sock)
    sock.close()
    assert s.proc.wait(timeout=60) == 0
    assert time.monotonic() - start < 30
    assert done
    assert events[-1]["choices"][0]["finish_reason"] == "abort"
    assert "aborting 1 requests" in "".join(s.log)


def test_sigint_exits_cleanly(deepinfer_bin):
    s = ServeProcess(deepinfer_bin)
    assert s.stop(signal.SIGINT) == 0


def test_port_in_use_fails_at_once(deepinfer_bin):
    s = ServeProcess(deepinfer_bin)
    try:
        proc = subprocess.run([deepinfer_bin, "serve", "--model", str(DATA / "tiny-qwen3"),
                               "--port", str(s.port)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1
        assert f"cannot listen on 127.0.0.1:{s.port}" in proc.stderr
    finally:
        assert s.stop() == 0


def test_bad_flags_fail_with_a_message(run_cli, tmp_path):
    tiny = ["--model", DATA / "tiny-qwen3", "--port", 0]
    for flags, needle in [(tiny + ["--port", "70000"], "--port"),
                          (tiny + ["--max-waiting-requests", "-1"], "--max-waiting-requests"),
                          (tiny + ["--generation-config", "x"], "--generation-config"),
                          (tiny + ["--config", "x.json"], "deepinfer run --config"),
                          (tiny + ["--frobnicate"], "frobnicate"),
                          # The port is bound before loading: a bad model must still exit.
                          (["--model", tmp_path / "missing", "--port", 0], "missing")]:
        proc = run_cli("serve", *flags, timeout=60)
        assert proc.returncode != 0
        assert needle in proc.stderr, proc.stderr
