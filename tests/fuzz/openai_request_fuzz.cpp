// Fuzzes the OpenAI request parsers: arbitrary bytes as a request body go through
// parse_json_body, then through both the completions and the chat parser (default sampling
// settings), and every request that parses gets its max_tokens resolved for a few prompt
// lengths. ApiError (a 4xx answer) is the expected outcome for garbage; any other exception,
// a crash, a hang or a sanitizer report is a bug. A resolved max_tokens must fit the context.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "server/errors.h"
#include "server/protocol.h"

namespace {

using deepinfer::server::ApiError;
using deepinfer::server::GenerationRequest;
using deepinfer::server::SamplingDefaults;

constexpr int64_t kMaxModelLen = 4096;
// Empty, typical, one short of and at the limit, and past it (the server checks prompts
// against the limit before asking for max_tokens, but the rule must hold on its own).
constexpr int64_t kPromptLengths[] = {0, 1, 17, kMaxModelLen - 1, kMaxModelLen, kMaxModelLen + 5};

void resolve_all(const GenerationRequest& request, const SamplingDefaults& defaults) {
  for (const int64_t prompt_len : kPromptLengths) {
    try {
      const int64_t n =
          deepinfer::server::resolve_max_tokens(request, prompt_len, kMaxModelLen, defaults);
      // 0 only when asked for (completions' max_tokens 0: scoring the prompt).
      const bool zero_asked = request.max_tokens && *request.max_tokens == 0;
      if (n < (zero_asked ? 0 : 1) || n > kMaxModelLen - prompt_len) std::abort();
    } catch (const ApiError&) {
    }
  }
}

template <typename Parse>
void parse_and_resolve(Parse parse, const nlohmann::ordered_json& body,
                       const SamplingDefaults& defaults) {
  try {
    resolve_all(parse(body, defaults), defaults);
  } catch (const ApiError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const SamplingDefaults defaults;
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::ordered_json body;
  try {
    body = deepinfer::server::parse_json_body(text);
  } catch (const ApiError&) {
    return 0;
  }
  parse_and_resolve(deepinfer::server::parse_completion_request, body, defaults);
  parse_and_resolve(deepinfer::server::parse_chat_request, body, defaults);
  return 0;
}
