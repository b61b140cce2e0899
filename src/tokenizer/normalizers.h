#pragma once
// tokenizer.json "normalizer": transforms the text of each segment between added tokens
// before pre-tokenization. Offsets are not tracked (the engine needs ids only).
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/text_budget.h"

namespace deepinfer::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8 and stays valid UTF-8. `start_kept` is cleared when characters at
  // the start of the text are deleted, so that the result no longer begins at the original
  // offset 0 (Metaspace's "first" prepend scheme depends on it). A normalizer whose output
  // can grow without bound (Replace) checks `budget` as it grows; the caller checks the rest.
  virtual void normalize(std::string& text, bool& start_kept, const TextBudget& budget) const = 0;
  void normalize(std::string& text) const {
    bool unused = true;
    normalize(text, unused, TextBudget::unlimited());
  }
  // How many times longer than its input the output can get (at most), for the warning at
  // load when that is over TextBudget::kExpansionFactor.
  virtual double max_expansion() const { return 1.0; }
};

// Supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Append, Strip,
// StripAccents, ByteLevel. Anything else throws Error naming the type and `source`.
// Returns nullptr for JSON null and for an empty Sequence.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& json, const std::string& source);

}  // namespace deepinfer::tokenizer
