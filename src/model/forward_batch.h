#pragma once
// What one model step computes: the new tokens of one or more sequences, concatenated.
// Produced by the scheduler (or a simple generation loop); consumed by CausalLM::forward.
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::model {

struct SequenceSlice {
  int64_t begin = 0;  // first row of this sequence in the batch's token arrays
  int64_t count = 0;  // its new tokens this step (a prefill chunk or one decode token)
  std::span<const int32_t> block_table;  // covers every position up to the last new one
  // Attention data parallelism: the attention group whose ranks hold this sequence's KV
  // cache and run its attention (0 without it).
  int64_t attention_group = 0;
};

struct ForwardBatch {
  std::span<const int32_t> tokens;     // [num_tokens]
  std::span<const int32_t> positions;  // [num_tokens], position of each token in its sequence
  std::vector<SequenceSlice> sequences;
  std::vector<int64_t> logit_rows;  // token rows whose next-token logits are wanted
};

}  // namespace deepinfer::model
