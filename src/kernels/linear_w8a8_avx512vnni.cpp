// W8A8 linear, AVX-512 VNNI: vpdpbusd multiplies unsigned by signed bytes, so x enters as
// xq + 128 (u8) against w (s8), and 128 * sum_c w[j, c] comes off the int32 total; the weight
// sum is a second vpdpbusd of ones against the same weight vector (linear_w8a8.h).
// GCC 12 reports the _mm512_undefined_*() idiom inside the intrinsic headers (GCC bug 105593;
// see simd_avx512.h), so before any include:
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/linear_w8a8.h"

namespace deepinfer::kernels::detail::avx512vnni {
namespace {

constexpr int64_t kRows = 4;

}  // namespace

void linear_w8a8_rows(const W8a8Args& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
  const int64_t k = a.k;
  const int64_t whole = k / 64 * 64;
  const int64_t tail = k - whole;
  const __mmask64 tail_mask = tail ? (~0ull >> (64 - tail)) : 0;
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t j = j0; j < j1; ++j) {
    const int8_t* w = a.w + j * k;
    for (int64_t i0 = r0; i0 < r1; i0 += kRows) {
      const int64_t rows = r1 - i0 < kRows ? r1 - i0 : kRows;
      __m512i acc[kRows];
      for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_si512();
      __m512i w_sum = _mm512_setzero_si512();
      for (int64_t c = 0; c < k; c += 64) {
        // Past k: w = 0, so the padded x (128) adds nothing.
        const __m512i wv =
            c < whole ? _mm512_loadu_si512(w + c) : _mm512_maskz_loadu_epi8(tail_mask, w + c);
        w_sum = _mm512_dpbusd_epi32(w_sum, ones, wv);
        for (int64_t r = 0; r < rows; ++r) {
          const __m512i xu = _mm512_loadu_si512(a.xu + (i0 + r) * a.x_stride + c);
          acc[r] = _mm512_dpbusd_epi32(acc[r], xu, wv);
        }
      }
      const int32_t correction = 128 * _mm512_reduce_add_epi32(w_sum);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        const int32_t t = _mm512_reduce_add_epi32(acc[r]) - correction;
        const float s = a.w_scale[j] * a.x_scale[i];
        const float out = a.bias ? __builtin_fmaf(static_cast<float>(t), s, a.bias[j])
                                 : static_cast<float>(t) * s;
        a.y[i * a.n + j] = out;
      }
    }
  }
}

}  // namespace deepinfer::kernels::detail::avx512vnni
