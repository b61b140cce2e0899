#pragma once
// Readers of one tool call's body (the text between a family's call markers), shared by the
// streaming parser. Not a public header.
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "toolcall/tool_parser.h"

namespace deepinfer::toolcall::detail {

using Json = nlohmann::ordered_json;

// Each returns nullopt when the body is malformed (the caller keeps it as plain text).
std::optional<ToolCall> read_hermes_call(std::string_view body, const Json& tools);
std::optional<ToolCall> read_deepseek_call(std::string_view body, const Json& tools);
std::optional<ToolCall> read_glm45_call(std::string_view body, const Json& tools);
// DeepSeek-V3.2's DSML invoke: the text between "<｜DSML｜invoke" and "</｜DSML｜invoke>".
std::optional<ToolCall> read_dsml_call(std::string_view body, const Json& tools);

// Whitespace as Python's str.strip() sees it in ASCII (the markup is ASCII).
bool is_space(char c);
std::string_view trim(std::string_view s);

}  // namespace deepinfer::toolcall::detail
