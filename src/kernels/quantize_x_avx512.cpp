// AVX-512 quantize_x_blocks (backend.h): two vectors per 32-element block, the same bytes as
// the baseline quantizer (quantize_x.cpp): max |x| and the scale are exact, each value is
// x * (1 / d) clamped to +-127 and rounded to nearest even (cvtps2dq under the default
// rounding mode, which the baseline's 1.5 * 2^23 trick reproduces).
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/quantize_x_terms.h"

namespace deepinfer::kernels::detail::avx512 {

void quantize_x_blocks(const float* x, int64_t m, int64_t k, const qx::Terms& terms, int8_t* q,
                       float* d, int32_t* t) {
  const int64_t blocks = k / kQuantBlock;
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* v = x + i * k + b * kQuantBlock;
      const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + kLanes);
      const bool nan = (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) |
                        _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q)) != 0;
      const float amax = _mm512_reduce_max_ps(
          _mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
      const float scale = qx::block_scale(amax, nan);
      const __m512 inverse = _mm512_set1_ps(qx::block_inverse(scale));
      const auto quantize = [&](__m512 value) {
        const __m512 r = _mm512_mul_ps(value, inverse);
        // NaN (inf * 0 in an infinite block) to 0; the scale carries it.
        const __m512 kept = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, r, _CMP_ORD_Q), r);
        return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(kept, lo), hi));
      };
      const __m128i q0 = _mm512_cvtepi32_epi8(quantize(v0));
      const __m128i q1 = _mm512_cvtepi32_epi8(quantize(v1));
      const __m256i quants = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
      const int64_t at = (i * blocks + b) * 8;
      qx::store_block(terms, quants, scale, q + i * k + b * kQuantBlock, d + at, t + at);
    }
  }
}

}  // namespace deepinfer::kernels::detail::avx512
