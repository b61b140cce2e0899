#pragma once
// One generated continuation: the scheduler's unit. A request with n > 1 owns n sequences
// (siblings) that share the prompt's KV blocks.
#include <cstdint>
#include <span>
#include <vector>

#include "cache/block_manager.h"

namespace deepinfer::engine {

using RequestId = uint64_t;

enum class FinishReason { none, stop, length, abort };
// "stop", "length", "abort" ("" for none): the OpenAI / vLLM spellings.
const char* finish_reason_name(FinishReason reason);

enum class SequenceStatus { waiting, running, finished };

struct Sequence {
  RequestId request = 0;
  int64_t index = 0;     // sibling index within the request (0..n-1)
  int64_t priority = 0;  // lower runs first (priority policy)
  uint64_t arrival = 0;  // request order: earlier runs first, later is preempted first
  uint64_t seed = 0;

  std::vector<int32_t> tokens;  // the prompt followed by the generated tokens
  int64_t prompt_len = 0;
  // Tokens whose K/V is in the cache. After a preemption it drops to 0 and the sequence
  // re-prefills prompt + generated-so-far (recompute), resuming with identical output.
  int64_t num_computed = 0;
  std::vector<int32_t> block_table;
  cache::PrefixChain chain;
  // Attention data parallelism: the attention group holding this sequence's KV cache (its
  // blocks come from that group's block manager). Chosen by the scheduler when the sequence
  // is added (-1 until then) and kept until it ends, across preemptions.
  int64_t attention_group = -1;

  SequenceStatus status = SequenceStatus::waiting;
  FinishReason finish_reason = FinishReason::none;
  int64_t num_preemptions = 0;
  int64_t num_cached_tokens = 0;  // prompt tokens found in the prefix cache on first admission
  // False while the engine needs every prompt position computed (prompt logprobs): admission
  // then takes no prefix-cache hits (it still registers the blocks it fills).
  bool reads_prefix_cache = true;
  // Most tokens one step may compute for it (0: no limit besides the step's budget). Prompt
  // logprobs run the lm_head on every row of a chunk: this bounds their logits buffer.
  int64_t max_chunk_tokens = 0;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output() const { return num_tokens() - prompt_len; }
  std::span<const int32_t> prompt() const {
    return std::span<const int32_t>(tokens).first(static_cast<size_t>(prompt_len));
  }
  std::span<const int32_t> output() const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(prompt_len));
  }
  bool finished() const { return status == SequenceStatus::finished; }
};

// Seed of sibling `index` of a request seeded with `seed`: the request's own seed for
// index 0, so n = 1 requests sample exactly as their seed says.
uint64_t sibling_seed(uint64_t seed, int64_t index);

}  // namespace deepinfer::engine
