// The tokenization text budget (issue #44): a tokenizer.json whose normalizer or
// pre-tokenizer expands text is stopped as its output grows, and 32-bit offsets past 4 GiB
// are an error instead of a wrap.
#include "tokenizer/text_budget.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

using nlohmann::json;

// A byte-level BPE over "a", " " and "▁" with no merges, and the given normalizer and
// pre-tokenizer.
Tokenizer tokenizer_with(const json& normalizer, const json& pre_tokenizer) {
  const json doc = {{"version", "1.0"},
                    {"added_tokens", json::array()},
                    {"normalizer", normalizer},
                    {"pre_tokenizer", pre_tokenizer},
                    {"post_processor", nullptr},
                    {"decoder", nullptr},
                    {"model",
                     {{"type", "BPE"},
                      {"vocab", {{"a", 0}, {" ", 1}, {"\u2581", 2}}},
                      {"merges", json::array()}}}};
  return Tokenizer::from_json_text(doc.dump(), "expanding.json");
}

json replace_a(size_t times) {
  return {
      {"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", std::string(times, 'a')}};
}

TEST(TextBudget, OffsetsPast4GiBAreRejectedNotWrapped) {
  const uint64_t four_gib = uint64_t{1} << 32;
  EXPECT_EQ(checked_offset(four_gib - 1), UINT32_MAX);
  EXPECT_EQ(checked_offset(12345), 12345u);
  // Wrapped, 4 GiB + 5 would be offset 5: silently dropped text.
  EXPECT_THROW(checked_offset(four_gib), Error);
  EXPECT_THROW(checked_offset(four_gib + 5), Error);
  EXPECT_THROW(checked_offset(5 * four_gib), Error);
}

TEST(TextBudget, ForInputScalesAndSaturates) {
  EXPECT_EQ(TextBudget::for_input(0).max_bytes, TextBudget::kSlackBytes);
  EXPECT_EQ(TextBudget::for_input(1000).max_bytes,
            1000 * TextBudget::kExpansionFactor + TextBudget::kSlackBytes);
  EXPECT_EQ(TextBudget::for_input(SIZE_MAX / 2).max_bytes, SIZE_MAX);
  EXPECT_EQ(TextBudget::for_input(1000).at_most(10).max_bytes, 10u);
}

TEST(TextBudget, ExpandingReplaceNormalizerStopsEarly) {
  const Tokenizer tok = tokenizer_with(replace_a(100000), nullptr);
  const std::string prompt(500, 'a');
  const auto start = std::chrono::steady_clock::now();
  try {
    tok.encode(prompt, false);
    FAIL() << "a 500-byte prompt expanded 100000x was tokenized";
  } catch (const TextBudgetExceeded& e) {
    EXPECT_EQ(e.budget_bytes(), TextBudget::for_input(500).max_bytes);
    EXPECT_NE(std::string(e.what()).find("normalizer Replace"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(e.budget_bytes())), std::string::npos);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  // A modest expansion within the budget still tokenizes: 3 x "a" per "a".
  EXPECT_EQ(tokenizer_with(replace_a(3), nullptr).encode("aa", false).size(), 6u);
}

TEST(TextBudget, ExplicitBudgetAndMetaspaceReplacement) {
  const Tokenizer plain = tokenizer_with(nullptr, nullptr);
  EXPECT_EQ(plain.encode("aaaa", false, TextBudget{4}).size(), 4u);
  EXPECT_THROW(plain.encode("aaaaa", false, TextBudget{4}), TextBudgetExceeded);
  // A Metaspace replacement of 50000 bytes for each space.
  const json metaspace = {{"type", "Metaspace"},
                          {"replacement", std::string(50000, 'a')},
                          {"prepend_scheme", "never"},
                          {"split", false}};
  const Tokenizer spaced = tokenizer_with(nullptr, metaspace);
  EXPECT_THROW(spaced.encode(std::string(100, ' '), false), TextBudgetExceeded);
}

TEST(TextBudget, SegmentsShareOneBudget) {
  // Sequence of two Replace steps: 10x then 10x is 100x, over 32x for a long enough prompt.
  const json twice = {{"type", "Sequence"}, {"normalizers", {replace_a(10), replace_a(10)}}};
  const Tokenizer tok = tokenizer_with(twice, nullptr);
  EXPECT_EQ(tok.encode("a", false).size(), 100u);  // within the 64 KiB slack
  EXPECT_THROW(tok.encode(std::string(4000, 'a'), false), TextBudgetExceeded);
}

}  // namespace
}  // namespace deepinfer::tokenizer
