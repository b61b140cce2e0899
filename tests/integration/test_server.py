"""`deepinfer serve` through the official openai client and raw HTTP: completions and chat,
streamed and not, n > 1, seeds, stop strings, logprobs, usage, generation_config defaults,
concurrency and /metrics."""
import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import requests

from serve_util import TINY, ServeProcess, sample, sse_events

MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def server(deepinfer_bin):
    # A long context (the tiny model's RoPE has no limit) so streams can run for a while.
    s = ServeProcess(deepinfer_bin, "--max-model-len", 4096, "--allow-long-max-model-len",
                     "--max-num-seqs", 16, "--enable-prefix-caching")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                         timeout=120)


def complete(client, prompt, **kw):
    extra = {"return_token_ids": True, **kw.pop("extra_body", {})}
    return client.completions.create(model="tiny-qwen3", prompt=prompt, extra_body=extra,
                                     **kw).model_dump()


def stream_completion(client, prompt, **kw):
    extra = {"return_token_ids": True, **kw.pop("extra_body", {})}
    chunks = [c.model_dump() for c in client.completions.create(
        model="tiny-qwen3", prompt=prompt, stream=True, extra_body=extra, **kw)]
    return chunks


def joined(chunks, index=0):
    """(text, token ids, finish_reason) of one choice from its stream chunks."""
    text, ids, finish = "", [], None
    for c in chunks:
        for ch in c["choices"]:
            if ch["index"] != index:
                continue
            text += ch.get("text") or (ch.get("delta") or {}).get("content") or ""
            ids += ch.get("token_ids") or []
            finish = ch["finish_reason"] or finish
    return text, ids, finish


def test_health_models_and_version(server, client):
    health = requests.get(server.url + "/health", timeout=10)
    assert health.status_code == 200
    models = client.models.list().model_dump()["data"]
    assert [m["id"] for m in models] == ["tiny-qwen3"]
    assert models[0]["object"] == "model" and models[0]["max_model_len"] == 4096
    assert client.models.retrieve("tiny-qwen3").id == "tiny-qwen3"
    assert requests.get(server.url + "/version", timeout=10).json()["version"]


