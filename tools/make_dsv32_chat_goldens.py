#!/usr/bin/env python3
"""Golden prompts of DeepSeek-V3.2's chat format, made with the reference Python encoder.

DeepSeek-V3.2 ships no Jinja chat template: its format is the Python module
encoding/encoding_dsv32.py of the Hugging Face repository (encode_messages). The hub is not
reachable from here, so the encoder comes from SGLang's wheel, which carries the vendor's file
adapted only in its error handling (provenance in tests/data/chat/templates/README.md):

    pip download sglang==0.5.23 --no-deps -d /tmp/sglang_wheel
    unzip /tmp/sglang_wheel/sglang-0.5.23-*.whl \
        sglang/srt/entrypoints/openai/encoding_dsv32.py -d /tmp/sgl
    .venv-tools/bin/python tools/make_dsv32_chat_goldens.py \
        --encoder /tmp/sgl/sglang/srt/entrypoints/openai/encoding_dsv32.py

Writes tests/data/chat/goldens/deepseek-v3.2.json: conversations (as an OpenAI request sends
them) + the exact prompt, or "error" where the request must be refused.

A request reaches encode_messages the way vLLM's deepseek_v32 tokenizer mode hands it over
(vllm/tokenizers/deepseek_v32.py): chat_template_kwargs "thinking" or "enable_thinking" picks
"thinking" over "chat" mode; request tools become a leading {"role": "system", "tools": ...}
message; historical reasoning is dropped when the last message is a user's. deepinfer's own
preparation, mirrored by prepare() below: keys whose value is null are dropped; an assistant's
reasoning may be sent as reasoning_content, reasoning or thinking; content given as a list of
text parts is joined with "\\n" (vLLM's "string" content format); user / developer / tool
messages need string content, and a tool message needs an assistant turn with tool_calls
before it. add_generation_prompt=false (the encoder has no such switch) removes the assistant
opener the encoder ends a final user turn (or tool-result block) with.
"""
import argparse
import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import make_chat_goldens as chat  # noqa: E402  (conversations shared with the Jinja goldens)

OUT = os.path.join(ROOT, "tests", "data", "chat", "goldens", "deepseek-v3.2.json")


class Refused(Exception):
    pass


def truthy(v):
    return bool(v)


def prepare(messages):
    out = []
    for i, m in enumerate(messages):
        m = {k: v for k, v in m.items() if v is not None}
        reasoning = None
        for field in ("reasoning_content", "reasoning", "thinking"):
            if field in m:
                reasoning = m[field]
                break
        for field in ("reasoning", "thinking"):
            m.pop(field, None)
        if reasoning is not None:
            m["reasoning_content"] = reasoning
        content = m.get("content")
        if isinstance(content, list):
            texts = []
            for part in content:
                if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                    raise Refused(f"messages[{i}]: only text content parts")
                texts.append(part["text"])
            m["content"] = "\n".join(texts)
        role = m.get("role")
        if role in ("user", "developer", "tool") and not isinstance(m.get("content"), str):
            raise Refused(f"messages[{i}]: content must be a string")
        if role == "tool":
            j = i - 1
            while j >= 0 and messages[j].get("role") == "tool":
                j -= 1
            if j < 0:
                raise Refused(f"messages[{i}]: tool message without an assistant turn before it")
        out.append(m)
    return out


def encode(enc, case):
    kwargs = case.get("kwargs", {})
    thinking = truthy(kwargs.get("thinking", False)) or truthy(kwargs.get("enable_thinking", False))
    mode = "thinking" if thinking else "chat"
    messages = prepare(case["messages"])
    tools = case.get("tools")
    if tools:
        messages.insert(0, {"role": "system", "tools": tools})
    drop = bool(messages) and messages[-1].get("role") == "user"
    prompt = enc.encode_messages(messages, thinking_mode=mode, drop_thinking=drop)
    if not case.get("add_generation_prompt", True) and messages:
        opener = enc.thinking_start_token if mode == "thinking" else enc.thinking_end_token
        last = messages[-1].get("role")
        if last in ("user", "developer"):
            tail = "<｜Assistant｜>" + opener
        elif last == "tool" and prompt.endswith("</function_results>\n\n" + opener):
            tail = "\n\n" + opener
        else:
            tail = ""
        if tail:
            assert prompt.endswith(tail), (case["name"], prompt[-40:])
            prompt = prompt[: -len(tail)]
    return prompt


