#pragma once
// The routed experts of one MoE layer that live on this rank, stored stacked so each expert
// runs its whole token group as one GEMM per projection:
//   gate_up [local_experts, 2 * intermediate, hidden]  (gate rows, then up rows)
//   down    [local_experts, hidden, intermediate]
// or, as GGUF files store them (llama.cpp's ffn_gate_exps / ffn_up_exps, mapped zero-copy),
// gate and up as two stacks [local_experts, intermediate, hidden]. Each projection is in any
// weight type kernels::linear runs: f32 / bf16 / f16 or a ggml block type (q8_0, q4_0, q4_1,
// q5_0, q5_1, q4_k, q5_k, q6_k); gate and up share one, down may have its own (a row of
// `intermediate` elements may not be whole 256-element k-quant blocks, so llama.cpp's mixes
// store down in another type). Hugging Face checkpoints store one tensor per expert
// (<prefix>.{e}.{gate,up,down}_proj.weight, what transformers 5 still writes, or another
// ExpertNames: Mixtral's w1 / w3 / w2); those are
// copied into the stacks once at load. W8A8 (i8) stacks carry one f32 scale per weight row
// (RowScales) and run kernels::linear_w8a8 with per-token int8 activations. Checkpoints already
// holding transformers 5's fused 3-D tensors (<prefix>.gate_up_proj [E, 2I, H], <prefix>.down_proj
// [E, H, I]) load zero-copy; under --quantization fp8 each expert's matrices are cut out of them
// and quantized as the same experts stored one matrix each (bitwise the same FP8 stacks).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/packed_weights.h"
#include "model/layers/tensor_parallel.h"
#include "model/weights.h"

namespace deepinfer::model {

// How a checkpoint names each expert's projections (<prefix>.<e>.<name>.weight): transformers'
// gate_proj / up_proj / down_proj, or Mixtral's w1 / w3 / w2 (MiniMax-M2 keeps them).
struct ExpertNames {
  std::string gate = "gate_proj";
  std::string up = "up_proj";
  std::string down = "down_proj";

  static ExpertNames mixtral() { return {"w1", "w3", "w2"}; }
  // The stored name of projection `proj` ("gate_proj", "up_proj" or "down_proj").
  const std::string& stored(std::string_view proj) const {
    return proj == "gate_proj" ? gate : proj == "up_proj" ? up : down;
  }
};

class ExpertStack {
 public:
  // Loads experts [first, first + count) of the layer's num_experts under `prefix`
  // ("model.layers.N.mlp.experts"); under moe tensor parallelism (`split`) only this rank's
  // part of each expert's intermediate (gate / up rows, down columns).
  static ExpertStack load(WeightLoader& weights, const std::string& prefix, int64_t num_experts,
                          int64_t first, int64_t count, int64_t hidden, int64_t intermediate,
                          const TensorSplit& split = {}, const ExpertNames& names = {});
  // Loads the experts `ids` (global ids, in local slot order; an id may repeat: EPLB
  // replicas). One ascending run of ids slices fused checkpoint tensors without a copy.
  static ExpertStack load(WeightLoader& weights, const std::string& prefix, int64_t num_experts,
                          std::span<const int64_t> ids, int64_t hidden, int64_t intermediate,
                          const TensorSplit& split = {}, const ExpertNames& names = {});
  // From stacks in hand (tests, converters): gate_up [count, 2I, H], down [count, H, I].
  ExpertStack(Tensor gate_up, Tensor down);
  // Gate and up apart: gate and up [count, I, H] of one dtype, down [count, H, I].
  ExpertStack(Tensor gate, Tensor up, Tensor down);
  // FP8 E4M3 stacks kept as an FP8 checkpoint stores them, gate / up / down apart, each with
  // its f32 block scales stacked [count, ceil(rows / br), ceil(cols / bc)]
  // (kernels::linear_fp8).
  struct Fp8Scales {
    Tensor gate, up, down;
    int64_t block_rows = 0, block_cols = 0;
  };
  ExpertStack(Tensor gate, Tensor up, Tensor down, Fp8Scales scales);
  // W8A8 stacks (i8, kernels::linear_w8a8): the f32 scale of every weight row stacked beside
  // its matrix as [count, rows, 1], gate_up's (or gate's and up's) and down's; the ones of the
  // layout not in use stay undefined.
  struct RowScales {
    Tensor gate_up, gate, up, down;
  };
  ExpertStack(Tensor gate_up, Tensor down, RowScales scales);
  ExpertStack(Tensor gate, Tensor up, Tensor down, RowScales scales);
  ExpertStack() = default;

