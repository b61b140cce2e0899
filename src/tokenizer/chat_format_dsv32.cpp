#include "tokenizer/chat_format_dsv32.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja/json_value.h"
#include "tokenizer/jinja/pyformat.h"

namespace deepinfer::tokenizer {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kDsml = "｜DSML｜";

// TOOLS_SYSTEM_TEMPLATE with its tokens filled in; the tool schemas go between the two parts.
constexpr std::string_view kToolsHead = R"dsv32(## Tools
You have access to a set of tools you can use to answer the user's question.
You can invoke functions by writing a "<｜DSML｜function_calls>" block like the following as part of your reply to the user:
<｜DSML｜function_calls>
<｜DSML｜invoke name="$FUNCTION_NAME">
<｜DSML｜parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</｜DSML｜parameter>
...
</｜DSML｜invoke>
<｜DSML｜invoke name="$FUNCTION_NAME2">
...
</｜DSML｜invoke>
</｜DSML｜function_calls>
String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).
If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:
<｜DSML｜function_calls>
...
</｜DSML｜function_calls>
<function_results>
...
</function_results>
<think>...thinking about results</think>
Here are the functions available in JSONSchema format:
<functions>
)dsv32";
constexpr std::string_view kToolsTail = "\n</functions>\n";
constexpr std::string_view kResponseFormat =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

[[noreturn]] void refuse(const auto&... parts) {
  fail("DeepSeek-V3.2 chat format: ", parts...);
}

// json.dumps(value, ensure_ascii=False): Python's separators and number forms.
std::string to_json(const Json& value) {
  return jinja::to_json(jinja::from_json(value), jinja::JsonOptions{},
                        std::numeric_limits<size_t>::max());
}

// Python truthiness of a JSON value.
bool truthy(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>() != 0;
  if (v.is_number_unsigned()) return v.get<uint64_t>() != 0;
  if (v.is_number_float()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();
}

const Json* field(const Json& msg, const char* key) {
  const auto it = msg.find(key);
  return it == msg.end() ? nullptr : &*it;
}

std::string role_of(const Json& msg) {
  const Json* role = field(msg, "role");
  return role && role->is_string() ? role->get<std::string>() : std::string();
}

// content as a string: a string, or a list of text parts joined with "\n"; null -> nullopt.
std::optional<std::string> content_text(const Json& content, size_t index) {
  if (content.is_null()) return std::nullopt;
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {
    std::string text;
    for (size_t i = 0; i < content.size(); ++i) {
      const Json& part = content[i];
      const Json* type = part.is_object() ? field(part, "type") : nullptr;
      const Json* t = part.is_object() ? field(part, "text") : nullptr;
      if (!type || *type != "text" || !t || !t->is_string()) {
        refuse("messages[", index, "].content[", i, "]: only text parts are supported");
      }
      if (i > 0) text += '\n';
      text += t->get<std::string>();
    }
    return text;
  }
  refuse("messages[", index, "].content must be a string or a list of text parts");
}

// One request message as the encoder sees it: null-valued keys dropped, reasoning under
// "reasoning_content", content as text.
Json prepare_message(const Json& raw, size_t index) {
  if (!raw.is_object()) refuse("messages[", index, "] must be a JSON object");
  Json msg = Json::object();
  for (const auto& [k, v] : raw.items()) {
    if (!v.is_null()) msg[k] = v;
  }
  const Json* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "reasoning", "thinking"}) {
    if ((reasoning = field(msg, key))) break;
  }
  if (reasoning) {
    const Json r = *reasoning;
    msg.erase("reasoning");
    msg.erase("thinking");
    msg["reasoning_content"] = r;
  }
  if (const Json* content = field(msg, "content")) {
    msg["content"] = *content_text(*content, index);
  }
  const std::string role = role_of(msg);
  if ((role == "user" || role == "developer" || role == "tool") &&
      !(field(msg, "content") && msg["content"].is_string())) {
    refuse("messages[", index, "] (", role, ") needs a string content");
  }
  return msg;
}

std::string render_tools(const Json& tools) {
  std::string schemas;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const Json* fn = tool.is_object() ? field(tool, "function") : nullptr;
    if (!fn) refuse("tools[", i, "] needs a \"function\" (OpenAI format)");
    if (i > 0) schemas += '\n';
    schemas += to_json(*fn);
  }
  return str_cat(kToolsHead, schemas, kToolsTail);
}

