// W8A8 linear, AVX-512BW: 64 weights a step widened to int16, vpmaddwd against the widened int8
// x of up to 4 rows (exact int32; linear_w8a8.h).
// GCC 12 reports the _mm512_undefined_*() idiom inside the intrinsic headers (GCC bug 105593;
// see simd_avx512.h), so before any include:
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/linear_w8a8.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int64_t kRows = 4;

}  // namespace

void linear_w8a8_rows(const W8a8Args& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
  const int64_t k = a.k;
  const int64_t whole = k / 64 * 64;
  const int64_t tail = k - whole;
  const __mmask64 tail_mask = tail ? (~0ull >> (64 - tail)) : 0;
  for (int64_t j = j0; j < j1; ++j) {
    const int8_t* w = a.w + j * k;
    for (int64_t i0 = r0; i0 < r1; i0 += kRows) {
      const int64_t rows = r1 - i0 < kRows ? r1 - i0 : kRows;
      __m512i acc[kRows];
      for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_si512();
      for (int64_t c = 0; c < k; c += 64) {
        // Past k: w = 0 (masked load), x = 0 (padded).
        const __m512i wv =
            c < whole ? _mm512_loadu_si512(w + c) : _mm512_maskz_loadu_epi8(tail_mask, w + c);
        const __m512i w0 = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(wv));
        const __m512i w1 = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(wv, 1));
        for (int64_t r = 0; r < rows; ++r) {
          const int8_t* x = a.xq + (i0 + r) * a.x_stride + c;
          const __m512i x0 =
              _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
          const __m512i x1 =
              _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32)));
          acc[r] = _mm512_add_epi32(
              acc[r], _mm512_add_epi32(_mm512_madd_epi16(w0, x0), _mm512_madd_epi16(w1, x1)));
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        const float s = a.w_scale[j] * a.x_scale[i];
        const float out =
            a.bias
                ? __builtin_fmaf(static_cast<float>(_mm512_reduce_add_epi32(acc[r])), s, a.bias[j])
                : static_cast<float>(_mm512_reduce_add_epi32(acc[r])) * s;
        a.y[i * a.n + j] = out;
      }
    }
  }
}

}  // namespace deepinfer::kernels::detail::avx512
