#pragma once
// AVX-512 helpers shared by the *_avx512.cpp files (and only them: this needs their flags).
// Everything here has internal linkage so no copy can leak into code run on other CPUs.

// GCC 12 reports its own _mm512_undefined_*() idiom inside the intrinsic headers as
// maybe-uninitialized (GCC bug 105593); the location is in the header, so this must precede
// the first include of <immintrin.h> in the translation unit (include this header first).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int64_t kLanes = 16;

// Mask of the first n (<= 16) lanes.
inline __mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

// The one horizontal-sum tree of this ISA: halves, then quarters, then pairs. Every
// reduction of an output element goes through it, so results never depend on the tiling.
inline float hsum(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
}

// hsum() of 16 vectors at once: out[j] = hsum(v[j]) bit for bit (same pairs added in the
// same order, transposed so that each level serves every vector). About 45 instructions
// instead of 16 x 8.
inline __m512 hsum16(const __m512* v) {
  __m512 h[8], q[4], p[2];
  DEEPINFER_UNROLL
  for (int i = 0; i < 8; ++i)  // lanes l + (l + 8): [h(v[2i]), h(v[2i+1])]
    h[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  DEEPINFER_UNROLL
  for (int i = 0; i < 4; ++i)  // l + (l + 4): 128-bit groups [q(v[4i]) .. q(v[4i+3])]
    q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(h[2 * i], h[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(h[2 * i], h[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  DEEPINFER_UNROLL
  for (int i = 0; i < 2; ++i)  // l + (l + 2): group g holds v[8i + g], v[8i + 4 + g]
    p[i] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // 0 + 1: lane 4g + j is the sum of v[4j + g].
  const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(p[0], p[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(p[0], p[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(order, s);
}
inline void hsum16(const __m512* v, float* out) {
  _mm512_storeu_ps(out, hsum16(v));
}

// r[16] rows -> r[16] columns: afterwards lane j of r[c] is element c of row j.
DEEPINFER_INLINE void transpose16(__m512* r) {
  __m512 t[16];
  DEEPINFER_UNROLL
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // Per 128-bit lane L, v[4g + c] holds column 4L + c of rows 4g .. 4g + 3.
  __m512 v[16];
  DEEPINFER_UNROLL
  for (int g = 0; g < 4; ++g) {
    v[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    v[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
    v[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    v[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
  }
  DEEPINFER_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m512 a = _mm512_shuffle_f32x4(v[c], v[4 + c], 0x88);
    const __m512 b = _mm512_shuffle_f32x4(v[c], v[4 + c], 0xdd);
    const __m512 e = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0x88);
    const __m512 f = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(a, e, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(b, f, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(a, e, 0xdd);
    r[12 + c] = _mm512_shuffle_f32x4(b, f, 0xdd);
  }
}

inline float hmax(__m512 v) {
  return _mm512_reduce_max_ps(v);
}

// exp(x) to ~2 ulp: x = n ln2 + r, |r| <= ln2/2, Cephes' degree-6 polynomial for e^r, and
// scalef for 2^n (which also gives the right inf / subnormal / 0 at the ends).
inline __m512 exp(__m512 x) {
  // max/min return their second operand for NaN, so NaN inputs stay NaN.
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

inline int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
inline float maxf(float a, float b) {
  return a > b ? a : b;
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx512
