#pragma once
// AVX-512 widening of bf16 / f16 / int8 KV cache rows to f32 (attention reads these).
#include "kernels/simd_avx512.h"  // first: see the note there

namespace deepinfer::kernels::detail::avx512 {
namespace {

// 16 int8 -> 16 f32 times scale; lanes outside m are not touched.
inline void widen_i8(const int8_t* src, __m512 scale, __mmask16 m, float* dst) {
  const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, src)));
  _mm512_mask_storeu_ps(dst, m, _mm512_mul_ps(v, scale));
}

inline void widen_16bit(const uint16_t* src, bool f16, __mmask16 m, float* dst) {
  const __m256i raw = _mm256_maskz_loadu_epi16(m, src);
  const __m512 v = f16 ? _mm512_cvtph_ps(raw)
                       : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  _mm512_mask_storeu_ps(dst, m, v);
}

}  // namespace

// Internal linkage: included by ops_avx512.cpp only, where attend() inlines it.
static inline void widen_kv_row(const void* src, DType dtype, const float* scales, int64_t group,
                                int64_t n, float* dst) {
  if (dtype == DType::i8) {
    const auto* q = static_cast<const int8_t*>(src);
    for (int64_t g0 = 0; g0 < n; g0 += group) {
      const __m512 scale = _mm512_set1_ps(scales[g0 / group]);
      int64_t i = 0;
      for (; i + kLanes <= group; i += kLanes)
        widen_i8(q + g0 + i, scale, static_cast<__mmask16>(0xffff), dst + g0 + i);
      if (i < group) widen_i8(q + g0 + i, scale, first_lanes(group - i), dst + g0 + i);
    }
    return;
  }
  const auto* h = static_cast<const uint16_t*>(src);
  const bool f16 = dtype == DType::f16;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    widen_16bit(h + i, f16, static_cast<__mmask16>(0xffff), dst + i);
  if (i < n) widen_16bit(h + i, f16, first_lanes(n - i), dst + i);
}

}  // namespace deepinfer::kernels::detail::avx512
