#!/usr/bin/env python3
"""Golden renders of chat templates and Jinja snippets, made with transformers' own code path.

Writes (relative to the repository root):
  tests/data/chat/templates/<name>.jinja   copies of the real templates (tests must not need ../shared);
                                           "data:" templates are committed there, not copied
                                           (provenance in tests/data/chat/templates/README.md)
  tests/data/chat/goldens/<name>.json      conversations + the exact text transformers renders
  tests/data/chat/jinja_cases.json         small templates + variables -> jinja2's output or error

Rendering goes through transformers.utils.chat_template_utils exactly as
PreTrainedTokenizerBase.apply_chat_template does it: _normalize_chat_messages (drops keys whose
value is None), then render_jinja_template(...) with the special tokens map and the template
kwargs. For the two real tokenizers the script also checks that a real
AutoTokenizer.apply_chat_template(tokenize=False) gives the same text.

Usage: .venv-tools/bin/python tools/make_chat_goldens.py [--shared ../shared]
"""
import argparse
import json
import os
import sys

import jinja2
import transformers
from transformers.utils.chat_template_utils import (
    _compile_jinja_template,
    _normalize_chat_messages,
    render_jinja_template,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "chat")

DEEPSEEK_BOS = "<｜begin▁of▁sentence｜>"
DEEPSEEK_EOS = "<｜end▁of▁sentence｜>"

# name -> (source, bos_token, eos_token); source is "tokenizers/<dir>" (the chat_template of
# its tokenizer_config.json), "chat_templates/<file>" (under --shared), or "data:<file>" (a
# template committed under tests/data/chat/templates, with its provenance in README.md there).
TEMPLATES = {
    "deepseek-v3": ("tokenizers/deepseek-v3", DEEPSEEK_BOS, DEEPSEEK_EOS),
    "qwen3": ("tokenizers/qwen3", None, "<|im_end|>"),
    "qwen2.5": ("chat_templates/qwen2.5.jinja", None, "<|im_end|>"),
    "deepseek-v2-chat": ("chat_templates/deepseek-v2-chat.jinja", DEEPSEEK_BOS, DEEPSEEK_EOS),
    "deepseek-v3.1": ("chat_templates/deepseek-v3.1.jinja", DEEPSEEK_BOS, DEEPSEEK_EOS),
    "glm-4-9b-chat": ("chat_templates/glm-4-9b-chat.jinja", None, "<|endoftext|>"),
    "glm-4.5": ("chat_templates/glm-4.5.jinja", None, "<|endoftext|>"),
    "glm-4.7": ("data:glm-4.7.jinja", None, "<|endoftext|>"),
    "minimax-m2": ("data:minimax-m2.jinja", "]~!b[", "[e~["),
}


# ---------------------------------------------------------------------------------------------
# Conversations. Strings mix Chinese, emoji and characters tojson must keep as they are
# (non-ASCII, <, >, &, ') or escape (", \\, newlines, control characters).

TRICKY = "Ünïcödé 中文 😀🚀 <b>&amp;</b> 'single' \"double\" back\\slash tab\tend"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "查询天气 / get the weather for a city 🌦",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "城市名, e.g. \"北京\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1.5},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web <safe> & 'quoted'",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["query"]},
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]


def call(name, arguments, as_string, call_id=None):
    fn = {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False) if as_string else arguments}
    out = {"type": "function", "function": fn}
    if call_id:
        out["id"] = call_id
    return out


def tool_conversation(as_string, content=None, two_calls=False):
    calls = [call("get_weather", {"city": "北京", "unit": "celsius", "days": 2}, as_string, "call_1")]
    if two_calls:
        calls.append(call("search", {"query": "weather \"today\" 😀", "tags": ["a", "b"]}, as_string, "call_2"))
    msgs = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "北京天气怎么样? And search the news."},
        {"role": "assistant", "content": content, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temp": 21, "sky": "晴"}, ensure_ascii=False)},
    ]
    if two_calls:
        msgs.append({"role": "tool", "tool_call_id": "call_2", "content": "No news <today>."})
    return msgs


def base_conversations():
    return [
        {"name": "user_only", "messages": [{"role": "user", "content": "Hello!"}]},
        {"name": "user_only_gen", "messages": [{"role": "user", "content": "Hello!"}], "add_generation_prompt": True},
        {"name": "system_user_gen", "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "What is 2+2?"}], "add_generation_prompt": True},
        {"name": "multi_turn", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello, how can I help?"},
            {"role": "user", "content": "Tell me a joke."}], "add_generation_prompt": True},
        {"name": "multi_turn_no_system", "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Bye"},
            {"role": "assistant", "content": "Goodbye."}]},
        {"name": "non_ascii", "messages": [
            {"role": "system", "content": "系统提示: 用中文回答 🐉"},
            {"role": "user", "content": TRICKY},
            {"role": "assistant", "content": "好的 👍\n第二行\n\n  indented"},
            {"role": "user", "content": "  leading and trailing spaces  \n"}], "add_generation_prompt": True},
        {"name": "empty_content", "messages": [
            {"role": "user", "content": ""},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "again"}], "add_generation_prompt": True},
        {"name": "multi_turn_no_gen", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello, how can I help?"},
            {"role": "user", "content": "Tell me a joke."}], "add_generation_prompt": False},
        {"name": "long_conversation", "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "词" * i}
            for i in range(8)], "add_generation_prompt": True},
        {"name": "template_syntax_in_content", "messages": [
            {"role": "user", "content": "{{ not_a_variable }} {% if x %}raw{% endif %} {# c #} <|im_end|> <｜User｜>"},
            {"role": "assistant", "content": "}} %} #} {{"}], "add_generation_prompt": True},
        {"name": "two_systems", "messages": [
            {"role": "system", "content": "First system."},
            {"role": "system", "content": "Second system."},
            {"role": "user", "content": "Which one?"}], "add_generation_prompt": True},
    ]


