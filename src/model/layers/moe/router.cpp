#include "model/layers/moe/router.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"

namespace deepinfer::model {
namespace {

// Index of the best candidate not yet taken: highest score, ties to the lowest index.
// A linear scan (k passes over E experts) instead of a sort keeps the tie rule exact and
// stays well-defined for NaN scores; E x k is tiny next to the expert GEMMs.
int64_t best_untaken(const float* score, const std::vector<char>& allowed,
                     const std::vector<char>& taken, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!allowed[static_cast<size_t>(i)] || taken[static_cast<size_t>(i)]) continue;
    if (best < 0 || score[i] > score[best]) best = i;
  }
  return best;
}

// Group scores as transformers forms them: max of the group (group_limited_greedy) or the
// sum of its two largest selection scores (noaux_tc).
float group_score(const float* choice, int64_t size, TopkMethod method) {
  if (method == TopkMethod::group_limited_greedy) {
    float m = choice[0];
    for (int64_t i = 1; i < size; ++i) m = choice[i] > m ? choice[i] : m;
    return m;
  }
  int64_t first = 0;
  for (int64_t i = 1; i < size; ++i) first = choice[i] > choice[first] ? i : first;
  int64_t second = first == 0 ? 1 : 0;
  for (int64_t i = 0; i < size; ++i) {
    if (i != first && choice[i] > choice[second]) second = i;
  }
  return choice[first] + choice[second];
}

}  // namespace

void RouterConfig::validate(const std::string& where) const {
  DI_CHECK(num_experts > 0, where, ": the number of experts must be positive, got ", num_experts);
  DI_CHECK(top_k > 0 && top_k <= num_experts, where, ": num_experts_per_tok ", top_k,
           " must be in [1, ", num_experts, "]");
  DI_CHECK(num_experts <= std::numeric_limits<int32_t>::max(), where, ": too many experts");
  if (method == TopkMethod::greedy) return;
  DI_CHECK(n_group > 0 && num_experts % n_group == 0, where, ": n_group ", n_group,
           " must divide the ", num_experts, " experts");
  DI_CHECK(topk_group > 0 && topk_group <= n_group, where, ": topk_group ", topk_group,
           " must be in [1, n_group = ", n_group, "]");
  const int64_t group_size = num_experts / n_group;
  DI_CHECK(top_k <= topk_group * group_size, where, ": num_experts_per_tok ", top_k,
           " exceeds the ", topk_group * group_size, " experts of the ", topk_group,
           " selected groups (topk_group x experts per group)");
  if (method == TopkMethod::noaux_tc) {
    DI_CHECK(group_size >= 2, where, ": noaux_tc scores a group by its top-2 experts, so each of ",
             "the n_group = ", n_group, " groups needs at least 2 experts");
  }
}

TopkMethod parse_topk_method(const std::string& name, const std::string& where) {
  if (name == "greedy") return TopkMethod::greedy;
  if (name == "group_limited_greedy") return TopkMethod::group_limited_greedy;
  if (name == "noaux_tc") return TopkMethod::noaux_tc;
  fail(where, ": topk_method \"", name,
       "\" is not supported (supported: greedy, group_limited_greedy, noaux_tc)");
}

RouterScoring parse_scoring(const std::string& name, const std::string& where) {
  if (name == "softmax") return RouterScoring::softmax;
  if (name == "sigmoid") return RouterScoring::sigmoid;
  fail(where, ": scoring_func \"", name, "\" is not supported (supported: softmax, sigmoid)");
}

