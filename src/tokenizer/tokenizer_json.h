#pragma once
// Reads tokenizer.json in one streaming pass: model.vocab and model.merges (most of an 11 MB
// file) go straight into vectors, everything else into a small JSON document.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {

struct TokenizerJson {
  nlohmann::json doc;  // the file without model.vocab and model.merges
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  bool has_vocab = false;
  bool has_merges = false;
};

// Throws Error naming `source` for malformed JSON or malformed vocab/merges entries.
TokenizerJson parse_tokenizer_json(const std::string& text, const std::string& source);
TokenizerJson read_tokenizer_json(const std::string& path);
// The fast reader behind parse_tokenizer_json; false means "use the strict reader".
bool parse_tokenizer_json_fast(const std::string& text, TokenizerJson& out);

}  // namespace deepinfer::tokenizer
