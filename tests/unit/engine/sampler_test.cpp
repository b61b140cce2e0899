#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace deepinfer::engine {
namespace {

const std::vector<float> kLogits = {2.0f, 1.0f, 0.5f, -0.5f, 1.5f, -2.0f, 0.0f, 0.9f};

// The exact distribution, written independently: softmax(l / T) restricted to `keep`.
std::vector<double> renormalised(const std::vector<float>& logits, double temperature,
                                 const std::vector<int>& keep) {
  std::vector<double> p(logits.size(), 0.0);
  double z = 0;
  for (int i : keep) z += std::exp(logits[static_cast<size_t>(i)] / temperature);
  for (int i : keep)
    p[static_cast<size_t>(i)] = std::exp(logits[static_cast<size_t>(i)] / temperature) / z;
  return p;
}

void expect_distribution(const SamplingParams& params, const std::vector<double>& expected) {
  std::vector<float> logits = kLogits;
  const auto got = sampling_distribution(logits, params);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-12) << "token " << i;
}

TEST(Sampler, DistributionMatchesTheExactRenormalisedSoftmax) {
  // Sorted by logit: 0 (2.0), 4 (1.5), 1 (1.0), 7 (0.9), 2 (0.5), 6 (0.0), 3 (-0.5), 5 (-2.0)
  SamplingParams plain;
  plain.temperature = 0.7;
  expect_distribution(plain, renormalised(kLogits, 0.7, {0, 1, 2, 3, 4, 5, 6, 7}));

  SamplingParams top_k = plain;
  top_k.top_k = 3;
  expect_distribution(top_k, renormalised(kLogits, 0.7, {0, 4, 1}));

  // T = 1: p = [.312 .115 .070 .026 .189 .006 .042 .104]; cumulative by rank: .312 .501 .616
  // .720 -> top_p 0.6 keeps the first three ranks (mass before rank 3 is .616 >= .6).
  SamplingParams top_p;
  top_p.temperature = 1.0;
  top_p.top_p = 0.6;
  expect_distribution(top_p, renormalised(kLogits, 1.0, {0, 4, 1}));

  // min_p 0.3: keep p >= 0.3 * p_max, i.e. logit >= 2 + ln 0.3 = 0.796: tokens 0, 4, 1, 7.
  SamplingParams min_p;
  min_p.temperature = 1.0;
  min_p.min_p = 0.3;
  expect_distribution(min_p, renormalised(kLogits, 1.0, {0, 4, 1, 7}));
}

TEST(Sampler, DrawsFollowTheDistributionChiSquare) {
  SamplingParams params;
  params.temperature = 0.8;
  params.top_k = 6;
  params.top_p = 0.95;
  std::vector<float> scratch = kLogits;
  const auto expected = sampling_distribution(scratch, params);
  const int draws = 40000;
  std::vector<int> counts(kLogits.size(), 0);
  for (int step = 0; step < draws; ++step) {
    std::vector<float> logits = kLogits;
    const auto result = sample(logits, params, {}, 12345, step);
    ++counts[static_cast<size_t>(result.token)];
  }
  double chi2 = 0;
  int categories = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "filtered token " << i << " was drawn";
      continue;
    }
    const double e = expected[i] * draws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++categories;
  }
  // Critical value of chi-square at p = 0.001 for up to 5 degrees of freedom: 20.52.
  EXPECT_LE(categories - 1, 5);
  EXPECT_LT(chi2, 20.52);
}

TEST(Sampler, SameSeedAndStepGiveTheSameTokenAnywhere) {
  SamplingParams params;
  params.temperature = 1.0;
  for (int64_t step = 0; step < 50; ++step) {
    std::vector<float> a = kLogits, b = kLogits;
    EXPECT_EQ(sample(a, params, {}, 7, step).token, sample(b, params, {}, 7, step).token);
  }
  int differing = 0;
  for (int64_t step = 0; step < 50; ++step) {
    std::vector<float> a = kLogits, b = kLogits;
    differing += sample(a, params, {}, 7, step).token != sample(b, params, {}, 8, step).token;
  }
  EXPECT_GT(differing, 5);
}

TEST(Sampler, GreedyIsArgmaxAfterPenalties) {
  SamplingParams params;
  params.temperature = 0.0;
  std::vector<float> logits = kLogits;
  EXPECT_EQ(sample(logits, params, {}, 0, 0).token, 0);
  params.repetition_penalty = 2.0;  // token 0: 2.0 -> 1.0, so token 4 (1.5) wins
  const std::vector<int32_t> prompt = {0};
  logits = kLogits;
  EXPECT_EQ(sample(logits, params, {prompt, {}}, 0, 0).token, 4);
}

TEST(Sampler, PenaltiesFollowTransformersAndOpenAi) {
  std::vector<float> logits = {4.0f, -1.0f, 2.0f, 3.0f};
  SamplingParams params;
  params.repetition_penalty = 2.0;
  params.frequency_penalty = 0.5;
  params.presence_penalty = 0.25;
  const std::vector<int32_t> prompt = {0, 0, 1};
  const std::vector<int32_t> output = {2, 2, 2, 1};
  apply_penalties(logits, params, {prompt, output});
  EXPECT_FLOAT_EQ(logits[0], 2.0f);                  // positive: divided, once
  EXPECT_FLOAT_EQ(logits[1], -2.0f - 0.5f - 0.25f);  // negative: multiplied; 1 output use
  EXPECT_FLOAT_EQ(logits[2], 1.0f - 1.5f - 0.25f);   // 3 output uses
  EXPECT_FLOAT_EQ(logits[3], 3.0f);                  // unseen
}

TEST(Sampler, LogprobsComeFromTheRawDistribution) {
  SamplingParams params;
  params.temperature = 0.0;
  params.repetition_penalty = 5.0;
  params.logprobs = 3;
  std::vector<float> logits = kLogits;
  const std::vector<int32_t> prompt = {0};
  const auto result = sample(logits, params, {prompt, {}}, 0, 0);
  double z = 0;
  for (float l : kLogits) z += std::exp(static_cast<double>(l));
  EXPECT_EQ(result.token, 4);
  EXPECT_NEAR(result.logprobs.chosen, 1.5 - std::log(z), 1e-5);
  ASSERT_EQ(result.logprobs.top.size(), 3u);
  EXPECT_EQ(result.logprobs.top[0].first, 0);  // raw top token despite its penalty
  EXPECT_NEAR(result.logprobs.top[0].second, 2.0 - std::log(z), 1e-5);
  EXPECT_EQ(result.logprobs.top[1].first, 4);
  EXPECT_EQ(result.logprobs.top[2].first, 1);
}

TEST(Sampler, ValidateNamesTheBadField) {
  SamplingParams params;
  EXPECT_NO_THROW(params.validate(8));
  auto expect_error = [](SamplingParams p, const char* field) {
    try {
      p.validate(8);
      FAIL() << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  SamplingParams p = params;
  p.temperature = -1;
  expect_error(p, "temperature");
  p = params;
  p.top_p = 0;
  expect_error(p, "top_p");
  p = params;
  p.stop_token_ids = {8};
  expect_error(p, "stop token");
  p = params;
  p.n = 0;
  expect_error(p, "n must");
}

}  // namespace
}  // namespace deepinfer::engine
