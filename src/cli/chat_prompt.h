#pragma once
// `generate --chat`: a conversation rendered through the model's chat template exactly as
// transformers' apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
// renders it (the same renderer as `deepinfer render-chat`).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {

// A JSON file holding a list of {"role", "content", ...} messages; Error naming `flag` and
// the file when it is not one.
nlohmann::ordered_json read_messages_file(const std::string& path, const std::string& flag);

// Renders `messages` with `template_file` when given, else the tokenizer's chat template;
// Error naming tokenizer_config.json when the model has none.
std::string render_chat_prompt(const tokenizer::Tokenizer& tok, const std::string& model_dir,
                               const nlohmann::ordered_json& messages,
                               const std::optional<std::string>& template_file);

}  // namespace deepinfer::cli
