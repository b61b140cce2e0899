#include "model/layers/moe/dispatch_plan.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace deepinfer::model {

int64_t expert_capacity(double capacity_factor, int64_t tokens, int64_t top_k,
                        int64_t num_experts) {
  DI_CHECK(capacity_factor > 0, "capacity_factor must be positive, got ", capacity_factor);
  const double exact =
      capacity_factor * static_cast<double>(tokens * top_k) / static_cast<double>(num_experts);
  return static_cast<int64_t>(std::ceil(exact));
}

DispatchPlan plan_dispatch(const int32_t* experts, int64_t tokens, int64_t top_k,
                           int64_t num_experts, std::optional<int64_t> capacity) {
  std::vector<std::vector<int64_t>> identity(static_cast<size_t>(num_experts));
  for (int64_t e = 0; e < num_experts; ++e) identity[static_cast<size_t>(e)] = {e};
  const std::vector<int64_t> ahead(static_cast<size_t>(top_k * num_experts), 0);
  int64_t dropped = 0;
  const std::vector<int32_t> targets =
      assign_targets(experts, tokens, top_k, num_experts, ahead, capacity, identity, dropped);
  DispatchPlan plan = group_by_target(targets.data(), tokens, top_k, num_experts);
  DI_CHECK(plan.dropped == dropped, "MoE dispatch: drop count mismatch");
  return plan;
}

std::vector<int32_t> assign_targets(const int32_t* experts, int64_t tokens, int64_t top_k,
                                    int64_t num_experts, std::span<const int64_t> ahead,
                                    std::optional<int64_t> capacity,
                                    const std::vector<std::vector<int64_t>>& replicas,
                                    int64_t& dropped) {
  DI_CHECK(static_cast<int64_t>(ahead.size()) == top_k * num_experts &&
               static_cast<int64_t>(replicas.size()) == num_experts,
           "MoE dispatch: admission counts for ", ahead.size(), " (slot, expert) pairs and ",
           replicas.size(), " replica lists, expected ", top_k * num_experts, " and ", num_experts);
  std::vector<int32_t> targets(static_cast<size_t>(tokens * top_k), -1);
  std::vector<int64_t> seen(static_cast<size_t>(num_experts), 0);  // this share's, so far
  dropped = 0;
  for (int64_t s = 0; s < top_k; ++s) {
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t a = t * top_k + s;
      const int32_t e = experts[a];
      DI_CHECK(e >= 0 && e < num_experts, "MoE dispatch: expert id ", e, " outside [0, ",
               num_experts, ")");
      const int64_t n = ahead[static_cast<size_t>(s * num_experts + e)] + seen[e]++;
      if (capacity && n >= *capacity) {
        ++dropped;
        continue;
      }
      const std::vector<int64_t>& slots = replicas[static_cast<size_t>(e)];
      targets[static_cast<size_t>(a)] =
          static_cast<int32_t>(slots[static_cast<size_t>(n % static_cast<int64_t>(slots.size()))]);
    }
  }
  return targets;
}

DispatchPlan group_by_target(const int32_t* targets, int64_t tokens, int64_t top_k,
                             int64_t num_targets) {
  const int64_t assignments = tokens * top_k;
  DispatchPlan plan;
  plan.position.assign(static_cast<size_t>(assignments), -1);
  std::vector<int64_t> counts(static_cast<size_t>(num_targets), 0);
  for (int64_t a = 0; a < assignments; ++a) {
    const int32_t d = targets[a];
    if (d < 0) {
      ++plan.dropped;
      continue;
    }
    DI_CHECK(d < num_targets, "MoE dispatch: destination ", d, " outside [0, ", num_targets, ")");
    ++counts[static_cast<size_t>(d)];
  }
  plan.expert_offsets.assign(static_cast<size_t>(num_targets + 1), 0);
  for (int64_t e = 0; e < num_targets; ++e) {
    plan.expert_offsets[static_cast<size_t>(e + 1)] =
        plan.expert_offsets[static_cast<size_t>(e)] + counts[static_cast<size_t>(e)];
  }
  plan.order.resize(static_cast<size_t>(assignments - plan.dropped));
  std::vector<int64_t> next(plan.expert_offsets.begin(), plan.expert_offsets.end() - 1);
  for (int64_t a = 0; a < assignments; ++a) {
    const int32_t d = targets[a];
    if (d < 0) continue;
    const int64_t slot = next[static_cast<size_t>(d)]++;
    plan.order[static_cast<size_t>(slot)] = static_cast<int32_t>(a);
    plan.position[static_cast<size_t>(a)] = static_cast<int32_t>(slot);
  }
  return plan;
}

ReceivedRows::ReceivedRows(std::span<const int64_t> counts, int64_t sources, int64_t per_rank)
    : counts_(counts), sources_(sources), per_rank_(per_rank), offset_(counts.size()) {
  int64_t next = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    offset_[b] = next;
    next += counts[b];
  }
}

int64_t ReceivedRows::total(int64_t expert) const {
  int64_t total = 0;
  for (int64_t s = 0; s < sources_; ++s)
    total += counts_[static_cast<size_t>(s * per_rank_ + expert)];
  return total;
}

int64_t ReceivedRows::contiguous(int64_t expert) const {
  int64_t first = -1;
  for (int64_t s = 0; s < sources_; ++s) {
    const auto b = static_cast<size_t>(s * per_rank_ + expert);
    if (counts_[b] == 0) continue;
    if (first >= 0) return -1;
    first = offset_[b];
  }
  return first;
}

void ReceivedRows::gather(int64_t expert, const float* rows, int64_t h, float* group) const {
  for (int64_t s = 0; s < sources_; ++s) {
    const auto b = static_cast<size_t>(s * per_rank_ + expert);
    group = std::copy_n(rows + offset_[b] * h, counts_[b] * h, group);
  }
}

void ReceivedRows::scatter(int64_t expert, const float* group, int64_t h, float* out) const {
  for (int64_t s = 0; s < sources_; ++s) {
    const auto b = static_cast<size_t>(s * per_rank_ + expert);
    std::copy_n(group, counts_[b] * h, out + offset_[b] * h);
    group += counts_[b] * h;
  }
}

}  // namespace deepinfer::model
