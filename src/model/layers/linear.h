#pragma once
// y = x W^T (+ b), W stored [out, in] as Hugging Face Linear does.
#include <span>
#include <string>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/packed_weights.h"
#include "model/weights.h"

namespace deepinfer::model {

struct Linear {
  Tensor weight;  // [out_features, in_features]: f32 / bf16 / f16 / a ggml block type / f8_e4m3
                  // / i8
  Tensor bias;    // [out_features] f32, or undefined
  // An f8_e4m3 weight (an FP8 checkpoint kept as stored): its f32 block scales and their block;
  // an i8 weight (--quantization w8a8): its f32 scale per output row [out_features].
  Tensor weight_scale;
  int64_t scale_block_rows = 0;
  int64_t scale_block_cols = 0;
  int64_t in_features = 0;
  int64_t out_features = 0;
  // weight re-laid out for the packed GEMM (kernels.h), when the CPU has a kernel for its dtype.
  // forward() uses it only while it still matches weight, so a replaced weight is never read
  // through stale panels (call pack() again after replacing it).
  kernels::PackedWeights packed;

  // Loads `<prefix>.weight` (and `<prefix>.bias` when with_bias); `use` tells the loader's
  // --quantization policy what the weight is for.
  static Linear load(WeightLoader& weights, const std::string& prefix, int64_t in_features,
                     int64_t out_features, bool with_bias, MatrixUse use = MatrixUse::projection);
  // Takes `w` as returned by weights.matrix(name, ...) with, for f8_e4m3 and i8, the scales
  // the loader keeps for it (read at once: a second slice of the same tensor replaces them),
  // and packs it (on huge pages when the loader's MemoryOptions ask for them).
  void set_weight(const WeightLoader& weights, const std::string& name, Tensor w);
  // Packs weight where that pays (f32 / bf16 on AVX-512 and AVX2); set_weight() does it.
  // `huge_pages`: the panels on transparent huge pages (MemoryOptions::huge_pages).
  void pack(bool huge_pages = false);
  // Whether packed is weight's current packing (what forward() reads).
  bool packed_current() const {
    return packed.defined() && packed.source() == weight.raw() && packed.n() == out_features &&
           packed.k() == in_features;
  }
  // x [rows, in_features] -> y [rows, out_features]
  void forward(const float* x, int64_t rows, float* y, ThreadPool& pool) const;
};

// forward() of several linears of one input x [rows, in_features] (q / k / v, gate / up) into
// ys[i]: one kernels::linear_grouped call (one wake-up, x quantized once) when they are all
// block weights of one type, in_features and layout (all repacked or all as stored), else one
// forward() each. Bitwise the same either way (a bias is one add after the dot, as in linear()).
void forward_same_input(std::span<const Linear* const> linears, const float* x, int64_t rows,
                        std::span<float* const> ys, ThreadPool& pool);

}  // namespace deepinfer::model