def cases():
    out = []
    on, off = {"thinking": True}, {"thinking": False}
    convs = chat.base_conversations() + chat.tools_conversations(as_string=True)
    convs += chat.thinking_conversations("thinking", True, False)
    convs += chat.thinking_switch_cases("thinking", True, False, as_string=True)
    for c in convs:
        base = {k: v for k, v in c.items() if k != "kwargs"}
        if "kwargs" in c:
            out.append(dict(c))
            continue
        out.append(dict(base))
        out.append(dict(base, name=base["name"] + "@thinking", kwargs=on))
    # Arguments as mappings (what transformers-style clients send) and enable_thinking.
    out.append({"name": "tool_arguments_as_mapping", "messages": chat.tool_conversation(False, two_calls=True),
                "tools": chat.TOOLS, "add_generation_prompt": True})
    out.append({"name": "enable_thinking_alias", "messages": chat.base_conversations()[3]["messages"],
                "add_generation_prompt": True, "kwargs": {"enable_thinking": True}})
    out.append({"name": "thinking_false_explicit", "messages": chat.base_conversations()[3]["messages"],
                "kwargs": off})
    out.append({"name": "content_parts", "messages": chat.PARTS, "add_generation_prompt": True})
    out.append({"name": "content_parts@thinking", "messages": chat.PARTS, "kwargs": on})
    # Agentic turn in thinking mode: the reasoning after the last user message is kept, the
    # earlier one dropped; the prompt ends with the tool results and an open <think>.
    agent = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "old answer", "reasoning_content": "old reasoning (dropped)"},
        {"role": "user", "content": "北京和上海的天气?"},
        {"role": "assistant", "content": None, "reasoning": "Two cities, two calls.",
         "tool_calls": [chat.call("get_weather", {"city": "北京", "days": 2, "extra": {"a": [1, 2.5, None, True]}}, True, "c1"),
                        chat.call("get_weather", {"city": "上海", "unit": "celsius"}, True, "c2")]},
        {"role": "tool", "tool_call_id": "c1", "content": "晴 21°C"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "雨"}, {"type": "text", "text": "18°C"}]},
    ]
    for kw in ({}, on):
        suffix = "@thinking" if kw else ""
        out.append({"name": "agent_tool_results" + suffix, "messages": agent, "tools": chat.TOOLS, "kwargs": kw})
        out.append({"name": "agent_tool_results_no_gen" + suffix, "messages": agent, "tools": chat.TOOLS,
                    "kwargs": kw, "add_generation_prompt": False})
        out.append({"name": "agent_partial_tool_results" + suffix, "messages": agent[:-1], "tools": chat.TOOLS,
                    "kwargs": kw})
        out.append({"name": "agent_answer" + suffix, "messages": agent + [
            {"role": "assistant", "content": "北京晴, 上海雨.", "reasoning_content": "Summarise."}],
            "tools": chat.TOOLS, "kwargs": kw})
        out.append({"name": "developer" + suffix, "messages": [
            {"role": "developer", "content": "Be formal.", "tools": chat.TOOLS[:1],
             "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}],
            "kwargs": kw})
        out.append({"name": "system_response_format" + suffix, "messages": [
            {"role": "system", "content": "Reply in JSON.", "response_format": {"type": "json_object"}},
            {"role": "user", "content": "hi"}], "kwargs": kw})
        out.append({"name": "developer_then_user" + suffix, "messages": [
            {"role": "developer", "content": "Rules."}, {"role": "user", "content": "hi"}], "kwargs": kw})
        out.append({"name": "no_messages_tools" + suffix, "messages": [], "tools": chat.TOOLS, "kwargs": kw})
        out.append({"name": "system_only" + suffix, "messages": [{"role": "system", "content": "S"}], "kwargs": kw})
        # Refusals.
        out.append({"name": "err_unknown_role" + suffix, "messages": [{"role": "robot", "content": "x"}], "kwargs": kw})
        out.append({"name": "err_tool_without_call" + suffix, "messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"},
            {"role": "tool", "content": "orphan"}], "kwargs": kw})
        out.append({"name": "err_too_many_tool_results" + suffix, "messages": agent + [
            {"role": "tool", "tool_call_id": "c3", "content": "extra"}], "kwargs": kw})
        out.append({"name": "err_leading_tool" + suffix, "messages": [{"role": "tool", "content": "x"}], "kwargs": kw})
        out.append({"name": "err_developer_empty" + suffix, "messages": [{"role": "developer", "content": ""}], "kwargs": kw})
        out.append({"name": "err_user_without_content" + suffix, "messages": [{"role": "user"}], "kwargs": kw})
        out.append({"name": "err_arguments_not_object" + suffix, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "[1]"}}]},
            {"role": "user", "content": "again"}], "kwargs": kw})
        out.append({"name": "err_arguments_not_json" + suffix, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{oops"}}]},
            {"role": "user", "content": "again"}], "kwargs": kw})
    out.append({"name": "err_thinking_answer_without_reasoning", "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "no reasoning"}], "kwargs": on})
    out.append({"name": "err_thinking_developer_before_last_user", "messages": [
        {"role": "developer", "content": "Rules."}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "a"}, {"role": "user", "content": "again"}], "kwargs": on})
    out.append({"name": "developer_before_last_user_chat", "messages": [
        {"role": "developer", "content": "Rules."}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "a"}, {"role": "user", "content": "again"}]})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", required=True, help="path of encoding_dsv32.py")
    ap.add_argument("--source", default="sglang==0.5.23: sglang/srt/entrypoints/openai/encoding_dsv32.py")
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("encoding_dsv32", args.encoder)
    enc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(enc)

    results = []
    for c in cases():
        entry = dict(c)
        try:
            entry["expected"] = encode(enc, c)
        except Exception as e:  # the encoder (or deepinfer's preparation) refuses the request
            entry.pop("expected", None)
            entry["error"] = f"{type(e).__name__}: {e}"
        results.append(entry)
    names = [r["name"] for r in results]
    assert len(names) == len(set(names)), "duplicate case names"
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"format": "deepseek_v32", "bos_token": enc.bos_token, "eos_token": enc.eos_token,
                   "made_with": {"encoder": args.source}, "cases": results}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{OUT}: {len(results)} cases, {sum('error' in r for r in results)} refusals")


if __name__ == "__main__":
    main()
