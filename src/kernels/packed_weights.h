#pragma once
// A weight matrix re-laid out once, at load, for the packed-panel GEMM (kernels.h:
// linear(x, m, PackedWeights, ...); layout in gemm_packed.h). Cheap to copy: copies share
// the panels.
#include <cstdint>
#include <memory>

#include "core/dtype.h"

namespace deepinfer::kernels {

class PackedWeights {
 public:
  PackedWeights() = default;

  // False when pack_weights() had no packed kernel for the weights (use them as stored).
  bool defined() const { return panels_ != nullptr; }
  // The [n, k] matrix these panels were packed from, as stored (the fallback's input, and
  // how a holder tells that its weight tensor was replaced since).
  const void* source() const { return source_; }
  DType dtype() const { return dtype_; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  const void* panels() const { return panels_.get(); }
  size_t bytes() const { return bytes_; }
  // Rows per unit of the repacked layout packed (repacked_row_unit() then); 0: not repacked.
  int64_t repacked_rows() const { return repacked_rows_; }

 private:
  friend PackedWeights pack_weights(const void* w, DType dtype, int64_t n, int64_t k,
                                    bool huge_pages);
  std::shared_ptr<const void> panels_;
  const void* source_ = nullptr;
  DType dtype_ = DType::f32;
  int64_t n_ = 0;
  int64_t k_ = 0;
  size_t bytes_ = 0;
  int64_t repacked_rows_ = 0;
};

// Packs w[n, k] (row-major, f32 or bf16) where the packed GEMM pays under the active ISA:
// f32 and bf16 on AVX2 and AVX-512 (one panel layout for both ISAs), and repacks q4_0, q5_0, q8_0
// and q4_k under AVX2 and AVX-512 (repacks_blocks; each ISA its own layout); otherwise returns an
// undefined PackedWeights (use w as stored).
// w must outlive the result (it stays the input of the fallback path). `huge_pages`: the panels
// sit on transparent huge pages, small ones carved from shared regions
// (core/huge_page_arena.h; MemoryOptions::huge_pages, core/memory.h).
PackedWeights pack_weights(const void* w, DType dtype, int64_t n, int64_t k,
                           bool huge_pages = false);
// Whether pack_weights() packs a matrix of `dtype` now (weight packing on, active ISA, dtype).
bool packs_weights(DType dtype);
// Whether pack_weights() repacks a block-type matrix now: q4_0, q5_0, q8_0, q4_k under AVX2 and
// AVX-512, their blocks in the order the kernels read them (kernels/whole_block_layout.h; same
// bytes as stored, and a matrix of whole units, repacked_row_unit(), keeps every unit at its
// stored offset).
// Separate from packs_weights(): the MoE expert panels (packed_experts.h) take f32 / bf16 only.
bool repacks_blocks(DType dtype);
// Whether w holds repacked blocks (repacks_blocks() at packing) in the layout the active ISA
// reads: under any other ISA since, linear() reads w.source().
bool reads_repacked_blocks(const PackedWeights& w);
// Rows per unit of the repacked layout under the active ISA (8 AVX2, 16 AVX-512; 0: none). A
// matrix of whole units keeps every unit at its stored byte offset, so a stack of such matrices
// (MoE experts) repacks as one and each matrix is read at its stored offset.
int64_t repacked_row_unit();

// Whether pack_weights() packs at all: a process-wide setting read at each call, for A/B runs
// and for comparing a layer with packed weights against one without. Until set, it is on
// unless DEEPINFER_PACK_WEIGHTS=0 (read once).
void set_weight_packing(bool enabled);
bool weight_packing();

}  // namespace deepinfer::kernels
