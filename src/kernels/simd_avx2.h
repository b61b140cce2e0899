#pragma once
// AVX2 + FMA + F16C helpers shared by the *_avx2.cpp files (and only them: this needs their
// flags). Everything here has internal linkage so no copy can leak into code run on other CPUs.
#include <immintrin.h>

#include <cstdint>

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

constexpr int64_t kLanes = 8;

// Whole-vector access (Full) or the first n lanes (a maskload/maskstore lane mask): kernels
// are written once as generic lambdas over both.
struct Full {};
inline __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline __m256 load(const float* p, Full) {
  return _mm256_loadu_ps(p);
}
inline __m256 load(const float* p, __m256i m) {
  return _mm256_maskload_ps(p, m);
}
inline void store(float* p, __m256 v, Full) {
  _mm256_storeu_ps(p, v);
}
inline void store(float* p, __m256 v, __m256i m) {
  _mm256_maskstore_ps(p, m, v);
}
// v where the lane is loaded, fallback elsewhere.
inline __m256 keep(__m256 v, __m256, Full) {
  return v;
}
inline __m256 keep(__m256 v, __m256 fallback, __m256i m) {
  return _mm256_blendv_ps(fallback, v, _mm256_castsi256_ps(m));
}

// Calls body(offset, Full{}) over whole vectors of [0, n), then body(offset, mask) once.
template <typename Body>
inline void for_each_vector(int64_t n, Body body) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) body(i, Full{});
  if (i < n) body(i, first_lanes(n - i));
}

// The one horizontal-sum tree of this ISA: halves, then pairs (l, l + 2), then (0, 1).
inline float hsum(__m256 v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 p = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
}

// hsum() of 8 vectors at once, bit for bit: out[j] = hsum(v[j]).
inline __m256 hsum8(const __m256* v) {
  __m256 h[4], p[2];
  DEEPINFER_UNROLL
  for (int i = 0; i < 4; ++i)  // l + (l + 4): [h(v[2i]) | h(v[2i+1])]
    h[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
  DEEPINFER_UNROLL
  for (int i = 0; i < 2; ++i)  // l + (l + 2): half g holds v[4i + g], v[4i + 2 + g]
    p[i] = _mm256_add_ps(_mm256_shuffle_ps(h[2 * i], h[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(h[2 * i], h[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // 0 + 1: lane 4g + j is the sum of v[2j + g].
  const __m256 s = _mm256_add_ps(_mm256_shuffle_ps(p[0], p[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(p[0], p[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
inline void hsum8(const __m256* v, float* out) {
  _mm256_storeu_ps(out, hsum8(v));
}

inline float hmax(__m256 v) {
  const __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 p = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(p, _mm_movehdup_ps(p)));
}

// exp(x) to ~2 ulp (Cephes' polynomial, see simd_avx512.h). 2^n is built in the exponent
// field, so x is limited to [-87.34, 88.38]: results below FLT_MIN flush to 0 and results
// above e^88.72 become inf; in (88.38, 88.72] the value saturates at e^88.38.
inline __m256 exp(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3365402f), hi = _mm256_set1_ps(88.3762626647949f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 overflow = _mm256_cmp_ps(x, _mm256_set1_ps(88.7228394f), _CMP_GT_OQ);
  // max/min return their second operand for NaN, so NaN inputs stay NaN.
  const __m256 xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 out = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
  out = _mm256_andnot_ps(underflow, out);
  return _mm256_blendv_ps(out, _mm256_set1_ps(__builtin_inff()), overflow);
}

inline int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
inline float maxf(float a, float b) {
  return a > b ? a : b;
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx2
