// validate's inputs and golden reader: line-numbered errors, seeded prompts, base64.
#include "validate/inputs.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "validate/golden.h"

namespace deepinfer::validate {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an Error";
  return "";
}

TEST(ValidateInputs, PromptsJsonlNamesTheBadLine) {
  const auto good =
      write_temp("di_validate_good.jsonl",
                 "{\"prompt_token_ids\": [1, 2, 3]}\n\n{\"prompt_token_ids\": [4]}\n");
  const auto prompts = read_prompts_jsonl(good, nullptr, 10);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[1].ids, std::vector<int32_t>{4});
  EXPECT_EQ(prompts[1].name, good + ":3");

  const auto bad = write_temp("di_validate_bad.jsonl", "{\"prompt_token_ids\": [1]}\nnot json\n");
  EXPECT_NE(error_of([&] { read_prompts_jsonl(bad, nullptr, 10); }).find(bad + ":2"),
            std::string::npos);
  const auto range = write_temp("di_validate_range.jsonl", "{\"prompt_token_ids\": [10]}\n");
  EXPECT_NE(
      error_of([&] { read_prompts_jsonl(range, nullptr, 10); }).find("outside the vocabulary"),
      std::string::npos);
  const auto text = write_temp("di_validate_text.jsonl", "{\"prompt\": \"hi\"}\n");
  EXPECT_NE(error_of([&] { read_prompts_jsonl(text, nullptr, 10); }).find("tokenizer"),
            std::string::npos);
  const auto neither = write_temp("di_validate_neither.jsonl", "{\"text\": \"hi\"}\n");
  EXPECT_NE(error_of([&] { read_prompts_jsonl(neither, nullptr, 10); }).find(":1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              read_prompts_jsonl("/nonexistent/p.jsonl", nullptr, 10);
            }).find("cannot open /nonexistent/p.jsonl"),
            std::string::npos);
}

TEST(ValidateInputs, RandomPromptsAreSeeded) {
  const auto a = random_prompts(3, 5, 100, 7);
  const auto b = random_prompts(3, 5, 100, 7);
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ids, b[i].ids);
    EXPECT_EQ(a[i].ids.size(), 5u);
    for (int32_t id : a[i].ids) EXPECT_LT(id, 100);
  }
  EXPECT_NE(random_prompts(1, 5, 100, 8)[0].ids, a[0].ids);
}

TEST(ValidateGolden, Base64DecodesFloat32) {
  // Python: base64.b64encode(struct.pack("<2f", 1.0, -2.5)) == b"AACAPwAAIMA="
  const auto bytes = decode_base64("AACAPwAAIMA=");
  ASSERT_EQ(bytes.size(), 8u);
  float values[2];
  std::memcpy(values, bytes.data(), 8);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], -2.5f);
  EXPECT_THROW(decode_base64("AA*A"), Error);
}

TEST(ValidateGolden, BadFilesNameThemselves) {
  EXPECT_NE(error_of([] { read_golden("/nonexistent/g.json"); }).find("cannot open"),
            std::string::npos);
  const auto other = write_temp("di_validate_golden.json", "{\"format\": \"other\"}");
  EXPECT_NE(error_of([&] { read_golden(other); }).find("dump_reference.py"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::validate
