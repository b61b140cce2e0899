// Fuzzes the tokenizer_config.json reader: arbitrary bytes as the file go through
// tokenizer::TokenizerConfig::parse (special tokens, add_*_token, model_max_length and the
// chat template in its string and list forms). deepinfer::Error is the expected outcome for
// garbage; any other exception, a crash, a hang or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text_file.h"
#include "tokenizer/tokenizer_config.h"

using deepinfer::tokenizer::TokenizerConfig;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const TokenizerConfig config = TokenizerConfig::parse(
        deepinfer::parse_json_text(text, "tokenizer_config.json"), "tokenizer_config.json");
    // The list form's "default" entry is the default template.
    const auto def = config.named_templates.find("default");
    if (def != config.named_templates.end() && config.chat_template != def->second) std::abort();
    if (config.model_max_length && *config.model_max_length < 1) std::abort();
  } catch (const deepinfer::Error&) {
  }
  return 0;
}
