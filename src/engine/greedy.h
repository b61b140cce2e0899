#pragma once
// The simplest generation loop: one sequence, greedy, paged KV cache. The full engine
// (scheduler, sampler, many sequences) builds on the same CausalLM::forward.
#include <cstdint>
#include <span>
#include <vector>

#include "cache/kv_cache.h"
#include "model/causal_lm.h"

namespace deepinfer::engine {

struct GreedyOptions {
  int64_t max_new_tokens = 16;
  std::vector<int64_t> eos_token_ids;
  bool ignore_eos = false;
  int64_t prefill_chunk = 0;  // 0: the whole prompt in one step
};

struct GreedyResult {
  std::vector<int32_t> output_ids;
  std::vector<float> prompt_logits;  // next-token logits at the last prompt position
  bool stopped_at_eos = false;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  int64_t decode_steps = 0;  // forward passes after the prompt (one token each)
};

GreedyResult greedy_generate(model::CausalLM& model, cache::KvCache& cache,
                             std::span<const int32_t> prompt, const GreedyOptions& options,
                             ThreadPool& pool);

// Index of the largest value; ties go to the lowest index (as torch.argmax does).
int32_t argmax(std::span<const float> values);

}  // namespace deepinfer::engine
