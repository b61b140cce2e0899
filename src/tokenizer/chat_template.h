#pragma once
// Chat templates rendered exactly as transformers' apply_chat_template renders them
// (transformers/utils/chat_template_utils.py render_jinja_template): jinja2 sandbox with
// trim_blocks + lstrip_blocks + loopcontrols, transformers' tojson (ensure_ascii=False),
// raise_exception and strftime_now globals, and the same preparation of the inputs:
//   - message keys whose value is null are dropped (_normalize_chat_messages);
//   - a message's reasoning under reasoning_content / thinking / reasoning is exposed as
//     both `thinking` and `reasoning_content` (_alias_reasoning_fields);
//   - `tools` is passed even when absent (as None), `documents` is None;
//   - special tokens are variables; every key of `extra` (chat_template_kwargs such as
//     enable_thinking) is a variable too and overrides them.
// JSON object key order is significant (Python dicts keep insertion order, which tojson and
// .items() expose): pass nlohmann::ordered_json to keep a request's order; nlohmann::json
// sorts keys.
//
// A model without a Jinja template may have a native chat format instead
// (TokenizerConfig::chat_format, e.g. DeepSeek-V3.2's encoder: chat_format_dsv32.h); such a
// ChatTemplate renders through the same entry points, the template kwargs its switches.
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/template.h"
#include "tokenizer/tokenizer_config.h"

namespace deepinfer::tokenizer {

class ChatTemplate {
 public:
  // Throws jinja::TemplateError (a deepinfer::Error) naming an unsupported construct or a
  // syntax error with line and column.
  static ChatTemplate parse(std::string source, const jinja::Limits& limits = jinja::Limits());
  // A native chat format by name ("deepseek_v32"); throws Error for an unknown name.
  static ChatTemplate native(const std::string& format);

  // bos_token / eos_token: an empty string means the tokenizer has none (the variable is
  // then undefined, as in transformers). Throws jinja::TemplateError; a template's
  // raise_exception() gives ErrorKind::Raised with the template's message.
  std::string render(const nlohmann::json& messages, const nlohmann::json& tools,
                     bool add_generation_prompt, const std::string& bos_token,
                     const std::string& eos_token,
                     const nlohmann::json& extra = nlohmann::json::object()) const;
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const std::string& bos_token,
                     const std::string& eos_token,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const std::string& source() const { return source_; }
  // The native format's name, empty for a Jinja template.
  const std::string& native_format() const { return native_; }

 private:
  std::string source_;
  std::string native_;
  jinja::Template template_;
};

// transformers' get_chat_template: with named templates, "tool_use" when tools are given
// (and present), else "default". Throws Error when the config has no chat template.
std::string select_chat_template(const TokenizerConfig& config, bool with_tools);

// Whether the config gives a chat template: a Jinja one, or a native chat_format.
bool has_chat_template(const TokenizerConfig& config);

// The config's chat template: the Jinja one select_chat_template picks, else its native
// chat_format. Throws Error (no template, or a Jinja template that does not parse).
ChatTemplate load_chat_template(const TokenizerConfig& config, bool with_tools);

}  // namespace deepinfer::tokenizer