def tools_conversations(as_string):
    return [
        {"name": "tools_defined", "messages": [{"role": "user", "content": "Weather in Paris?"}],
         "tools": TOOLS, "add_generation_prompt": True},
        {"name": "tools_defined_with_system", "messages": [
            {"role": "system", "content": "Use tools when needed."},
            {"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS, "add_generation_prompt": True},
        {"name": "tool_call_and_result", "messages": tool_conversation(as_string), "tools": TOOLS,
         "add_generation_prompt": True},
        {"name": "two_tool_calls", "messages": tool_conversation(as_string, two_calls=True), "tools": TOOLS,
         "add_generation_prompt": True},
        {"name": "two_tool_calls_empty_content", "messages": tool_conversation(as_string, content="", two_calls=True),
         "tools": TOOLS, "add_generation_prompt": True},
        {"name": "tool_call_with_content", "messages": tool_conversation(as_string, content="Let me check 🔍") + [
            {"role": "assistant", "content": "It is 21°C and sunny in 北京."},
            {"role": "user", "content": "Thanks!"}], "tools": TOOLS, "add_generation_prompt": False},
    ]


def thinking_conversations(kw, on, off):
    reasoning = [
        {"role": "user", "content": "Why is the sky blue?"},
        {"role": "assistant", "content": "<think>\nRayleigh scattering.\n</think>\n\nBecause of scattering."},
        {"role": "user", "content": "And sunsets?"},
    ]
    field = [
        {"role": "user", "content": "Why is the sky blue?"},
        {"role": "assistant", "content": "Because of scattering.", "reasoning_content": "Short wavelengths scatter more."},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "Anything else?", "reasoning_content": "Offer help."},
    ]
    return [
        {"name": "thinking_on", "messages": reasoning, "add_generation_prompt": True, "kwargs": {kw: on}},
        {"name": "thinking_off", "messages": reasoning, "add_generation_prompt": True, "kwargs": {kw: off}},
        {"name": "reasoning_field", "messages": field, "add_generation_prompt": False},
        {"name": "reasoning_field_thinking_off", "messages": field, "add_generation_prompt": True, "kwargs": {kw: off}},
    ]


def reasoning_tool_conversation(as_string):
    """Interleaved thinking: reasoning on a tool-calling turn after the last user message."""
    return [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Earlier question"},
        {"role": "assistant", "content": "Earlier answer.", "reasoning_content": "old thoughts"},
        {"role": "user", "content": "北京天气?"},
        {"role": "assistant", "content": "", "reasoning_content": "Need the weather tool.",
         "tool_calls": [call("get_weather", {"city": "北京", "days": 2}, as_string, "call_9")]},
        {"role": "tool", "tool_call_id": "call_9", "content": "晴, 21°C"},
        {"role": "assistant", "content": "<think>\nfrom content\n</think>\n\nIt is sunny.",
         "tool_calls": None},
    ]


def thinking_switch_cases(kw, on, off, as_string):
    """chat_template_kwargs on a conversation with reasoning, tools and a generation prompt."""
    msgs = reasoning_tool_conversation(as_string)
    follow = msgs + [{"role": "user", "content": "And tomorrow?"}]
    return [
        {"name": "reasoning_tool_chain", "messages": msgs, "tools": TOOLS, "add_generation_prompt": False},
        {"name": "reasoning_tool_chain_gen", "messages": follow, "tools": TOOLS, "add_generation_prompt": True},
        {"name": "reasoning_tool_chain_" + kw + "_on", "messages": follow, "tools": TOOLS,
         "add_generation_prompt": True, "kwargs": {kw: on}},
        {"name": "reasoning_tool_chain_" + kw + "_off", "messages": follow, "tools": TOOLS,
         "add_generation_prompt": True, "kwargs": {kw: off}},
        {"name": "reasoning_tool_chain_" + kw + "_off_no_gen", "messages": msgs, "tools": TOOLS,
         "add_generation_prompt": False, "kwargs": {kw: off}},
    ]


PARTS = [{"role": "system", "content": [{"type": "text", "text": "Parts system."}]},
         {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this 图片."}]}]


def conversations_for(name):
    cases = base_conversations()
    if name in ("qwen3", "qwen2.5", "glm-4.5"):
        cases += tools_conversations(as_string=False)
    if name in ("deepseek-v3", "deepseek-v3.1"):
        cases += tools_conversations(as_string=True)
    if name == "qwen3":
        cases += thinking_conversations("enable_thinking", True, False)
        cases.append({"name": "tool_arguments_as_string", "messages": tool_conversation(True), "tools": TOOLS,
                      "add_generation_prompt": True})
    if name == "glm-4.5":
        cases += thinking_conversations("enable_thinking", True, False)
        cases.append({"name": "content_parts", "messages": PARTS, "add_generation_prompt": True})
    if name == "deepseek-v3.1":
        cases += thinking_conversations("thinking", True, False)
        cases.append({"name": "enable_thinking_alias", "messages": base_conversations()[3]["messages"],
                      "add_generation_prompt": True, "kwargs": {"enable_thinking": True}})
    if name == "deepseek-v3.1":
        cases += thinking_switch_cases("thinking", True, False, as_string=True)
    if name == "glm-4.7":
        cases += tools_conversations(as_string=False)
        cases += thinking_conversations("enable_thinking", True, False)
        cases += thinking_switch_cases("enable_thinking", True, False, as_string=False)
        field = thinking_conversations("enable_thinking", True, False)[2]["messages"]
        cases.append({"name": "clear_thinking_false", "messages": field + [{"role": "user", "content": "more"}],
                      "add_generation_prompt": True, "kwargs": {"clear_thinking": False}})
        cases.append({"name": "clear_thinking_true", "messages": field + [{"role": "user", "content": "more"}],
                      "add_generation_prompt": True, "kwargs": {"clear_thinking": True, "enable_thinking": True}})
        cases.append({"name": "tool_arguments_as_string", "messages": tool_conversation(True), "tools": TOOLS,
                      "add_generation_prompt": True})
        cases.append({"name": "content_parts", "messages": PARTS, "add_generation_prompt": True})
    if name == "minimax-m2":
        cases += tools_conversations(as_string=False)
        cases += thinking_conversations("enable_thinking", True, False)
        cases += thinking_switch_cases("enable_thinking", True, False, as_string=False)
        cases.append({"name": "model_identity", "messages": [{"role": "user", "content": "who?"}],
                      "add_generation_prompt": True, "kwargs": {"model_identity": "You are M2 🤖."}})
        cases.append({"name": "system_date_location", "messages": [
            {"role": "system", "content": "", "current_date": "2025-10-27", "current_location": "上海"},
            {"role": "user", "content": "hi"}], "add_generation_prompt": True})
        cases.append({"name": "tool_without_call", "messages": [
            {"role": "user", "content": "hi"}, {"role": "tool", "content": "orphan"}], "add_generation_prompt": True})
        cases.append({"name": "tool_result_parts", "messages": tool_conversation(False)[:3] + [
            {"role": "tool", "content": [{"type": "text", "text": "part <1>"}, {"output": "out 2"}]}],
            "tools": TOOLS, "add_generation_prompt": True})
        cases.append({"name": "tool_arguments_as_string", "messages": tool_conversation(True), "tools": TOOLS,
                      "add_generation_prompt": True})
        cases.append({"name": "content_parts", "messages": PARTS, "add_generation_prompt": True})
    if name == "glm-4-9b-chat":
        cases.append({"name": "tools_in_system_item", "messages": [
            {"role": "system", "content": "", "tools": TOOLS + [{"type": "python"}, {"type": "simple_browser"}, {"type": "cogview"}]},
            {"role": "user", "content": "画一只猫"}], "add_generation_prompt": True})
        cases.append({"name": "metadata", "messages": [
            {"role": "user", "content": "hi", "metadata": "meta✓"},
            {"role": "assistant", "content": "hello"}], "add_generation_prompt": True})
    # content as a list of parts is not supported by most templates: transformers fails
    # there too, and the goldens record how.
    if name not in ("glm-4.5", "glm-4.7", "minimax-m2"):
        cases.append({"name": "content_parts", "messages": PARTS, "add_generation_prompt": True})
    return cases


# ---------------------------------------------------------------------------------------------
# Jinja snippets: (template, variables). Expected output or error comes from jinja2.

COMMON_VARIABLES = {
    "d": {"a": 1, "b": "x", "items": 5, "nested": {"k": [1, {"c": "deep"}]}},
    "l": [1, 2, 3, 4, 5],
    "s": "héllo😀世界",
    "s2": "hello WORLD ßtraße ΣΑΣ x1y ǅ",
    "n": None,
    "f": 2.5,
    "users": [{"name": "bob", "age": 30}, {"name": "alice", "age": 25}, {"name": "Carl", "age": 30}],
    "msgs": [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "user", "content": "c", "tool_calls": None},
    ],
    "x": {"b": [1, 2.5, "中\n\"</script>\\", None, True, False], "a": {"é": "😀"}, "c": []},
}

# Each entry: a template, or (template, extra variables). Printed values that Python shows
# with a memory address (methods, generators) are left to the hand-written C++ tests.
JINJA_CASES = [
    # whitespace control, trim_blocks, lstrip_blocks, comments, raw, newlines
    "a\n{% if true %}\nb\n{% endif %}\nc",
    "  {% if true %}x{% endif %}  \n  y",
    "a {%- if true -%} b {%- endif -%} c",
    "{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n",
    "{%+ if true %}x{% endif %}|  {%+ if true %}x{% endif %}|  {% if true %}x{% endif %}",
    "{% if true +%}\nx{% endif %}|{% if true %}\nx{% endif %}",
    "a  {#- comment -#}  b|  {# c #}\nx|{#+ c +#}\ny",
    "{{- ' x ' -}}|  {{ 'v' }}  \n  {{- 'w' }}",
    "a\n  {{ 'x' }}\n  {% if true %}y{% endif %}\n",
    "{% raw %}{{ not }}{% endraw %}|  {% raw %}\n  {{ x }}\n  {% endraw %}\nz|{%- raw -%}  a  {%- endraw -%}  b",
    "line1\r\nline2\r{% if true %}\r\nx{% endif %}\n\n",
    "trailing newline\n",
    "\t{% if true %}\n\tx\n\t{% endif %}\n\tend",
    "\u3000{% if true %}y{% endif %}|x \u3000{% if true %}y{% endif %}",
    "{{ 1 }}\n{% if true %}x{% endif %}\n{{ 2 }}",
    "{%- if true %}\n\n{% endif %}|{% if true -%}\n\n  x{%- endif %}",
    "{% for m in l %}{{ m }}{% if not loop.last %}, {% endif %}{% endfor %}",
    "{{ '{{' }}{{ '}}' }}{{ '{%' }}",
    # literals and printing
    "{{ 1 }}|{{ 1.0 }}|{{ 1.5e3 }}|{{ 1e100 }}|{{ 0.1 + 0.2 }}|{{ 1_000 }}|{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1e-7 }}|{{ 123456789012345678.0 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 12.0e-5 }}",
    r"""{{ 'a\nb' }}|{{ "q'uote" }}|{{ 'tab\tx' }}|{{ '\u4e2d\x41\101' }}|{{ 'unknown \d escape' }}|{{ 'é\é' }}|{{ 'line\
cont' }}""",
    "{{ [1, 'a', none, true, 1.5, {'k': [2, (3,)]}, ()] }}",
    "{{ {'a': 1, 'b': 'x'} }}|{{ {} }}|{{ [] }}|{{ (1,) }}|{{ (1, 2) }}|{{ 1, 2 }}|{{ ((1, 2),) }}",
    r"""{{ ["it's", 'say "hi"', 'both \' "', '\n\t\x00\x7f\x1b', '中', '\xa0', '\u200b', '😀', '\\'] }}""",
    "{{ none }}|{{ None }}|{{ true }}|{{ True }}|{{ false }}|{{ False }}",
    "{{ x }}|{{ d }}|{{ users[0] }}|{{ n }}|{{ f }}",
    "{{ 'a' 'b' }}|{{ -1 }} {{ +1 }} {{ - -1 }} {{ not true }} {{ -f }} {{ +f }}",
    # arithmetic and operators
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** 0.5 }} {{ 6 / 3 }} {{ 1 / 3 }}",
    "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }} {{ 2 * 3 % 4 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ u ~ 1.0 }}|{{ 'a' ~ 'b' is string }}|{{ not 1 == 2 }}",
    "{{ 'ab' * 3 }} {{ 3 * 'ab' }} {{ [1, 2] * 2 }} [{{ 'x' * 0 }}] [{{ 'x' * -1 }}] {{ (1,) * 2 }} {{ 'a' * true }}",
    "{{ [1] + [2] }} {{ (1,) + (2,) }} {{ 'a' + 'b' }} {{ true + 1 }} {{ 1 + 1.5 }} {{ true + true }}",
    "{{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' == 'a' }} {{ [1, 2] == [1, 2] }} {{ [1] == (1,) }} {{ {'a': 1} == {'a': 1} }} {{ none == none }} {{ 'a' != 1 }} {{ u == u }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ 'B' < 'a' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2.0 }} {{ 1 <= 0.5 }} {{ (1, 2) > (1,) }}",
    "{{ 'b' in 'abc' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in u }} {{ '' in 'a' }} {{ 1.0 in [1] }} {{ (1, 2) in [[1, 2], (1, 2)] }}",
    "{{ true and 'x' }} {{ false or 'y' }} {{ none or 0 or '' }}|{{ 'a' and 0 }} {{ not none }} {{ [] or {} }} {{ 1 and 2 and 3 }}",
    "{{ 'x' if true else 'y' }} {{ 'x' if false else 'y' }} [{{ 'x' if false }}] {{ ('a' if false) is defined }} {{ 1 if 0 else 2 if 0 else 3 }}",
    "{{ 1 + 'a' }}", "{{ 'a' + 1 }}", "{{ 1 / 0 }}", "{{ 1 // 0 }}", "{{ 5 % 0 }}", "{{ [] < 1 }}", "{{ 1 in 1 }}",
    "{{ 1 in 'abc' }}", "{{ u + 1 }}", "{{ u.x }}", "{{ u[0] }}", "{{ u() }}", "{{ 'abc'() }}", "{{ n + 1 }}",
    "{{ -'a' }}", "{{ [1] + (2,) }}", "{{ {'a': 1} + {} }}", "{{ 'a' - 'b' }}", "{{ [1] in {} }}",
    # undefined
    "{{ u }}|{{ u is defined }}|{{ u is undefined }}|{{ u|default('d') }}|{{ u|length }}|{{ u ~ 'x' }}|{{ u is none }}|{{ u is iterable }}|{{ u is sequence }}|{{ u is callable }}|{{ u is string }}|{{ not u }}|{{ u|list }}|{{ u|first is defined }}|{{ u|last is defined }}|{{ u|join(',') }}|{{ u|string }}",
    "{% for x in u %}x{% else %}empty{% endfor %}|{% if u %}t{% else %}f{% endif %}",
    "{{ d.missing }}|{{ d['missing'] }}|{{ d.missing is defined }}|{{ n.foo is defined }}|{{ l[10] is defined }}|{{ s[10] is defined }}|{{ l.foo is defined }}|{{ s.foo is defined }}|{{ f.foo is defined }}",
    "{{ d.missing.deeper }}", "{{ u|upper }}", "{{ u|int }}", "{{ u|tojson }}", "{{ u|trim }}", "{{ u|indent }}",
    "{{ ''|default('e') }}|{{ ''|default('e', true) }}|{{ none|default('n') }}|{{ 0|d(5, true) }}|{{ u|d }}|{{ false|default(1) }}",
    # attribute / item access
    "{{ d.a }}|{{ d['a'] }}|{{ d['items'] }}|{{ d.nested.k[1].c }}|{{ d['nested']['k'][0] }}|{{ d.nested.k.1.c }}",
    "{{ d.get('a') }}|{{ d.get('zz') }}|{{ d.get('zz', 'dflt') }}|{{ d.keys()|list }}|{{ d.values()|list|length }}|{{ d.items()|list|first }}|{{ d.keys() }}|{{ {'q': [1]}.items() }}|{{ {'q': 1}.values() }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{{ 'a' in d.keys() }}|{{ d.keys()|length }}",
    "{{ l[0] }}{{ l[-1] }}{{ l.0 }}{{ l[1:] }}{{ l[::-1] }}{{ l[::2] }}{{ l[-2:] }}{{ l[5:] }}{{ l[:-1] }}{{ l[1:2:3] }}{{ l[10:0:-3] }}{{ l[-100:100] }}{{ l[:] }}",
    "{{ s[0] }}|{{ s[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s[5] }}|{{ s[-3:] }}|{{ s|length }}",
    "[{{ l['a'] }}]|[{{ l[none:2] }}]|[{{ l[true] }}]|[{{ d[1] }}]|[{{ l[1.5] }}]|[{{ n[1] }}]|[{{ d.keys()[0] }}]",
    "{{ s[0:1.5] }}", "{{ d[1:2] }}", "{{ n[1:] }}", "{{ u[1:] }}", "{{ d.keys()[1:] }}", "{{ 5[0] }}",
    "{{ l[::0] }}",
    "{{ {1: 'int', 'k': 'str'}[1] }}|{{ {1: 'a'}[true] }}|{{ {1: 'a'}[1.0] }}|{{ {'1': 'a'}[1] is defined }}|{{ {none: 'n'}[none] }}|{{ {(1, 2): 't'}[(1, 2)] }}",
    "{{ {'a': 1}.get([1]) }}", "{{ {[1]: 2} }}",
    "{{ msgs[1].tool_calls[0].function.arguments.x }}|{{ msgs[2].tool_calls is none }}|{{ msgs[0].tool_calls is defined }}",
    # str methods
    "{{ s2.upper() }}|{{ s2.lower() }}|{{ s2.title() }}|{{ s2.capitalize() }}|{{ s2.swapcase() }}|{{ s2.casefold() }}", 
    "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ '\u3000a\u00a0\x1c'.strip() }}|{{ 'abc'.strip('') }}|{{ 'abcba'.strip('ab') }}|{{ '\n\nx\n'.lstrip('\n') }}",
    "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ '  a b c  '.split(none, 1) }}|{{ '  a b c  '.rsplit(none, 1) }}|{{ ''.split() }}|{{ ''.split(',') }}|{{ 'a\nb\r\nc\x0bd\u2028e'.splitlines() }}|{{ 'a</think>b</think>c'.split('</think>')[-1] }}|{{ 'x'.split('</think>', 1) }}",
    "{{ 'abc'.startswith('ab') }}|{{ 'abc'.startswith(('x', 'a')) }}|{{ 'abc'.endswith('bc') }}|{{ 'abc'.startswith('b', 1) }}|{{ 'abc'.endswith('b', 0, 2) }}|{{ 'abc'.find('c') }}|{{ 'abc'.find('z') }}|{{ 'héllo'.find('l') }}|{{ 'abcabc'.rfind('b') }}|{{ 'aaa'.count('a') }}|{{ 'abc'.index('b') }}|{{ 'abc'.find('', 5) }}|{{ 'abc'.count('') }}|{{ 'héllo'.rfind('l', 0, 3) }}",
    "{{ 'aaa'.replace('a', 'b') }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abc'.replace('', '-') }}|{{ 'x'.center(7, '*') }}|{{ 'ab'.center(7) }}|{{ 'abc'.center(6) }}|{{ 'ab'.ljust(5, '.') }}|{{ 'ab'.rjust(5) }}|{{ '42'.zfill(5) }}|{{ '-42'.zfill(5) }}|{{ '中'.center(4, '中') }}",
    "{{ '123'.isdigit() }}|{{ 'abc'.isalpha() }}|{{ 'a1'.isalnum() }}|{{ ' \t'.isspace() }}|{{ 'abc1'.islower() }}|{{ 'ABC'.isupper() }}|{{ 'Hello World'.istitle() }}|{{ ''.isdigit() }}|{{ '中文'.isalpha() }}|{{ '²'.isdigit() }}|{{ '²'.isdecimal() }}|{{ 'Ab'.islower() }}",
    "{{ '-'.join(['a', 'b']) }}|{{ ''.join('abc') }}|{{ 'a=b=c'.partition('=') }}|{{ 'a=b=c'.rpartition('=') }}|{{ 'abc'.partition('x') }}|{{ 'prefix_x'.removeprefix('prefix_') }}|{{ 'x.py'.removesuffix('.py') }}",
    "{{ '{} and {}'.format('a', 1) }}|{{ '{1}{0}'.format('a', 'b') }}|{{ '{name}!'.format(name='x') }}|{{ '{:>5}|{:<5}|{:^5}'.format('a', 'b', 'c') }}|{{ '{:.2f}'.format(3.14159) }}|{{ '{0[k]}'.format({'k': 'v'}) }}|{{ '{{}}'.format() }}|{{ '{!r}'.format('q') }}|{{ '{:05d}'.format(42) }}|{{ '{:*^9}'.format('mid') }}|{{ '{}'.format(1.5) }}|{{ '{0.a}'.format(d) }}",
    "{{ '%s and %d' % ('a', 3) }}|{{ '%s' % 'x' }}|{{ '%5.1f|%-4s|%%' % (2.25, 'ab') }}|{{ '%(a)s' % {'a': 1} }}|{{ '%r' % 'q' }}|{{ '%s' % [1, 2] }}|{{ '%03d' % 7 }}|{{ '%x' % 255 }}|{{ '%s' % none }}|{{ '%.3s' % 'abcdef' }}",
    "{{ '%s %s' % ('a',) }}", "{{ 'abc' % 1 }}", "{{ '{}'.format() }}", "{{ 'abc'.index('z') }}", "{{ 'a'.split('') }}",
    "{{ s.missing_method is defined }}|{{ s.upper is defined }}|{{ l.append is defined }}|{{ d.update is defined }}|{{ l.count(1) }}|{{ l.index(3) }}|{{ (1, 1).count(1) }}",
    "{{ l.append(6) }}", "{{ d.update({}) }}", "{{ d.pop('a') }}",
    # filters
    "{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 5|trim }}|{{ '\u00a0 y\u2003'|trim }}",
    "{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(sort_keys=true) }}|{{ x|tojson(separators=(',', ':')) }}|{{ x|tojson(ensure_ascii=true) }}",
    r"""{{ 'a"b\\c\n\u0001\x7f</script>&\''|tojson }}|{{ 1.0|tojson }}|{{ [1e20, 1e-7, -0.0, 3.0, 1e16, 123.456]|tojson }}|{{ none|tojson }}|{{ true|tojson }}|{{ (1, 'a')|tojson }}|{{ {1: 'a', none: 'c', 1.5: 'd', false: 'e'}|tojson }}|{{ 'x'|tojson(indent=4) }}""",
    "{{ x|tojson(indent='\t') }}|{{ [1, [2, {}], {'a': []}]|tojson(indent=0) }}|{{ {'b': 1, 'a': {'d': 1, 'c': 2}}|tojson(indent=1, sort_keys=true) }}|{{ []|tojson(indent=2) }}",
    "{{ {1: 'a', 'b': 2}|tojson(sort_keys=true) }}", "{{ range(2)|tojson }}", "{{ d.keys()|tojson }}",
    "{{ 'héllo'|length }}|{{ [1, 2]|count }}|{{ {'a': 1}|length }}|{{ u|length }}|{{ ''|length }}|{{ range(4)|length }}",
    "{{ 5|length }}", "{{ none|length }}",
    "{{ [1, 2, 3]|first }}|{{ [1, 2, 3]|last }}|{{ 'abc'|first }}|{{ 'abc'|last }}|{{ []|first }}|{{ {'a': 1, 'b': 2}|first }}|{{ {'a': 1, 'b': 2}|last }}|{{ (4, 5)|last }}|{{ ''|last }}",
    "{{ 5|first }}", "{{ [1]|select|last }}",
    "{{ [1, 'a', none, 1.5]|join(', ') }}|{{ ['a', 'b']|join }}|{{ users|join(',', attribute='name') }}|{{ 'abc'|join('-') }}|{{ {'k': 1, 'j': 2}|join('+') }}|{{ [[1], (2,)]|join(';') }}",
    "{{ 'hello world-foo(bar)'|title }}|{{ 'hELLO wORLD'|capitalize }}|{{ 'Ab'|upper }}{{ 'Ab'|lower }}|{{ \"they're bill's [x]<y>{z}\"|title }}|{{ 5|upper }}|{{ 'ßtraße ΣΑΣ'|upper }}|{{ 'ΣΑΣ ΟΔΟΣ'|lower }}",
    "{{ 'abc'|list }}|{{ (1, 2)|list }}|{{ {'a': 1}|list }}|{{ 1|string }}|{{ [1]|string }}|{{ none|string }}|{{ 'x'|string }}|{{ range(3)|list }}",
    "{{ '42'|int }}|{{ '4.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ '0x1A'|int(0, 16) }}|{{ '1A'|int(base=16) }}|{{ ' 12 '|int }}|{{ '1_000'|int }}|{{ 3.99|int }}|{{ -3.99|int }}|{{ true|int }}|{{ none|int }}|{{ [1]|int }}|{{ '-12'|int }}|{{ '0b11'|int(base=0) }}|{{ '1e3'|int }}|{{ 'nan'|int }}",
    "{{ '3.5'|float }}|{{ 'x'|float }}|{{ 2|float }}|{{ ' 1e3 '|float }}|{{ 'inf'|float }}|{{ '-nan'|float }}|{{ none|float }}|{{ '1_0.5'|float }}|{{ '.5'|float }}|{{ '5.'|float }}|{{ 'x'|float(1) }}|{{ true|float }}",
    "{{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ 3.14159|round(3) }}|{{ 5|round }}|{{ 2.1|round(0, 'ceil') }}|{{ 2.9|round(0, 'floor') }}|{{ 1.25|round(1) }}|{{ -0.5|round }}|{{ 0.125|round(2) }}|{{ 1234.5678|round(2, 'floor') }}",
    "{{ -3|abs }}|{{ -2.5|abs }}|{{ true|abs }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 5|replace('5', 'x') }}|{{ none|replace('None', 'n') }}|{{ 'a.b'|replace('.', '') }}",
    "{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'x\ny'|indent('> ', first=true) }}|{{ 'ab'|center(6) }}|{{ ''|indent(first=true) }}|{{ 'a\r\nb'|indent(1) }}",
    "{{ 5|indent }}",
    "{{ 'hello world foo bar'|truncate(9) }}|{{ 'hello world foo bar'|truncate(9, true) }}|{{ 'hello world foo bar'|truncate(9, leeway=0) }}|{{ 'short'|truncate(3, leeway=2) }}|{{ 'hi there, 你好_x!'|wordcount }}|{{ 'a b c d e f'|truncate(5, end='~', leeway=0) }}",
    "{{ [3, 1, 2]|sort }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ ['b', 'A', 'c']|sort }}|{{ ['b', 'A', 'c']|sort(case_sensitive=true) }}|{{ users|sort(attribute='age')|map(attribute='name')|list }}|{{ users|sort(attribute='age,name')|map(attribute='name')|join(',') }}|{{ users|sort(attribute='age', reverse=true)|map(attribute='name')|join(',') }}|{{ 'cab'|sort }}",
    "{{ [1, 'a']|sort }}",
    "{{ [1, 2, 1, 3]|unique|list }}|{{ ['a', 'A', 'b']|unique|list }}|{{ ['a', 'A']|unique(true)|list }}|{{ users|unique(attribute='age')|map(attribute='name')|list }}",
    "{{ [3, 1, 2]|min }}|{{ [3, 1, 2]|max }}|{{ ['b', 'A']|max }}|{{ ['b', 'A']|max(case_sensitive=true) }}|[{{ []|max }}]|{{ users|max(attribute='age') }}|{{ users|min(attribute='name') }}|{{ 'hello'|max }}",
    "{{ [1, 2, 3]|sum }}|{{ [1.5, 2]|sum }}|{{ users|sum(attribute='age') }}|{{ [[1], [2]]|sum(start=[]) }}|{{ []|sum }}",
    "{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('even')|list }}|{{ [0, 1, '', none, 'a']|select|list }}|{{ [1, 2, 3]|select('>', 1)|list }}|{{ [1, 2, 3]|select('in', [2, 3])|list }}|{{ ['a', 'B']|select('upper')|list }}|{{ [1, 2, 3]|reject('divisibleby', 3)|list }}|{{ [none, 1]|reject('none')|list }}",
    "{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}|{{ msgs|rejectattr('role', '==', 'user')|list|length }}|{{ msgs|selectattr('tool_calls')|list|length }}|{{ msgs|selectattr('tool_calls', 'defined')|list|length }}|{{ msgs|selectattr('role', 'ne', 'user')|first|attr('role') is defined }}",
    "{{ ['a', 'b']|map('upper')|list }}|{{ [1.5, 2.5]|map('round')|list }}|{{ users|map(attribute='missing', default='?')|list }}|{{ ['x']|map('replace', 'x', 'y')|list }}|{{ [[1, 2]]|map(attribute='0')|list }}|{{ [1, 2]|map('string')|join }}",
    "{{ {'a': 1}|items|list }}|{% for k, v in {'b': 2}|items %}{{ k }}{{ v }}{% endfor %}|{{ u|items|list }}",
    "{{ [1]|items|list }}",
    "{{ {'b': 1, 'A': 2, 'c': 0}|dictsort }}|{{ {'b': 1, 'A': 2}|dictsort(true) }}|{{ {'b': 1, 'a': 2}|dictsort(by='value') }}|{{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}",
    "{{ 'abc'|reverse }}|{{ [1, 2, 3]|reverse|list }}|{{ {'a': 1, 'b': 2}|reverse|list }}|{{ [1, 2]|select|reverse|list }}|{{ (1, 2)|reverse|join }}",
    "{{ [1, 2, 3, 4, 5]|batch(2)|list }}|{{ [1, 2, 3]|batch(2, 'x')|list }}|{{ [1, 2, 3, 4, 5]|slice(2)|list }}|{{ [1, 2, 3, 4]|slice(3, 0)|list }}|{{ []|batch(3)|list }}",
    "{{ '<a>'|safe }}|{{ '<a & \"b\">'|e }}|{{ ('<b>'|safe) + '<i>' }}|{{ '<i>' + ('<b>'|safe) }}|{{ '<x>'|escape|escape }}|{{ ('<b>'|safe) ~ '<i>' }}|{{ ('<b>'|safe)|length }}|{{ 5|e }}|{{ '<'|forceescape }}|{{ ('<'|safe)|forceescape }}|{{ ('a'|safe) is string }}|{{ ('<'|safe) * 2 }}|{{ ('<b>'|safe) == '<b>' }}",
    "{{ '%s-%s'|format('a', 1) }}|{{ '%(x)s'|format(x=2) }}|{{ 5|format }}|{{ '%d%%'|format(50) }}",
    "{% set ns = namespace(x=3) %}{{ ns|attr('x') }}|{{ d|attr('a') is defined }}|{{ d|attr('get') is defined }}|{{ 'x'|attr('upper') is defined }}",
    "{% set g = [1, 2, 3]|select('odd') %}{{ g|list }}|{{ g|list }}|{% set h = [1, 2]|map('string') %}{{ h is iterable }}|{{ h is sequence }}|{{ h is string }}|{{ (h|list)[0] is string }}|{{ [1]|select|first }}|{{ [0]|select|first is defined }}",
    "{% set g = [1, 2, 3]|select %}{{ g|first }}|{{ g|list }}|{{ 2 in g }}",
    "{% set g = [1, 2, 3]|select %}{{ 2 in g }}{{ g|list }}|{% set e = []|select %}{{ 'yes' if e else 'no' }}",
    "{{ [1]|select|length }}", "{{ [1]|map('string')|last }}", "{{ [1]|nosuchfilter }}", "{{ [1]|map('nosuchfilter')|list }}",
    "{{ [1]|select('nosuchtest')|list }}", "{{ 1 is nosuchtest }}", "{{ 1 is odd(2) }}",
    # tests
    "{{ 1 is odd }}{{ 2 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is integer }}{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ none is none }}{{ 'a' is string }}{{ d is mapping }}{{ l is sequence }}{{ d is sequence }}{{ 'a' is sequence }}{{ 1 is sequence }}{{ l is iterable }}{{ 1 is iterable }}{{ d.keys() is sequence }}{{ d.keys() is iterable }}",
    "{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 'aB' is lower }}{{ 1 is sameas 1 }}{{ none is sameas none }}{{ 1000 is sameas 1000 }}{{ l is sameas l }}{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}{{ 2 is in [1, 2] }}{{ 2 is eq 2 }}{{ 2 is ne 2 }}{{ 3 is gt 2 }}{{ 3 is ge 3 }}{{ 1 is lt 2 }}{{ 1 is le 0 }}{{ 2 is equalto 2 }}{{ 3 is greaterthan 2 }}{{ 1 is lessthan 2 }}{{ 'a' is escaped }}{{ ('a'|safe) is escaped }}{{ range is callable }}{{ 1 is callable }}{{ d.get is callable }}{{ 1.5 is odd }}{{ f is number }}",
    "{{ n is not none }}{{ n is not defined }}{{ not n is defined }}{{ u is not defined }}{{ d.a is not string }}{{ (1, 2) is sequence }}{{ {} is mapping }}{{ msgs[0] is mapping }}",
    "{{ 'a' is odd }}", "{{ u is odd }}", "{{ 1 is divisibleby 0 }}",
    # statements
    "{% for i in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.depth }}{{ loop.depth0 }}{{ loop.cycle('x', 'y') }};{% endfor %}",
    "{% for i in [1, 2, 3, 4] %}{{ loop.changed(i // 2) }}{% endfor %}|{% for i in [1] %}{{ loop.previtem is defined }}{{ loop.nextitem is defined }}{{ loop }}{% endfor %}",
    "{% for a, b in [[1, 2], (3, 4)] %}{{ a }}{{ b }}{% endfor %}|{% for a, (b, c) in [[1, [2, 3]]] %}{{ a }}{{ b }}{{ c }}{% endfor %}|{% for k, v in {'x': 1}.items() %}{{ k }}{{ v }}{% endfor %}|{% for a, b in ['xy'] %}{{ a }}{{ b }}{% endfor %}",
    "{% for x in [1, 2] %}{% for y in [3, 4] %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}{{ loop.index }}|{% endfor %}",
    "{% for i in range(5) if i != 2 %}{{ loop.index }}:{{ i }},{{ loop.last }},{{ loop.length }};{% endfor %}",
    "{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for i in [1, 2] %}{% for j in [1, 2] %}{% if j == 2 %}{% break %}{% endif %}{{ i }}{{ j }}{% endfor %}{% endfor %}",
    "{% for i in [] %}x{% else %}empty{% endfor %}|{% for i in [1] if false %}x{% else %}filtered{% endfor %}|{% for i in [1] %}{% break %}{% else %}never{% endfor %}",
    "{% for a, b in [[1]] %}{% endfor %}", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", "{% for x in 5 %}{% endfor %}",
    "{% for x in none %}{% endfor %}", "{% for x in range(100001) %}{% endfor %}",
    "{{ range(3) }}|{{ range(1, 10, 3)|list }}|{{ range(5, 0, -2)|list }}|{{ range(3)|length }}|{{ range(3)[1] }}|{{ range(0) }}|{{ range(2, 8, 2) }}|{{ range(-3)|list }}|{{ 2 in range(3) }}|{{ range(3)[-1] }}",
    "{% set x = 0 %}{% for i in [1, 2, 3] %}{{ x }}{% set x = i %}{{ x }}|{% endfor %}{{ x }}",
    "{% for i in [1, 2, 3] %}{% if loop.first %}{% set y = 5 %}{% endif %}{{ y }}|{% endfor %}{{ y }}|{{ i is defined }}",
    "{% set ns = namespace(total=0, items=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.total }}{{ ns.items }}{{ ns.missing is defined }}{{ ns }}",
    "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}",
    "{% set ns = namespace(a=1) %}{% set ns2 = namespace(ns=ns) %}{% set ns2.ns.a = 9 %}{{ ns.a }}",
    "{% set ns = namespace(a=1) %}{% set ns2 = namespace(inner=ns) %}{% set ns2.inner = 5 %}{{ ns.a }}{{ ns2.inner }}|{% set ns3 = namespace() %}{% set ns3.d = {'k': ns} %}{{ ns3.d.k.a }}",
    "{{ msgs|map(attribute='tool_calls.0.function.name')|list }}",
    "{% set ns = namespace() %}{% set ns._x = 1 %}", "{% set x = 1 %}{% set x.y = 2 %}", "{% set ns = namespace(_a=1) %}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}|{% set (p, q) = 'xy' %}{{ p }}{{ q }}",
    "{% set t %}  block {{ 1 }} {% endset %}[{{ t }}]|{% set u2 | upper | trim %} x {% endset %}[{{ u2 }}]|{% for i in [1] %}{% set v %}{{ i }}{% endset %}{% endfor %}{{ v is defined }}",
    "{% if true %}{% set z = 1 %}{% endif %}{{ z }}|{% if false %}{% elif true %}{% set w = 2 %}{% else %}{% endif %}{{ w }}",
    "{% if 0 %}a{% elif '' %}b{% elif none %}c{% else %}d{% endif %}|{% if 1, 2 %}tuple{% endif %}|{% if [] %}x{% endif %}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% set c = 3 %}{% endwith %}{{ a is defined }}{{ c is defined }}",
    "{% filter upper %}abc{{ 'd' }}{% endfilter %}|{% filter replace('a', 'b')|upper %}aaa{% endfilter %}|{% filter trim %}  x  {% endfilter %}",
    "{% print 'x', 1 %}|{% print %}|{% generation %}gen {{ 1 }}{% set g = 1 %}{% endgeneration %}{{ g is defined }}",
    "{% macro m(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}{{ m() }}{{ m(c=1, a=2) }}",
    "{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}{{ m() }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, a=2) }}",
    "{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
    "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}|{% for i in [1] %}{% set y = 'loop' %}{% macro k() %}{{ y }}{% endmacro %}{{ k() }}{% endfor %}",
    "{% macro m(x) %}{% set y = x * 2 %}{{ y }}{% endmacro %}{{ m(2) }}{{ y is defined }}|{% macro n() %}{% for i in [1, 2] %}{{ i }}{% endfor %}{% endmacro %}{{ n() }}",
    "{% macro m() %}a{% endmacro %}{{ m() ~ 'b' }}{{ m()|length }}{{ m }}{{ m is callable }}|{% macro p(a, b=a) %}{{ b }}{% endmacro %}{{ p(3) }}",
    "{% macro m(a) %}{{ a is defined }}{% endmacro %}{{ m() }}|{% macro q(content) %}{% if content is string %}{{ content }}{% else %}{% for c in content %}{{ c.text }}{% endfor %}{% endif %}{% endmacro %}{{ q('s') }}{{ q([{'text': 'p'}, {'text': 'q'}]) }}",
    "{{ raise_exception('bad ' ~ 1) }}", "{% if true %}{{ raise_exception('inside') }}{% endif %}",
    "{{ dict(a=1, b=2) }}|{{ dict({'x': 1}, y=2) }}|{{ dict([['k', 'v']]) }}|{{ dict() }}|{{ namespace is callable }}",
    "{{ 'a' ~ 'b' ~ 'c' }}|{{ [1, 2, 3][1:][0] }}|{{ 'abc'[1] ~ 'x' }}|{{ {'a': {'b': [1, {'c': 'd'}]}}.a.b[1].c }}|{{ (l|first) + (l|last) }}|{{ l|length > 3 }}|{{ -f|abs }}",
    "{{ -l|length }}",
    "{{ (messages|default([]))|length }}|{{ messages[-1] if messages else 'none' }}",
    # constructs of the thinking-model templates (Kimi-K2, GLM-5.x, MiniMax-M2, llama.cpp's DeepSeek-V3.2)
    ("{%- set clear_thinking = clear_thinking if clear_thinking is defined else false -%}{{ clear_thinking }}"
     "{%- set agp = add_generation_prompt | default(true) -%}{{ agp }}|{% set flag = flag or 'x' %}{{ flag }}",
     {"clear_thinking": True}),
    "{%- set clear_thinking = clear_thinking if clear_thinking is defined else false -%}{{ clear_thinking }}",
    ("{%- set ns = namespace(last=-1) -%}{%- for idx in range(msgs|length-1, -1, -1) -%}"
     "{%- if msgs[idx]['role'] == 'assistant' and not msgs[idx].get('tool_calls') -%}{%- set ns.last = idx -%}"
     "{%- break -%}{%- endif -%}{%- endfor -%}{{ ns.last }}|{{ msgs[:ns.last+1]|length }}|{{ msgs[ns.last+1:]|length }}"
     "|{% for m in msgs %}{{ m.get('name') or m['role'] }},{% endfor %}", {"msgs": [
         {"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "name": "bot"},
         {"role": "assistant", "content": "c", "tool_calls": [{"id": "t"}]}, {"role": "tool", "content": "d"}]}),
    ("{% for c in parts %}{% if c['type'] == 'image' or 'image' in c or 'image_url' in c %}I{% else %}{{ c['text'] }}"
     "{% endif %}{% endfor %}|{{ tools | tojson(separators=(',', ':')) }}|{{ m.get('content') is not none }}"
     "|{{ m.get('reasoning_content', '') }}|{{ m.get('missing', 'dflt') }}",
     {"parts": [{"type": "text", "text": "t"}, {"image_url": {"url": "u"}}, {"type": "image"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"a": [1, "中"]}}}],
      "m": {"content": None, "reasoning_content": "r"}}),
    ("{%- macro f() -%}{%- if model_identity is not defined -%}{%- set model_identity = 'dflt' -%}{%- endif -%}"
     "{{ model_identity }}{%- endmacro -%}{{ f() }}|{% set model_identity = 'outer' %}{{ f() }}", {}),
    ("{%- set tools = namespace(value=[]) -%}{%- set _ = tools.value.append(1) -%}{{ tools.value }}", {}),
    ("{%- set last = namespace(name=none) -%}{%- set last.name = calls[-1].function.name -%}{{ last.name }}"
     "{{ last.name is none }}|{%- set last.name = calls[-1].name -%}{{ last.name is none }}{{ last.name is defined }}",
     {"calls": [{"function": {"name": "f"}}]}),
    # found by fuzzing against jinja2
    "abc {#", "abc  {#-", "x{% raw -%}\n", "abc {# x",
    "{{ 'L:Σ'|lower }}|{{ \"Α'Σ\"|lower }}|{{ 'ΑΣ.Β'|lower }}|{{ 'Σ'|lower }}|{{ 'ΑΣ́'|lower }}",
    "{% set g = u|map %}ok|{% set h = l|map %}ok2|{{ n|map|list }}|{% set i = 'x'|items %}ok3|{% set j = 5|select %}ok4",
    "{{ l|map|list }}", "{{ 'x'|items|list }}", "{{ 5|select|list }}",
    "{{ 'x'|tojson(indent=u) }}|{{ 'é'|tojson(indent=[]) }}", "{{ 1|tojson(indent=u) }}",
    "{{ '% %' % () }}", "{{ '%%|%s' % 1 }}", "{{ '%5%' % (1,) }}",
    "{% set g = [1, 2, 3]|select %}{{ g|select|first }}|{{ g|list }}|{% set h = [1, 2, 3]|map('string') %}{{ h|first }}{{ h|map('int')|list }}",
    # jinja2 evaluates constant {{ }} expressions at compile time, where slices cannot fail
    "{{ (none)[1:] }}|{{ 'abc'[0:1.5] }}|{{ [(5)[1:]] }}|{{ (5)[1:]|list }}|{{ {}[1:] is defined }}|{{ ('abc' if true else x)[0:1.5] }}|{% print (1)[:1], 2 %}",
    "{% set v = (none)[1:] %}", "{{ ('abc' if x else 'd')[0:1.5] }}", "{{ [1][::0] }}", "{% if (none)[1:] %}{% endif %}",
    "{% if (0)[1:]|upper %}a{% else %}b{% endif %}|{{ n if (0)[1:]|length else 'c' }}|{{ ((1.5)[:1] is defined, n) }}|{% set w = (none)[1:]|string %}[{{ w }}]",
    "{{ (2.5|safe).startswith('2') }}|{{ ('<a>'|safe).replace('a', '&') }}|{{ ('x'|safe).center(5, '<') if false else ('x'|safe).center(5) }}|{{ ('-'|safe).join(['<', 1]) }}|{{ ('a,b'|safe).split(',') }}|{{ ('a=b'|safe).partition('=') }}|{{ ('ab'|safe)[0] ~ ('ab'|safe)|first }}|{{ ('ab'|safe)|list }}|{{ 2.5|safe|batch(2)|list }}",
    "{{ ('x'|safe).center(5, '<') }}", "{{ [1, 2]|truncate(5) }}|{{ {'a': 1}|truncate(3, leeway=0) }}", "{{ [1, 2, 3, 4, 5, 6, 7]|truncate(3, leeway=0) }}",
    "{{ 'abc' % [1] }}|{{ 'abc' % {'a': 1} }}|{{ 'abc' % u }}|{{ '%s' % [1, 2] }}|{{ 'x' % range(2) }}", "{{ 'abc' % (1,) }}", "{{ 'abc' % 5 }}",
    "{{ 123.4 ** 560.0 }}", "{{ 10.0 ** -400 }}|{{ 2 ** 0.5 }}|{{ 1e308 * 10 }}", "{{ 'a\\nb'.splitlines('x') }}",
    "{{ 'a\\nb'.splitlines(true) }}|{{ 'a\\nb'.splitlines(1) }}|{{ '%5.60f' % 254 }}|{{ '%.300e' % 1.5 }}",
    # syntax errors and unsupported constructs
    "{% if %}x{% endif %}", "{% for x %}{% endfor %}", "{{ }}", "{{ 1 + }}", "{% endif %}", "{% if true %}", "{{ 'abc }}",
    "{{ (1 }}", "{% foo %}", "{# unclosed", "{% raw %}x", "{{ x | }}", "{{ 1 2 }}", "{% set 1 = 2 %}",
    "{% macro m(a=1, b) %}{% endmacro %}", "{{ x is }}", "{% break %}", "{{ x|nosuchfilter }}", "{{ x is nosuchtest }}",
    "{% include 'x' %}", "{% extends 'x' %}", "{% import 'x' as y %}", "{% call m() %}{% endcall %}",
    "{% do x %}", "{{ f(*l) }}", "{% set true = 1 %}",
    "{% if n %}{{ y|nosuchfilter }}{% endif %}ok", "{% if x %}{{ y|nosuchfilter }}{% endif %}ok", "{% if true %}{{ y|nosuchfilter }}{% endif %}",
    "{{ 1 if x else 2|nosuchfilter }}", "{{ 2|nosuchfilter if false else 1 }}", "{{ x is nosuchtest if false else 3 }}",
    "{% for i in l %}{% if i %}{{ i|nosuchfilter }}{% endif %}{% endfor %}", "{% if true %}{% for i in l %}{{ i|nosuch }}{% endfor %}{% endif %}",
    "{{ 1 }}{% endfor %}", "{% for x in l %}{% endif %}", "{% if x %}{% else %}{% else %}{% endif %}",
    "{{ 'a' is string is string }}", "{{ a.'b' }}", "{{ 1.x }}", "{{ [1, 2 }}", "{{ {'a' 1} }}", "{{ a = 1 }}",
    "{{ x !}}", "{{ '\\N{DASH}' }}", "{{ '\\x4' }}", "{{ '\\ud800' }}",
]


