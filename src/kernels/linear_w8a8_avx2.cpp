// W8A8 linear, AVX2: 32 weights a step widened to int16, vpmaddwd against the widened int8 x
// of up to 4 rows (exact int32; linear_w8a8.h).
#include <immintrin.h>

#include "kernels/linear_w8a8.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

constexpr int64_t kRows = 4;

inline int32_t reduce(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i t = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1)));
}

}  // namespace

void linear_w8a8_rows(const W8a8Args& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
  const int64_t k = a.k;
  const int64_t whole = k / 32 * 32;
  for (int64_t j = j0; j < j1; ++j) {
    const int8_t* w = a.w + j * k;
    alignas(32) int8_t w_tail[32] = {};  // the last partial step, zero-padded
    for (int64_t c = whole; c < k; ++c) w_tail[c - whole] = w[c];
    for (int64_t i0 = r0; i0 < r1; i0 += kRows) {
      const int64_t rows = r1 - i0 < kRows ? r1 - i0 : kRows;
      __m256i acc[kRows];
      for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_si256();
      for (int64_t c = 0; c < k; c += 32) {
        const int8_t* wp = c < whole ? w + c : w_tail;
        const __m128i w_lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wp));
        const __m128i w_hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wp + 16));
        const __m256i w0 = _mm256_cvtepi8_epi16(w_lo);
        const __m256i w1 = _mm256_cvtepi8_epi16(w_hi);
        for (int64_t r = 0; r < rows; ++r) {
          const int8_t* x = a.xq + (i0 + r) * a.x_stride + c;  // zero past k
          const __m256i x0 =
              _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
          const __m256i x1 =
              _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)));
          acc[r] = _mm256_add_epi32(
              acc[r], _mm256_add_epi32(_mm256_madd_epi16(w0, x0), _mm256_madd_epi16(w1, x1)));
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        const float s = a.w_scale[j] * a.x_scale[i];
        const float out = a.bias ? __builtin_fmaf(static_cast<float>(reduce(acc[r])), s, a.bias[j])
                                 : static_cast<float>(reduce(acc[r])) * s;
        a.y[i * a.n + j] = out;
      }
    }
  }
}

}  // namespace deepinfer::kernels::detail::avx2
