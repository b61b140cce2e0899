// FP8 E4M3 block-scaled linear, AVX-512: 16 weights a vector, widened to f32 in register by
// bit moves (linear_fp8.h), scaled, and FMA'd into up to 4 rows of x at once.
// GCC 12 reports the _mm512_undefined_*() idiom inside the intrinsic headers (GCC bug 105593;
// see simd_avx512.h), so before any include:
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/linear_fp8.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int64_t kRows = 4;

// 16 E4M3 bytes -> f32, exactly (linear_fp8.h).
inline __m512 widen_fp8(__m128i bytes) {
  const __m512i q = _mm512_cvtepu8_epi32(bytes);
  const __m512i em = _mm512_and_si512(q, _mm512_set1_epi32(0x7f));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0x80)), 24);
  const __m512i bits = _mm512_or_si512(_mm512_slli_epi32(em, 20), sign);
  const __m512 value = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p120f));
  const __mmask16 nan = _mm512_cmpeq_epi32_mask(em, _mm512_set1_epi32(0x7f));
  return _mm512_mask_blend_ps(nan, value, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
}

// ((h0 + h4) + (h2 + h6)) + ((h1 + h5) + (h3 + h7)) with h[l] = A[l] + A[l + 8].
inline float reduce(__m512 acc) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 g = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  // g = (h0 + h4, h1 + h5, h2 + h6, h3 + h7)
  const __m128 pair = _mm_add_ps(g, _mm_movehl_ps(g, g));  // (g0 + g2, g1 + g3, ..)
  const __m128 odd = _mm_shuffle_ps(pair, pair, 1);
  return _mm_cvtss_f32(_mm_add_ss(pair, odd));
}

}  // namespace

void linear_fp8_rows(const Fp8LinearArgs& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
  const int64_t k = a.k;
  const int64_t whole = k / 16 * 16;
  const int64_t tail = k - whole;
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << tail) - 1u);
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* q = a.w + j * k;
    const float* s = a.scale + (j / a.block_rows) * a.scale_cols;
    for (int64_t i0 = r0; i0 < r1; i0 += kRows) {
      const int64_t rows = r1 - i0 < kRows ? r1 - i0 : kRows;
      const float* x = a.x + i0 * k;
      __m512 acc[kRows];
      for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
      for (int64_t c = 0; c < whole; c += 16) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c));
        const __m512 w = _mm512_mul_ps(widen_fp8(bytes), _mm512_set1_ps(s[c / a.block_cols]));
        for (int64_t r = 0; r < rows; ++r)
          acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * k + c), w, acc[r]);
      }
      if (tail) {
        const __m128i bytes = _mm_maskz_loadu_epi8(tail_mask, q + whole);
        // Past k: x = w = 0 (a masked-off lane adds +0 as the reference does).
        const __m512 w = _mm512_maskz_mul_ps(tail_mask, widen_fp8(bytes),
                                             _mm512_set1_ps(s[whole / a.block_cols]));
        for (int64_t r = 0; r < rows; ++r)
          acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail_mask, x + r * k + whole), w, acc[r]);
      }
      for (int64_t r = 0; r < rows; ++r) {
        float out = reduce(acc[r]);
        if (a.bias) out += a.bias[j];
        a.y[(i0 + r) * a.n + j] = out;
      }
    }
  }
}

}  // namespace deepinfer::kernels::detail::avx512
