#pragma once
// One output budget for every stage of encode() that can make text longer than it came in
// (normalizers, pre-tokenizers): a tokenizer.json may say "replace each 'a' by 100000 'a's",
// and a 500-byte prompt would become 50 MB before any length check saw it. Stages check the
// budget as their output grows and throw TextBudgetExceeded, which the server answers 400.
//
// Offsets inside one text are 32-bit (spans and matches are many and small); checked_offset
// makes a text past 4 GiB an error instead of a silent wrap. The budget keeps texts far
// below that, so the check never fires in practice.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"

namespace deepinfer::tokenizer {

class TextBudgetExceeded : public Error {
 public:
  TextBudgetExceeded(const std::string& message, size_t budget_bytes)
      : Error(message), budget_bytes_(budget_bytes) {}
  size_t budget_bytes() const { return budget_bytes_; }

 private:
  size_t budget_bytes_;
};

struct TextBudget {
  // No real tokenizer expands text more: NFKC's worst character grows 11x, ByteLevel 2x.
  static constexpr size_t kExpansionFactor = 32;
  static constexpr size_t kSlackBytes = 64 * 1024;  // affixes, short prompts

  size_t max_bytes = std::numeric_limits<size_t>::max();

  // kExpansionFactor x `input_bytes` + kSlackBytes.
  static TextBudget for_input(size_t input_bytes);
  static TextBudget unlimited() { return {}; }
  // The tighter of the two.
  TextBudget at_most(size_t bytes) const { return {bytes < max_bytes ? bytes : max_bytes}; }

  // Throws TextBudgetExceeded naming `stage` (e.g. "normalizer Replace") when `bytes` is over.
  void check(size_t bytes, const char* stage) const {
    if (bytes > max_bytes) exceeded(bytes, stage);
  }

 private:
  [[noreturn]] void exceeded(size_t bytes, const char* stage) const;
};

[[noreturn]] void offset_overflow(size_t offset);

// A byte offset into one text as the 32-bit offset spans and matches hold; Error past 2^32-1.
inline uint32_t checked_offset(size_t offset) {
  if (offset > std::numeric_limits<uint32_t>::max()) offset_overflow(offset);
  return static_cast<uint32_t>(offset);
}

}  // namespace deepinfer::tokenizer
