#include "tokenizer/tokenizer_config.h"

#include <filesystem>

#include "core/error.h"
#include "core/text_file.h"
#include "tokenizer/chat_format_dsv32.h"

namespace deepinfer::tokenizer {
namespace {

// Special tokens appear as plain strings or as AddedToken objects {"content": "..."}.
std::optional<std::string> special_token(const nlohmann::json& json, const char* key,
                                         const std::string& source) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  fail(source, ": ", key, ": expected a string or {\"content\": ...}");
}

std::optional<bool> optional_bool(const nlohmann::json& json, const char* key,
                                  const std::string& source) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  DI_CHECK(it->is_boolean(), source, ": ", key, ": expected true or false");
  return it->get<bool>();
}

}  // namespace

TokenizerConfig TokenizerConfig::parse(const nlohmann::json& json, const std::string& source) {
  DI_CHECK(json.is_object(), source, ": expected a JSON object");
  TokenizerConfig config;
  config.raw = json;
  config.bos_token = special_token(json, "bos_token", source);
  config.eos_token = special_token(json, "eos_token", source);
  config.pad_token = special_token(json, "pad_token", source);
  config.unk_token = special_token(json, "unk_token", source);
  config.add_bos_token = optional_bool(json, "add_bos_token", source);
  config.add_eos_token = optional_bool(json, "add_eos_token", source);
  if (const auto it = json.find("model_max_length"); it != json.end() && it->is_number()) {
    // transformers writes 1e30 for "no limit"; keep only meaningful values (a fraction below
    // one would truncate to a limit of 0 tokens).
    const double value = it->get<double>();
    if (value >= 1 && value < 1e15) config.model_max_length = static_cast<int64_t>(value);
  }
  if (const auto it = json.find("chat_template"); it != json.end() && !it->is_null()) {
    if (it->is_string()) {
      config.chat_template = it->get<std::string>();
    } else if (it->is_array()) {
      for (const auto& entry : *it) {
        DI_CHECK(entry.is_object() && entry.contains("name") && entry.contains("template") &&
                     entry["name"].is_string() && entry["template"].is_string(),
                 source, ": chat_template: list entries need string \"name\" and \"template\"");
        config.named_templates[entry["name"].get<std::string>()] =
            entry["template"].get<std::string>();
      }
      if (const auto def = config.named_templates.find("default");
          def != config.named_templates.end()) {
        config.chat_template = def->second;
      }
    } else {
      fail(source, ": chat_template: expected a string or a list of {name, template}");
    }
  }
  return config;
}

TokenizerConfig TokenizerConfig::load(const std::string& path) {
  if (!std::filesystem::exists(path)) return {};
  TokenizerConfig config = parse(read_json_file(path), path);
  // Newer checkpoints keep the template beside the config instead of inside it.
  const auto jinja = std::filesystem::path(path).parent_path() / "chat_template.jinja";
  if (!config.chat_template && std::filesystem::exists(jinja)) {
    config.chat_template = read_text_file(jinja.string());
  }
  const auto model_config = std::filesystem::path(path).parent_path() / "config.json";
  if (!config.chat_template && config.named_templates.empty() &&
      std::filesystem::exists(model_config) &&
      is_deepseek_v32_config(read_json_file(model_config.string()))) {
    config.chat_format = kDeepseekV32ChatFormat;
  }
  return config;
}

}  // namespace deepinfer::tokenizer
