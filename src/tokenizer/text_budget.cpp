#include "tokenizer/text_budget.h"

namespace deepinfer::tokenizer {

TextBudget TextBudget::for_input(size_t input_bytes) {
  const size_t cap = std::numeric_limits<size_t>::max();
  const size_t scaled =
      input_bytes > (cap - kSlackBytes) / kExpansionFactor ? cap : input_bytes * kExpansionFactor;
  return {scaled == cap ? cap : scaled + kSlackBytes};
}

void TextBudget::exceeded(size_t bytes, const char* stage) const {
  throw TextBudgetExceeded(
      str_cat("the text grows past its tokenization budget of ", max_bytes, " bytes in the ", stage,
              " (", bytes, " bytes): the tokenizer may make text at most ", kExpansionFactor,
              "x its size plus ", kSlackBytes / 1024,
              " KiB, and no longer than the context can hold"),
      max_bytes);
}

void offset_overflow(size_t offset) {
  fail("a text offset of ", offset, " bytes is past the tokenizer's 4 GiB range");
}

}  // namespace deepinfer::tokenizer
