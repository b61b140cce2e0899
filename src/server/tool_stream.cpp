#include "server/tool_stream.h"

namespace deepinfer::server {

void parse_choice_tools(ChoiceResult& c, toolcall::Family family, const Json& tools,
                        bool parallel) {
  toolcall::ParsedText parsed = toolcall::parse_tool_calls(family, tools, c.text);
  if (!parallel && parsed.calls.size() > 1) parsed.calls.resize(1);
  c.text = std::move(parsed.content);
  c.tools_parsed = true;
  c.tool_calls = std::move(parsed.calls);
  c.tool_call_ids.clear();
  for (size_t k = 0; k < c.tool_calls.size(); ++k) c.tool_call_ids.push_back(make_tool_call_id());
}

ToolCallStream::ToolCallStream(toolcall::Family family, const Json& tools, size_t choices,
                               bool parallel)
    : sent_(choices, 0), parallel_(parallel) {
  parsers_.reserve(choices);
  for (size_t i = 0; i < choices; ++i) parsers_.emplace_back(family, tools);
}

Json ToolCallStream::delta(int64_t choice, const std::string& text, bool final) {
  const auto i = static_cast<size_t>(choice);
  toolcall::ParsedText parsed = parsers_.at(i).feed(text);
  if (final) parsed.append(parsers_[i].finish());
  Json delta = Json::object();
  if (!parsed.content.empty()) delta["content"] = std::move(parsed.content);
  Json calls = Json::array();
  for (const auto& call : parsed.calls) {
    if (!parallel_ && sent_[i] > 0) break;
    calls.push_back(tool_call_json(call, make_tool_call_id(), sent_[i]++));
  }
  if (!calls.empty()) delta["tool_calls"] = std::move(calls);
  return delta;
}

bool ToolCallStream::made_calls(int64_t choice) const {
  return sent_.at(static_cast<size_t>(choice)) > 0;
}

}  // namespace deepinfer::server
