#include "tokenizer/tokenizer_config.h"

#include <gtest/gtest.h>

namespace deepinfer::tokenizer {
namespace {

using json = nlohmann::json;

// transformers stores model_max_length as an int, with 1e30 meaning "no limit"; only a limit
// of at least one token means anything (a fraction once truncated to a limit of 0).
TEST(TokenizerConfig, ModelMaxLengthKeepsOnlyMeaningfulLimits) {
  const auto limit = [](const char* text) {
    return TokenizerConfig::parse(json::parse(text), "t.json").model_max_length;
  };
  EXPECT_EQ(limit(R"({"model_max_length": 4096})"), 4096);
  EXPECT_EQ(limit(R"({"model_max_length": 1})"), 1);
  EXPECT_EQ(limit(R"({"model_max_length": 1000000000000000019884624838656})"), std::nullopt);
  EXPECT_EQ(limit(R"({"model_max_length": 0.5})"), std::nullopt);
  EXPECT_EQ(limit(R"({"model_max_length": 0})"), std::nullopt);
  EXPECT_EQ(limit(R"({"model_max_length": -3})"), std::nullopt);
}

}  // namespace
}  // namespace deepinfer::tokenizer