void select_experts(const RouterConfig& config, const float* logits, int64_t tokens,
                    std::span<const float> bias, int32_t* experts, float* weights) {
  const int64_t n = config.num_experts;
  const int64_t k = config.top_k;
  const bool biased = config.method == TopkMethod::noaux_tc;
  DI_CHECK(biased ? static_cast<int64_t>(bias.size()) == n : bias.empty(),
           "select_experts: e_score_correction_bias of ", bias.size(), " values for ", n,
           " experts (it is used by noaux_tc only)");
  const bool grouped = config.method != TopkMethod::greedy && config.n_group > 1;
  const int64_t group_size = grouped ? n / config.n_group : n;

  std::vector<float> scores(static_cast<size_t>(n));
  std::vector<float> choice(static_cast<size_t>(n));
  std::vector<float> groups(static_cast<size_t>(grouped ? config.n_group : 0));
  std::vector<char> allowed(static_cast<size_t>(n));
  std::vector<char> taken(static_cast<size_t>(n));
  std::vector<char> all_groups(groups.size(), 1);
  std::vector<char> group_taken(groups.size());
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * n;
    std::copy(row, row + n, scores.begin());
    if (config.scoring == RouterScoring::softmax) {
      kernels::softmax(scores.data(), 1, n);
    } else {
      for (float& s : scores) s = 1.0f / (1.0f + std::exp(-s));
    }
    for (int64_t e = 0; e < n; ++e) {
      choice[static_cast<size_t>(e)] =
          biased ? scores[static_cast<size_t>(e)] + bias[e] : scores[static_cast<size_t>(e)];
    }

    std::fill(allowed.begin(), allowed.end(), static_cast<char>(!grouped));
    if (grouped) {
      for (int64_t g = 0; g < config.n_group; ++g) {
        groups[static_cast<size_t>(g)] =
            group_score(choice.data() + g * group_size, group_size, config.method);
      }
      std::fill(group_taken.begin(), group_taken.end(), 0);
      for (int64_t i = 0; i < config.topk_group; ++i) {
        const int64_t g = best_untaken(groups.data(), all_groups, group_taken, config.n_group);
        group_taken[static_cast<size_t>(g)] = 1;
        std::fill_n(allowed.begin() + g * group_size, group_size, 1);
      }
    }

    std::fill(taken.begin(), taken.end(), 0);
    int32_t* chosen = experts + t * k;
    float* w = weights + t * k;
    for (int64_t s = 0; s < k; ++s) {
      const int64_t e = best_untaken(choice.data(), allowed, taken, n);
      taken[static_cast<size_t>(e)] = 1;
      chosen[s] = static_cast<int32_t>(e);
      w[s] = scores[static_cast<size_t>(e)];  // unbiased: the bias only steers selection
    }
    if (config.norm_topk_prob) {
      float sum = 0.0f;
      for (int64_t s = 0; s < k; ++s) sum += w[s];
      sum += config.norm_eps;
      for (int64_t s = 0; s < k; ++s) w[s] /= sum;
    }
    for (int64_t s = 0; s < k; ++s) w[s] *= config.routed_scaling_factor;
  }
}

MoeRouter::MoeRouter(RouterConfig config, Tensor weight, Tensor bias)
    : config_(config), weight_(std::move(weight)), bias_(std::move(bias)) {
  config_.validate("MoE router");
  DI_CHECK(
      weight_.dtype() == DType::f32 && weight_.ndim() == 2 && weight_.dim(0) == config_.num_experts,
      "MoE router: weight must be f32 [", config_.num_experts, ", hidden], got ",
      weight_.describe());
  DI_CHECK(bias_.defined() == (config_.method == TopkMethod::noaux_tc),
           "MoE router: e_score_correction_bias is required by noaux_tc and used by it only");
}

MoeRouter MoeRouter::load(WeightLoader& weights, const std::string& prefix, int64_t hidden,
                          const RouterConfig& config, const std::string& bias_name) {
  config.validate(prefix);
  Tensor weight = weights.vector_f32(prefix + ".weight", {config.num_experts, hidden});
  Tensor bias;
  if (config.method == TopkMethod::noaux_tc) {
    bias = weights.vector_f32(bias_name.empty() ? prefix + ".e_score_correction_bias" : bias_name,
                              {config.num_experts});
  }
  return MoeRouter(config, std::move(weight), std::move(bias));
}

void MoeRouter::route(const float* x, int64_t tokens, int32_t* experts, float* weights,
                      ThreadPool& pool) const {
  const int64_t hidden = weight_.dim(1);
  std::vector<float> logits(static_cast<size_t>(tokens * config_.num_experts));
  kernels::linear(x, tokens, hidden, weight_.raw(), DType::f32, config_.num_experts, nullptr,
                  logits.data(), pool);
  std::span<const float> bias;
  if (bias_.defined()) bias = bias_.span<const float>();
  select_experts(config_, logits.data(), tokens, bias, experts, weights);
}

}  // namespace deepinfer::model
