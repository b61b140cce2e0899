"""64 concurrent streaming clients in three phases against the tiny model: no error responses
other than the deliberate 503s of --max-waiting-requests, no memory growth between phases 2
and 3 (RSS within 8 MiB), every KV block free at the end. Some clients vanish mid-stream.

DEEPINFER_STRESS_SECONDS sets the phase length (default 20, the acceptance criterion)."""
import json
import os
import random
import threading
import time

import requests

from conftest import SANITIZED
from serve_util import ServeProcess, sample, wait_idle

CLIENTS = 64
PHASE_SECONDS = float(os.environ.get("DEEPINFER_STRESS_SECONDS", "20"))


def rss_mib(pid):
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []

    def add(self, key, failure=None):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            if failure:
                self.failures.append(failure)


def client_loop(url, seed, stop_at, tally):
    rng = random.Random(seed)
    session = requests.Session()
    while time.monotonic() < stop_at:
        chat = rng.random() < 0.5
        body = {"max_tokens": rng.randint(8, 96), "temperature": rng.choice([0, 0.8]),
                "seed": rng.randint(0, 10**6), "stream": True, "ignore_eos": rng.random() < 0.5}
        if chat:
            body["messages"] = [{"role": "user", "content": f"Tell story {rng.randint(0, 99)}"}]
            path = "/v1/chat/completions"
        else:
            body["prompt"] = " ".join(rng.choice(["alpha", "beta", "gamma", "delta"])
                                      for _ in range(rng.randint(1, 40)))
            path = "/v1/completions"
        vanish = rng.random() < 0.1
        try:
            with session.post(url + path, data=json.dumps(body), stream=True, timeout=120,
                              headers={"Content-Type": "application/json"}) as r:
                if r.status_code == 503:
                    tally.add("503")
                    time.sleep(float(r.headers.get("Retry-After", "1")) * rng.random())
                    continue
                if r.status_code != 200:
                    tally.add("error", f"{r.status_code}: {r.text[:200]}")
                    continue
                done = False
                for raw in r.iter_lines():
                    if vanish and raw.startswith(b"data: {"):
                        break  # leaves mid-stream: the connection is dropped below
                    if raw == b"data: [DONE]":
                        done = True
                if vanish:
                    r.raw.close()  # drops the connection with the response unread
                    session.close()
                    session = requests.Session()
                    tally.add("vanished")
                elif done:
                    tally.add("ok")
                else:
                    tally.add("error", "stream ended without [DONE]")
        except requests.RequestException as e:
            tally.add("error", repr(e))


def run_phase(url, phase, tally):
    stop_at = time.monotonic() + PHASE_SECONDS
    threads = [threading.Thread(target=client_loop, args=(url, phase * 1000 + i, stop_at, tally))
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=PHASE_SECONDS + 180)
        assert not t.is_alive(), "a client hung"


def test_64_streaming_clients_three_phases(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--max-num-seqs", 32, "--max-waiting-requests", 24,
                     "--max-model-len", 1024, "--allow-long-max-model-len",
                     "--enable-prefix-caching")
    try:
        rss = []
        tallies = []
        for phase in range(3):
            tally = Tally()
            run_phase(s.url, phase, tally)
            m = wait_idle(s, timeout=60)
            assert sample(m, "deepinfer:num_requests_running") == 0
            assert sample(m, "deepinfer:num_requests_waiting") == 0
            assert sample(m, "deepinfer:kv_cache_usage_perc") == 0
            rss.append(rss_mib(s.proc.pid))
            tallies.append(tally)
            assert not tally.failures, tally.failures[:5]
            assert tally.counts.get("ok", 0) > CLIENTS, tally.counts
        assert sum(t.counts.get("vanished", 0) for t in tallies) > 0
        assert sample(s.metrics(), "deepinfer:request_success_total",
                      finished_reason="abort") > 0  # some vanished clients were cut short
        if not SANITIZED:  # ASan keeps freed memory in quarantine: RSS says nothing there
            assert rss[2] <= rss[1] + 8, rss
        m = s.metrics()
        statuses = {labels: v for (name, labels), v in m.items()
                    if name == "deepinfer:http_requests_total"}
        for labels, count in statuses.items():
            status = dict(labels)["status"]
            assert status in ("200", "503"), (labels, count)
        assert requests.post(s.url + "/v1/completions",
                             json={"prompt": "after", "max_tokens": 2}, timeout=30).ok
    finally:
        assert s.stop() == 0
