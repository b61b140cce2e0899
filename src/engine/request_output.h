#pragma once
// What the engine reports: per step, the new tokens / text of each request that advanced;
// at the end, the whole result (generate()).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sequence.h"

namespace deepinfer::engine {

// The progress of one sequence (choice `index` of its request) in one step.
struct CompletionDelta {
  int64_t index = 0;
  std::vector<int32_t> token_ids;       // tokens generated this step
  std::string text;                     // newly safe text (empty without a tokenizer)
  std::vector<TokenLogprobs> logprobs;  // one per token when SamplingParams::logprobs is set
  FinishReason finish_reason = FinishReason::none;
  std::string stop;  // the stop string that ended it, if any
};

struct RequestOutput {
  RequestId id = 0;
  std::vector<CompletionDelta> completions;  // only the sequences that changed
  bool finished = false;                     // every sequence of the request has finished
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_tokens = 0;  // prompt tokens served from the prefix cache
  // SamplingParams::prompt_logprobs: reported once, with the output of the step that finished
  // the prefill; entry i is prompt token i + 1 (the first token has none).
  std::vector<TokenLogprobs> prompt_logprobs;
  std::string error;  // set (with finished) when the engine failed while running it
};

// A whole finished sequence (generate()).
struct Completion {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish_reason = FinishReason::none;
  std::string stop;
};

struct RequestResult {
  RequestId id = 0;
  std::vector<int32_t> prompt_ids;
  std::vector<Completion> completions;  // n of them, by index
  int64_t num_cached_tokens = 0;
  std::vector<TokenLogprobs> prompt_logprobs;  // as in RequestOutput
};

// Appends one step's delta to an accumulated completion.
void accumulate(Completion& into, const CompletionDelta& delta);

}  // namespace deepinfer::engine
