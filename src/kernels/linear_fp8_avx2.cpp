// FP8 E4M3 block-scaled linear, AVX2: the 16 lanes of linear_fp8.h as two 8-wide halves
// (lanes 0..7 and 8..15), widened to f32 in register by bit moves, scaled, FMA'd into up to 4
// rows of x at once.
#include <immintrin.h>

#include "kernels/linear_fp8.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

constexpr int64_t kRows = 4;

// 8 E4M3 bytes -> f32, exactly (linear_fp8.h).
inline __m256 widen_fp8(__m128i bytes) {
  const __m256i q = _mm256_cvtepu8_epi32(bytes);
  const __m256i em = _mm256_and_si256(q, _mm256_set1_epi32(0x7f));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(q, _mm256_set1_epi32(0x80)), 24);
  const __m256i bits = _mm256_or_si256(_mm256_slli_epi32(em, 20), sign);
  const __m256 value = _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(0x1p120f));
  const __m256 nan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(em, _mm256_set1_epi32(0x7f)));
  return _mm256_blendv_ps(value, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), nan);
}

// ((h0 + h4) + (h2 + h6)) + ((h1 + h5) + (h3 + h7)) with h = lanes 0..7 + lanes 8..15.
inline float reduce(__m256 lo, __m256 hi) {
  const __m256 h = _mm256_add_ps(lo, hi);
  const __m128 g = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 pair = _mm_add_ps(g, _mm_movehl_ps(g, g));
  const __m128 odd = _mm_shuffle_ps(pair, pair, 1);
  return _mm_cvtss_f32(_mm_add_ss(pair, odd));
}

}  // namespace

void linear_fp8_rows(const Fp8LinearArgs& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
  const int64_t k = a.k;
  const int64_t whole = k / 16 * 16;
  const int64_t tail = k - whole;
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* q = a.w + j * k;
    const float* s = a.scale + (j / a.block_rows) * a.scale_cols;
    // The last partial vector, zero-padded (x = w = 0 past k, as the reference).
    alignas(16) uint8_t q_tail[16] = {};
    for (int64_t c = 0; c < tail; ++c) q_tail[c] = q[whole + c];
    for (int64_t i0 = r0; i0 < r1; i0 += kRows) {
      const int64_t rows = r1 - i0 < kRows ? r1 - i0 : kRows;
      const float* x = a.x + i0 * k;
      __m256 lo[kRows], hi[kRows];
      for (int r = 0; r < kRows; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
      for (int64_t c = 0; c < whole; c += 16) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c));
        const __m256 sc = _mm256_set1_ps(s[c / a.block_cols]);
        const __m256 w_lo = _mm256_mul_ps(widen_fp8(bytes), sc);
        const __m256 w_hi = _mm256_mul_ps(widen_fp8(_mm_srli_si128(bytes, 8)), sc);
        for (int64_t r = 0; r < rows; ++r) {
          lo[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * k + c), w_lo, lo[r]);
          hi[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * k + c + 8), w_hi, hi[r]);
        }
      }
      if (tail) {
        const __m128i bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(q_tail));
        const __m256 sc = _mm256_set1_ps(s[whole / a.block_cols]);
        const __m256 w_lo = _mm256_mul_ps(widen_fp8(bytes), sc);
        const __m256 w_hi = _mm256_mul_ps(widen_fp8(_mm_srli_si128(bytes, 8)), sc);
        for (int64_t r = 0; r < rows; ++r) {
          alignas(32) float x_tail[16] = {};
          for (int64_t c = 0; c < tail; ++c) x_tail[c] = x[r * k + whole + c];
          lo[r] = _mm256_fmadd_ps(_mm256_load_ps(x_tail), w_lo, lo[r]);
          hi[r] = _mm256_fmadd_ps(_mm256_load_ps(x_tail + 8), w_hi, hi[r]);
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        float out = reduce(lo[r], hi[r]);
        if (a.bias) out += a.bias[j];
        a.y[(i0 + r) * a.n + j] = out;
      }
    }
  }
}

}  // namespace deepinfer::kernels::detail::avx2
