#pragma once
// tokenizer.json "normalizer": transforms the text of each segment between added tokens
// before pre-tokenization. Offsets are not tracked (the engine needs ids only).
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8 and stays valid UTF-8.
  virtual void normalize(std::string& text) const = 0;
};

// Supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Append, Strip,
// StripAccents, ByteLevel. Anything else throws Error naming the type and `source`.
// Returns nullptr for JSON null and for an empty Sequence.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& json, const std::string& source);

}  // namespace deepinfer::tokenizer
