#pragma once
// Groups a batch's (token, slot) expert assignments by destination: the permutation that
// turns the router's token-major choices into one contiguous row block per expert (and so
// per destination rank, since experts are laid out rank by rank), with an optional capacity
// limit per expert, and, under EPLB, the choice of replica for replicated experts.
#include <cstdint>
#include <optional>
#include <span>
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

// targets: [tokens, top_k] destination ids in [0, num_targets) (experts, or EPLB's physical
// expert slots), -1 for a dropped assignment. Groups the others by destination.
DispatchPlan group_by_target(const int32_t* targets, int64_t tokens, int64_t top_k,
                             int64_t num_targets);

// Where each assignment goes when the batch is one share of a larger one (the expert group's
// tokens: the ranks' shares concatenated in rank order). The admission order is global
// slot-major: slot s of every token of every rank comes before slot s + 1; within a slot,
// ranks in order, tokens in order. `ahead` [top_k * num_experts] says, for each (slot,
// expert), how many assignments of the other ranks come before this share's in that order;
// the n-th assignment (0-based, in that order) of expert e is dropped when n >= capacity, and
// otherwise goes to replicas[e][n % replicas[e].size()]: the replicas take turns, so each
// gets an equal share whatever the split over ranks. With one share, `ahead` is all zeros.
// Returns the targets for group_by_target; `dropped` counts this share's drops.
std::vector<int32_t> assign_targets(const int32_t* experts, int64_t tokens, int64_t top_k,
                                    int64_t num_experts, std::span<const int64_t> ahead,
                                    std::optional<int64_t> capacity,
                                    const std::vector<std::vector<int64_t>>& replicas,
                                    int64_t& dropped);

// The rows an expert rank received from the all-to-all: one block per source rank, each block
// expert-major; counts[s * per_rank + j] rows of local expert j came from source s. Says where
// each expert's rows are and moves them between that layout and one contiguous group.
class ReceivedRows {
 public:
  ReceivedRows(std::span<const int64_t> counts, int64_t sources, int64_t per_rank);

  int64_t total(int64_t expert) const;
  // The first row of the expert's rows when they came in one block (always so at world size
  // 1: they can be run in place), else -1.
  int64_t contiguous(int64_t expert) const;
  // Copies the expert's rows (h floats each) from `rows` into `group`, in source order.
  void gather(int64_t expert, const float* rows, int64_t h, float* group) const;
  // The inverse: the expert's `group` rows back to their places in `out`.
  void scatter(int64_t expert, const float* group, int64_t h, float* out) const;

 private:
  std::span<const int64_t> counts_;
  int64_t sources_, per_rank_;
  std::vector<int64_t> offset_;  // first row of block (s, j)
};

}  // namespace deepinfer::model
