#pragma once
// The tool-calling fields of a chat request (docs/API.md, "Tool calling"): `tools`,
// `tool_choice`, `parallel_tool_calls`, and the `tool_calls` of assistant messages in the
// history, checked with errors naming the field; and the shape the chat template gets them in.
#include <optional>

#include <nlohmann/json.hpp>

#include "server/protocol.h"

namespace deepinfer::server {

// Reads tools / tool_choice / parallel_tool_calls into `r` and checks the tool calls of
// r.messages (already normalized; an assistant message with tool calls and a null content
// gets content "", as vLLM passes it to templates). Throws ApiError (400). tool_choice "required"
// and a named function are refused: they need guided decoding, which deepinfer lacks.
void parse_tool_fields(const nlohmann::ordered_json& body, GenerationRequest& r);

// The messages with every tool call's `arguments` as a mapping (a JSON string parsed, "" as
// {}), as transformers' templates expect (Qwen, GLM-4.5 iterate or tojson them; vLLM converts
// likewise); nullopt when no message has string arguments.
std::optional<nlohmann::ordered_json> with_mapping_arguments(
    const nlohmann::ordered_json& messages);

}  // namespace deepinfer::server
