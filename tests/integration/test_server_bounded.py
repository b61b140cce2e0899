"""Bounded work per input byte (issue #44), against a real `deepinfer serve`: bodies of many
keys parsed in linear time and capped, one log line for ignored fields, a tokenizer.json that
expands text refused within its budget, half-closed clients answered, NUL bytes refused,
memory given back after large bodies, vLLM's structured-output fields refused."""
import json
import shutil
import socket
import threading
import time

import pytest
import requests

from conftest import SANITIZED
from serve_util import MB, TINY, PeakRss, ServeProcess, check_rss, rss_kib

# The sanitized server is several times slower: its timing bounds are looser (the Release run
# holds the numbers).
SLOW = 5 if SANITIZED else 1
KEY_CAP = 1024  # JsonBodyLimits::max_object_keys
CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}


@pytest.fixture(scope="module")
def server(deepinfer_bin):
    s = ServeProcess(deepinfer_bin)
    yield s
    assert s.stop() == 0


def many_keys_body(n):
    """A chat request with `n` unknown top-level keys (200k: about 2.2 MB)."""
    keys = ",".join(f'"k{i}":1' for i in range(n))
    return ('{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1,' + keys + "}").encode()


def post_raw(server, path, body, timeout=60):
    return requests.post(server.url + path, data=body, timeout=timeout,
                         headers={"Content-Type": "application/json"})


class HealthProbe:
    """GETs /health every 20 ms on the side; `worst` is the slowest answer in seconds, `failed` the
    answers other than 200 (asserted by the test: an assert in this thread would be lost)."""

    def __init__(self, server):
        self.server = server
        self.worst = 0.0
        self.count = 0
        self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        session = requests.Session()
        while not self.stop.is_set():
            start = time.monotonic()
            if session.get(self.server.url + "/health", timeout=30).status_code != 200:
                self.failed += 1
            self.worst = max(self.worst, time.monotonic() - start)
            self.count += 1
            time.sleep(0.02)

    def __enter__(self):
        self.thread.start()
        time.sleep(0.1)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=60)


def test_eight_requests_of_200k_unknown_keys_are_answered_at_once(server):
    body = many_keys_body(200_000)
    assert len(body) > 2 * MB
    results = []

    def one():
        r = post_raw(server, "/v1/chat/completions", body)
        results.append((r.status_code, r.json()["error"]["message"]))

    with HealthProbe(server) as health:
        start = time.monotonic()
        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
    print(f"8 x 200k keys: {elapsed:.2f} s; /health worst {health.worst * 1000:.0f} ms "
          f"over {health.count} probes")
    assert [status for status, _ in results] == [400] * 8
    assert f"the request body has more than {KEY_CAP} keys" in results[0][1]
    assert elapsed <= 2.0 * SLOW
    assert health.worst < 0.2 * SLOW
    assert health.failed == 0


def test_unknown_fields_are_summarised_in_one_short_log_line(server):
    keys = {f"unknown_field_{i}": i for i in range(1000)}
    r = server.post("/v1/chat/completions", {**CHAT, **keys})
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 10
    while True:
        lines = [line for line in server.log if "request fields ignored" in line]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(lines) == 1, lines
    assert "1000 (unknown_field_0, unknown_field_1" in lines[0]
    assert "unknown_field_999" not in lines[0]
    assert len(lines[0]) < 400


def test_logit_bias_of_100k_entries_is_a_fast_400_naming_the_cap(server):
    bias = ",".join(f'"{i}":1' for i in range(100_000))
    body = ('{"prompt":"Hi","max_tokens":1,"logit_bias":{' + bias + "}}").encode()
    start = time.monotonic()
    r = post_raw(server, "/v1/completions", body)
    elapsed = time.monotonic() - start
    print(f"logit_bias of 100k entries: {r.status_code} in {elapsed * 1000:.0f} ms")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "logit_bias"
    assert f"'logit_bias' has more than {KEY_CAP} keys" in error["message"]
    assert elapsed < 0.5 * SLOW, elapsed


def test_tool_schema_over_the_cap_names_its_path(server):
    properties = {f"p{i}": {"type": "string"} for i in range(80_000)}
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": properties}}}
    start = time.monotonic()
    r = server.post("/v1/chat/completions", {**CHAT, "tools": [tool]})
    assert time.monotonic() - start < 1.0 * SLOW
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "tools"
    assert "'tools[0].function.parameters.properties' has more than" in r.json()["error"]["message"]