def load_template(shared, source):
    if source.startswith("data:"):
        with open(os.path.join(OUT, "templates", source[len("data:"):]), encoding="utf-8", newline="") as f:
            return f.read()
    path = os.path.join(shared, source)
    if source.startswith("tokenizers/"):
        with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as f:
            return json.load(f)["chat_template"]
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def render(template, case, bos, eos):
    """What apply_chat_template(tokenize=False) returns, or the exception it raises."""
    special = {k: v for k, v in (("bos_token", bos), ("eos_token", eos)) if v is not None}
    kwargs = {**special, **case.get("kwargs", {})}
    try:
        chats = [_normalize_chat_messages(case["messages"])]
        out, _ = render_jinja_template(
            conversations=chats,
            tools=case.get("tools"),
            chat_template=template,
            add_generation_prompt=case.get("add_generation_prompt", False),
            **kwargs,
        )
        return {"expected": out[0]}
    except Exception as e:  # the golden records that transformers fails here
        return {"error": f"{type(e).__name__}: {e}"}


def check_with_real_tokenizer(shared, name, template, cases):
    source = TEMPLATES[name][0]
    if not source.startswith("tokenizers/"):
        return
    tok = transformers.AutoTokenizer.from_pretrained(os.path.join(shared, source))
    for case in cases:
        if "error" in case:
            continue
        got = tok.apply_chat_template(
            case["messages"],
            tools=case.get("tools"),
            add_generation_prompt=case.get("add_generation_prompt", False),
            tokenize=False,
            **case.get("kwargs", {}),
        )
        if got != case["expected"]:
            raise SystemExit(f"{name}/{case['name']}: apply_chat_template differs from render path")


