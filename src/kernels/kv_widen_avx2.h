#pragma once
// AVX2 widening of bf16 / f16 / int8 KV cache rows to f32 (attention reads these). AVX2 has no
// byte / 16-bit masked loads: a partial vector is staged through a zeroed 8-lane buffer.
#include "kernels/backend.h"
#include "kernels/simd_avx2.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

inline __m256 widen_i8(const int8_t* src, __m256 scale) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)), scale);
}

inline __m256 widen_16bit(const uint16_t* src, bool f16) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  return f16 ? _mm256_cvtph_ps(raw)
             : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}

// The first n (< 8) elements of src, zero-padded to a whole vector.
template <typename T>
inline const T* staged(const T* src, int64_t n, T* buf) {
  for (int64_t i = 0; i < kLanes; ++i) buf[i] = i < n ? src[i] : T{0};
  return buf;
}

}  // namespace

// Internal linkage: included by ops_avx2.cpp only, where attend() inlines it.
static inline void widen_kv_row(const void* src, DType dtype, const float* scales, int64_t group,
                                int64_t n, float* dst) {
  if (dtype == DType::i8) {
    const auto* q = static_cast<const int8_t*>(src);
    int8_t buf[kLanes];
    for (int64_t g0 = 0; g0 < n; g0 += group) {
      const __m256 scale = _mm256_set1_ps(scales ? scales[g0 / group] : 1.0f);
      int64_t i = 0;
      for (; i + kLanes <= group; i += kLanes)
        store(dst + g0 + i, widen_i8(q + g0 + i, scale), Full{});
      if (i < group) {
        const int64_t rest = group - i;
        store(dst + g0 + i, widen_i8(staged(q + g0 + i, rest, buf), scale), first_lanes(rest));
      }
    }
    return;
  }
  const auto* h = static_cast<const uint16_t*>(src);
  const bool f16 = dtype == DType::f16;
  uint16_t buf[kLanes];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(dst + i, widen_16bit(h + i, f16), Full{});
  if (i < n) store(dst + i, widen_16bit(staged(h + i, n - i, buf), f16), first_lanes(n - i));
}

}  // namespace deepinfer::kernels::detail::avx2
