// Fuzzes the tool-call parsers: arbitrary model output, fed whole and in pieces (split points
// taken from the input), must give the same content and calls, every call's arguments must be
// the JSON text of an object, and nothing may throw, crash or trip a sanitizer.
// Input: byte 0 picks the family, byte 1 seeds the split points, the rest is the output text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "toolcall/tool_parser.h"

namespace {

using deepinfer::toolcall::Family;
using deepinfer::toolcall::ParsedText;

const nlohmann::ordered_json& tools() {
  static const auto t = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object",
     "properties": {"s": {"type": "string"}, "n": {"type": "integer"}}}}}])");
  return t;
}

bool same(const ParsedText& a, const ParsedText& b) {
  return a.content == b.content && a.calls == b.calls;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static constexpr Family kFamilies[] = {Family::hermes, Family::deepseek, Family::glm45};
  const Family family = kFamilies[data[0] % 3];
  uint32_t seed = data[1] * 2654435761u + 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  const ParsedText whole = deepinfer::toolcall::parse_tool_calls(family, tools(), text);
  for (const auto& call : whole.calls) {
    const auto args = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
    if (args.is_discarded() || !args.is_object() || call.name.empty()) std::abort();
  }

  deepinfer::toolcall::ToolCallParser parser(family, tools());
  ParsedText pieces;
  size_t at = 0;
  while (at < text.size()) {
    seed = seed * 1103515245u + 12345u;
    const size_t step = 1 + (seed >> 16) % 7;
    const size_t n = step < text.size() - at ? step : text.size() - at;
    pieces.append(parser.feed(text.substr(at, n)));
    at += n;
  }
  pieces.append(parser.finish());
  if (!same(whole, pieces)) std::abort();
  return 0;
}
