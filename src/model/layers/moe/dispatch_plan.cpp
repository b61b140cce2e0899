#include "model/layers/moe/dispatch_plan.h"

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
  const int64_t assignments = tokens * top_k;
  DispatchPlan plan;
  plan.position.assign(static_cast<size_t>(assignments), -1);
  std::vector<int64_t> counts(static_cast<size_t>(num_experts), 0);
  std::vector<char> kept(static_cast<size_t>(assignments), 1);
  for (int64_t s = 0; s < top_k; ++s) {
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t a = t * top_k + s;
      const int32_t e = experts[a];
      DI_CHECK(e >= 0 && e < num_experts, "MoE dispatch: expert id ", e, " outside [0, ",
               num_experts, ")");
      if (capacity && counts[static_cast<size_t>(e)] >= *capacity) {
        kept[static_cast<size_t>(a)] = 0;
        ++plan.dropped;
        continue;
      }
      ++counts[static_cast<size_t>(e)];
    }
  }
  plan.expert_offsets.assign(static_cast<size_t>(num_experts + 1), 0);
  for (int64_t e = 0; e < num_experts; ++e) {
    plan.expert_offsets[static_cast<size_t>(e + 1)] =
        plan.expert_offsets[static_cast<size_t>(e)] + counts[static_cast<size_t>(e)];
  }
  plan.order.resize(static_cast<size_t>(assignments - plan.dropped));
  std::vector<int64_t> next(plan.expert_offsets.begin(), plan.expert_offsets.end() - 1);
  for (int64_t a = 0; a < assignments; ++a) {
    if (!kept[static_cast<size_t>(a)]) continue;
    const int64_t slot = next[static_cast<size_t>(experts[a])]++;
    plan.order[static_cast<size_t>(slot)] = static_cast<int32_t>(a);
    plan.position[static_cast<size_t>(a)] = static_cast<int32_t>(slot);
  }
  return plan;
}

}  // namespace deepinfer::model
