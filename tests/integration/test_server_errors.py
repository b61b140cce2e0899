"""Every bad request gets the OpenAI error object with the right status, and the server keeps
serving: malformed JSON, wrong types, out-of-range and huge values, unknown model or route,
API keys, oversized bodies, prompts over max_model_len, overload (503) and clients that
vanish mid-stream."""
import time

import openai
import pytest
import requests

from serve_util import ServeProcess, raw_stream, sample, wait_idle

GOOD = {"model": "tiny-qwen3", "prompt": "Hello", "max_tokens": 3, "temperature": 0}


@pytest.fixture(scope="module")
def server(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--max-body-bytes", 65536, "--max-model-len", 8192,
                     "--allow-long-max-model-len", "--max-num-seqs", 4)
    yield s
    assert s.stop() == 0


def assert_error(response, status, param=None, code=None):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    assert error["type"] == ("invalid_request_error" if status < 500 else "server_error")
    if param is not None:
        assert error["param"] == param, error
    if code is not None:
        assert error["code"] == code, error
    return error


def assert_still_serving(server):
    r = server.post("/v1/completions", GOOD)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("body", [b"{", b"", b"not json", b'{"prompt": "a",}', b"[1, 2",
                                  b'{"prompt": "\xff\xfe bad utf-8"}',
                                  b'{"prompt": "\\ud800 lone surrogate"}',
                                  b"[" * 5000 + b"]" * 5000])
def test_malformed_json(server, body):
    for path in ("/v1/completions", "/v1/chat/completions"):
        assert_error(server.post(path, body), 400, code="invalid_json")
    assert_still_serving(server)


@pytest.mark.parametrize("field,value", [
    ("temperature", "hot"), ("temperature", -1), ("temperature", 1e308), ("top_p", 0),
    ("top_p", [1]), ("top_k", -5), ("min_p", 2), ("max_tokens", -1),
    ("prompt_logprobs", 21), ("max_tokens", "ten"), ("max_tokens", 1.5), ("max_tokens", 10**30), ("n", 0), ("n", 1000),
    ("n", None), ("seed", "abc"), ("stop", 5), ("stop", [""]), ("logprobs", 50),
    ("presence_penalty", 9), ("frequency_penalty", -9), ("repetition_penalty", -1),
    ("stream", "yes"), ("ignore_eos", "no"), ("priority", 1), ("logit_bias", {"1": 5}),
    ("stop_token_ids", [10**9]), ("model", 7),
])
def test_bad_parameters_name_the_parameter(server, field, value):
    body = {**GOOD, field: value}
    r = server.post("/v1/completions", body)
    if value is None:  # null means "absent": the request is fine
        assert r.status_code == 200, r.text
        return
    error = assert_error(r, 400, param=field)
    assert field in error["message"]
    assert_still_serving(server)


@pytest.mark.parametrize("body,param", [
    ({"prompt": ""}, "prompt"), ({"prompt": []}, "prompt"), ({"prompt": [600]}, "prompt"),
    ({"prompt": [-3]}, "prompt"), ({"prompt": {"text": "a"}}, "prompt"), ({}, "prompt"),
    ({"prompt": "a", "suffix": "b"}, "suffix"),
])
def test_bad_prompts(server, body, param):
    assert_error(server.post("/v1/completions", {**body, "max_tokens": 2}), 400, param=param)
    assert_still_serving(server)


@pytest.mark.parametrize("body,param", [
    ({"messages": []}, "messages"), ({"messages": "hi"}, "messages"),
    ({"messages": [{"content": "x"}]}, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages"),
    ({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}, "top_logprobs"),
    ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}, "tool_choice"),
    ({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -2},
     "max_completion_tokens"),
])
def test_bad_chat_requests(server, body, param):
    assert_error(server.post("/v1/chat/completions", body), 400, param=param)
    assert_still_serving(server)


def test_prompt_longer_than_max_model_len(server):
    long_prompt = list(range(1, 500)) * 17  # 8483 ids > 8192
    assert_error(server.post("/v1/completions", {"prompt": long_prompt, "max_tokens": 1}),
                 400, param="prompt", code="context_length_exceeded")
    fits = list(range(1, 500)) * 16  # 7984 ids: fits, but not with 500 more tokens
    error = assert_error(server.post("/v1/completions", {"prompt": fits, "max_tokens": 500}),
                         400, code="context_length_exceeded")
    assert "8192" in error["message"] and "8484" in error["message"]
    assert_still_serving(server)


