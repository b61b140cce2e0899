"""A real `deepinfer serve` process for the server tests: started on a free port (--port 0,
the bound port read from its log), ready when /health is 200, stopped with SIGTERM."""
import json
import re
import socket
import signal
import subprocess
import threading
import time

import requests
from prometheus_client.parser import text_string_to_metric_families

from conftest import DATA, SANITIZED

TINY = DATA / "tiny-qwen3"
MB = 1 << 20


class ServeProcess:
    def __init__(self, binary, *flags, model=TINY, wait_ready=True, timeout=120, positional=False):
        # positional: `serve MODEL ...` as vllm serve takes it, else `serve --model MODEL`.
        model_args = [str(model)] if positional else ["--model", str(model)]
        args = [binary, "serve", *model_args, "--port", "0", "--threads", "2", *map(str, flags)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, errors="replace")
        self.log = []
        self.port = None
        deadline = time.monotonic() + timeout
        # The first log lines carry the bound port; the rest is drained in the background so
        # the pipe never fills.
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError(f"serve exited early ({self.proc.wait()}): {''.join(self.log)}")
            self.log.append(line)
            match = re.search(r"listening on http://[^:]+:(\d+)", line)
            if match:
                self.port = int(match.group(1))
            if time.monotonic() > deadline:
                raise AssertionError("serve did not report its port")
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()
        self.url = f"http://127.0.0.1:{self.port}"
        if wait_ready:
            self.wait_ready(deadline)

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def wait_ready(self, deadline):
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"serve died: {''.join(self.log)}"
            try:
                status = requests.get(self.url + "/health", timeout=5).status_code
                assert status in (200, 503), status
                if status == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.05)
        raise AssertionError("serve never became ready")

    def post(self, path, body, **kwargs):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
        return requests.post(self.url + path, data=data, headers=headers,
                             timeout=kwargs.pop("timeout", 120), **kwargs)

    def metrics(self):
        """{(sample name, labels without model_name): value}"""
        text = requests.get(self.url + "/metrics", timeout=30).text
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "model_name"))
                out[(s.name, labels)] = s.value
        return out

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"serve did not exit after {sig!r}: {''.join(self.log)}")


def sample(metrics, name, **labels):
    return metrics[(name, tuple(sorted(labels.items())))]


def wait_idle(server, timeout=20):
    """Waits until nothing runs or waits and the KV cache is empty; returns the metrics."""
    deadline = time.monotonic() + timeout
    while True:
        m = server.metrics()
        idle = (sample(m, "deepinfer:num_requests_running") == 0
                and sample(m, "deepinfer:num_requests_waiting") == 0
                and sample(m, "deepinfer:kv_cache_usage_perc") == 0)
        if idle or time.monotonic() > deadline:
            return m
        time.sleep(0.05)


def sse_events(response):
    """The data payloads of an SSE response, in order ("[DONE]" included); comments skipped."""
    events = []
    for raw in response.iter_lines(decode_unicode=False):
        if not raw or raw.startswith(b":"):
            continue
        assert raw.startswith(b"data: "), raw
        payload = raw[len(b"data: "):].decode("utf-8")
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def raw_stream(server, path, body, timeout=60):
    """Opens a streaming request on a plain socket and reads up to its first SSE data event;
    returns (socket, first event). Closing the socket is a client vanishing mid-stream."""
    payload = json.dumps({**body, "stream": True}).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    received = b""
    while b"\ndata: " not in received and not received.startswith(b"data: "):
        chunk = sock.recv(65536)
        assert chunk, f"connection closed early: {received!r}"
        received += chunk
        assert received.startswith(b"HTTP/1.1 200"), received[:200]
        # The event ends with a blank line (inside one HTTP chunk).
        if b"data: " in received and b"\n\n" in received[received.index(b"data: "):]:
            break
    start = received.index(b"data: ") + len(b"data: ")
    end = received.index(b"\n\n", start)
    return sock, json.loads(received[start:end])


def reset_peak_rss(pid):
    # Writing 5 to clear_refs resets VmHWM (the peak RSS) to the current RSS.
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def rss_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(field)


class PeakRss:
    """Peak RSS growth of a process over a with-block, in bytes."""

    def __init__(self, pid):
        self.pid = pid

    def __enter__(self):
        reset_peak_rss(self.pid)
        self.start = rss_kib(self.pid, "VmRSS")
        return self

    def __exit__(self, *exc):
        self.growth = (rss_kib(self.pid, "VmHWM") - self.start) * 1024


def check_rss(rss, limit):
    # Under ASan the process's memory is mostly ASan's (quarantine, shadow): the Release run
    # checks the bound.
    print(f"peak RSS growth {rss.growth / MB:.1f} MiB (limit {limit / MB:.0f})")
    if not SANITIZED:
        assert rss.growth <= limit, rss.growth
