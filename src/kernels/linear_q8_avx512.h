#pragma once
// AVX-512 block-weight linear, shared by linear_q8_avx512.cpp (AVX-512BW: vpmaddubsw +
// vpmaddwd) and linear_q8_avx512vnni.cpp (vpdpbusd); include it from those files only (it needs
// their flags; everything has internal linkage). q4_0, q5_0, q8_0, q4_k and q5_k run the
// whole-block kernel of linear_whole_block_avx512.h; q4_1, whose f32 work is per 4-element lane
// (kernels.h), runs here.
//
// One 512-bit step covers two blocks: 16 int32 lanes, lanes 0-7 the 8 four-element lanes of
// block b and lanes 8-15 those of block b + 1, which is the accumulator layout of kernels.h, so
// the f32 work per step, x row and weight row is two FMAs (d_w * d_x times the lane dot, m_w
// times d_x * the lane's x sum; masked to lanes 0-7 for a lone last block), and the final
// reduction is hsum(). The integer dot products are exact in every variant.
//
// GCC 12 also reports the _mm512_undefined_*() idiom behind the 256 -> 512-bit casts used
// here as plainly uninitialized (the same bug as in simd_avx512.h), so before any include:
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/backend.h"
#include "kernels/linear_whole_block_avx512.h"
#include "kernels/linear_xblock_avx512.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int64_t kQPanelRows = 64;

template <bool V>
struct Flag {
  static constexpr bool value = V;
};  // weight rows kept in L2 while every x tile passes over them

// ggml's block_q4_1: d (f16) at 0, m (f16) at 2, 16 bytes of nibbles at 4.
constexpr int64_t kQ41BlockBytes = 20;
constexpr int64_t kQ41QuantsAt = 4;

// The weight scales of blocks p0, p1 as 16 lanes (the first 8 from p0, the last 8 from p1):
// d and m from one 32-bit load per block.
inline void pair_scales(const uint8_t* p0, const uint8_t* p1, __m512& d, __m512& m) {
  const __m128i h = _mm_unpacklo_epi32(_mm_loadu_si32(p0), _mm_loadu_si32(p1));  // d0 m0 d1 m1
  const __m512 f = _mm512_castps128_ps512(_mm_cvtph_ps(h));
  d = _mm512_permutexvar_ps(_mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0), f);
  m = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1), f);
}

// The 64 unsigned nibbles of blocks p0, p1 in element order.
inline __m512i pair_quants(const uint8_t* p0, const uint8_t* p1) {
  // 128-bit lanes [qs0, qs0, qs1, qs1]; the 2nd and 4th shifted by 4 give the high nibbles.
  const __m256i lo = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + kQ41QuantsAt)));
  const __m256i hi = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + kQ41QuantsAt)));
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  const __m512i shifted = _mm512_srlv_epi64(both, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f));
}

// Decode prefetch of the next tile's rows (see linear_avx512.cpp), calls of few x rows only.
constexpr int64_t kQStreamRows = 8;

// q4_1: y[i0 : i0 + MR, j0 : j0 + cols] (cols <= NR; missing weight rows repeat the last one).
template <class Dot, int MR, int NR, bool PF>
void q41_tile(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks * kQ41BlockBytes;
  const uint8_t* wr[NR];
  DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c)
    wr[c] = static_cast<const uint8_t*>(a.w) + (j0 + min64(c, cols - 1)) * row_bytes;
  __m512 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();

  // Blocks b, b + 1 (Lone: b only, into lanes 0-7; its lanes 8-15 read block b again and
  // are masked off). The x lane terms are d_x * s (XStep::ds).
  auto step = [&](int64_t b, auto lone) {
    constexpr bool kLone = decltype(lone)::value;
    XStep x[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r)
      x[r].ds = _mm512_castsi512_ps(load_x_block<kLone>(a, i0 + r, b, blocks, x[r]));
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      const uint8_t* p0 = wr[c] + b * kQ41BlockBytes;
      const uint8_t* p1 = kLone ? p0 : p0 + kQ41BlockBytes;
      if constexpr (PF)
        _mm_prefetch(reinterpret_cast<const char*>(p0 + NR * row_bytes), _MM_HINT_T0);
      const __m512i wq = pair_quants(p0, p1);
      __m512 dw, mw;
      pair_scales(p0, p1, dw, mw);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) {
        const __m512i t = Dot::unsigned_dot(_mm512_setzero_si512(), wq, x[r].q);
        const __m512 d = _mm512_mul_ps(dw, x[r].d);
        if constexpr (kLone) {
          acc[r][c] = _mm512_mask3_fmadd_ps(d, _mm512_cvtepi32_ps(t), acc[r][c], 0x00ff);
          acc[r][c] = _mm512_mask3_fmadd_ps(mw, x[r].ds, acc[r][c], 0x00ff);
        } else {
          acc[r][c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(t), acc[r][c]);
          acc[r][c] = _mm512_fmadd_ps(mw, x[r].ds, acc[r][c]);
        }
      }
    }
  };
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) step(b, Flag<false>{});
  if (b < blocks) step(b, Flag<true>{});
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    float* yr = a.y + (i0 + r) * a.n + j0;
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      if (c < cols) {
        const float v = hsum(acc[r][c]);
        yr[c] = a.bias ? v + a.bias[j0 + c] : v;
      }
    }
  }
}

template <class Dot, int MR, int NR, bool PF>
void q41_tiles(const LinearArgs& a, int64_t i0, int64_t j_begin, int64_t j_end) {
  for (int64_t j = j_begin; j < j_end; j += NR)
    q41_tile<Dot, MR, NR, PF>(a, i0, j, min64(NR, j_end - j));
}

template <class Dot, bool PF>
void q41_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t jp = n0; jp < n1; jp += kQPanelRows) {
    const int64_t jp_end = min64(jp + kQPanelRows, n1);
    int64_t i = m0;
    for (; i + 4 <= m1; i += 4) q41_tiles<Dot, 4, 4, PF>(a, i, jp, jp_end);
    switch (m1 - i) {
      case 3:
        q41_tiles<Dot, 3, 4, PF>(a, i, jp, jp_end);
        break;
      case 2:
        q41_tiles<Dot, 2, 4, PF>(a, i, jp, jp_end);
        break;
      case 1:
        q41_tiles<Dot, 1, 4, true>(a, i, jp, jp_end);
        break;
      default:
        break;
    }
  }
}

// q4_0 / q5_0 / q8_0 / q4_k / q5_k (whole blocks) and q4_1 over rows m0 .. m1, outputs n0 .. n1.
template <class Dot>
void q_linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (a.w_dtype != DType::q4_1) return whole_block_linear_rows<Dot>(a, m0, m1, n0, n1);
  return m1 - m0 <= kQStreamRows ? q41_rows<Dot, true>(a, m0, m1, n0, n1)
                                 : q41_rows<Dot, false>(a, m0, m1, n0, n1);
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx512
