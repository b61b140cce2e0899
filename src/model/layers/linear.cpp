#include "model/layers/linear.h"

#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"

namespace deepinfer::model {

Linear Linear::load(WeightLoader& weights, const std::string& prefix, int64_t in_features,
                    int64_t out_features, bool with_bias, MatrixUse use) {
  Linear linear;
  linear.in_features = in_features;
  linear.out_features = out_features;
  linear.set_weight(weights, prefix + ".weight",
                    weights.matrix(prefix + ".weight", {out_features, in_features}, use));
  if (with_bias) linear.bias = weights.vector_f32(prefix + ".bias", {out_features});
  return linear;
}

void Linear::set_weight(const WeightLoader& weights, const std::string& name, Tensor w) {
  weight = std::move(w);
  if (weight.dtype() == DType::f8_e4m3) {
    const WeightLoader::Fp8Scales& fp8 = weights.fp8_scale(name);
    weight_scale = fp8.scale;
    scale_block_rows = fp8.block.block_rows;
    scale_block_cols = fp8.block.block_cols;
  } else if (weight.dtype() == DType::i8) {
    weight_scale = weights.w8a8_scale(name);
  }
  pack(weights.memory_options().huge_pages);
}

void Linear::pack(bool huge_pages) {
  // Block weights (q4_0, q5_0, q8_0, q4_k repacked for AVX2 / AVX-512) only when their stored pages
  // can be dropped (a file mapping; not --no-mmap, --mlock, or weights quantized at load): a copy
  // beside them would double them.
  if (is_block_dtype(weight.dtype()) && !weight.pages_releasable()) return;
  packed =
      kernels::pack_weights(weight.raw(), weight.dtype(), out_features, in_features, huge_pages);
  // Every forward now reads the panels, so the mapped bytes as stored would only double the
  // resident weights: drop their pages (the file gives them back to a rare reader, e.g. a
  // tied embedding's row lookups or MLA's kv_b slices). Owned weights (widened at load) stay.
  if (packed.defined()) weight.release_pages();
}

namespace {

// The block matrix Linear::forward() multiplies by, and whether it is repacked.
struct BlockMatrix {
  const void* w = nullptr;
  bool repacked = false;
};
BlockMatrix block_matrix(const Linear& l) {
  if (l.packed_current() && kernels::reads_repacked_blocks(l.packed))
    return {l.packed.panels(), true};
  return {l.weight.raw(), false};
}

}  // namespace

void forward_same_input(std::span<const Linear* const> linears, const float* x, int64_t rows,
                        std::span<float* const> ys, ThreadPool& pool) {
  DI_CHECK(linears.size() == ys.size(), "forward_same_input: ", linears.size(), " linears but ",
           ys.size(), " outputs");
  if (linears.empty()) return;
  const Linear& first = *linears.front();
  std::vector<BlockMatrix> matrices;
  for (const Linear* l : linears) matrices.push_back(block_matrix(*l));
  bool grouped = linears.size() > 1 && is_block_dtype(first.weight.dtype());
  for (size_t i = 0; i < linears.size(); ++i)
    grouped = grouped && linears[i]->weight.dtype() == first.weight.dtype() &&
              linears[i]->in_features == first.in_features &&
              matrices[i].repacked == matrices.front().repacked;
  if (!grouped) {
    for (size_t i = 0; i < linears.size(); ++i) linears[i]->forward(x, rows, ys[i], pool);
    return;
  }
  std::vector<kernels::LinearJob> jobs;
  for (size_t i = 0; i < linears.size(); ++i)
    jobs.push_back({x, rows, matrices[i].w, ys[i], linears[i]->out_features});
  kernels::linear_grouped(jobs, first.in_features, first.weight.dtype(), first.out_features, pool,
                          matrices.front().repacked);
  for (size_t i = 0; i < linears.size(); ++i) {
    if (!linears[i]->bias.defined()) continue;
    const float* b = linears[i]->bias.data<float>();
    const int64_t n = linears[i]->out_features;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) ys[i][r * n + j] += b[j];
  }
}

void Linear::forward(const float* x, int64_t rows, float* y, ThreadPool& pool) const {
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  if (weight.dtype() == DType::f8_e4m3) {
    const kernels::Fp8Weight w{weight.data<uint8_t>(), weight_scale.data<float>(), scale_block_rows,
                               scale_block_cols};
    kernels::linear_fp8(x, rows, in_features, w, out_features, b, y, pool);
    return;
  }
  if (weight.dtype() == DType::i8) {
    kernels::linear_w8a8(x, rows, in_features, weight.data<int8_t>(), weight_scale.data<float>(),
                         out_features, b, y, pool);
    return;
  }
  // pack_weights() packs only f32 / bf16 and repacks q4_0 / q5_0 / q8_0 / q4_k, so the FP8 / W8A8
  // weights never have panels.
  if (packed_current()) {
    kernels::linear(x, rows, packed, b, y, pool);
    return;
  }
  kernels::linear(x, rows, in_features, weight.raw(), weight.dtype(), out_features, b, y, pool);
}

}  // namespace deepinfer::model
