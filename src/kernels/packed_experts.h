#pragma once
// The routed experts of an MoE step as one grouped job on packed panels (gemm_packed.h):
// y = down(silu(gate · x) * (up · x)) for every (expert, token group) of the step, the thread
// split over (group, panel) work items of all groups at once, so decode with one or two tokens
// per expert keeps every thread busy without a fork-join per expert.
//
// Layout: gate and up [I, H] of one expert are packed into ONE panel stack of 2·ceil(I / 16)·16
// rows: panel P holds gate rows [16P, 16P + 16) in its first 16 columns and the up rows of the
// same indices in the last 16 (rows past I zero). One pass of the packed GEMM over a panel
// thus yields gate and up of 16 activations, and silu(gate) * up is taken from the L1-resident
// tile into the [rows, I] activations (no [rows, 2I] round trip through memory). down [H, I]
// is packed as pack_weights() packs it.
//
// Numerics: every gate, up and down output is the packed GEMM's one chain over k in order
// (kernels.h, linear on PackedWeights), and silu_mul is elementwise, so a token's result is
// bitwise that of GatedMlp on packed Linear weights, independent of the batch, of the groups
// around it and of the thread count.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/packed_weights.h"

namespace deepinfer::kernels {

class PackedExpert {
 public:
  PackedExpert() = default;

  // False when pack_expert() had no packed kernel for the dtypes (run the stored matrices).
  bool defined() const { return gate_up_ != nullptr; }
  int64_t hidden() const { return hidden_; }
  int64_t intermediate() const { return intermediate_; }
  DType dtype() const { return dtype_; }  // gate and up
  const PackedWeights& down() const { return down_; }
  // The matrices as stored (the scalar ISA runs them; they must outlive this object).
  const void* gate() const { return gate_; }
  const void* up() const { return up_; }
  const void* gate_up_panels() const { return gate_up_.get(); }
  size_t bytes() const { return gate_up_bytes_ + down_.bytes(); }

 private:
  friend PackedExpert pack_expert(const void* gate, const void* up, DType dtype, const void* down,
                                  DType down_dtype, int64_t hidden, int64_t intermediate,
                                  bool huge_pages);
  std::shared_ptr<const void> gate_up_;
  size_t gate_up_bytes_ = 0;
  PackedWeights down_;
  const void* gate_ = nullptr;
  const void* up_ = nullptr;
  DType dtype_ = DType::f32;
  int64_t hidden_ = 0;
  int64_t intermediate_ = 0;
};

// Packs one expert (gate, up [I, H] of `dtype`; down [H, I] of `down_dtype`) where pack_weights()
// packs both dtypes under the active ISA; otherwise returns an undefined PackedExpert.
// huge_pages: the panels in memory advised for transparent huge pages (as pack_weights()).
PackedExpert pack_expert(const void* gate, const void* up, DType dtype, const void* down,
                         DType down_dtype, int64_t hidden, int64_t intermediate,
                         bool huge_pages = false);

// One token group of one expert: x [rows, hidden] -> y [rows, hidden] (y must not overlap x).
struct ExpertRows {
  const PackedExpert* expert = nullptr;
  const float* x = nullptr;
  int64_t rows = 0;
  float* y = nullptr;
};

// Every group's SwiGLU MLP as one job (two passes: gate_up with the SiLU epilogue, then down).
// Under the scalar ISA (forced after packing) each group runs the stored matrices through
// linear() and silu_mul.
void expert_mlps(std::span<const ExpertRows> groups, ThreadPool& pool);

}  // namespace deepinfer::kernels
