#include "validate/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace deepinfer::validate {

std::vector<double> log_softmax(std::span<const float> logits) {
  DI_CHECK(!logits.empty(), "log_softmax: empty logits");
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float l : logits) max_logit = std::max(max_logit, static_cast<double>(l));
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_z = max_logit + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_z;
  return out;
}

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  DI_CHECK(p_logits.size() == q_logits.size(), "kl_divergence: ", p_logits.size(), " vs ",
           q_logits.size(), " logits (different vocabularies)");
  const std::vector<double> lp = log_softmax(p_logits);
  const std::vector<double> lq = log_softmax(q_logits);
  double kl = 0;
  for (size_t i = 0; i < lp.size(); ++i) {
    const double p = std::exp(lp[i]);
    if (p > 0) kl += p * (lp[i] - lq[i]);
  }
  return std::max(0.0, kl);  // rounding may leave a tiny negative for equal rows
}

int64_t top1(std::span<const float> logits) {
  DI_CHECK(!logits.empty(), "top1: empty logits");
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

GreedyComparison compare_greedy(std::span<const int32_t> model,
                                std::span<const int32_t> reference) {
  GreedyComparison out;
  out.compared = static_cast<int64_t>(std::max(model.size(), reference.size()));
  for (int64_t i = 0; i < out.compared; ++i) {
    const auto k = static_cast<size_t>(i);
    const bool same = k < model.size() && k < reference.size() && model[k] == reference[k];
    if (same) {
      ++out.matching;
    } else if (out.first_divergence < 0) {
      out.first_divergence = i;
    }
  }
  return out;
}

std::vector<PerplexityWindow> perplexity_windows(int64_t num_tokens, int64_t window,
                                                 int64_t stride) {
  DI_CHECK(window >= 2, "--window must be at least 2 tokens, got ", window);
  DI_CHECK(stride >= 1 && stride <= window, "--stride must be in [1, --window ", window, "], got ",
           stride);
  std::vector<PerplexityWindow> out;
  int64_t scored_until = 1;  // the first token has no context
  for (int64_t begin = 0; scored_until < num_tokens; begin += stride) {
    const int64_t end = std::min(begin + window, num_tokens);
    if (end > scored_until) out.push_back({begin, end, std::max(scored_until, begin + 1)});
    scored_until = std::max(scored_until, end);
  }
  return out;
}

double NllSum::perplexity() const {
  return count == 0 ? std::numeric_limits<double>::quiet_NaN()
                    : std::exp(total / static_cast<double>(count));
}

double relative_error(std::span<const float> a, std::span<const float> b) {
  DI_CHECK(a.size() == b.size(), "relative_error: ", a.size(), " vs ", b.size(), " values");
  double diff = 0;
  double norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    diff += d * d;
    norm += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  if (norm == 0) return diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / norm);
}

}  // namespace deepinfer::validate
