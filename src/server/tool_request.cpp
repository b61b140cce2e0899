#include "server/tool_request.h"

#include <set>
#include <string>

#include "server/request_fields.h"

namespace deepinfer::server {

namespace {

using fields::Json;

std::string type_name(const Json& value) {
  return value.is_null() ? "null" : value.type_name();
}

// Names of the request's tools; checks each is {"type": "function", "function": {"name": ...,
// "description"?: string, "parameters"?: object}}.
std::set<std::string> check_tools(const Json& tools) {
  if (!tools.is_array()) bad_param("tools", "'tools' must be an array of tool objects");
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const std::string where = str_cat("tools[", i, "]");
    if (!tool.is_object()) bad_param("tools", where + " must be an object");
    const Json* type = fields::find(tool, "type");
    if (type != nullptr && *type != "function") {
      bad_param("tools", str_cat(where, ".type must be \"function\", got ", type->dump()));
    }
    const Json* fn = fields::find(tool, "function");
    if (fn == nullptr || !fn->is_object())
      bad_param("tools", where + ".function must be an object");
    const Json* name = fields::find(*fn, "name");
    if (name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
      bad_param("tools", where + ".function.name must be a non-empty string");
    }
    const Json* params = fields::find(*fn, "parameters");
    if (params != nullptr && !params->is_object()) {
      bad_param("tools", where + ".function.parameters must be a JSON schema object");
    }
    const Json* description = fields::find(*fn, "description");
    if (description != nullptr && !description->is_string()) {
      bad_param("tools", where + ".function.description must be a string");
    }
    names.insert(name->get<std::string>());
  }
  return names;
}

void parse_tool_choice(const Json& body, const std::set<std::string>& names, bool have_tools,
                       GenerationRequest& r) {
  const Json* choice = fields::find(body, "tool_choice");
  if (choice == nullptr) return;
  if (choice->is_string()) {
    const auto value = choice->get<std::string>();
    if (value == "none") {
      r.tool_choice = ToolChoice::none;
      return;
    }
    if (value == "auto") return;
    if (value == "required") {
      bad_param("tool_choice",
                "'tool_choice': \"required\" is not supported (it needs guided decoding, which "
                "deepinfer lacks); use \"auto\" and check the response for tool_calls");
    }
    bad_param("tool_choice",
              str_cat("'tool_choice' must be \"none\", \"auto\", \"required\" or "
                      "{\"type\": \"function\", \"function\": {\"name\": ...}}, got ",
                      choice->dump()));
  }
  const Json* fn = choice->is_object() ? fields::find(*choice, "function") : nullptr;
  const Json* name = fn != nullptr && fn->is_object() ? fields::find(*fn, "name") : nullptr;
  if (name == nullptr || !name->is_string() || choice->value("type", Json()) != "function") {
    bad_param("tool_choice",
              "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
              "\"function\": {\"name\": ...}}");
  }
  if (!have_tools || names.count(name->get<std::string>()) == 0) {
    bad_param("tool_choice", str_cat("'tool_choice' names function ", name->dump(),
                                     ", which is not among 'tools'"));
  }
  bad_param("tool_choice",
            "'tool_choice' naming a function is not supported (it needs guided decoding, which "
            "deepinfer lacks); use \"auto\" and check the response for tool_calls");
}

// Checks the tool calls of the history. An assistant message with calls and a null content
// gets content "" (as vLLM passes it): Qwen3's and DeepSeek-V3.1's templates concatenate or
// search the content, and a null one is dropped before rendering (transformers does so).
void check_tool_calls(Json& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    Json& m = messages[i];
    const Json* calls = fields::find(m, "tool_calls");
    const std::string where = str_cat("messages[", i, "]");
    if (m.at("role") == "tool") {
      const Json* id = fields::find(m, "tool_call_id");
      if (id != nullptr && !id->is_string()) {
        bad_param("messages", where + ".tool_call_id must be a string");
      }
    }
    if (calls == nullptr) continue;
    if (m.at("role") != "assistant") {
      bad_param("messages", where + ": only assistant messages may have tool_calls");
    }
    if (!calls->is_array()) bad_param("messages", where + ".tool_calls must be an array");
    for (size_t j = 0; j < calls->size(); ++j) {
      const Json& call = (*calls)[j];
      const std::string at = str_cat(where, ".tool_calls[", j, "]");
      if (!call.is_object()) bad_param("messages", at + " must be an object");
      for (const char* key : {"id", "type"}) {
        const Json* value = fields::find(call, key);
        if (value != nullptr && !value->is_string()) {
          bad_param("messages", str_cat(at, ".", key, " must be a string"));
        }
      }
      const Json* fn = fields::find(call, "function");
      if (fn == nullptr || !fn->is_object())
        bad_param("messages", at + ".function must be an object");
      const Json* name = fields::find(*fn, "name");
      if (name == nullptr || !name->is_string()) {
        bad_param("messages", at + ".function.name must be a string");
      }
      const Json* args = fields::find(*fn, "arguments");
      if (args == nullptr || args->is_object()) continue;
      if (!args->is_string()) {
        bad_param("messages",
                  str_cat(at, ".function.arguments must be a JSON string, got ", type_name(*args)));
      }
      const auto& text = args->get_ref<const std::string&>();
      if (text.empty()) continue;
      const Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        bad_param("messages", str_cat(at, ".function.arguments is not the JSON text of an object"));
      }
    }
    // Last: adding a key to `m` moves its values (`calls` would dangle).
    if (!calls->empty() && fields::find(m, "content") == nullptr) m["content"] = "";
  }
}

}  // namespace

void parse_tool_fields(const Json& body, GenerationRequest& r) {
  std::set<std::string> names;
  const Json* tools = fields::find(body, "tools");
  if (tools != nullptr) {
    names = check_tools(*tools);
    r.tools = *tools;
  }
  parse_tool_choice(body, names, tools != nullptr && !tools->empty(), r);
  r.parallel_tool_calls = fields::boolean(body, "parallel_tool_calls").value_or(true);
  check_tool_calls(r.messages);
}

std::optional<Json> with_mapping_arguments(const Json& messages) {
  std::optional<Json> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json* calls = fields::find(messages[i], "tool_calls");
    if (calls == nullptr) continue;
    for (size_t j = 0; j < calls->size(); ++j) {
      const Json* fn = fields::find((*calls)[j], "function");
      const Json* args = fields::find(*fn, "arguments");
      if (args == nullptr || !args->is_string()) continue;
      if (!out) out = messages;
      const auto& text = args->get_ref<const std::string&>();
      // Checked by parse_tool_fields: "" or the JSON text of an object.
      (*out)[i]["tool_calls"][j]["function"]["arguments"] =
          text.empty() ? Json::object() : Json::parse(text);
    }
  }
  return out;
}

}  // namespace deepinfer::server