// encode_arguments_to_dsml: one <｜DSML｜parameter> line per argument, in the given order.
std::string encode_arguments(const Json& arguments_field, size_t index) {
  Json arguments;
  if (arguments_field.is_string()) {
    try {
      arguments = Json::parse(arguments_field.get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      refuse("messages[", index, "]: tool call arguments are not valid JSON: ", e.what());
    }
  } else {
    arguments = arguments_field;
  }
  if (!arguments.is_object()) {
    refuse("messages[", index, "]: tool call arguments must be a JSON object");
  }
  std::string out;
  bool first = true;
  for (const auto& [k, v] : arguments.items()) {
    if (!first) out += '\n';
    first = false;
    const bool is_str = v.is_string();
    out += str_cat("<", kDsml, "parameter name=\"", k, "\" string=\"", is_str ? "true" : "false",
                   "\">", is_str ? v.get<std::string>() : to_json(v), "</", kDsml, "parameter>");
  }
  return out;
}

std::string render_tool_calls(const Json& tool_calls, size_t index) {
  if (!tool_calls.is_array()) refuse("messages[", index, "].tool_calls must be a list");
  std::string calls;
  for (size_t i = 0; i < tool_calls.size(); ++i) {
    const Json& call = tool_calls[i];
    const Json* fn = call.is_object() ? field(call, "function") : nullptr;
    const Json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
    const Json* arguments = fn && fn->is_object() ? field(*fn, "arguments") : nullptr;
    if (!name || !name->is_string() || !arguments) {
      refuse("messages[", index, "].tool_calls[", i,
             "] needs a function with a string name and arguments");
    }
    if (i > 0) calls += '\n';
    calls += str_cat("<", kDsml, "invoke name=\"", name->get<std::string>(), "\">\n",
                     encode_arguments(*arguments, index), "\n</", kDsml, "invoke>");
  }
  return str_cat("\n\n<", kDsml, "function_calls>\n", calls, "\n</", kDsml, "function_calls>");
}

ptrdiff_t last_user_index(const std::vector<Json>& messages) {
  for (ptrdiff_t i = static_cast<ptrdiff_t>(messages.size()) - 1; i >= 0; --i) {
    const std::string role = role_of(messages[i]);
    if (role == "user" || role == "developer") return i;
  }
  return -1;
}

std::string str_field(const Json& msg, const char* key) {
  const Json* v = field(msg, key);
  if (!v || !truthy(*v)) return "";
  if (!v->is_string()) refuse("\"", key, "\" must be a string");
  return v->get<std::string>();
}

// render_message. `opener`: whether a final user turn or tool-result block is followed by the
// assistant opener (false only for the last message without add_generation_prompt).
std::string render_message(const std::vector<Json>& messages, size_t index, bool thinking,
                           ptrdiff_t last_user, bool opener) {
  const Json& msg = messages[index];
  const std::string role = role_of(msg);
  const auto idx = static_cast<ptrdiff_t>(index);
  const Json* tools = field(msg, "tools");
  const bool has_tools = tools && truthy(*tools);
  if (has_tools && !tools->is_array()) refuse("messages[", index, "].tools must be a list");
  const Json* response_format = field(msg, "response_format");
  const bool has_format = response_format && truthy(*response_format);
  const std::string_view marker = thinking && idx == last_user ? kThinkStart : kThinkEnd;

  if (role == "system") {
    std::string out = str_field(msg, "content");
    if (has_tools) out += str_cat("\n\n", render_tools(*tools));
    if (has_format) out += str_cat("\n\n", kResponseFormat, to_json(*response_format));
    return out;
  }
  if (role == "developer") {
    const std::string content = str_field(msg, "content");
    if (content.empty()) refuse("messages[", index, "]: a developer message needs content");
    std::string text;
    if (has_tools) text += str_cat("\n\n", render_tools(*tools));
    if (has_format) text += str_cat("\n\n", kResponseFormat, to_json(*response_format));
    text += str_cat("\n\n# The user's message is: ", content);
    return str_cat(kUser, text, opener ? str_cat(kAssistant, marker) : std::string());
  }
  if (role == "user") {
    return str_cat(kUser, msg["content"].get<std::string>(),
                   opener ? str_cat(kAssistant, marker) : std::string());
  }
  if (role == "tool") {
    ptrdiff_t prev = idx - 1;
    while (prev >= 0 && role_of(messages[prev]) == "tool") --prev;
    if (prev < 0 || role_of(messages[prev]) != "assistant") {
      refuse("messages[", index, "]: a tool message must follow an assistant message");
    }
    const Json* calls = field(messages[prev], "tool_calls");
    const ptrdiff_t order = idx - prev;
    if (!calls || !truthy(*calls) || !calls->is_array() ||
        static_cast<ptrdiff_t>(calls->size()) < order) {
      refuse("messages[", index, "]: no tool calls but found tool output (the assistant message ",
             "before it has ", calls && calls->is_array() ? calls->size() : 0, " tool calls)");
    }
    std::string out = order == 1 ? "\n\n<function_results>" : "";
    out += str_cat("\n<result>", msg["content"].get<std::string>(), "</result>");
    if (order == static_cast<ptrdiff_t>(calls->size())) {
      out += "\n</function_results>";
      if (opener) out += str_cat("\n\n", thinking && idx >= last_user ? kThinkStart : kThinkEnd);
    }
    return out;
  }
  if (role == "assistant") {
    const Json* calls = field(msg, "tool_calls");
    const bool has_calls = calls && truthy(*calls);
    const std::string calls_text = has_calls ? render_tool_calls(*calls, index) : std::string();
    const Json* content = field(msg, "content");
    if (content && !content->is_string()) refuse("messages[", index, "].content must be a string");
    std::string thinking_part;
    if (thinking && idx > last_user) {
      const std::string reasoning = str_field(msg, "reasoning_content");
      if (reasoning.empty() && !has_calls) {
        refuse("messages[", index, "]: in thinking mode an assistant message after the last ",
               "user message needs reasoning_content or tool_calls");
      }
      thinking_part = str_cat(reasoning, kThinkEnd);
    }
    return str_cat(thinking_part, str_field(msg, "content"), calls_text, kEos);
  }
  refuse("messages[", index, "]: unknown role '", role, "'");
}

}  // namespace

