#include "kernels/lightning_index.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "kernels/isa.h"
#include "kernels/kv_widen_scalar.h"

namespace deepinfer::kernels {
namespace {

// Keys widened per tile: a tile's rows stay in L1 while every head reads them.
constexpr int64_t kTileRows = 32;

detail::IndexTileFn tile_kernel() {
  switch (active_isa()) {
    case Isa::avx512:
      return &detail::avx512::index_tile;
    case Isa::avx2:
      return &detail::avx2::index_tile;
    case Isa::scalar:
      break;
  }
  return &detail::scalar::index_tile;
}

}  // namespace

void lightning_index_scores(const float* q, const float* w, int64_t heads, float scale,
                            const PagedKv& keys, int64_t count, float* scores, ThreadPool& pool) {
  DI_CHECK(heads > 0 && keys.kv_heads == 1 && keys.head_dim > 0 && count >= 0,
           "kernels::lightning_index_scores: bad shape (heads ", heads, ", kv heads ",
           keys.kv_heads, ", dim ", keys.head_dim, ", count ", count, ")");
  DI_CHECK(count <= static_cast<int64_t>(keys.block_table.size()) * keys.block_size,
           "kernels::lightning_index_scores: ", count, " positions exceed the block table");
  DI_CHECK(keys.dtype != DType::i8 || (keys.k_scale != nullptr && keys.quant_group > 0),
           "kernels::lightning_index_scores: an int8 store needs scales and a quant_group");
  if (count == 0) return;
  const int64_t dim = keys.head_dim;
  const int64_t padded = detail::index_heads_padded(heads);
  std::vector<float> qt(static_cast<size_t>(dim * padded), 0.0f);
  std::vector<float> ws(static_cast<size_t>(padded), 0.0f);
  for (int64_t h = 0; h < heads; ++h) {
    ws[static_cast<size_t>(h)] = w[h] * scale;
    for (int64_t d = 0; d < dim; ++d) qt[static_cast<size_t>(d * padded + h)] = q[h * dim + d];
  }
  const detail::IndexTileFn tile = tile_kernel();
  const int64_t tiles = (count + kTileRows - 1) / kTileRows;
  pool.parallel_for(tiles, [&](int64_t t0, int64_t t1) {
    std::vector<float> buffer(static_cast<size_t>(kTileRows * dim));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t first = t * kTileRows;
      tile(keys, first, std::min(kTileRows, count - first), qt.data(), padded, ws.data(),
           buffer.data(), scores + first);
    }
  });
}

void top_k_positions(const float* scores, int64_t count, int64_t k, int32_t* positions) {
  DI_CHECK(k >= 0 && k <= count, "kernels::top_k_positions: k ", k, " of ", count, " scores");
  std::vector<int32_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  const auto better = [scores](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  std::nth_element(order.begin(), order.begin() + k, order.end(), better);
  std::sort(order.begin(), order.begin() + k);
  std::copy(order.begin(), order.begin() + k, positions);
}

namespace detail::scalar {

void index_tile(const PagedKv& store, int64_t first, int64_t rows, const float* qt,
                int64_t heads_padded, const float* ws, float* buffer, float* scores) {
  const int64_t dim = store.head_dim;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = index_row(store, first + r);
    float* dst = buffer + r * dim;
    if (store.dtype == DType::f32) {
      std::copy_n(static_cast<const float*>(store.k) + row * dim, dim, dst);
    } else {
      widen_kv_row(static_cast<const char*>(store.k) +
                       row * dim * static_cast<int64_t>(dtype_size(store.dtype)),
                   store.dtype,
                   store.k_scale ? store.k_scale + row * (dim / store.quant_group) : nullptr,
                   store.quant_group, dim, dst);
    }
  }
  std::vector<float> acc(static_cast<size_t>(heads_padded));
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t d = 0; d < dim; ++d) {
      const float k = buffer[r * dim + d];
      const float* q = qt + d * heads_padded;
      for (int64_t h = 0; h < heads_padded; ++h) acc[static_cast<size_t>(h)] += q[h] * k;
    }
    float sum = 0.0f;
    for (int64_t h = 0; h < heads_padded; ++h)
      sum += ws[h] * std::max(acc[static_cast<size_t>(h)], 0.0f);
    scores[r] = sum;
  }
}

}  // namespace detail::scalar

}  // namespace deepinfer::kernels
