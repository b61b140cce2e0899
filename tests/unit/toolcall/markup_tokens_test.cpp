// The parsers read the detokenized text, which the server decodes with skip_special_tokens
// (the API default): the markup must survive it. It does for the real tokenizers because their
// tool-call tokens are added tokens that are not "special".
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tokenizer/tokenizer.h"
#include "toolcall/tool_parser.h"

namespace deepinfer::toolcall {
namespace {

void expect_calls_survive(const char* dir, Family family, const std::string& output) {
  const std::filesystem::path path =
      std::filesystem::path(DEEPINFER_SHARED_DIR) / "tokenizers" / dir;
  if (!std::filesystem::exists(path / "tokenizer.json")) {
    GTEST_SKIP() << "no " << path << " (shared test data absent)";
  }
  const auto tok = tokenizer::Tokenizer::load_dir(path.string());
  const auto ids = tok.encode(output, /*add_special_tokens=*/false);
  const std::string text = tok.decode(ids, /*skip_special_tokens=*/true);
  EXPECT_EQ(text, output);
  const auto parsed = parse_tool_calls(family, nlohmann::ordered_json(), text);
  ASSERT_EQ(parsed.calls.size(), 1u) << text;
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"Paris"})");
}

TEST(ToolCallMarkup, Qwen3MarkupSurvivesSkipSpecialTokens) {
  expect_calls_survive("qwen3", Family::hermes,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"Paris\"}}\n</tool_call>");
}

TEST(ToolCallMarkup, DeepSeekV3MarkupSurvivesSkipSpecialTokens) {
  expect_calls_survive(
      "deepseek-v3", Family::deepseek,
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
      "```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
}

}  // namespace
}  // namespace deepinfer::toolcall
