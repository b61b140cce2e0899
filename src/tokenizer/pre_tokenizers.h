#pragma once
// tokenizer.json "pre_tokenizer": splits each normalized segment into words for the model.
// Words are byte ranges of one shared buffer, so splitting never copies text; only
// pre-tokenizers that change the text (ByteLevel, Metaspace) rebuild the buffer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/text_budget.h"

namespace deepinfer::tokenizer {

struct Span {
  uint32_t begin;
  uint32_t end;
  bool at_start;  // begins at offset 0 of the original input (Metaspace "first" scheme)
};

struct PreTokenized {
  std::string text;
  std::vector<Span> spans;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Stages that make the text longer keep it within `budget` (TextBudgetExceeded).
  virtual void pre_tokenize(PreTokenized& pieces, const TextBudget& budget) const = 0;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits every span of `pieces` at `matches_of(span)`, as tokenizers' NormalizedString::split
// does for `behavior` (with `invert` swapping matches and gaps); empty pieces are dropped.
// The matches are relative to the span, sorted and non-overlapping.
void split_span(const Span& span, const std::vector<std::pair<uint32_t, uint32_t>>& matches,
                SplitBehavior behavior, bool invert, std::vector<Span>& out);

struct PreTokenizerOptions {
  // When the last step is ByteLevel, leave its byte -> character mapping to the BPE model,
  // which then works on raw bytes (faster, same ids).
  bool defer_final_byte_level = false;
};

// Supported: Sequence, Split, ByteLevel, Digits, Metaspace, Whitespace, WhitespaceSplit,
// Punctuation, CharDelimiterSplit. Anything else throws Error naming the type and source.
// Returns nullptr for JSON null.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& json,
                                                 const std::string& source,
                                                 const PreTokenizerOptions& options = {});

// True when the pre-tokenizer (flattening Sequences) ends with a ByteLevel step.
bool ends_with_byte_level(const nlohmann::json& json);

}  // namespace deepinfer::tokenizer