def test_greedy_completion_equals_deepinfer_generate(server, client, deepinfer_bin):
    got = complete(client, "Hello world", max_tokens=24, temperature=0,
                   extra_body={"ignore_eos": True})
    ref = json.loads(subprocess.run(
        [deepinfer_bin, "generate", "--model", str(TINY), "--prompt", "Hello world",
         "--max-new-tokens", "24", "--ignore-eos", "--json"],
        capture_output=True, text=True, check=True).stdout)
    choice = got["choices"][0]
    assert choice["prompt_token_ids"] == ref["prompt_ids"]
    assert choice["token_ids"] == ref["output_ids"]
    assert choice["text"] == ref["text"]
    assert choice["finish_reason"] == "length"
    assert got["object"] == "text_completion" and got["id"].startswith("cmpl-")
    usage = {k: got["usage"][k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    assert usage == {"prompt_tokens": len(ref["prompt_ids"]), "completion_tokens": 24,
                     "total_tokens": len(ref["prompt_ids"]) + 24}


@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 0.9, "seed": 7}])
def test_stream_equals_non_stream_completion(client, sampling):
    kw = dict(max_tokens=40, extra_body={"ignore_eos": True}, **sampling)
    full = complete(client, "The quick brown fox", **kw)
    chunks = stream_completion(client, "The quick brown fox", **kw)
    assert all(c["object"] == "text_completion" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    text, ids, finish = joined(chunks)
    assert text == full["choices"][0]["text"]
    assert ids == full["choices"][0]["token_ids"]
    assert finish == full["choices"][0]["finish_reason"] == "length"


def test_chat_stream_wire_format_and_usage(server, client):
    body = {"model": "tiny-qwen3", "messages": MESSAGES, "max_tokens": 30, "temperature": 0,
            "ignore_eos": True}
    full = server.post("/v1/chat/completions", body).json()
    assert full["object"] == "chat.completion" and full["id"].startswith("chatcmpl-")
    message = full["choices"][0]["message"]
    assert message["role"] == "assistant"
    with server.post("/v1/chat/completions",
                     {**body, "stream": True, "stream_options": {"include_usage": True}},
                     stream=True) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    # First the role, then content deltas, then a usage-only chunk with no choices.
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == full["usage"]
    assert all(c["usage"] is None for c in chunks[:-1])
    text, _, finish = joined(chunks[:-1])
    assert text == message["content"]
    assert finish == full["choices"][0]["finish_reason"] == "length"
    assert full["usage"]["completion_tokens"] == 30

    # The same through the openai client.
    streamed = client.chat.completions.create(model="tiny-qwen3", messages=MESSAGES,
                                              max_tokens=30, temperature=0, stream=True,
                                              extra_body={"ignore_eos": True})
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == \
        message["content"]


@pytest.fixture(scope="module")
def thinking_model(tmp_path_factory):
    """tiny-qwen3 with a template that reacts to enable_thinking (as Qwen3's does)."""
    d = tmp_path_factory.mktemp("tiny-thinking")
    for f in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(TINY / f, d / f)
    config = json.loads((TINY / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] += ("{%- if enable_thinking is defined and not enable_thinking %}"
                                "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}")
    (d / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return d


def test_chat_prompt_is_the_rendered_template(deepinfer_bin, thinking_model, tmp_path):
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    (tmp_path / "m.json").write_text(json.dumps(MESSAGES), encoding="utf-8")
    (tmp_path / "t.json").write_text(json.dumps(tools), encoding="utf-8")

    def template_ids(kwargs, with_tools):
        extra = ["--tools", str(tmp_path / "t.json")] if with_tools else []
        rendered = subprocess.run(
            [deepinfer_bin, "render-chat", "--model", str(thinking_model), "--messages",
             str(tmp_path / "m.json"), "--add-generation-prompt", "--kwargs", json.dumps(kwargs),
             *extra], capture_output=True, check=True).stdout
        (tmp_path / "p.txt").write_bytes(rendered)
        return json.loads(subprocess.run(
            [deepinfer_bin, "tokenize", "--model", str(thinking_model), "--text-file",
             str(tmp_path / "p.txt")], capture_output=True, text=True, check=True).stdout)

    server = ServeProcess(deepinfer_bin, "--max-model-len", 2048, "--allow-long-max-model-len",
                          model=thinking_model)
    try:
        seen = []
        for kwargs in ({}, {"enable_thinking": False}):
            for with_tools in (False, True):
                body = {"messages": MESSAGES, "max_tokens": 1, "return_token_ids": True,
                        "chat_template_kwargs": kwargs}
                if with_tools:
                    body["tools"] = tools
                r = server.post("/v1/chat/completions", body).json()
                assert r["prompt_token_ids"] == template_ids(kwargs, with_tools), (kwargs, tools)
                assert r["usage"]["prompt_tokens"] == len(r["prompt_token_ids"])
                seen.append(tuple(r["prompt_token_ids"]))
        # Tools and the kwarg each change the prompt.
        assert len(set(seen)) == 4
    finally:
        assert server.stop() == 0


def test_n_choices_and_batched_prompts(client):
    two = complete(client, "Once upon a time", n=2, max_tokens=16, temperature=1.0, seed=3,
                   extra_body={"ignore_eos": True})
    assert [c["index"] for c in two["choices"]] == [0, 1]
    assert two["choices"][0]["token_ids"] != two["choices"][1]["token_ids"]
    assert two["usage"]["completion_tokens"] == 32

    batch = complete(client, ["Once upon a time", "In a galaxy"], n=2, max_tokens=8,
                     temperature=0, extra_body={"ignore_eos": True})
    assert [c["index"] for c in batch["choices"]] == [0, 1, 2, 3]
    solo = complete(client, "In a galaxy", max_tokens=8, temperature=0,
                    extra_body={"ignore_eos": True})
    assert batch["choices"][2]["token_ids"] == solo["choices"][0]["token_ids"]
    assert batch["choices"][3]["token_ids"] == solo["choices"][0]["token_ids"]
    assert batch["usage"]["prompt_tokens"] == (len(batch["choices"][0]["prompt_token_ids"])
                                               + len(solo["choices"][0]["prompt_token_ids"]))

    # Streamed n=2: each choice's deltas add up to its non-streamed text.
    chunks = stream_completion(client, "Once upon a time", n=2, max_tokens=16,
                               temperature=1.0, seed=3, extra_body={"ignore_eos": True})
    for i in range(2):
        assert joined(chunks, i)[1] == two["choices"][i]["token_ids"]


def test_seed_reproducibility(client):
    kw = dict(max_tokens=20, temperature=1.0, extra_body={"ignore_eos": True})
    a = complete(client, "Seeds grow", seed=1234, **kw)["choices"][0]["token_ids"]
    b = complete(client, "Seeds grow", seed=1234, **kw)["choices"][0]["token_ids"]
    c = complete(client, "Seeds grow", seed=4321, **kw)["choices"][0]["token_ids"]
    assert a == b
    assert a != c


def test_stop_strings(client):
    kw = dict(max_tokens=40, temperature=0, extra_body={"ignore_eos": True})
    text = complete(client, "Hello world", **kw)["choices"][0]["text"]
    # A stop string from the middle of the greedy text (clean ASCII, so it is unambiguous).
    words = [w for w in text.split() if len(w) >= 3 and w.isascii() and w.isalpha()]
    assert words, text
    stop = words[len(words) // 2]
    expected = text[:text.index(stop)]
    got = complete(client, "Hello world", stop=[stop, "\x00never"], **kw)["choices"][0]
    assert got["text"] == expected
    assert got["finish_reason"] == "stop"
    streamed = stream_completion(client, "Hello world", stop=stop, **kw)
    assert joined(streamed)[0] == expected
    assert joined(streamed)[2] == "stop"
    kept = complete(client, "Hello world", stop=stop,
                    **{**kw, "extra_body": {"ignore_eos": True,
                                            "include_stop_str_in_output": True}})
    assert kept["choices"][0]["text"] == expected + stop


def test_logprobs(server, client):
    r = complete(client, "Hello world", max_tokens=6, temperature=0, logprobs=3,
                 extra_body={"ignore_eos": True})
    lp = r["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 6
    for token, chosen, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        # Distinct ids may decode to the same string (partial UTF-8 shows as U+FFFD): the dict
        # keeps the best logprob per string, so it can hold fewer than 3 + 1 entries.
        assert 1 <= len(top) <= 4 and token in top
        assert chosen <= 0
        # Greedy: the chosen token is the most likely one.
        assert chosen == pytest.approx(max(top.values()), abs=1e-6)
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"])

    chat = client.chat.completions.create(model="tiny-qwen3", messages=MESSAGES, max_tokens=5,
                                          temperature=0, logprobs=True, top_logprobs=2,
                                          extra_body={"ignore_eos": True}).model_dump()
    content = chat["choices"][0]["logprobs"]["content"]
    assert len(content) == 5
    for entry in content:
        assert set(entry) >= {"token", "logprob", "bytes", "top_logprobs"}
        assert len(entry["top_logprobs"]) == 2
        assert entry["top_logprobs"][0]["logprob"] == pytest.approx(entry["logprob"], abs=1e-6)
        assert entry["top_logprobs"][0]["logprob"] >= entry["top_logprobs"][1]["logprob"]
        assert isinstance(entry["bytes"], list)


def test_generation_config_supplies_omitted_sampling_fields(client):
    # tiny-qwen3's generation_config.json: temperature 0.6, top_k 20, top_p 0.95.
    kw = dict(max_tokens=24, seed=99, extra_body={"ignore_eos": True})
    omitted = complete(client, "Defaults", **kw)["choices"][0]["token_ids"]
    explicit = complete(client, "Defaults", temperature=0.6, top_p=0.95,
                        extra_body={"ignore_eos": True, "top_k": 20}, max_tokens=24,
                        seed=99)["choices"][0]["token_ids"]
    hot = complete(client, "Defaults", temperature=1.0, top_p=1.0,
                   extra_body={"ignore_eos": True, "top_k": 0}, max_tokens=24,
                   seed=99)["choices"][0]["token_ids"]
    assert omitted == explicit
    assert omitted != hot


def test_token_prompts_echo_and_unknown_fields(server):
    ids = [39, 392, 450, 75, 67]
    r = server.post("/v1/completions", {"prompt": ids, "max_tokens": 4, "temperature": 0,
                                        "echo": True, "return_token_ids": True,
                                        "some_future_field": {"x": 1}})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["prompt_token_ids"] == ids
    text = server.post("/v1/completions", {"prompt": "Hello world", "max_tokens": 4,
                                           "temperature": 0}).json()["choices"][0]["text"]
    assert choice["text"].endswith(text) and len(choice["text"]) > len(text)
    assert any("some_future_field" in line for line in server.log)


def test_concurrent_requests_equal_their_solo_results(client):
    prompts = [f"Story number {i}:" for i in range(8)]
    kw = dict(max_tokens=32, temperature=0, extra_body={"ignore_eos": True})
    solo = [complete(client, p, **kw)["choices"][0]["token_ids"] for p in prompts]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda p: complete(client, p, **kw)["choices"][0]["token_ids"],
                                 prompts))
        streamed = list(pool.map(lambda p: joined(stream_completion(client, p, **kw))[1],
                                 prompts))
    assert together == solo
    assert streamed == solo


def test_metrics_count_requests(server, client):
    before = server.metrics()
    r = complete(client, "Count me", max_tokens=5, temperature=0,
                 extra_body={"ignore_eos": True})
    after = server.metrics()

    def delta(name, **labels):
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert delta("deepinfer:prompt_tokens_total") == r["usage"]["prompt_tokens"]
    assert delta("deepinfer:generation_tokens_total") == 5
    assert delta("deepinfer:request_success_total", finished_reason="length") == 1
    assert delta("deepinfer:time_to_first_token_seconds_count") == 1
    assert delta("deepinfer:e2e_request_latency_seconds_count") == 1
    assert delta("deepinfer:inter_token_latency_seconds_count") == 4
    assert delta("deepinfer:http_requests_total", endpoint="/v1/completions", status="200") == 1
    for name in ("deepinfer:num_requests_running", "deepinfer:num_requests_waiting",
                 "deepinfer:kv_cache_usage_perc", "deepinfer:prefix_cache_hit_rate",
                 "deepinfer:num_preemptions_total", "deepinfer:prefix_cache_queries_total",
                 "deepinfer:request_queue_time_seconds_count"):
        assert (name, ()) in after, name
    # Prefix caching is on: a repeated prompt finds its blocks.
    assert sample(after, "deepinfer:prefix_cache_queries_total") > 0
