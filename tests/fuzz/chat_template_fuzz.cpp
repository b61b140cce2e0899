// Fuzzes the chat-template interpreter: arbitrary template text is parsed and rendered with
// a small fixed conversation (tools, a tool call, non-ASCII text). A TemplateError is the
// expected outcome for garbage; a crash, a hang, a sanitizer report or any other exception
// is a bug. Tight limits keep every input fast, as the real limits do at larger scale.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace {

const nlohmann::ordered_json& messages() {
  static const auto m = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful. 系统"},
    {"role": "user", "content": "Hi 😀 <tag> \"q\" \\ \n"},
    {"role": "assistant", "content": "<think>r</think>ok", "reasoning_content": "why",
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1, "y": [true, null]}}}]},
    {"role": "tool", "content": "{\"r\": 2}"},
    {"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image"}]}
  ])");
  return m;
}

const nlohmann::ordered_json& tools() {
  static const auto t = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "f", "description": "d",
     "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
  ])");
  return t;
}

deepinfer::tokenizer::jinja::Limits fuzz_limits() {
  deepinfer::tokenizer::jinja::Limits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  limits.max_string_bytes = 1 << 20;
  limits.max_list_items = 1 << 14;
  return limits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto limits = fuzz_limits();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto tpl = deepinfer::tokenizer::ChatTemplate::parse(std::string(text), limits);
    const bool generation_prompt = size % 2 == 0;
    tpl.render(messages(), size % 3 == 0 ? nlohmann::ordered_json(nullptr) : tools(),
               generation_prompt, "<s>", "</s>",
               nlohmann::ordered_json{{"enable_thinking", size % 5 == 0}});
  } catch (const deepinfer::Error&) {
  }
  return 0;
}
