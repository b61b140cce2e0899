#include "model/layers/moe/packed_experts.h"

#include <algorithm>

#include "core/error.h"
#include "core/scratch.h"
#include "model/layers/moe/dispatch_plan.h"

namespace deepinfer::model {

PackedExperts PackedExperts::pack(const ExpertStack& stack, bool huge_pages) {
  PackedExperts packed;
  const int parts = stack.parts();
  // gate_up fused + down, or gate, up, down: the layouts of f32 / bf16 stacks (FP8 and W8A8
  // stacks carry scales as further parts and dtypes the packed kernels do not take).
  if (stack.count() == 0 || (parts != 2 && parts != 3)) return packed;
  if (!kernels::packs_weights(stack.dtype()) || !kernels::packs_weights(stack.down_dtype()))
    return packed;
  const int64_t h = stack.hidden(), i = stack.intermediate();
  packed.hidden_ = h;
  packed.experts_.reserve(static_cast<size_t>(stack.count()));
  for (int64_t j = 0; j < stack.count(); ++j) {
    const std::byte* gate = stack.expert_bytes(j, 0).data();
    const std::byte* up = parts == 2 ? gate + static_cast<size_t>(i * h) * dtype_size(stack.dtype())
                                     : stack.expert_bytes(j, 1).data();
    const std::byte* down = stack.expert_bytes(j, parts - 1).data();
    kernels::PackedExpert e =
        kernels::pack_expert(gate, up, stack.dtype(), down, stack.down_dtype(), h, i, huge_pages);
    if (!e.defined()) return PackedExperts();
    packed.experts_.push_back(std::move(e));
  }
  return packed;
}

size_t PackedExperts::bytes() const {
  size_t total = 0;
  for (const kernels::PackedExpert& e : experts_) total += e.bytes();
  return total;
}

void PackedExperts::run(const float* rows, std::span<const int64_t> counts, int64_t sources,
                        float* out, ThreadPool& pool) const {
  const int64_t per_rank = count();
  const int64_t h = hidden_;
  DI_CHECK(static_cast<int64_t>(counts.size()) == sources * per_rank,
           "packed experts: ", counts.size(), " row counts for ", sources, " sources of ", per_rank,
           " experts");
  const ReceivedRows received(counts, sources, per_rank);
  // An expert whose rows came in one block (always so at world size 1) runs in place; rows
  // from several sources are gathered first and scattered back after.
  struct Gathered {
    int64_t expert, at;
  };
  std::vector<kernels::ExpertRows> groups;
  std::vector<Gathered> gathered;
  int64_t gathered_rows = 0;
  for (int64_t j = 0; j < per_rank; ++j) {
    const int64_t total = received.total(j);
    if (total == 0) continue;
    const kernels::PackedExpert* expert = &experts_[static_cast<size_t>(j)];
    if (const int64_t row = received.contiguous(j); row >= 0) {
      groups.push_back({expert, rows + row * h, total, out + row * h});
    } else {
      gathered.push_back({j, gathered_rows});
      groups.push_back({expert, nullptr, total, nullptr});
      gathered_rows += total;
    }
  }
  ScratchFloats in(static_cast<size_t>(gathered_rows * h)), result(in.size());
  size_t next_gathered = 0;
  for (kernels::ExpertRows& g : groups) {
    if (g.x != nullptr) continue;
    const Gathered& at = gathered[next_gathered++];
    received.gather(at.expert, rows, h, in.data() + at.at * h);
    g.x = in.data() + at.at * h;
    g.y = result.data() + at.at * h;
  }
  kernels::expert_mlps(groups, pool);
  for (const Gathered& at : gathered)
    received.scatter(at.expert, result.data() + at.at * h, h, out);
}

}  // namespace deepinfer::model
