#include "toolcall/call_readers.h"

namespace deepinfer::toolcall::detail {

namespace {

constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
constexpr std::string_view kJsonFence = "```json";
constexpr std::string_view kFence = "```";
constexpr std::string_view kArgKeyOpen = "<arg_key>";
constexpr std::string_view kArgKeyClose = "</arg_key>";
constexpr std::string_view kArgValueOpen = "<arg_value>";
constexpr std::string_view kArgValueClose = "</arg_value>";

std::string dump(const Json& value) {
  // Invalid UTF-8 (a model can write anything) must not throw here: replace it.
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<Json> parse_json(std::string_view text) {
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// Arguments as OpenAI sends them: the JSON text of an object.
std::optional<std::string> object_arguments(std::string_view text) {
  const auto value = parse_json(text);
  if (!value || !value->is_object()) return std::nullopt;
  return dump(*value);
}

// A function name is one line of text without markup.
bool valid_name(std::string_view name) {
  return !name.empty() && name.find_first_of("\n<>") == std::string_view::npos;
}

}  // namespace

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<ToolCall> read_hermes_call(std::string_view body, const Json& /*tools*/) {
  const auto value = parse_json(trim(body));
  if (!value || !value->is_object()) return std::nullopt;
  const auto name = value->find("name");
  if (name == value->end() || !name->is_string()) return std::nullopt;
  ToolCall call{name->get<std::string>(), "{}"};
  if (!valid_name(call.name)) return std::nullopt;
  const auto args = value->find("arguments");
  if (args == value->end() || args->is_null()) return call;
  if (args->is_object()) {
    call.arguments = dump(*args);
  } else if (args->is_string()) {
    // Some fine-tunes write the arguments as a JSON string, as the OpenAI API carries them.
    auto inner = object_arguments(args->get<std::string>());
    if (!inner) return std::nullopt;
    call.arguments = std::move(*inner);
  } else {
    return std::nullopt;
  }
  return call;
}

std::optional<ToolCall> read_deepseek_call(std::string_view body, const Json& /*tools*/) {
  const size_t sep = body.find(kDeepSeekSep);
  if (sep == std::string_view::npos) return std::nullopt;
  const std::string_view before = trim(body.substr(0, sep));
  const std::string_view after = body.substr(sep + kDeepSeekSep.size());
  // V3 / R1: "<type><sep><name>\n```json\n<args>\n```"; the closing fence may be missing when
  // the output was cut right after the arguments.
  if (const size_t fence = after.find(kJsonFence); fence != std::string_view::npos) {
    const std::string_view name = trim(after.substr(0, fence));
    std::string_view rest = after.substr(fence + kJsonFence.size());
    if (const size_t close = rest.rfind(kFence); close != std::string_view::npos) {
      if (!trim(rest.substr(close + kFence.size())).empty()) return std::nullopt;
      rest = rest.substr(0, close);
    }
    auto args = object_arguments(trim(rest));
    if (!before.empty() && valid_name(name) && args) return ToolCall{std::string(name), *args};
  }
  // V3.1: "<name><sep><args>".
  auto args = object_arguments(trim(after));
  if (!valid_name(before) || !args) return std::nullopt;
  return ToolCall{std::string(before), std::move(*args)};
}

namespace {

// Whether the request's schema for tool `name` types parameter `key` as a string.
bool string_typed(const Json& tools, const std::string& name, const std::string& key) {
  if (!tools.is_array()) return false;
  for (const Json& tool : tools) {
    if (!tool.is_object()) continue;
    const auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object() || fn->value("name", Json()) != name) continue;
    const auto params = fn->find("parameters");
    if (params == fn->end() || !params->is_object()) return false;
    const auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return false;
    const auto prop = props->find(key);
    if (prop == props->end() || !prop->is_object()) return false;
    return prop->value("type", Json()) == "string";
  }
  return false;
}

// Reads `open`...`close` at the front of `s` (after whitespace); advances `s` past it.
std::optional<std::string_view> tagged(std::string_view& s, std::string_view open,
                                       std::string_view close) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  if (s.substr(0, open.size()) != open) return std::nullopt;
  s.remove_prefix(open.size());
  const size_t end = s.find(close);
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view inner = s.substr(0, end);
  s.remove_prefix(end + close.size());
  return inner;
}

}  // namespace

std::optional<ToolCall> read_glm45_call(std::string_view body, const Json& tools) {
  const size_t first = body.find(kArgKeyOpen);
  const std::string_view name = trim(body.substr(0, first));
  if (!valid_name(name)) return std::nullopt;
  ToolCall call{std::string(name), "{}"};
  Json args = Json::object();
  std::string_view rest = first == std::string_view::npos ? std::string_view() : body.substr(first);
  while (!trim(rest).empty()) {
    const auto key = tagged(rest, kArgKeyOpen, kArgKeyClose);
    if (!key) return std::nullopt;
    const auto value = tagged(rest, kArgValueOpen, kArgValueClose);
    if (!value) return std::nullopt;
    const std::string k(trim(*key));
    const std::string_view v = trim(*value);
    if (k.empty()) return std::nullopt;
    std::optional<Json> typed;
    if (!string_typed(tools, call.name, k)) typed = parse_json(v);
    args[k] = typed ? std::move(*typed) : Json(std::string(v));
  }
  call.arguments = dump(args);
  return call;
}

namespace {

// Strips `prefix` from the front of `s`; false (s unchanged) when it is not there.
bool consume(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Text up to `stop` (removed from `s` with it); nullopt when `stop` is missing.
std::optional<std::string_view> until(std::string_view& s, std::string_view stop) {
  const size_t at = s.find(stop);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view inner = s.substr(0, at);
  s.remove_prefix(at + stop.size());
  return inner;
}

constexpr std::string_view kDsmlParamOpen = "<｜DSML｜parameter name=\"";
constexpr std::string_view kDsmlParamClose = "</｜DSML｜parameter>";

}  // namespace

// ` name="f">\n<｜DSML｜parameter name="k" string="true|false">v</｜DSML｜parameter>\n...`:
// a string="true" value is the text as is, a string="false" one JSON (the text as a string
// when it does not parse, as vLLM's deepseek_v32 parser reads it).
std::optional<ToolCall> read_dsml_call(std::string_view body, const Json& /*tools*/) {
  std::string_view s = body;
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  if (!consume(s, "name=\"")) return std::nullopt;
  const auto name = until(s, "\">");
  if (!name || !valid_name(*name) || name->find('"') != std::string_view::npos) {
    return std::nullopt;
  }
  Json args = Json::object();
  for (;;) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    if (s.empty()) break;
    if (!consume(s, kDsmlParamOpen)) return std::nullopt;
    const auto key = until(s, "\" string=\"");
    if (!key || key->empty() || key->find('"') != std::string_view::npos) return std::nullopt;
    bool is_string = true;
    if (consume(s, "true\">")) {
      is_string = true;
    } else if (consume(s, "false\">")) {
      is_string = false;
    } else {
      return std::nullopt;
    }
    const auto value = until(s, kDsmlParamClose);
    if (!value) return std::nullopt;
    const std::string k(*key);
    if (args.contains(k)) return std::nullopt;  // the reference parser rejects duplicates
    std::optional<Json> typed;
    if (!is_string) typed = parse_json(*value);
    args[k] = typed ? std::move(*typed) : Json(std::string(*value));
  }
  return ToolCall{std::string(*name), dump(args)};
}

}  // namespace deepinfer::toolcall::detail
