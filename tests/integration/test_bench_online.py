"""`deepinfer bench --mode online`: against a server it starts (request rate 4, 64 requests:
every request accounted for, percentiles recomputed from the per-request records), and against
a hand-written server (--base-url) whose answers are known: 503s from an admission limit and
streams cut short are failures with their reasons, TTFT is the first chunk with text, token
counts come from the usage chunk."""
import http.server
import json
import threading
import time

import pytest

from bench_util import check_summaries
from conftest import DATA

TINY = DATA / "tiny-qwen3"


def test_online_against_a_started_server(run_cli):
    proc = run_cli("bench", "--mode", "online", "--model", TINY, "--threads", 2,
                   "--num_samples", 64, "--warmup", 2, "--request-rate", 4, "--seed", 1,
                   "--input-len", 16, "--output-len", 8, "--json", timeout=120, check=True)
    run = json.loads(proc.stdout)
    assert run["mode"] == "online" and run["server"] == "started by bench"
    assert run["sent"] == 64 and run["completed"] + run["failed"] == 64
    assert run["completed"] == 64, run["failure_reasons"]
    check_summaries(run)
    sent = [r["sent_s"] for r in run["requests"]]
    assert sent == sorted(sent)
    # 63 exponential gaps of mean 1/4 s: about 16 s in all.
    assert 8 < sent[-1] < 30
    assert all(r["output_tokens"] == 8 and r["prompt_tokens"] == 16 for r in run["requests"])
    assert run["peak_rss_mb"] > 0
    assert run["kv_blocks"] > 0 and 0 <= run["peak_kv_blocks"] <= run["kv_blocks"]
    assert "bench: starting deepinfer serve" in proc.stderr


def test_admission_limit_503s_are_failures_with_their_reason(run_cli):
    proc = run_cli("bench", "--mode", "online", "--model", TINY, "--threads", 2,
                   "--num-prompts", 24, "--input-len", 64, "--output-len", 4,
                   "--max-waiting-requests", 1, "--json", timeout=120, check=True)
    run = json.loads(proc.stdout)
    assert run["completed"] + run["failed"] == run["sent"] == 24
    failed = [r for r in run["requests"] if r["status"] == "failed"]
    # 24 requests at once with room for one waiting: the rest are refused.
    assert failed and run["failure_reasons"] == {"http_503": len(failed)}
    for r in failed:
        assert r["http_status"] == 503 and "--max-waiting-requests 1" in r["error"]
    check_summaries(run)


class FakeServer(http.server.ThreadingHTTPServer):
    """Answers by arrival order n: n % 4 == 1 -> 503 (admission limit), n % 4 == 3 -> a stream
    cut after its first event, else a stream of an empty chunk, a 0.15 s pause, three text
    chunks and a usage chunk, with events split across HTTP chunks."""
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.count = 0
        self.bodies = []
        self.lock = threading.Lock()


class FakeHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def chunk(self, data):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "fake-model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            n = self.server.count
            self.server.count += 1
            self.server.bodies.append(body)
        if n % 4 == 1:
            error = json.dumps({"error": {"message": "the server is overloaded (fake)",
                                          "type": "overloaded", "code": 503}}).encode()
            self.send_response(503)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            self.wfile.write(error)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        event = lambda p: f"data: {json.dumps(p)}\n\n".encode()
        text = lambda t: event({"choices": [{"index": 0, "text": t, "finish_reason": None}],
                                "usage": None})
        self.chunk(text(""))
        if n % 4 == 3:
            self.close_connection = True
            return
        time.sleep(0.15)
        first = text("a")
        self.chunk(first[:9])  # one event split across two HTTP chunks
        self.chunk(first[9:] + text("b"))
        time.sleep(0.02)
        self.chunk(text("c") + event({"choices": [], "usage": {
            "prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}))
        self.chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def fake_server():
    server = FakeServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_client_against_a_known_server(run_cli, fake_server, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"question {i}"}) for i in range(3)))
    url = f"http://127.0.0.1:{fake_server.server_address[1]}"
    proc = run_cli("bench", "--mode", "online", "--base-url", url, "--dataset", prompts,
                   "--num_samples", 8, "--max-concurrency", 1, "--output-len", 3, "--json",
                   check=True)
    run = json.loads(proc.stdout)
    assert run["server"] == "external" and run["model"] == "fake-model"
    assert run["sent"] == 8 and run["completed"] == 4 and run["failed"] == 4
    assert run["failure_reasons"] == {"http_503": 2, "stream": 2}
    by_index = {r["index"]: r for r in run["requests"]}
    for i in (1, 5):
        assert by_index[i]["http_status"] == 503
        assert by_index[i]["error"] == "HTTP 503: the server is overloaded (fake)"
    for i in (3, 7):
        assert "[DONE]" in by_index[i]["error"] or "closed" in by_index[i]["error"]
    for i in (0, 2, 4, 6):
        r = by_index[i]
        assert r["status"] == "completed"
        assert r["prompt_tokens"] == 5 and r["output_tokens"] == 3
        assert r["ttft_ms"] >= 150  # the empty first chunk is not content
        assert len(r["itl_ms"]) == 2 and r["itl_ms"][1] >= 15
    check_summaries(run)
    # What was asked: the dataset's prompts in order (cycled), streamed with usage.
    assert [b["prompt"] for b in fake_server.bodies] == [f"question {i % 3}" for i in range(8)]
    for b in fake_server.bodies:
        assert b["model"] == "fake-model" and b["max_tokens"] == 3 and b["stream"] is True
        assert b["stream_options"] == {"include_usage": True}


def test_duration_ends_sending(run_cli, fake_server, tmp_path):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps(["a", "b"]))
    url = f"http://127.0.0.1:{fake_server.server_address[1]}"
    start = time.monotonic()
    proc = run_cli("bench", "--mode", "online", "--base-url", url, "--dataset", prompts,
                   "--duration", 1, "--request-rate", 10, "--output-len", 3,
                   "--served-model-name", "m", "--json", check=True)
    run = json.loads(proc.stdout)
    assert time.monotonic() - start < 10
    assert 2 <= run["sent"] <= 30 and run["completed"] + run["failed"] == run["sent"]
    assert all(r["sent_s"] < 1.0 for r in run["requests"])
    assert fake_server.count == run["sent"]