  int64_t count() const { return down_.defined() ? down_.dim(0) : 0; }
  int64_t hidden() const { return down_.dim(1); }
  int64_t intermediate() const { return down_.dim(2); }
  DType dtype() const { return gate_up_.defined() ? gate_up_.dtype() : gate_.dtype(); }  // gate/up
  DType down_dtype() const { return down_.dtype(); }

  // y = down(silu(gate(x)) * up(x)) through local expert j, for x [rows, hidden] -> y [rows,
  // hidden]: two GEMM calls whatever `rows` is (three with gate and up apart).
  void forward(int64_t j, const float* x, int64_t rows, float* y, ThreadPool& pool) const;

  // Rows routed to one local expert: x [rows, hidden] in, y [rows, hidden] out.
  struct ExpertRows {
    int64_t expert = 0;
    const float* x = nullptr;
    int64_t rows = 0;
    float* y = nullptr;
  };
  // forward() of several experts, bitwise the same: for block-quantized stacks (GGUF files,
  // --quantization) each projection of all of them is one kernels::linear_grouped call (one
  // thread split and wake-up per projection instead of per expert: decode runs 6 or 8 small
  // experts per layer); other stacks run expert by expert.
  void forward_group(std::span<const ExpertRows> work, ThreadPool& pool) const;

  // Moving experts between ranks (EPLB): the bytes of local expert j in each of the stack's
  // parts() tensors (gate_up or gate and up, down, and FP8 scales), and a zeroed stack of
  // `count` experts of this one's shapes and dtypes whose bytes the caller fills. Only
  // empty_like stacks are written (never mmap'd ones).
  int parts() const;
  std::span<const std::byte> expert_bytes(int64_t j, int part) const;
  std::span<std::byte> mutable_expert_bytes(int64_t j, int part);
  ExpertStack empty_like(int64_t count) const;
  // Drops the resident pages of mapped stacks (Tensor::release_pages; owned stacks stay): for
  // a holder that computes from a packed copy (packed_experts.h). A later read of the stored
  // bytes (EPLB moves, the scalar ISA) gets them from the file again.
  void release_pages() const;
  // Block stacks (q4_0, q5_0, q8_0, q4_k) repacked (kernels::repacks_blocks: AVX2, AVX-512),
  // each part as one pack_weights() of [count * rows, cols], where its rows per expert are whole
  // units (kernels::repacked_row_unit(): 8 rows on AVX2, 16 on AVX-512; each expert then starts at
  // its stored byte offset: linear_grouped cannot check that, so only this builds its jobs) and its
  // stored pages can be dropped (a file mapping; not --no-mmap / --mlock / stacks copied at load),
  // which they then are. Only stacks that forward_group runs grouped (gate / up and down all block
  // types). For MoeLayer, at load and after each EPLB move; `huge_pages` as pack_weights().
  void repack_blocks(bool huge_pages = false);
  // How many of the stack's parts repack_blocks() repacked (logs, tests).
  int repacked_parts() const;

 private:
  // A part of the stack, as repacked (undefined: read as stored).
  struct Repacked {
    kernels::PackedWeights gate_up, gate, up, down;
  };
  static kernels::PackedWeights repack_part(const Tensor& stack, bool huge_pages);
  std::vector<const Tensor*> part_tensors() const;
  void check_row_scales() const;
  bool w8a8() const { return down_.defined() && down_.dtype() == DType::i8; }

  Tensor gate_up_;  // fused; undefined when gate_ and up_ hold the two halves
  Tensor gate_;
  Tensor up_;
  Tensor down_;
  Fp8Scales fp8_;   // f8_e4m3 stacks only
  RowScales w8a8_;  // i8 stacks only
  Repacked repacked_;
};

}  // namespace deepinfer::model
