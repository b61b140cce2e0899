#include "validate/inputs.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::validate {

std::vector<ValidationPrompt> read_prompts_jsonl(const std::string& path,
                                                 const tokenizer::Tokenizer* tok, int64_t vocab) {
  std::ifstream in(path);
  DI_CHECK(in.good(), "--prompts: cannot open ", path, " (no such file or not readable)");
  std::vector<ValidationPrompt> out;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = str_cat(path, ":", number);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail(where, ": not a JSON object (", e.what(), ")");
    }
    DI_CHECK(j.is_object(), where, ": expected a JSON object, got ", j.type_name());
    ValidationPrompt p;
    p.name = where;
    if (j.contains("prompt_token_ids")) {
      const auto& ids = j.at("prompt_token_ids");
      DI_CHECK(ids.is_array() && !ids.empty(), where,
               ": \"prompt_token_ids\" must be a non-empty array of token ids");
      for (const auto& id : ids) {
        DI_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab,
                 where, ": token id ", id.dump(), " is outside the vocabulary [0, ", vocab, ")");
        p.ids.push_back(id.get<int32_t>());
      }
    } else if (j.contains("prompt")) {
      DI_CHECK(j.at("prompt").is_string(), where, ": \"prompt\" must be a string");
      DI_CHECK(tok != nullptr, where,
               ": a text prompt needs the model's tokenizer.json; give \"prompt_token_ids\"");
      p.ids = tok->encode(j.at("prompt").get<std::string>(), /*add_special_tokens=*/true);
      DI_CHECK(!p.ids.empty(), where, ": the prompt encodes to no tokens");
    } else {
      fail(where, ": expected {\"prompt\": \"...\"} or {\"prompt_token_ids\": [...]}");
    }
    out.push_back(std::move(p));
  }
  DI_CHECK(!out.empty(), "--prompts: ", path, " holds no prompts");
  return out;
}

std::vector<ValidationPrompt> random_prompts(int64_t count, int64_t length, int64_t vocab,
                                             uint64_t seed) {
  DI_CHECK(count >= 1, "--num-prompts must be >= 1, got ", count);
  DI_CHECK(length >= 1, "--prompt-len must be >= 1, got ", length);
  std::mt19937_64 rng(seed);
  std::vector<ValidationPrompt> out;
  for (int64_t i = 0; i < count; ++i) {
    ValidationPrompt p;
    p.name = str_cat("random-", i);
    for (int64_t k = 0; k < length; ++k) {
      p.ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DI_CHECK(in.good(), "--text: cannot open ", path, " (no such file or not readable)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  DI_CHECK(!text.empty(), "--text: ", path, " is empty");
  return text;
}

std::string preset_prompts_path(const std::string& data_dir) {
  return (std::filesystem::path(data_dir) / "validate" / "prompts.jsonl").string();
}

std::string preset_text_path(const std::string& data_dir) {
  return (std::filesystem::path(data_dir) / "validate" / "gettysburg_address.txt").string();
}

}  // namespace deepinfer::validate
