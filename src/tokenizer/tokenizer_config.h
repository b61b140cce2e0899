#pragma once
// tokenizer_config.json of a Hugging Face model directory: special token strings,
// add_bos_token / add_eos_token (how transformers adds BOS for DeepSeek-V3/Llama-style
// tokenizers) and the chat template(s).
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {

struct TokenizerConfig {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> unk_token;
  std::optional<bool> add_bos_token;  // absent: the post-processor alone decides
  std::optional<bool> add_eos_token;
  std::optional<std::string> chat_template;            // the default template
  std::map<std::string, std::string> named_templates;  // list form: {name: template}
  // A native chat format when there is no Jinja template, from the model's config.json
  // beside tokenizer_config.json: "deepseek_v32" for DeepSeek-V3.2 (chat_format_dsv32.h),
  // as vLLM picks its deepseek_v32 tokenizer mode.
  std::optional<std::string> chat_format;
  std::optional<int64_t> model_max_length;
  nlohmann::json raw;

  // A missing file gives an empty config; a malformed one throws Error naming the file.
  static TokenizerConfig load(const std::string& path);
  static TokenizerConfig parse(const nlohmann::json& json, const std::string& source);
};

}  // namespace deepinfer::tokenizer
