#include "cli/chat_prompt.h"

#include "core/error.h"
#include "core/text_file.h"
#include "tokenizer/chat_template.h"

namespace deepinfer::cli {

nlohmann::ordered_json read_messages_file(const std::string& path, const std::string& flag) {
  nlohmann::ordered_json messages;
  try {
    messages = nlohmann::ordered_json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(flag, " ", path, ": malformed JSON: ", e.what());
  }
  DI_CHECK(messages.is_array() && !messages.empty(), flag, " ", path,
           ": expected a non-empty JSON list of messages like "
           "[{\"role\": \"user\", \"content\": \"Hi\"}]");
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    DI_CHECK(m.is_object() && m.contains("role") && m["role"].is_string(), flag, " ", path,
             ": message ", i, " needs a string \"role\"");
  }
  return messages;
}

std::string render_chat_prompt(const tokenizer::Tokenizer& tok, const std::string& model_dir,
                               const nlohmann::ordered_json& messages,
                               const std::optional<std::string>& template_file) {
  const tokenizer::TokenizerConfig& config = tok.config();
  if (!template_file) {
    DI_CHECK(tokenizer::has_chat_template(config), model_dir,
             "/tokenizer_config.json has no chat_template: --chat needs one (or give "
             "--chat-template FILE); plain --prompt works without it");
  }
  tokenizer::ChatTemplate chat = [&] {
    try {
      return template_file ? tokenizer::ChatTemplate::parse(read_text_file(*template_file))
                           : tokenizer::load_chat_template(config, false);
    } catch (const Error& e) {
      fail("the chat template ", template_file ? *template_file : model_dir,
           " does not parse: ", e.what());
    }
  }();
  return chat.render(messages, nlohmann::ordered_json(nullptr), true, config.bos_token.value_or(""),
                     config.eos_token.value_or(""));
}

}  // namespace deepinfer::cli
