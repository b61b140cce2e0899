// The lightning indexer's tile on AVX2: lanes are query heads (8 per FMA); 2 key rows x 32
// heads of accumulators share every load of the transposed query.
#include <algorithm>

#include "kernels/kv_widen_avx2.h"
#include "kernels/lightning_index.h"
#include "kernels/simd_avx2.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

// Rows [r0, r0 + R) x head vectors [v0, v0 + V) of 8: adds sum_h ws[h] relu(q_h . k).
template <int R, int V>
void block(const float* keys, int64_t r0, int64_t dim, const float* qt, int64_t padded, int64_t v0,
           const float* ws, float* scores) {
  __m256 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t d = 0; d < dim; ++d) {
    const float* q = qt + d * padded + v0 * 8;
    __m256 qv[V];
    for (int v = 0; v < V; ++v) qv[v] = _mm256_loadu_ps(q + v * 8);
    for (int r = 0; r < R; ++r) {
      const __m256 k = _mm256_broadcast_ss(keys + (r0 + r) * dim + d);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(qv[v], k, acc[r][v]);
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  for (int r = 0; r < R; ++r) {
    __m256 sum = zero;
    for (int v = 0; v < V; ++v)
      sum =
          _mm256_fmadd_ps(_mm256_loadu_ps(ws + (v0 + v) * 8), _mm256_max_ps(acc[r][v], zero), sum);
    scores[r0 + r] += hsum(sum);
  }
}

template <int R>
void rows_block(const float* keys, int64_t r0, int64_t dim, const float* qt, int64_t padded,
                const float* ws, float* scores) {
  // padded is a multiple of 16: whole pairs of 8-float vectors.
  const int64_t vectors = padded / 8;
  int64_t v = 0;
  for (; v + 4 <= vectors; v += 4) block<R, 4>(keys, r0, dim, qt, padded, v, ws, scores);
  if (vectors - v == 2) block<R, 2>(keys, r0, dim, qt, padded, v, ws, scores);
}

}  // namespace

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
  const float* keys = buffer;
  std::fill(scores, scores + rows, 0.0f);
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) rows_block<2>(keys, r, dim, qt, heads_padded, ws, scores);
  for (; r < rows; ++r) rows_block<1>(keys, r, dim, qt, heads_padded, ws, scores);
}

}  // namespace deepinfer::kernels::detail::avx2