def test_unknown_model_route_and_method(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        client.completions.create(model="gpt-9", prompt="hi", max_tokens=2)
    assert info.value.body["code"] == "model_not_found"
    assert_error(server.post("/v1/chat/completions",
                             {"model": "nope", "messages": [{"role": "user", "content": "x"}]}),
                 404, param="model", code="model_not_found")
    assert_error(requests.get(server.url + "/v1/models/nope", timeout=10), 404)
    assert_error(server.post("/v1/embeddings", {"input": "x"}), 404)
    assert_error(requests.get(server.url + "/v2/anything", timeout=10), 404)
    assert requests.get(server.url + "/v1/completions", timeout=10).status_code in (404, 405)
    assert_still_serving(server)


def test_oversized_body(server):
    big = {**GOOD, "prompt": "x" * 70000}
    error = assert_error(server.post("/v1/completions", big), 413)
    assert "65536" in error["message"]
    assert_still_serving(server)


def test_unknown_fields_are_ignored(server):
    r = server.post("/v1/completions", {**GOOD, "frobnicate": True, "metadata_v9": [1]})
    assert r.status_code == 200, r.text


def test_api_key_and_priority(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--api-key", "s3cret", "--scheduling-policy", "priority")
    try:
        assert requests.get(s.url + "/health", timeout=10).status_code == 200
        assert requests.get(s.url + "/metrics", timeout=10).status_code == 200
        assert_error(s.post("/v1/completions", GOOD), 401, code="invalid_api_key")
        assert_error(s.post("/v1/completions", GOOD, headers={"Authorization": "Bearer wrong"}),
                     401, code="invalid_api_key")
        assert_error(s.post("/v1/completions", GOOD, headers={"Authorization": "s3cret"}), 401)
        assert_error(requests.get(s.url + "/v1/models", timeout=10), 401)
        ok = s.post("/v1/completions", GOOD, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200, ok.text
        bad = openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        good = openai.OpenAI(base_url=s.url + "/v1", api_key="s3cret", max_retries=0)
        assert good.completions.create(model="tiny-qwen3", prompt="Hi", max_tokens=2).choices
        # Under the priority policy the vLLM extension field is accepted.
        assert good.completions.create(model="tiny-qwen3", prompt="Hi", max_tokens=2,
                                       extra_body={"priority": -3}).choices
    finally:
        assert s.stop() == 0


LONG = {"prompt": "Once", "max_tokens": 8000, "temperature": 0, "ignore_eos": True}


def test_client_disconnect_aborts_and_frees_blocks(server):
    before = server.metrics()
    sock, first = raw_stream(server, "/v1/completions", LONG)
    assert first["choices"][0]["finish_reason"] is None
    sock.close()  # the client vanishes mid-stream
    after = wait_idle(server)
    assert sample(after, "deepinfer:num_requests_running") == 0
    assert sample(after, "deepinfer:num_requests_waiting") == 0
    assert sample(after, "deepinfer:kv_cache_usage_perc") == 0
    aborted = (sample(after, "deepinfer:request_success_total", finished_reason="abort")
               - sample(before, "deepinfer:request_success_total", finished_reason="abort"))
    assert aborted == 1  # cut short, not run to its 8000 tokens
    assert_still_serving(server)


def test_overload_gives_503_with_retry_after(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--max-num-seqs", 1, "--max-waiting-requests", 1,
                     "--max-model-len", 8192, "--allow-long-max-model-len")
    try:
        running, _ = raw_stream(s, "/v1/completions", LONG)  # holds the only sequence slot
        # The chat stream's role chunk comes at submission: this one is queued.
        queued, first = raw_stream(s, "/v1/chat/completions",
                                   {"messages": [{"role": "user", "content": "hi"}],
                                    "max_tokens": 4})
        assert first["choices"][0]["delta"]["role"] == "assistant"
        r = s.post("/v1/completions", GOOD)
        assert_error(r, 503)
        assert r.headers["Retry-After"] == "1"
        with pytest.raises(openai.InternalServerError):
            openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0).completions.create(
                model="tiny-qwen3", prompt="hi", max_tokens=2)
        for sock in (running, queued):
            sock.close()
        m = wait_idle(s)
        assert sample(m, "deepinfer:kv_cache_usage_perc") == 0
        assert sample(m, "deepinfer:http_requests_total", endpoint="/v1/completions",
                      status="503") == 2
        deadline = time.monotonic() + 10
        while s.post("/v1/completions", GOOD).status_code == 503 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert_still_serving(s)
    finally:
        assert s.stop() == 0
