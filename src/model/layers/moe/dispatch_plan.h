#pragma once
// Groups a batch's (token, slot) expert assignments by expert: the permutation that turns
// the router's token-major choices into one contiguous row block per expert (and so per
// destination rank, since experts are laid out rank by rank), with an optional capacity
// limit per expert.
#include <cstdint>
#include <optional>
#include <vector>

namespace deepinfer::model {

struct DispatchPlan {
  // Kept assignments (index token * top_k + slot), grouped by expert id; within an expert in
  // ascending assignment index. Deterministic: a counting sort, no hashing or atomics.
  std::vector<int32_t> order;
  std::vector<int64_t> expert_offsets;  // [num_experts + 1]: expert e owns order[off[e], off[e+1])
  std::vector<int32_t> position;        // [tokens * top_k]: index into `order`, or -1 when dropped
  int64_t dropped = 0;
};

// ceil(capacity_factor * tokens * top_k / num_experts): at most this many assignments per
// expert are kept (the ep_config "capacity_factor" rule).
int64_t expert_capacity(double capacity_factor, int64_t tokens, int64_t top_k, int64_t num_experts);

// experts: [tokens, top_k] expert ids. With a capacity, assignments are admitted in
// slot-major order (every token's first choice before any second choice, tokens in batch
// order within a slot, as GShard / Switch do), and an expert's assignments beyond its capacity
// are dropped: that expert contributes nothing to that token.
DispatchPlan plan_dispatch(const int32_t* experts, int64_t tokens, int64_t top_k,
                           int64_t num_experts, std::optional<int64_t> capacity);

}  // namespace deepinfer::model
