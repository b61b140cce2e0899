#pragma once
// Per-request sampling settings, with the semantics users know: temperature / top_k / top_p /
// min_p as in transformers and vLLM, repetition_penalty as in transformers (over prompt and
// output), presence / frequency penalties as in the OpenAI API (over output tokens).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::engine {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0 or -1: off
  double top_p = 1.0;        // 1: off
  double min_p = 0.0;        // 0: off
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::optional<uint64_t> seed;     // same seed => same output, whatever else is batched
  std::optional<int64_t> logprobs;  // top-N logprobs besides the chosen token's (0..20)
  // vLLM's prompt_logprobs: for every prompt token after the first, its logprob given the
  // tokens before it plus the top-N (0..20), computed in the prefill's forward pass. Such a
  // request takes no prefix-cache hits (the positions must be computed), its prefill chunks are
  // capped so their logits fit in 256 MiB (~440 rows of a 152k vocabulary), and it may set
  // max_new_tokens = 0 (scoring only: it finishes after the prefill, reason length).
  std::optional<int64_t> prompt_logprobs;
  int64_t max_new_tokens = 16;
  std::vector<int64_t> stop_token_ids;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int64_t n = 1;

  bool greedy() const { return temperature == 0.0; }
  // Throws Error naming the first invalid field.
  void validate(int64_t vocab_size) const;
};

}  // namespace deepinfer::engine
