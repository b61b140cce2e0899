#pragma once
// Turns one row of next-token logits into a token. Stateless: the random draw for step t of a
// seeded request depends only on (seed, t), so a request's output does not depend on what
// else shares its batch.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace deepinfer::engine {

struct TokenLogprobs {
  float chosen = 0;                            // log p(chosen) under the raw distribution
  int64_t chosen_rank = 0;                     // 1 + tokens strictly more likely (vLLM's rank)
  std::vector<std::pair<int32_t, float>> top;  // top-N (id, logprob), most likely first
};

struct SampleResult {
  int32_t token = 0;
  TokenLogprobs logprobs;  // filled when params.logprobs is set
};

// History the penalties look at.
struct TokenHistory {
  std::span<const int32_t> prompt;
  std::span<const int32_t> output;
};

// `logits` is modified in place (penalties, temperature, filtering). `step` is the index of
// the token being generated; `seed` the request's seed (a random one when unseeded).
SampleResult sample(std::span<float> logits, const SamplingParams& params,
                    const TokenHistory& history, uint64_t seed, int64_t step);

// log_softmax of raw `logits` at `chosen`, its rank and the top-N (ties by lower id): the
// logprobs of a sampled token, and of a prompt token under its preceding context.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int64_t top_n);

// Applies the penalties of `params` to `logits` in place (exposed for tests).
void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     const TokenHistory& history);

// The probability distribution sample() draws from, after penalties, temperature and the
// top_k / top_p / min_p filters (exposed for the statistical tests).
std::vector<double> sampling_distribution(std::span<float> logits, const SamplingParams& params);

// A uniform double in [0, 1) determined by (seed, step) alone.
double uniform_draw(uint64_t seed, int64_t step);

}  // namespace deepinfer::engine
