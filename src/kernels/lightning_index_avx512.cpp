// The lightning indexer's tile on AVX-512: lanes are query heads, so each key element is
// broadcast once and multiplies 16 heads per FMA; 4 key rows x 64 heads of accumulators share
// every load of the transposed query.
// GCC 12 also reports the intrinsic headers' _mm*_undefined_*() idiom as plainly uninitialized
// once hsum() is inlined into these templates (GCC bug 105593, as simd_avx512.h explains).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: it precedes <immintrin.h>

#include <algorithm>

#include "kernels/lightning_index.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int64_t kRows = 4;

// max(x, 0) as a masked move (GCC 12 flags _mm512_max_ps's undefined-source idiom here).
inline __m512 relu(__m512 x) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), x);
}

// Rows [r0, r0 + R) x head vectors [v0, v0 + V): adds sum_h ws[h] relu(q_h . k) to scores.
template <int R, int V>
void block(const float* keys, int64_t r0, int64_t dim, const float* qt, int64_t padded, int64_t v0,
           const float* ws, float* scores) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t d = 0; d < dim; ++d) {
    const float* q = qt + d * padded + v0 * 16;
    __m512 qv[V];
    for (int v = 0; v < V; ++v) qv[v] = _mm512_loadu_ps(q + v * 16);
    for (int r = 0; r < R; ++r) {
      const __m512 k = _mm512_set1_ps(keys[(r0 + r) * dim + d]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(qv[v], k, acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    __m512 sum = _mm512_setzero_ps();
    for (int v = 0; v < V; ++v)
      sum = _mm512_fmadd_ps(_mm512_loadu_ps(ws + (v0 + v) * 16), relu(acc[r][v]), sum);
    scores[r0 + r] += hsum(sum);
  }
}

template <int R>
void rows_block(const float* keys, int64_t r0, int64_t dim, const float* qt, int64_t padded,
                const float* ws, float* scores) {
  const int64_t vectors = padded / 16;
  int64_t v = 0;
  for (; v + 4 <= vectors; v += 4) block<R, 4>(keys, r0, dim, qt, padded, v, ws, scores);
  switch (vectors - v) {
    case 3:
      block<R, 3>(keys, r0, dim, qt, padded, v, ws, scores);
      break;
    case 2:
      block<R, 2>(keys, r0, dim, qt, padded, v, ws, scores);
      break;
    case 1:
      block<R, 1>(keys, r0, dim, qt, padded, v, ws, scores);
      break;
    default:
      break;
  }
}

// Row `row` of the store (one kv head) as f32 into dst: 16 lanes per conversion.
inline void widen_row(const PagedKv& s, int64_t row, float* dst) {
  const int64_t dim = s.head_dim;
  for (int64_t d = 0; d < dim; d += kLanes) {
    const __mmask16 m = first_lanes(std::min<int64_t>(kLanes, dim - d));
    const int64_t at = row * dim + d;
    __m512 v;
    switch (s.dtype) {
      case DType::f16:
        v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(s.k) + at));
        break;
      case DType::bf16:
        v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(
                                                      m, static_cast<const uint16_t*>(s.k) + at)),
                                                  16));
        break;
      case DType::i8: {
        // Groups that are whole vectors give the lanes one scale; others one per lane.
        const float* scales = s.k_scale + row * (dim / s.quant_group);
        __m512 scale;
        if (s.quant_group % kLanes == 0) {
          scale = _mm512_set1_ps(scales[d / s.quant_group]);
        } else {
          float lanes[kLanes];
          for (int64_t l = 0; l < kLanes; ++l)
            lanes[l] = d + l < dim ? scales[(d + l) / s.quant_group] : 0.0f;
          scale = _mm512_loadu_ps(lanes);
        }
        v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                              _mm_maskz_loadu_epi8(m, static_cast<const int8_t*>(s.k) + at))),
                          scale);
        break;
      }
      default:
        v = _mm512_maskz_loadu_ps(m, static_cast<const float*>(s.k) + at);
        break;
    }
    _mm512_mask_storeu_ps(dst + d, m, v);
  }
}

}  // namespace

void index_tile(const PagedKv& store, int64_t first, int64_t rows, const float* qt,
                int64_t heads_padded, const float* ws, float* buffer, float* scores) {
  const int64_t dim = store.head_dim;
  for (int64_t r = 0; r < rows; ++r)
    widen_row(store, index_row(store, first + r), buffer + r * dim);
  const float* keys = buffer;
  std::fill(scores, scores + rows, 0.0f);
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) rows_block<4>(keys, r, dim, qt, heads_padded, ws, scores);
  for (; r < rows; ++r) rows_block<1>(keys, r, dim, qt, heads_padded, ws, scores);
}

}  // namespace deepinfer::kernels::detail::avx512
