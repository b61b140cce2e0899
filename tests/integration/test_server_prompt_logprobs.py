"""Prompt log-probabilities through the server: /v1/completions echo + logprobs with
max_tokens 0 (lm-evaluation-harness's loglikelihood request) gives the perplexity that
`deepinfer validate` computes on the same text in one window, and vLLM's prompt_logprobs list."""
import json
import math

import pytest

from conftest import DATA
from serve_util import TINY, ServeProcess, sse_events

TEXT = (DATA.parent.parent / "data" / "validate" / "gettysburg_address.txt").read_text()
PARAGRAPH = TEXT.split("\n\n")[0]


@pytest.fixture(scope="module")
def server(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--max-model-len", 256, "--enable-prefix-caching")
    yield s
    assert s.stop() == 0


def scored(server, **body):
    r = server.post("/v1/completions", {"model": "tiny-qwen3", "prompt": PARAGRAPH, **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_echo_logprobs_perplexity_equals_validate(server, run_cli, tmp_path):
    out = scored(server, echo=True, logprobs=1, max_tokens=0)
    choice = out["choices"][0]
    lp = choice["logprobs"]
    assert choice["text"] == PARAGRAPH and choice["finish_reason"] == "length"
    n = out["usage"]["prompt_tokens"]
    assert len(lp["tokens"]) == n and lp["token_logprobs"][0] is None
    assert lp["top_logprobs"][0] is None and lp["text_offset"][0] == 0
    nll = [-v for v in lp["token_logprobs"][1:]]
    server_ppl = math.exp(sum(nll) / len(nll))

    text = tmp_path / "paragraph.txt"
    text.write_text(PARAGRAPH)
    proc = run_cli("validate", "-m", TINY, "--reference", TINY, "--text", text, "--window", 256,
                   "--json", "--log-level", "error")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["perplexity"]
    assert report["tokens"] == n - 1  # one window: every token after the first
    assert server_ppl == pytest.approx(report["model"], rel=1e-4)

    # The same again (now a prefix-cache hit for plain requests): identical values.
    again = scored(server, echo=True, logprobs=1, max_tokens=0)["choices"][0]["logprobs"]
    assert again["token_logprobs"] == lp["token_logprobs"]


def test_vllm_prompt_logprobs_list(server):
    out = scored(server, prompt_logprobs=2, max_tokens=1, temperature=0)
    choice = out["choices"][0]
    plp = choice["prompt_logprobs"]
    assert len(plp) == out["usage"]["prompt_tokens"] and plp[0] is None
    for entry in plp[1:]:
        assert 2 <= len(entry) <= 3  # the prompt token plus the top 2
        ranks = sorted(v["rank"] for v in entry.values())
        assert ranks[:2] == [1, 2] or ranks[0] == 1
        assert all(v["logprob"] <= 0 and isinstance(v["decoded_token"], str) for v in entry.values())


def test_streamed_echo_logprobs_equal_the_whole_response(server):
    whole = scored(server, echo=True, logprobs=1, max_tokens=2, temperature=0)["choices"][0]
    r = server.post("/v1/completions", {"model": "tiny-qwen3", "prompt": PARAGRAPH, "echo": True,
                                        "logprobs": 1, "max_tokens": 2, "temperature": 0,
                                        "stream": True}, stream=True)
    assert r.status_code == 200
    events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = [e["choices"][0] for e in events[:-1] if e["choices"]]
    first = chunks[0]
    assert first["text"] == PARAGRAPH  # the echo, sent with the prompt's logprobs
    tokens, values = [], []
    for c in chunks:
        tokens += c["logprobs"]["tokens"]
        values += c["logprobs"]["token_logprobs"]
    assert "".join(c["text"] for c in chunks) == whole["text"]
    assert tokens == whole["logprobs"]["tokens"]
    assert values[0] is None
    assert values[1:] == pytest.approx(whole["logprobs"]["token_logprobs"][1:], abs=1e-6)
