#pragma once
// The local experts of an ExpertStack packed for the grouped expert job
// (kernels/packed_experts.h): each expert's gate and up side by side in one panel stack with
// SiLU·up in the epilogue, down as the packed GEMM lays it out, and one thread split over the
// work items of every expert a step runs. Built at load (and again after an EPLB migration
// replaced the stack) when the MoE fusion is on (enable_atb_moe) and the packed kernels take
// the stack's dtypes (f32 / bf16 under the active ISA); block types, FP8 and W8A8 stacks keep
// their kernels (ExpertStack::forward).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/packed_experts.h"
#include "model/layers/moe/expert_stack.h"

namespace deepinfer::model {

class PackedExperts {
 public:
  PackedExperts() = default;
  // Every local expert of `stack` packed, or none (defined() false) where the packed kernels do
  // not take its dtypes. The stack must outlive the result (the scalar ISA reads it).
  // huge_pages: the packed panels in memory advised for transparent huge pages.
  static PackedExperts pack(const ExpertStack& stack, bool huge_pages = false);

  bool defined() const { return !experts_.empty(); }
  int64_t count() const { return static_cast<int64_t>(experts_.size()); }
  size_t bytes() const;

  // As run_experts (moe_layer.cpp): `rows` as the all-to-all delivers them, one block per
  // source rank, each expert-major, counts[s * count() + j] rows of local expert j from
  // source s; outputs to `out` in the same layout. One grouped job for all experts.
  void run(const float* rows, std::span<const int64_t> counts, int64_t sources, float* out,
           ThreadPool& pool) const;

 private:
  std::vector<kernels::PackedExpert> experts_;
  int64_t hidden_ = 0;
};

}  // namespace deepinfer::model
