// AVX2 quantize_x_blocks (backend.h): four vectors per 32-element block, the same bytes as the
// baseline quantizer (quantize_x.cpp; see quantize_x_avx512.cpp for why they agree).
#include "kernels/quantize_x_terms.h"
#include "kernels/simd_avx2.h"

namespace deepinfer::kernels::detail::avx2 {

void quantize_x_blocks(const float* x, int64_t m, int64_t k, const qx::Terms& terms, int8_t* q,
                       float* d, int32_t* t) {
  const int64_t blocks = k / kQuantBlock;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
  // packs_epi32 then packs_epi16 leave the four vectors' halves interleaved per 128-bit lane.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* v = x + i * k + b * kQuantBlock;
      __m256 val[4];
      __m256 amax = _mm256_setzero_ps();
      int unordered = 0;
      for (int j = 0; j < 4; ++j) {
        val[j] = _mm256_loadu_ps(v + j * kLanes);
        unordered |= _mm256_movemask_ps(_mm256_cmp_ps(val[j], val[j], _CMP_UNORD_Q));
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, val[j]));
      }
      const float scale = qx::block_scale(hmax(amax), unordered != 0);
      const __m256 inverse = _mm256_set1_ps(qx::block_inverse(scale));
      __m256i ints[4];
      for (int j = 0; j < 4; ++j) {
        const __m256 r = _mm256_mul_ps(val[j], inverse);
        // NaN (inf * 0 in an infinite block) to 0; the scale carries it.
        const __m256 kept = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));
        ints[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(kept, lo), hi));
      }
      const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(ints[0], ints[1]),
                                                _mm256_packs_epi32(ints[2], ints[3]));
      const __m256i quants = _mm256_permutevar8x32_epi32(packed, order);
      const int64_t at = (i * blocks + b) * 8;
      qx::store_block(terms, quants, scale, q + i * k + b * kQuantBlock, d + at, t + at);
    }
  }
}

}  // namespace deepinfer::kernels::detail::avx2
