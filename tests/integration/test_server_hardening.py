"""`deepinfer serve` under hostile clients (issue #14): bodies and headers over the limits
answered at once in bounded memory, slow clients that hold no thread and are cut at the
request timeout, a SIGTERM that always ends, bounded prompt parsing, abort on disconnect,
overflowing max_tokens, methods, Host / CORS / content type / API key sources."""
import json
import os
import signal
import socket
import threading
import time

import pytest
import requests

from conftest import SANITIZED
from serve_util import MB, PeakRss, ServeProcess, check_rss, sample

LONG_FLAGS = ("--max-model-len", 8192, "--allow-long-max-model-len")


def read_status(sock, timeout):
    """Reads until the end of a response head; returns (status, head text)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head = data.split(b"\r\n\r\n")[0].decode("latin-1")
    assert head.startswith("HTTP/1.1 "), data[:200]
    return int(head.split()[1]), head


def send_flood(port, head, body_chunks, timeout=1.0):
    """Sends `head` then the chunks from a thread (as a client that does not wait for an
    answer), reads the response status on the side; returns (status, seconds)."""
    sock = socket.create_connection(("127.0.0.1", port))
    stop = threading.Event()

    def pump():
        try:
            sock.sendall(head)
            for chunk in body_chunks:
                if stop.is_set():
                    return
                sock.sendall(chunk)
        except OSError:
            pass  # the server closed the connection after answering

    start = time.monotonic()
    sender = threading.Thread(target=pump, daemon=True)
    sender.start()
    try:
        status, _ = read_status(sock, timeout + 5)
        return status, time.monotonic() - start
    finally:
        stop.set()
        sock.close()
        sender.join(timeout=10)


@pytest.fixture(scope="module")
def server(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, *LONG_FLAGS)
    yield s
    assert s.stop() == 0


def chunked_body(total):
    piece = b"x" * MB
    for _ in range(total // MB):
        yield b"%x\r\n" % len(piece) + piece + b"\r\n"
    yield b"0\r\n\r\n"


def test_chunked_body_over_the_limit_is_413_at_once(server):
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
            b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    with PeakRss(server.proc.pid) as rss:
        status, seconds = send_flood(server.port, head, chunked_body(200 * MB))
    assert status == 413
    assert seconds < 1.0
    check_rss(rss, 16 * MB)


def test_body_without_length_is_411_at_once(server):
    # RFC 9110: a POST with neither Content-Length nor Transfer-Encoding has no body; the
    # server answers 411 Length Required and never reads what follows as a body.
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\n\r\n")
    with PeakRss(server.proc.pid) as rss:
        status, seconds = send_flood(server.port, head, (b"x" * MB for _ in range(200)))
    assert status == 411
    assert seconds < 1.0
    check_rss(rss, 16 * MB)


def many_headers(count):
    line = b"X-A: b\r\n"
    batch = line * 10000
    for _ in range(count // 10000):
        yield batch
    yield b"\r\n"


@pytest.mark.parametrize("with_key", [False, True])
def test_a_million_headers_is_431_at_once(deepinfer_bin, server, with_key):
    s = server
    if with_key:
        s = ServeProcess(deepinfer_bin, "--api-key", "k")
    try:
        head = b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n"
        with PeakRss(s.proc.pid) as rss:
            status, seconds = send_flood(s.port, head, many_headers(1_000_000))
        assert status == 431
        assert seconds < 1.0
        check_rss(rss, 16 * MB)
    finally:
        if with_key:
            assert s.stop() == 0


def test_length_errors(server):
    def status_of(raw):
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(raw)
            start = time.monotonic()
            status, _ = read_status(sock, 5)
            return status, time.monotonic() - start

    base = b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    assert status_of(base + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}")[0] == 400
    status, seconds = status_of(base + b"Content-Length: -1\r\n\r\n")
    assert status == 400 and seconds < 1.0
    assert status_of(base + b"Content-Length: 9999999999999\r\n\r\n")[0] == 413
    assert status_of(base + b"Transfer-Encoding: gzip\r\n\r\n")[0] == 501


def test_slowloris_holds_no_thread_and_is_cut_at_the_request_timeout(server):
    # 300 clients trickle a header byte at a time; normal requests are served meanwhile with
    # the default handler threads, and the tricklers are closed at the request timeout (15 s).
    slow = []
    for _ in range(300):
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        slow.append(sock)
    stream = requests.post(server.url + "/v1/completions", stream=True, timeout=60,
                           headers={"Content-Type": "application/json"},
                           data=json.dumps({"prompt": "Once", "max_tokens": 6000, "stream": True,
                                            "ignore_eos": True, "temperature": 0}))
    assert stream.status_code == 200
    lines = stream.iter_lines()
    next(lines)
    for i in range(4):
        start = time.monotonic()
        r = server.post("/v1/completions", {"prompt": "Hello", "max_tokens": 4}, timeout=10)
        assert r.status_code == 200, r.text
        assert time.monotonic() - start < 1.0
    start = time.monotonic()
    open_socks = set(range(len(slow)))
    while open_socks and time.monotonic() - start < 20:
        for i in list(open_socks):
            try:
                slow[i].setblocking(False)
                slow[i].send(b"a")
                data = slow[i].recv(4096)
                if data == b"" or data.startswith(b"HTTP/1.1 408"):
                    open_socks.discard(i)
            except BlockingIOError:
                pass
            except OSError:
                open_socks.discard(i)
        time.sleep(1.0)
    elapsed = time.monotonic() - start
    for sock in slow:
        sock.close()
    assert not open_socks, f"{len(open_socks)} trickling connections still open after {elapsed} s"
    # The open stream waiting for tokens was not cut.
    got = 0
    for line in lines:
        if line.startswith(b"data: {"):
            got += 1
            if got == 5:
                break
    assert got == 5
    stream.close()


def open_stream(port):
    payload = json.dumps({"prompt": "Once", "max_tokens": 7000, "stream": True,
                          "ignore_eos": True, "temperature": 0}).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload)
                 + payload)
    return sock


def read_all(sock, timeout):
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data


@pytest.mark.parametrize("run", range(int(os.environ.get("DEEPINFER_SHUTDOWN_RUNS", "10"))))
def test_sigterm_always_ends(deepinfer_bin, run):
    s = ServeProcess(deepinfer_bin, *LONG_FLAGS, "--shutdown-timeout", 1, "--max-num-seqs", 32)
    idle = socket.create_connection(("127.0.0.1", s.port))
    idle.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert read_status(idle, 10)[0] == 200  # now an idle keep-alive connection
    trickler = socket.create_connection(("127.0.0.1", s.port))
    trickler.sendall(b"GET /health HTTP/1.1\r\nHost: loc")
    streams = [open_stream(s.port) for _ in range(30)]
    deadline = time.monotonic() + 30
    while sample(s.metrics(), "deepinfer:num_requests_running") < 30:
        assert time.monotonic() < deadline, "the 30 streams never ran together"
        time.sleep(0.02)
    start = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    try:
        rc = s.proc.wait(timeout=1 + 2)
    except Exception:
        s.proc.kill()
        raise AssertionError("serve did not exit within --shutdown-timeout + 2 s")
    assert rc == 0
    assert time.monotonic() - start <= 3
    for sock in streams:
        data = read_all(sock, 2)
        sock.close()
        assert b'"finish_reason":"abort"' in data or b'"finish_reason":"length"' in data, data[-300:]
        assert b"data: [DONE]" in data, data[-300:]
    idle.close()
    trickler.close()


def test_huge_prompts_are_refused_in_bounded_memory(server):
    body = json.dumps({"prompt": "a " * (3 * MB), "max_tokens": 1}).encode()
    assert len(body) > 6 * MB
    results = []

    def one():
        r = requests.post(server.url + "/v1/completions", data=body, timeout=60,
                          headers={"Content-Type": "application/json"})
        results.append((r.status_code, r.json()["error"].get("code")))

    with PeakRss(server.proc.pid) as rss:
        threads = [threading.Thread(target=one) for _ in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    refused = [(400, "context_length_exceeded")]
    if SANITIZED:
        # ASan makes each 6 MB parse several times slower: requests waiting for the body budget
        # may reach the request timeout (408). The Release run asserts 400 for every one.
        assert set(results) <= {refused[0], (408, None)} and refused[0] in results, results
    else:
        assert results == refused * 32
    check_rss(rss, 256 * MB)


def test_disconnected_non_streamed_requests_are_aborted(server):
    payload = json.dumps({"prompt": "Once", "max_tokens": 7000, "ignore_eos": True}).encode()
    socks = []
    for _ in range(8):
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                     % len(payload) + payload)
        socks.append(sock)
    deadline = time.monotonic() + 30
    while sample(server.metrics(), "deepinfer:num_requests_running") < 8:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    for sock in socks:
        sock.close()
    start = time.monotonic()
    while True:
        m = server.metrics()
        if (sample(m, "deepinfer:num_requests_running") == 0
                and sample(m, "deepinfer:kv_cache_usage_perc") == 0):
            break
        assert time.monotonic() - start < 1.0, "the requests ran on after their clients left"
        time.sleep(0.02)


@pytest.mark.parametrize("max_tokens", [2**63 - 1, 2**63 - 2])
def test_max_tokens_near_2_63_is_context_length_exceeded(server, max_tokens):
    prompt_tokens = server.post("/v1/completions", {"prompt": "Hello", "max_tokens": 1}).json()[
        "usage"]["prompt_tokens"]
    r = server.post("/v1/completions", {"prompt": "Hello", "max_tokens": max_tokens})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "context_length_exceeded"
    # The total is reported exactly (no wrap-around past 2^63).
    assert f"you requested {prompt_tokens + max_tokens} tokens" in r.json()["error"]["message"]


def test_wrong_method_is_405_with_allow(server):
    r = requests.get(server.url + "/v1/completions", timeout=10)
    assert r.status_code == 405
    assert r.headers["Allow"] == "POST"
    r = requests.delete(server.url + "/health", timeout=10)
    assert r.status_code == 405
    assert set(r.headers["Allow"].replace(" ", "").split(",")) == {"GET", "HEAD"}
    assert requests.head(server.url + "/health", timeout=10).status_code == 200
    assert requests.get(server.url + "/nowhere", timeout=10).status_code == 404


def test_host_allow_list_on_loopback(server):
    ok = requests.get(server.url + "/v1/models", timeout=10, headers={"Host": "localhost:1"})
    assert ok.status_code == 200
    evil = requests.get(server.url + "/v1/models", timeout=10, headers={"Host": "evil.example"})
    assert evil.status_code == 400
    assert "evil.example" in evil.json()["error"]["message"]


def test_post_needs_json_content_type(server):
    r = requests.post(server.url + "/v1/completions", timeout=10,
                      data=json.dumps({"prompt": "Hi", "max_tokens": 1}),
                      headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    assert "application/json" in r.json()["error"]["message"]
    r = server.post("/v1/completions", {"prompt": "Hi", "max_tokens": 1},
                    headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200


def test_nul_in_a_request_value_stays_in_the_error(server):
    r = server.post("/v1/completions", {"model": "a\u0000tail", "prompt": "Hi"})
    assert r.status_code == 404
    assert "a\u0000tail" in r.json()["error"]["message"]


def test_api_key_sources_and_scheme(deepinfer_bin, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    s = ServeProcess(deepinfer_bin, "--api-key-file", key_file)
    try:
        assert " from-file" not in " ".join(s.proc.args)
        assert requests.get(s.url + "/v1/models", timeout=10).status_code == 401
        for scheme in ("Bearer", "bearer", "BEARER"):
            r = requests.get(s.url + "/v1/models", timeout=10,
                             headers={"Authorization": f"{scheme} from-file"})
            assert r.status_code == 200, scheme
    finally:
        assert s.stop() == 0
    os.environ["DEEPINFER_API_KEY"] = "from-env"
    try:
        s = ServeProcess(deepinfer_bin)
    finally:
        del os.environ["DEEPINFER_API_KEY"]
    try:
        assert requests.get(s.url + "/v1/models", timeout=10).status_code == 401
        r = requests.get(s.url + "/v1/models", timeout=10,
                         headers={"Authorization": "Bearer from-env"})
        assert r.status_code == 200
    finally:
        assert s.stop() == 0


def test_cors_only_when_configured(deepinfer_bin, server):
    plain = requests.get(server.url + "/v1/models", timeout=10,
                         headers={"Origin": "http://page.example"})
    assert "Access-Control-Allow-Origin" not in plain.headers
    s = ServeProcess(deepinfer_bin, "--allowed-origins", '["http://app.example"]')
    try:
        r = requests.get(s.url + "/v1/models", timeout=10,
                         headers={"Origin": "http://app.example"})
        assert r.headers["Access-Control-Allow-Origin"] == "http://app.example"
        pre = requests.options(s.url + "/v1/chat/completions", timeout=10, headers={
            "Origin": "http://app.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization"})
        assert pre.status_code == 200
        assert pre.headers["Access-Control-Allow-Origin"] == "http://app.example"
        assert "POST" in pre.headers["Access-Control-Allow-Methods"]
        other = requests.options(s.url + "/v1/chat/completions", timeout=10, headers={
            "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
        assert other.status_code == 400
    finally:
        assert s.stop() == 0


def test_warns_beyond_loopback_without_a_key(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--host", "0.0.0.0")
    try:
        assert "without an API key" in "".join(s.log)
    finally:
        assert s.stop() == 0
