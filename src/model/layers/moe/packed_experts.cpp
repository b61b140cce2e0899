#include "model/layers/moe/packed_experts.h"

#include <algorithm>

#include "core/error.h"

namespace deepinfer::model {

PackedExperts PackedExperts::pack(const ExpertStack& stack) {
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
        kernels::pack_expert(gate, up, stack.dtype(), down, stack.down_dtype(), h, i);
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
  std::vector<int64_t> offset(counts.size());  // first row of block (s, j)
  int64_t next = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    offset[b] = next;
    next += counts[b];
  }
  // An expert whose rows came in one block (always so at world size 1) runs in place; rows
  // from several sources are gathered first and scattered back after.
  struct Gathered {
    int64_t expert, at;
  };
  std::vector<kernels::ExpertRows> groups;
  std::vector<Gathered> gathered;
  int64_t gathered_rows = 0;
  for (int64_t j = 0; j < per_rank; ++j) {
    int64_t total = 0, blocks = 0, only = 0;
    for (int64_t s = 0; s < sources; ++s) {
      const auto b = static_cast<size_t>(s * per_rank + j);
      total += counts[b];
      if (counts[b] > 0) {
        ++blocks;
        only = static_cast<int64_t>(b);
      }
    }
    if (total == 0) continue;
    if (blocks == 1) {
      const int64_t row = offset[static_cast<size_t>(only)];
      groups.push_back({&experts_[static_cast<size_t>(j)], rows + row * h, total, out + row * h});
    } else {
      gathered.push_back({j, gathered_rows});
      groups.push_back({&experts_[static_cast<size_t>(j)], nullptr, total, nullptr});
      gathered_rows += total;
    }
  }
  std::vector<float> in(static_cast<size_t>(gathered_rows * h)), result(in.size());
  size_t next_gathered = 0;
  for (kernels::ExpertRows& g : groups) {
    if (g.x != nullptr) continue;
    const Gathered& at = gathered[next_gathered++];
    int64_t row = at.at;
    for (int64_t s = 0; s < sources; ++s) {
      const auto b = static_cast<size_t>(s * per_rank + at.expert);
      std::copy_n(rows + offset[b] * h, counts[b] * h, in.begin() + row * h);
      row += counts[b];
    }
    g.x = in.data() + at.at * h;
    g.y = result.data() + at.at * h;
  }
  kernels::expert_mlps(groups, pool);
  for (const Gathered& at : gathered) {
    int64_t row = at.at;
    for (int64_t s = 0; s < sources; ++s) {
      const auto b = static_cast<size_t>(s * per_rank + at.expert);
      std::copy_n(result.begin() + row * h, counts[b] * h, out + offset[b] * h);
      row += counts[b];
    }
  }
}

}  // namespace deepinfer::model
