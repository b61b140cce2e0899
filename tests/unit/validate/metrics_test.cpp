// validate's metrics against hand-computed values.
#include "validate/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace deepinfer::validate {
namespace {

TEST(ValidateMetrics, KlDivergenceOfKnownDistributions) {
  // P = softmax(0, ln 3) = (1/4, 3/4), Q = (1/2, 1/2):
  // KL = 1/4 ln(1/2) + 3/4 ln(3/2) = 0.1308120...
  const std::vector<float> p = {0.0f, static_cast<float>(std::log(3.0))};
  const std::vector<float> q = {5.0f, 5.0f};
  EXPECT_NEAR(kl_divergence(p, q), 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-7);
  EXPECT_EQ(kl_divergence(p, p), 0.0);
  EXPECT_THROW(kl_divergence(p, std::vector<float>{1, 2, 3}), Error);
}

TEST(ValidateMetrics, LogSoftmaxAndTop1) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
  const auto lp = log_softmax(logits);
  double sum = 0;
  for (double v : lp) sum += std::exp(v);
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(lp[1] - lp[0], 2.0, 1e-12);
  EXPECT_EQ(top1(logits), 1);  // ties go to the lower index
}

TEST(ValidateMetrics, GreedyComparisonCountsMissingTokensAsDivergence) {
  const std::vector<int32_t> a = {1, 2, 3, 4};
  EXPECT_EQ(compare_greedy(a, a).first_divergence, -1);
  EXPECT_EQ(compare_greedy(a, a).matching, 4);
  const auto g = compare_greedy(a, std::vector<int32_t>{1, 2, 9, 4, 5});
  EXPECT_EQ(g.compared, 5);
  EXPECT_EQ(g.matching, 3);
  EXPECT_EQ(g.first_divergence, 2);
  EXPECT_EQ(compare_greedy(a, std::vector<int32_t>{1, 2}).first_divergence, 2);
}

TEST(ValidateMetrics, PerplexityWindowsFollowHuggingFace) {
  // HF: for begin in range(0, 10, 2): end = min(begin + 4, 10); score the last end - prev_end.
  const auto w = perplexity_windows(10, 4, 2);
  ASSERT_EQ(w.size(), 4u);
  const int64_t want[4][3] = {{0, 4, 1}, {2, 6, 4}, {4, 8, 6}, {6, 10, 8}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(w[i].begin, want[i][0]);
    EXPECT_EQ(w[i].end, want[i][1]);
    EXPECT_EQ(w[i].score_from, want[i][2]);
  }
  // One window when the text is shorter; disjoint windows when stride == window.
  const auto one = perplexity_windows(3, 8, 4);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].end, 3);
  const auto disjoint = perplexity_windows(7, 3, 3);
  ASSERT_EQ(disjoint.size(), 3u);
  EXPECT_EQ(disjoint[1].score_from, 4);  // a window's first token has no context in it
  EXPECT_EQ(disjoint[2].score_from, 7);
  EXPECT_THROW(perplexity_windows(10, 1, 1), Error);
  EXPECT_THROW(perplexity_windows(10, 4, 5), Error);
}

TEST(ValidateMetrics, PerplexityAndRelativeError) {
  NllSum s;
  s.add(std::log(4.0));
  s.add(std::log(16.0));
  EXPECT_NEAR(s.perplexity(), 8.0, 1e-12);  // exp(mean) = geometric mean of 4 and 16
  const std::vector<float> b = {3.0f, 4.0f};
  EXPECT_NEAR(relative_error(std::vector<float>{3.0f, 4.5f}, b), 0.1, 1e-7);
  EXPECT_EQ(relative_error(b, b), 0.0);
  EXPECT_TRUE(std::isinf(relative_error(b, std::vector<float>{0, 0})));
}

}  // namespace
}  // namespace deepinfer::validate
