// MoE routing against (a) hand-built cases whose answer is known by construction and (b) a
// double-precision re-derivation of transformers' routers on random logits, for every
// scoring function and topk_method.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "model/layers/moe/router.h"

namespace deepinfer::model {
namespace {

struct Choice {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Choice select(const RouterConfig& config, const std::vector<float>& logits,
              const std::vector<float>& bias = {}) {
  const int64_t tokens = static_cast<int64_t>(logits.size()) / config.num_experts;
  Choice c{std::vector<int32_t>(static_cast<size_t>(tokens * config.top_k)),
           std::vector<float>(static_cast<size_t>(tokens * config.top_k))};
  select_experts(config, logits.data(), tokens, bias, c.experts.data(), c.weights.data());
  return c;
}

// p = sigmoid(logit_of(p)).
float logit_of(double p) {
  return static_cast<float>(std::log(p / (1.0 - p)));
}

// The routers of modeling_{qwen3_moe,deepseek_v2,deepseek_v3,glm4_moe}.py for one token, in
// double, with stable sorts standing in for topk (ties: lower index first).
Choice reference(const RouterConfig& c, const float* logits, const std::vector<float>& bias) {
  const auto n = static_cast<size_t>(c.num_experts);
  std::vector<double> scores(n), choice(n);
  const double max = *std::max_element(logits, logits + n);
  double total = 0;
  for (size_t e = 0; e < n; ++e) total += std::exp(logits[e] - max);
  for (size_t e = 0; e < n; ++e) {
    scores[e] = c.scoring == RouterScoring::softmax ? std::exp(logits[e] - max) / total
                                                    : 1.0 / (1.0 + std::exp(-double(logits[e])));
    choice[e] = scores[e] + (bias.empty() ? 0.0 : bias[e]);
  }
  auto by_desc = [](const std::vector<double>& v) {
    std::vector<size_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
    return idx;
  };
  std::vector<bool> allowed(n, true);
  if (c.method != TopkMethod::greedy && c.n_group > 1) {
    const auto size = n / static_cast<size_t>(c.n_group);
    std::vector<double> group(static_cast<size_t>(c.n_group));
    for (size_t g = 0; g < group.size(); ++g) {
      std::vector<double> members(choice.begin() + g * size, choice.begin() + (g + 1) * size);
      std::sort(members.rbegin(), members.rend());
      group[g] =
          c.method == TopkMethod::group_limited_greedy ? members[0] : members[0] + members[1];
    }
    std::fill(allowed.begin(), allowed.end(), false);
    const auto order = by_desc(group);
    for (int64_t i = 0; i < c.topk_group; ++i) {
      std::fill_n(allowed.begin() + order[i] * size, size, true);
    }
  }
  for (size_t e = 0; e < n; ++e) {
    if (!allowed[e]) choice[e] = -1e300;
  }
  Choice out;
  const auto order = by_desc(choice);
  double sum = 0;
  for (int64_t s = 0; s < c.top_k; ++s) {
    out.experts.push_back(static_cast<int32_t>(order[s]));
    sum += scores[order[s]];
  }
  for (int64_t s = 0; s < c.top_k; ++s) {
    double w = scores[order[s]];
    if (c.norm_topk_prob) w /= sum + c.norm_eps;
    out.weights.push_back(static_cast<float>(w * c.routed_scaling_factor));
  }
  return out;
}

RouterConfig qwen3_moe() {
  return {.num_experts = 16, .top_k = 4, .norm_topk_prob = true};
}
RouterConfig deepseek_v2_greedy() {
  return {.num_experts = 16, .top_k = 3, .routed_scaling_factor = 1.5f};
}
RouterConfig deepseek_v2_grouped() {
  return {.num_experts = 16,
          .top_k = 3,
          .method = TopkMethod::group_limited_greedy,
          .n_group = 4,
          .topk_group = 2,
          .routed_scaling_factor = 16.0f};
}
RouterConfig deepseek_v3() {
  return {.num_experts = 16,
          .top_k = 4,
          .scoring = RouterScoring::sigmoid,
          .method = TopkMethod::noaux_tc,
          .n_group = 4,
          .topk_group = 2,
          .norm_topk_prob = true,
          .norm_eps = 1e-20f,
          .routed_scaling_factor = 2.5f};
}

class RouterVsReference : public ::testing::TestWithParam<RouterConfig (*)()> {};

TEST_P(RouterVsReference, RandomLogitsMatchDoublePrecisionRederivation) {
  const RouterConfig config = GetParam()();
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  constexpr int64_t kTokens = 64;
  std::vector<float> logits(static_cast<size_t>(kTokens * config.num_experts));
  for (float& v : logits) v = normal(rng);
  std::vector<float> bias;
  if (config.method == TopkMethod::noaux_tc) {
    for (int64_t e = 0; e < config.num_experts; ++e) bias.push_back(0.3f * normal(rng));
  }
  const Choice got = select(config, logits, bias);
  int differs_from_greedy_on_scores = 0;
  for (int64_t t = 0; t < kTokens; ++t) {
    const Choice want = reference(config, logits.data() + t * config.num_experts, bias);
    for (int64_t s = 0; s < config.top_k; ++s) {
      const auto i = static_cast<size_t>(t * config.top_k + s);
      ASSERT_EQ(got.experts[i], want.experts[static_cast<size_t>(s)]) << "token " << t;
      EXPECT_NEAR(got.weights[i], want.weights[static_cast<size_t>(s)],
                  2e-6 * config.routed_scaling_factor)
          << "token " << t << " slot " << s;
    }
    RouterConfig plain = config;
    plain.method = TopkMethod::greedy;
    const Choice unlimited = reference(plain, logits.data() + t * config.num_experts, {});
    if (unlimited.experts != want.experts) ++differs_from_greedy_on_scores;
  }
  // Group limits and the bias must actually have changed some choices in this sample.
  if (config.method != TopkMethod::greedy) {
    EXPECT_GT(differs_from_greedy_on_scores, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, RouterVsReference,
                         ::testing::Values(&qwen3_moe, &deepseek_v2_greedy, &deepseek_v2_grouped,
                                           &deepseek_v3));

// 4 groups of 2; group maxima 5, 4.9, 0, 4.8 -> groups 0 and 1. Plain greedy would take
// expert 6 (4.8) third; the group limit takes expert 3 (0.5) instead.
TEST(MoeRouter, GroupLimitedGreedyMasksGroupsByTheirMaximum) {
  RouterConfig config = deepseek_v2_grouped();
  config.num_experts = 8;
  config.topk_group = 2;
  const std::vector<float> logits = {5.0f, -1.0f, 4.9f, 0.5f, 0.0f, 0.0f, 4.8f, 4.7f};
  const Choice c = select(config, logits);
  EXPECT_EQ(c.experts, (std::vector<int32_t>{0, 2, 3}));
  double total = 0;
  for (float l : logits) total += std::exp(double(l));
  for (size_t s = 0; s < 3; ++s) {  // softmax over all experts, x routed_scaling_factor, no norm
    EXPECT_NEAR(c.weights[s], 16.0 * std::exp(double(logits[c.experts[s]])) / total, 1e-5);
  }
}

// Two groups of 4 experts with sigmoid scores A = {0.9, 0.1, 0.1, 0.1} and
// B = {0.62, 0.6, 0.1, 0.1}. noaux_tc ranks groups by the sum of their top two (A: 1.0,
// B: 1.22), so B wins although A holds the best expert (the max rule would pick A).
TEST(MoeRouter, NoauxTcRanksGroupsByTheSumOfTheirTopTwo) {
  RouterConfig config = deepseek_v3();
  config.num_experts = 8;
  config.n_group = 2;
  config.topk_group = 1;
  config.top_k = 2;
  std::vector<float> logits;
  for (double p : {0.9, 0.1, 0.1, 0.1, 0.62, 0.6, 0.1, 0.1}) logits.push_back(logit_of(p));
  const std::vector<float> zero(8, 0.0f);
  Choice c = select(config, logits, zero);
  EXPECT_EQ(c.experts, (std::vector<int32_t>{4, 5}));
  EXPECT_NEAR(c.weights[0], 2.5 * 0.62 / 1.22, 1e-6);
  EXPECT_NEAR(c.weights[1], 2.5 * 0.6 / 1.22, 1e-6);

  // A bias of +0.5 on expert 3 lifts group A to 0.9 + 0.6 = 1.5 and expert 3 into the top
  // two, but the weights stay the unbiased scores 0.9 and 0.1 (normalised, then x 2.5).
  std::vector<float> bias = zero;
  bias[3] = 0.5f;
  c = select(config, logits, bias);
  EXPECT_EQ(c.experts, (std::vector<int32_t>{0, 3}));
  EXPECT_NEAR(c.weights[0], 2.5 * 0.9, 1e-5);
  EXPECT_NEAR(c.weights[1], 2.5 * 0.1, 1e-5);
}

TEST(MoeRouter, TiesGoToTheLowerExpertAndGroupIndex) {
  RouterConfig greedy = qwen3_moe();
  greedy.num_experts = 8;
  greedy.top_k = 3;
  Choice c = select(greedy, {1, 2, 2, 1, 2, 0, 0, 2});
  EXPECT_EQ(c.experts, (std::vector<int32_t>{1, 2, 4}));
  for (float w : c.weights) EXPECT_FLOAT_EQ(w, 1.0f / 3.0f);

  RouterConfig grouped = deepseek_v2_grouped();
  grouped.num_experts = 4;
  grouped.n_group = 2;
  grouped.topk_group = 1;
  grouped.top_k = 2;
  c = select(grouped, {1, 3, 3, 1});  // both groups score 3: group 0 wins
  EXPECT_EQ(c.experts, (std::vector<int32_t>{1, 0}));

  RouterConfig v3 = deepseek_v3();
  v3.num_experts = 4;
  v3.n_group = 2;
  v3.topk_group = 1;
  v3.top_k = 1;
  c = select(v3, {0, 0, 0, 0}, {0.25f, 0.0f, 0.0f, 0.25f});  // group sums tie: group 0
  EXPECT_EQ(c.experts, (std::vector<int32_t>{0}));
  EXPECT_FLOAT_EQ(c.weights[0], 2.5f);  // 0.5 / 0.5 x 2.5
}

// Sigmoid scores underflow to 0 for very negative logits; DeepSeek-V3 / GLM-4.5 add 1e-20
// to the denominator so such a token gets zero weights, not NaN.
TEST(MoeRouter, DenominatorEpsilonKeepsUnderflowedWeightsFinite) {
  RouterConfig config = deepseek_v3();
  config.num_experts = 4;
  config.n_group = 1;
  config.topk_group = 1;
  config.top_k = 2;
  const Choice c = select(config, {-200, -300, -250, -400}, std::vector<float>(4, 0.0f));
  EXPECT_EQ(c.experts, (std::vector<int32_t>{0, 1}));  // all scores 0: a tie
  EXPECT_EQ(c.weights, (std::vector<float>{0.0f, 0.0f}));
}

TEST(MoeRouter, RouteAppliesTheF32GateLinear) {
  RouterConfig config = qwen3_moe();
  config.num_experts = 4;
  config.top_k = 2;
  Tensor weight = Tensor::zeros({4, 3}, DType::f32);
  const float w[] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};
  std::copy(std::begin(w), std::end(w), weight.data<float>());
  const MoeRouter router(config, weight, Tensor());
  const float x[] = {0.5f, 2.0f, -1.0f};  // logits 0.5, 2, -1, 1.5
  int32_t experts[2];
  float weights[2];
  ThreadPool pool(1);
  router.route(x, 1, experts, weights, pool);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 3);
  EXPECT_NEAR(weights[0], 1.0 / (1.0 + std::exp(-0.5)), 1e-6);  // e^2 / (e^2 + e^1.5)
}

TEST(MoeRouter, InconsistentSettingsAreRejected) {
  RouterConfig c = deepseek_v2_grouped();
  c.n_group = 5;  // does not divide 16
  EXPECT_THROW(c.validate("cfg"), Error);
  c = deepseek_v2_grouped();
  c.topk_group = 1;
  c.top_k = 5;  // only 4 experts in one group
  EXPECT_THROW(c.validate("cfg"), Error);
  c = deepseek_v3();
  c.n_group = 16;  // groups of 1 cannot give a top-2 sum
  c.topk_group = 4;
  EXPECT_THROW(c.validate("cfg"), Error);
  c = qwen3_moe();
  c.top_k = 17;
  EXPECT_THROW(c.validate("cfg"), Error);
  EXPECT_THROW(parse_topk_method("top2", "cfg"), Error);
  EXPECT_THROW(parse_scoring("relu", "cfg"), Error);
  std::vector<float> logits(16, 0.0f);
  int32_t e[4];
  float w[4];
  EXPECT_THROW(select_experts(deepseek_v3(), logits.data(), 1, {}, e, w), Error);  // no bias
}

}  // namespace
}  // namespace deepinfer::model
