// Benchmark dataset readers on hand-written files: prompt lists, jsonl, ShareGPT, and the
// errors a user must be able to act on.
#include "bench/dataset.h"

#include <gtest/gtest.h>

#include <string>

#include "bench/statistics.h"
#include "core/error.h"

namespace deepinfer::bench {
namespace {

std::string error_of(std::string_view text, DatasetFormat format = DatasetFormat::automatic) {
  try {
    parse_dataset(text, "d.json", format);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BenchDataset, JsonListOfStringsAndObjects) {
  const auto d = parse_dataset(
      R"( [ "Hi there", {"prompt": "Tell me a joke", "output_len": 7}, {"prompt": "x", "max_tokens": 3} ])",
      "d.json", DatasetFormat::automatic);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].prompt, "Hi there");
  EXPECT_FALSE(d[0].output_len);
  EXPECT_EQ(d[1].prompt, "Tell me a joke");
  EXPECT_EQ(*d[1].output_len, 7);
  EXPECT_EQ(*d[2].output_len, 3);
}

TEST(BenchDataset, JsonlSkipsBlankLines) {
  const auto d = parse_dataset("{\"prompt\": \"a\"}\n\n\"b\"\r\n  \n{\"prompt\": \"c\"}", "p.jsonl",
                               DatasetFormat::automatic);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[1].prompt, "b");
  EXPECT_EQ(d[2].prompt, "c");
}

TEST(BenchDataset, ShareGptFirstHumanTurnAndItsAnswer) {
  const auto d = parse_dataset(R"([
    {"id": "1", "conversations": [{"from": "system", "value": "be brief"},
                                  {"from": "human", "value": "Q1"},
                                  {"from": "gpt", "value": "A1 is long"},
                                  {"from": "human", "value": "Q2"}]},
    {"id": "2", "conversations": [{"from": "gpt", "value": "no question here"}]},
    {"id": "3", "conversations": [{"from": "human", "value": "Q3"}]},
    {"id": "4", "messages": [{"role": "user", "content": "Q4"}, {"role": "assistant", "content": "A4"}]}
  ])",
                               "s.json", DatasetFormat::sharegpt);
  ASSERT_EQ(d.size(), 3u);  // the conversation without a human turn is skipped
  EXPECT_EQ(d[0].prompt, "Q1");
  EXPECT_EQ(*d[0].reference_output, "A1 is long");
  EXPECT_EQ(d[1].prompt, "Q3");
  EXPECT_FALSE(d[1].reference_output);
  EXPECT_EQ(d[2].prompt, "Q4");
  EXPECT_EQ(*d[2].reference_output, "A4");
}

TEST(BenchDataset, ClearErrors) {
  const std::string bad_line =
      error_of("{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n{\"prompt\": oops}\n");
  EXPECT_NE(bad_line.find("d.json:3:"), std::string::npos) << bad_line;
  EXPECT_NE(bad_line.find("not valid JSON"), std::string::npos) << bad_line;

  const std::string no_human =
      error_of(R"([{"conversations": [{"from": "gpt", "value": "hi"}]}, {"conversations": []}])",
               DatasetFormat::sharegpt);
  EXPECT_NE(no_human.find("without a human turn"), std::string::npos) << no_human;
  EXPECT_NE(no_human.find("2 conversations"), std::string::npos) << no_human;

  const std::string not_sharegpt = error_of(R"(["plain"])", DatasetFormat::sharegpt);
  EXPECT_NE(not_sharegpt.find("element 1"), std::string::npos) << not_sharegpt;
  EXPECT_NE(not_sharegpt.find("ShareGPT"), std::string::npos) << not_sharegpt;

  EXPECT_NE(error_of("[1, 2]").find("element 1: expected a prompt"), std::string::npos);
  EXPECT_NE(error_of("[]").find("no prompts"), std::string::npos);
  EXPECT_NE(error_of("[\"\"]").find("empty prompt"), std::string::npos);
  EXPECT_NE(error_of("[{\"prompt\": \"a\", \"output_len\": 0}]").find("output_len"),
            std::string::npos);
  EXPECT_NE(error_of("[\"a\",").find("malformed JSON"), std::string::npos);

  try {
    read_dataset("/nonexistent/prompts.json", DatasetFormat::automatic);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/prompts.json: no such dataset file"),
              std::string::npos)
        << e.what();
  }
}

TEST(BenchStatistics, PercentilesAsNumpy) {
  // numpy.percentile([1, 2, 3, 4, 10], [50, 90, 99]) = 3, 7.6, 9.76 (linear interpolation).
  const Distribution d = summarize({10, 2, 4, 1, 3});
  EXPECT_EQ(d.count, 5u);
  EXPECT_DOUBLE_EQ(d.mean, 4.0);
  EXPECT_DOUBLE_EQ(d.p50, 3.0);
  EXPECT_NEAR(d.p90, 7.6, 1e-12);
  EXPECT_NEAR(d.p99, 9.76, 1e-12);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 10);
  EXPECT_DOUBLE_EQ(summarize({}).p99, 0);
  EXPECT_DOUBLE_EQ(summarize({5}).p90, 5);
}

}  // namespace
}  // namespace deepinfer::bench
