#pragma once
// 256-bit decoders of one 32-element weight block of the per-lane types q5_1 / q6_k, shared
// by linear_qk_avx2.cpp, linear_qpanel_avx2.h and linear_qk_avx512.h (AVX2 + F16C
// instructions, which the AVX-512 files have too); include it from those files only.
// Everything has internal linkage.
//
// A block is given as its unsigned quants in element order (0..31 for q5_1, 0..63 for q6_k:
// vpmaddubsw pairs stay below 2 * 63 * 127, no int16 saturation), the weight scale of each of
// its 8 four-element lanes, and the lane min term. q6_k's offset (32) enters through the x lane
// term (quantize_x_blocks). The scales are an
// f16 times a 6- or 8-bit integer, exact in f32, so every ISA gets bitwise the same values as
// the scalar decoder (linear_qk_scalar.cpp).
#include <immintrin.h>

#include <cstdint>

#include "core/dtype.h"

namespace deepinfer::kernels::detail::qk {
namespace {

template <DType W>
constexpr bool kWithMin = W == DType::q5_1;
// Bytes of one stored block (a super-block of 8 x 32 elements for q6_k).
template <DType W>
constexpr int64_t kStoredBytes = W == DType::q5_1 ? 24 : 210;
// 32-element blocks per stored block.
template <DType W>
constexpr int64_t kSubBlocks = W == DType::q5_1 ? 1 : 8;

struct WBlock {
  __m256i q;  // 32 unsigned quants
  __m256 d;   // scale per 4-element lane
  __m256 m;   // min term per lane (types with a min; else unused)
};

inline float f16_at(const uint8_t* p) {
  return _cvtsh_ss(static_cast<unsigned short>(p[0] | (p[1] << 8)));
}

inline uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// 16 bytes of nibbles as 32 quants: the low nibbles are elements 0..15, the high ones 16..31.
inline __m256i split_nibbles(const uint8_t* qs) {
  const __m256i v =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)),
                          _mm256_set1_epi8(0x0f));
}

// 0x10 in byte e where bit e of qh is set (the fifth bit of q5_1 element e).
inline __m256i fifth_bits(uint32_t qh) {
  const __m256i bytes = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The 32 quants of block j (0..7) of a q6_k super-block.
template <DType W>
inline __m256i block_quants(const uint8_t* super, int j) {
  const int half = j / 4, quarter = j % 4;
  const __m256i ql =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 64 * half + 32 * (quarter % 2)));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 128 + 32 * half));
  const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(ql, _mm_cvtsi32_si128(4 * (quarter / 2))),
                                      _mm256_set1_epi8(0x0f));
  const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * quarter)),
                                      _mm256_set1_epi8(0x03));
  return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
}

// Block b of a weight row.
template <DType W>
inline WBlock decode(const uint8_t* row, int64_t b) {
  WBlock w;
  if constexpr (W == DType::q5_1) {
    const uint8_t* block = row + b * kStoredBytes<W>;
    w.d = _mm256_set1_ps(f16_at(block));
    w.m = _mm256_set1_ps(f16_at(block + 2));
    w.q = _mm256_or_si256(split_nibbles(block + 8), fifth_bits(u32_at(block + 4)));
  } else {  // q6_k: 32 elements of one quarter of a 128-element half, two 16-element groups
    const uint8_t* super = row + (b / 8) * kStoredBytes<W>;
    const int j = static_cast<int>(b % 8), half = j / 4, quarter = j % 4;
    w.q = block_quants<W>(super, j);
    const auto* scales = reinterpret_cast<const int8_t*>(super + 192 + 8 * half + 2 * quarter);
    const float d = f16_at(super + 208);
    w.d = _mm256_set_m128(_mm_set1_ps(d * static_cast<float>(scales[1])),
                          _mm_set1_ps(d * static_cast<float>(scales[0])));
    w.m = _mm256_setzero_ps();
  }
  return w;
}

// The weight bytes block b starts in (for prefetching), as an offset into its row.
template <DType W>
constexpr int64_t block_byte(int64_t b) {
  return b * kStoredBytes<W> / kSubBlocks<W>;
}

}  // namespace
}  // namespace deepinfer::kernels::detail::qk
