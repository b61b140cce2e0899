#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "engine/greedy.h"

namespace deepinfer::engine {

void SamplingParams::validate(int64_t vocab_size) const {
  DI_CHECK(std::isfinite(temperature) && temperature >= 0.0, "temperature must be >= 0, got ",
           temperature);
  DI_CHECK(top_k >= -1, "top_k must be -1, 0 (off) or positive, got ", top_k);
  DI_CHECK(top_p > 0.0 && top_p <= 1.0, "top_p must be in (0, 1], got ", top_p);
  DI_CHECK(min_p >= 0.0 && min_p <= 1.0, "min_p must be in [0, 1], got ", min_p);
  DI_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0,
           "repetition_penalty must be > 0, got ", repetition_penalty);
  DI_CHECK(presence_penalty >= -2.0 && presence_penalty <= 2.0,
           "presence_penalty must be in [-2, 2], got ", presence_penalty);
  DI_CHECK(frequency_penalty >= -2.0 && frequency_penalty <= 2.0,
           "frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  DI_CHECK(!logprobs || (*logprobs >= 0 && *logprobs <= 20), "logprobs must be in [0, 20], got ",
           logprobs.value_or(0));
  DI_CHECK(!prompt_logprobs || (*prompt_logprobs >= 0 && *prompt_logprobs <= 20),
           "prompt_logprobs must be in [0, 20], got ", prompt_logprobs.value_or(0));
  DI_CHECK(max_new_tokens >= 0, "max_tokens must be >= 0, got ", max_new_tokens);
  DI_CHECK(n >= 1 && n <= 64, "n must be in [1, 64], got ", n);
  for (int64_t id : stop_token_ids) {
    DI_CHECK(id >= 0 && id < vocab_size, "stop token id ", id, " is outside the vocabulary");
  }
  for (const auto& s : stop) DI_CHECK(!s.empty(), "stop strings must not be empty");
}

double uniform_draw(uint64_t seed, int64_t step) {
  // splitmix64 over (seed, step): a counter-based generator, so draws need no state.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(step) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     const TokenHistory& history) {
  const auto vocab = static_cast<int32_t>(logits.size());
  if (params.repetition_penalty != 1.0) {
    // transformers: every token seen in prompt or output, once, regardless of count.
    const auto penalty = static_cast<float>(params.repetition_penalty);
    std::vector<bool> seen(logits.size(), false);
    for (auto ids : {history.prompt, history.output}) {
      for (int32_t id : ids) {
        if (id < 0 || id >= vocab || seen[static_cast<size_t>(id)]) continue;
        seen[static_cast<size_t>(id)] = true;
        float& logit = logits[static_cast<size_t>(id)];
        logit = logit > 0 ? logit / penalty : logit * penalty;
      }
    }
  }
  if (params.presence_penalty != 0.0 || params.frequency_penalty != 0.0) {
    // OpenAI: mu[j] -= c[j] * frequency + (c[j] > 0) * presence, over generated tokens.
    std::unordered_map<int32_t, int64_t> counts;
    for (int32_t id : history.output) {
      if (id >= 0 && id < vocab) ++counts[id];
    }
    for (const auto& [id, count] : counts) {
      logits[static_cast<size_t>(id)] -= static_cast<float>(
          static_cast<double>(count) * params.frequency_penalty + params.presence_penalty);
    }
  }
}

std::vector<double> sampling_distribution(std::span<float> logits, const SamplingParams& params) {
  const size_t vocab = logits.size();
  const double inv_temperature = 1.0 / params.temperature;
  // Candidates sorted by logit (descending, ties by id) when a filter needs the order.
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)];
    const float lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  size_t kept = vocab;
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab) {
    kept = static_cast<size_t>(params.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(),
                      by_logit);
  } else if (params.top_p < 1.0 || params.min_p > 0.0) {
    std::sort(order.begin(), order.end(), by_logit);
  }
  const double max_logit = logits[static_cast<size_t>(
      *std::max_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept),
                        [&](int32_t a, int32_t b) { return by_logit(b, a); }))];
  std::vector<double> weights(kept);
  double total = 0;
  for (size_t i = 0; i < kept; ++i) {
    weights[i] = std::exp((logits[static_cast<size_t>(order[i])] - max_logit) * inv_temperature);
    total += weights[i];
  }
  if (params.top_p < 1.0) {
    // Keep the smallest prefix whose mass reaches top_p (at least one token).
    double mass = 0;
    size_t cut = 0;
    while (cut < kept) {
      mass += weights[cut] / total;
      ++cut;
      if (mass >= params.top_p) break;
    }
    kept = cut;
    total =
        std::accumulate(weights.begin(), weights.begin() + static_cast<std::ptrdiff_t>(kept), 0.0);
  }
  if (params.min_p > 0.0) {
    // Keep tokens whose probability is at least min_p times the top token's.
    const double threshold = params.min_p * weights[0] / total;
    size_t cut = 1;
    while (cut < kept && weights[cut] / total >= threshold) ++cut;
    kept = cut;
    total =
        std::accumulate(weights.begin(), weights.begin() + static_cast<std::ptrdiff_t>(kept), 0.0);
  }
  std::vector<double> probs(vocab, 0.0);
  for (size_t i = 0; i < kept; ++i) probs[static_cast<size_t>(order[i])] = weights[i] / total;
  return probs;
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int64_t top_n) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max_logit));
  const auto log_z = static_cast<float>(max_logit + std::log(sum));
  TokenLogprobs out;
  const float chosen_logit = logits[static_cast<size_t>(chosen)];
  out.chosen = chosen_logit - log_z;
  out.chosen_rank =
      1 + std::count_if(logits.begin(), logits.end(), [&](float l) { return l > chosen_logit; });
  if (top_n > 0) {
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const auto n =
        static_cast<std::ptrdiff_t>(std::min<size_t>(static_cast<size_t>(top_n), ids.size()));
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
      const float la = logits[static_cast<size_t>(a)];
      const float lb = logits[static_cast<size_t>(b)];
      return la != lb ? la > lb : a < b;
    });
    for (std::ptrdiff_t i = 0; i < n; ++i) {
      out.top.emplace_back(ids[static_cast<size_t>(i)],
                           logits[static_cast<size_t>(ids[static_cast<size_t>(i)])] - log_z);
    }
  }
  return out;
}

SampleResult sample(std::span<float> logits, const SamplingParams& params,
                    const TokenHistory& history, uint64_t seed, int64_t step) {
  DI_CHECK(!logits.empty(), "sample: empty logits");
  // Logprobs come from the model's raw distribution, before penalties and temperature
  // (vLLM's default), so keep a copy only when asked.
  std::vector<float> raw;
  if (params.logprobs) raw.assign(logits.begin(), logits.end());
  apply_penalties(logits, params, history);
  SampleResult result;
  if (params.greedy()) {
    result.token = argmax(logits);
  } else {
    const std::vector<double> probs = sampling_distribution(logits, params);
    const double u = uniform_draw(seed, step);
    double cumulative = 0;
    result.token = -1;
    for (size_t i = 0; i < probs.size(); ++i) {
      if (probs[i] <= 0) continue;
      cumulative += probs[i];
      result.token = static_cast<int32_t>(i);
      if (u < cumulative) break;
    }
  }
  if (params.logprobs) result.logprobs = token_logprobs(raw, result.token, *params.logprobs);
  return result;
}

}  // namespace deepinfer::engine
