"""Tool calling through `deepinfer serve` and the official openai client: request validation,
tools reaching the chat template, tool-call history in both argument shapes, and answers
without tool calls (streamed and not) left exactly as without parsing.

The bundled tiny models write random text, so no test here can make the model emit a tool
call; the parsers (every family, every split of a stream, malformed markup) are unit-tested in
tests/unit/toolcall and the response shapes in tests/unit/server/tool_request_test.cpp."""
import json

import openai
import pytest

from conftest import DATA
from serve_util import ServeProcess

MODEL = "tiny-qwen3"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(deepinfer_bin):
    s = ServeProcess(deepinfer_bin, "--max-model-len", 4096, "--allow-long-max-model-len",
                     "--max-num-seqs", 4)
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                         timeout=120)


def chat(client, messages=ASK, **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(model=MODEL, messages=messages, **kw)


def history(arguments, content=None):
    return ASK + [
        {"role": "assistant", "content": content, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "22 C, sunny"}]


def test_parser_chosen_from_the_template(server):
    # The tiny models carry a Qwen2.5-style template: hermes markup.
    assert any("tool calls: parsed as hermes" in line for line in server.log), "".join(server.log)


def test_tool_call_parser_flag(deepinfer_bin, run_cli):
    forced = ServeProcess(deepinfer_bin, "--tool-call-parser", "none")
    try:
        assert not any("tool calls: parsed as" in line for line in forced.log), "".join(forced.log)
    finally:
        assert forced.stop() == 0
    proc = run_cli("serve", "--model", DATA / MODEL, "--port", 0, "--tool-call-parser", "bogus")
    assert proc.returncode != 0
    assert "bogus" in proc.stderr and "hermes" in proc.stderr


def bad_request(fn):
    with pytest.raises(openai.BadRequestError) as info:
        fn()
    return info.value.body  # the "error" object's fields


@pytest.mark.parametrize("tool_choice", [
    "required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_tool_choice_is_refused(client, tool_choice):
    error = bad_request(lambda: chat(client, tools=TOOLS, tool_choice=tool_choice))
    assert error["param"] == "tool_choice"
    assert "guided decoding" in error["message"]


@pytest.mark.parametrize("kw, param", [
    ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "other"}}},
     "tool_choice"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
    ({"messages": history("{not json")}, "messages"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, "messages"),
])
def test_bad_tool_fields_name_the_field(client, kw, param):
    error = bad_request(lambda: chat(client, **kw))
    assert error["param"] == param, error
    # ... and the server goes on serving.
    assert chat(client).choices[0].message.content is not None


def test_tools_reach_the_template(client):
    plain = chat(client, max_tokens=1).usage.prompt_tokens
    with_tools = chat(client, tools=TOOLS, max_tokens=1).usage.prompt_tokens
    none_choice = chat(client, tools=TOOLS, tool_choice="none", max_tokens=1).usage.prompt_tokens
    # The tool's JSON schema is in the prompt, also with tool_choice "none" (vLLM's default).
    assert with_tools > plain + 20
    assert none_choice == with_tools


def test_answer_without_tool_calls_is_unchanged(client):
    parsed = chat(client, tools=TOOLS, max_tokens=16)
    unparsed = chat(client, tools=TOOLS, tool_choice="none", max_tokens=16)
    choice = parsed.choices[0]
    # The random tiny model writes no <tool_call> markup: nothing to parse, nothing changed.
    assert "<tool_call>" not in unparsed.choices[0].message.content
    assert choice.message.tool_calls is None
    assert choice.message.content == unparsed.choices[0].message.content
    assert choice.finish_reason == unparsed.choices[0].finish_reason != "tool_calls"


def test_streamed_answer_without_tool_calls(client):
    whole = chat(client, tools=TOOLS, max_tokens=16).choices[0]
    text, finish = "", None
    for chunk in chat(client, tools=TOOLS, max_tokens=16, stream=True):
        for c in chunk.choices:
            assert not c.delta.tool_calls
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text == whole.message.content
    assert finish == whole.finish_reason


def test_history_arguments_as_string_or_object(client):
    args = {"city": "Paris"}
    as_string = chat(client, messages=history(json.dumps(args)), tools=TOOLS, max_tokens=1,
                     extra_body={"return_token_ids": True})
    as_object = chat(client, messages=history(args), tools=TOOLS, max_tokens=1,
                     extra_body={"return_token_ids": True})
    other = chat(client, messages=history(json.dumps({"city": "Rome"})), tools=TOOLS,
                 max_tokens=1, extra_body={"return_token_ids": True})
    # The template gets the arguments as a mapping either way: the same prompt.
    ids = as_string.model_dump()["prompt_token_ids"]
    assert ids == as_object.model_dump()["prompt_token_ids"]
    assert ids != other.model_dump()["prompt_token_ids"]
    assert as_string.usage.prompt_tokens > chat(client, max_tokens=1).usage.prompt_tokens


def test_parallel_tool_calls_flag_is_accepted(client):
    r = chat(client, tools=TOOLS, parallel_tool_calls=False)
    assert r.choices[0].message.tool_calls is None
