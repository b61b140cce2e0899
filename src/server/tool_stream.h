#pragma once
// Tool calls read out of chat output for the response: whole choices (non-streamed) and the
// per-event deltas of a stream (docs/API.md, "Tool calling").
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/responses.h"
#include "toolcall/tool_parser.h"

namespace deepinfer::server {

// Splits a finished choice's text into content and tool calls (fresh ids); with `parallel`
// false only the first call is kept.
void parse_choice_tools(ChoiceResult& choice, toolcall::Family family,
                        const nlohmann::ordered_json& tools, bool parallel);

// One parser per choice of a stream.
class ToolCallStream {
 public:
  ToolCallStream(toolcall::Family family, const nlohmann::ordered_json& tools, size_t choices,
                 bool parallel);

  // The chat delta for new text of `choice` ({} when nothing can be said yet): plain text as
  // "content", each call completed by it as one "tool_calls" entry with index, id, type, name
  // and the whole arguments. `final`: the choice's last text (held-back text is flushed).
  nlohmann::ordered_json delta(int64_t choice, const std::string& text, bool final);
  // Whether `choice` has sent a tool call (its finish_reason is then "tool_calls").
  bool made_calls(int64_t choice) const;

 private:
  std::vector<toolcall::ToolCallParser> parsers_;
  std::vector<int64_t> sent_;
  bool parallel_;
};

}  // namespace deepinfer::server