std::string render_deepseek_v32_chat(const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& tools,
                                     bool add_generation_prompt,
                                     const nlohmann::ordered_json& kwargs) {
  if (!messages.is_array()) refuse("messages must be a JSON array of message objects");
  if (!tools.is_null() && !tools.is_array()) refuse("tools must be a JSON array or null");
  if (!kwargs.is_null() && !kwargs.is_object()) refuse("template kwargs must be a JSON object");

  std::vector<Json> list;
  if (truthy(tools)) list.push_back(Json{{"role", "system"}, {"tools", tools}});
  for (size_t i = 0; i < messages.size(); ++i) {
    list.push_back(prepare_message(messages[i], i));
    if (role_of(list.back()) == "tool") {
      bool after_other = false;
      for (size_t j = i; j-- > 0;) after_other |= role_of(messages[j]) != "tool";
      if (!after_other)
        refuse("messages[", i, "]: a tool message must follow an assistant message");
    }
  }
  const auto kwarg = [&](const char* key) {
    if (!kwargs.is_object()) return false;
    const auto it = kwargs.find(key);
    return it != kwargs.end() && truthy(*it);
  };
  const bool thinking = kwarg("thinking") || kwarg("enable_thinking");
  const bool drop_thinking = !list.empty() && role_of(list.back()) == "user";

  if (thinking && drop_thinking) {
    // drop_thinking_messages: earlier assistants lose their reasoning; a message of any other
    // role before the last user message (a developer's) is dropped, which the encoder cannot
    // render (its message list gets shorter than the count it renders).
    const ptrdiff_t last_user = last_user_index(list);
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string role = role_of(list[i]);
      if (role == "user" || role == "system" || role == "tool" ||
          static_cast<ptrdiff_t>(i) >= last_user) {
        continue;
      }
      if (role == "assistant") {
        list[i].erase("reasoning_content");
      } else {
        refuse("in thinking mode a '", role,
               "' message before the last user message is not supported by the encoder");
      }
    }
  }

  const ptrdiff_t last_user = last_user_index(list);
  std::string prompt(kBos);
  for (size_t i = 0; i < list.size(); ++i) {
    const bool opener = add_generation_prompt || i + 1 != list.size();
    prompt += render_message(list, i, thinking, last_user, opener);
  }
  return prompt;
}

bool is_deepseek_v32_config(const nlohmann::json& model_config) {
  if (!model_config.is_object()) return false;
  if (const auto it = model_config.find("model_type");
      it != model_config.end() && *it == "deepseek_v32") {
    return true;
  }
  if (const auto it = model_config.find("architectures");
      it != model_config.end() && it->is_array()) {
    for (const auto& a : *it) {
      if (a == "DeepseekV32ForCausalLM") return true;
    }
  }
  return false;
}

}  // namespace deepinfer::tokenizer