@pytest.mark.parametrize("field, value", [
    ("guided_json", {"type": "object"}),
    ("guided_regex", "[a-z]+"),
    ("guided_choice", ["yes", "no"]),
    ("guided_grammar", "root ::= \"a\""),
    ("guided_decoding_backend", "xgrammar"),
    ("guided_whitespace_pattern", " *"),
    ("structural_tag", "{}"),
    ("structured_outputs", {"json": {"type": "object"}}),
    ("response_format", {"type": "json_object"}),
    ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}),
])
@pytest.mark.parametrize("path, base", [
    ("/v1/chat/completions", CHAT),
    ("/v1/completions", {"prompt": "Hi", "max_tokens": 1}),
])
def test_structured_output_fields_are_refused_until_implemented(server, path, base, field, value):
    r = server.post(path, {**base, field: value})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field
    assert field in r.json()["error"]["message"]
    # null is absent, as for every field.
    assert server.post(path, {**base, field: None}).status_code == 200


@pytest.mark.parametrize("body", [
    b'{"prompt": "Hi", "max_tokens": 1}\x00{"prompt": "other"}',
    b'{"prompt": "Hi", "max_tokens": 1\x00}',
    b'{"prompt": "H\x00i", "max_tokens": 1}',
])
def test_a_nul_byte_in_the_body_is_invalid_json(server, body):
    r = post_raw(server, "/v1/completions", body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_json"
    assert "NUL" in r.json()["error"]["message"]
    # The escaped form is a character of the prompt.
    assert server.post("/v1/completions", {"prompt": "H\u0000i", "max_tokens": 1}).status_code == 200


def half_closed_exchange(port, request):
    """Sends `request`, shuts down the sending side (as `nc -N`), reads until the server
    closes; returns the final response's status (interim 1xx responses skipped, as HTTP/1.1
    clients must) and its body."""
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(30)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    while data.startswith(b"HTTP/1.1 1"):
        data = data[data.index(b"\r\n\r\n") + 4:]
    if not data:
        return None, b""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_half_closed_clients_get_their_response(server):
    payload = json.dumps({"prompt": "Once upon a time", "max_tokens": 8}).encode()
    post = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload)
            + payload)
    health = b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    for request in (health, post):
        answered = 0
        for _ in range(20):
            status, body = half_closed_exchange(server.port, request)
            if status == 200:
                answered += 1
                if request is post:
                    assert json.loads(body)["choices"][0]["text"], body
        assert answered == 20, (request[:20], answered)


def test_memory_is_given_back_after_large_bodies(server):
    # 8 bodies just under the 8 MiB limit, each a prompt of 4 million token ids: the parse
    # holds many times that; the prompt is then refused (longer than the context).
    ids = ",".join(["1"] * (4 * MB - 16))
    body = ('{"max_tokens":1,"prompt":[' + ids + "]}").encode()
    assert 7.9 * MB < len(body) <= 8 * MB
    requests.get(server.url + "/health", timeout=10)
    before = rss_kib(server.proc.pid, "VmRSS") * 1024

    statuses = []

    def one():
        statuses.append(post_raw(server, "/v1/completions", body).status_code)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Under ASan reading 8 bodies of 8 MiB at once can outlast the request deadline: a 408.
    allowed = {400, 408} if SANITIZED else {400}
    assert len(statuses) == 8 and set(statuses) <= allowed, statuses
    time.sleep(0.2)
    after = rss_kib(server.proc.pid, "VmRSS") * 1024
    print(f"RSS before {before / MB:.0f} MiB, after 8 x 8 MiB bodies {after / MB:.0f} MiB")
    if not SANITIZED:  # ASan keeps freed memory in its quarantine
        assert after - before <= 32 * MB


def expanding_model(tmp_path, times):
    """tiny-qwen3 whose normalizer also replaces each "a" by `times` of them."""
    model = tmp_path / "expanding"
    shutil.copytree(TINY, model)
    path = model / "tokenizer.json"
    doc = json.loads(path.read_text())
    doc["normalizer"] = {"type": "Sequence", "normalizers": [
        doc["normalizer"],
        {"type": "Replace", "pattern": {"String": "a"}, "content": "a" * times}]}
    path.write_text(json.dumps(doc))
    return model


def test_expanding_normalizer_warns_at_load_and_is_refused_within_budget(deepinfer_bin, tmp_path):
    s = ServeProcess(deepinfer_bin, model=expanding_model(tmp_path, 100_000))
    try:
        assert any("the normalizer can make text up to" in line for line in s.log), s.log
        prompt = ("a" * 99 + " ") * 5
        assert len(prompt) == 500
        with PeakRss(s.proc.pid) as rss:
            start = time.monotonic()
            r = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 1})
            elapsed = time.monotonic() - start
        print(f"500-byte prompt, 100000x normalizer: {r.status_code} in {elapsed * 1000:.0f} ms")
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["param"] == "prompt"
        assert "tokenization budget of " in error["message"]
        assert "normalizer Replace" in error["message"]
        assert elapsed < 1.0 * SLOW
        check_rss(rss, 64 * MB)
        # Text without the expanded letter still tokenizes, and the server keeps serving.
        assert s.post("/v1/completions", {"prompt": "Hi there", "max_tokens": 1}).status_code == 200
        assert requests.get(s.url + "/health", timeout=10).status_code == 200
    finally:
        assert s.stop() == 0