def make_template_goldens(shared):
    os.makedirs(os.path.join(OUT, "templates"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "goldens"), exist_ok=True)
    for name, (source, bos, eos) in TEMPLATES.items():
        template = load_template(shared, source)
        if not source.startswith("data:"):
            with open(os.path.join(OUT, "templates", name + ".jinja"), "w", encoding="utf-8", newline="") as f:
                f.write(template)
        cases = []
        for case in conversations_for(name):
            result = render(template, case, bos, eos)
            cases.append({**case, **result})
        ok = sum("expected" in c for c in cases)
        if ok < 10:
            raise SystemExit(f"{name}: only {ok} conversations render; need at least 10")
        check_with_real_tokenizer(shared, name, template, cases)
        golden = {
            "template": name,
            "template_file": f"templates/{name}.jinja",
            "bos_token": bos,
            "eos_token": eos,
            "made_with": {"transformers": transformers.__version__, "jinja2": jinja2.__version__},
            "cases": cases,
        }
        with open(os.path.join(OUT, "goldens", name + ".json"), "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{name}: {ok} renders, {len(cases) - ok} expected errors")


def make_jinja_cases():
    out = []
    for i, case in enumerate(JINJA_CASES):
        source, extra = (case, {}) if isinstance(case, str) else case
        entry = {"id": i, "template": source}
        if extra:
            entry["variables"] = extra
        try:
            text = _compile_jinja_template(source).render(**{**COMMON_VARIABLES, **extra})
            text.encode("utf-8")  # lone surrogates: the prompt could not be tokenized
            entry["expected"] = text
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
        out.append(entry)
    with open(os.path.join(OUT, "jinja_cases.json"), "w", encoding="utf-8") as f:
        json.dump({"made_with": {"transformers": transformers.__version__, "jinja2": jinja2.__version__},
                   "common_variables": COMMON_VARIABLES, "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"jinja_cases: {len(out)} snippets, {sum('error' in c for c in out)} expected errors")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = parser.parse_args()
    make_template_goldens(args.shared)
    make_jinja_cases()


if __name__ == "__main__":
    main()
