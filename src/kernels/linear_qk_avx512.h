#pragma once
// AVX-512 block-weight linear for the per-lane types q5_1 / q6_k, shared by
// linear_qk_avx512.cpp (AVX-512BW: vpmaddubsw + vpmaddwd) and linear_qk_avx512vnni.cpp
// (vpdpbusd); include it from those files only (it needs their flags; internal linkage).
//
// As linear_q8_avx512.h: one 512-bit step is blocks b and b + 1 (lanes 0-7 and 8-15, the
// accumulator layout of kernels.h), decoded two at a time with the values of the 256-bit
// decoders of linear_qk_decode.h (the AVX2 path). q6_k has 8 blocks per super-block,
// so a step never straddles two; only q5_1 rows can end in a lone block (lanes 8-15
// masked off).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/backend.h"
#include "kernels/linear_qk_decode.h"
#include "kernels/linear_xblock_avx512.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

using qk::kWithMin;

constexpr int64_t kQkPanelRows = 64;
constexpr int64_t kQkStreamRows = 8;

template <bool V>
struct QkFlag {
  static constexpr bool value = V;
};

template <DType W, bool Lone>
inline XStep qk_x_step(const LinearArgs& a, int64_t i, int64_t b, int64_t blocks) {
  XStep x;
  const __m512i t = load_x_block<Lone>(a, i, b, blocks, x);
  x.offset = kWithMin<W> ? _mm512_setzero_si512() : t;
  x.ds = _mm512_castsi512_ps(t);
  return x;
}

// Blocks p0, p1 of q5_1 (the values of qk::decode, two at once): nibbles as in q4_0
// (128-bit lanes [qs0, qs0, qs1, qs1], the 2nd and 4th shifted by 4), plus 16 where the 64 bits
// qh0 | qh1 << 32 are set; d (and q5_1's m, the f16 after it) from one 32-bit load per block.
template <DType W>
inline void q5_pair(const uint8_t* p0, const uint8_t* p1, __m512i& q, __m512& d, __m512& m) {
  constexpr int64_t kQh = 4, kQs = 8;
  const __m256i lo =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + kQs)));
  const __m256i hi =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + kQs)));
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  q = _mm512_and_si512(_mm512_srlv_epi64(both, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)),
                       _mm512_set1_epi8(0x0f));
  const __mmask64 fifth = static_cast<__mmask64>(qk::u32_at(p0 + kQh)) |
                          (static_cast<__mmask64>(qk::u32_at(p1 + kQh)) << 32);
  q = _mm512_mask_add_epi8(q, fifth, q, _mm512_set1_epi8(0x10));
  const __m128i h = _mm_unpacklo_epi32(_mm_loadu_si32(p0), _mm_loadu_si32(p1));  // d0 x0 d1 x1
  const __m512 f = _mm512_castps128_ps512(_mm_cvtph_ps(h));
  d = _mm512_permutexvar_ps(_mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0), f);
  m = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1), f);
}

template <class Dot, DType W, int MR, int NR, bool PF>
void qk_tile(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks / qk::kSubBlocks<W> * qk::kStoredBytes<W>;
  const uint8_t* wr[NR];
  DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c)
    wr[c] = static_cast<const uint8_t*>(a.w) + (j0 + min64(c, cols - 1)) * row_bytes;
  __m512 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();

  auto step = [&](int64_t b, auto lone) {
    constexpr bool kLone = decltype(lone)::value;
    XStep x[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) x[r] = qk_x_step<W, kLone>(a, i0 + r, b, blocks);
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      if constexpr (PF)
        _mm_prefetch(reinterpret_cast<const char*>(wr[c] + qk::block_byte<W>(b) + NR * row_bytes),
                     _MM_HINT_T0);
      const uint8_t* p0 = wr[c] + b * qk::kStoredBytes<W>;
      const uint8_t* p1 = kLone ? p0 : p0 + qk::kStoredBytes<W>;
      __m512i wq;
      __m512 dw, mw;
      q5_pair<W>(p0, p1, wq, dw, mw);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) {
        const __m512i t = Dot::unsigned_dot(x[r].offset, wq, x[r].q);
        const __m512 d = _mm512_mul_ps(dw, x[r].d);
        if constexpr (kLone) {
          acc[r][c] = _mm512_mask3_fmadd_ps(d, _mm512_cvtepi32_ps(t), acc[r][c], 0x00ff);
          if constexpr (kWithMin<W>)
            acc[r][c] = _mm512_mask3_fmadd_ps(mw, x[r].ds, acc[r][c], 0x00ff);
        } else {
          acc[r][c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(t), acc[r][c]);
          if constexpr (kWithMin<W>) acc[r][c] = _mm512_fmadd_ps(mw, x[r].ds, acc[r][c]);
        }
      }
    }
  };
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) step(b, QkFlag<false>{});
  if (b < blocks) step(b, QkFlag<true>{});
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

// q6_k a super-block at a time: its 16 group scales are computed once per weight row into one
// vector, from which each of its 4 steps takes its 16 lanes with one permute; the quants of a
// step's two blocks come from one load of 64 bytes of low bits. The values are the ones decode()
// gives (exact products), so results are bitwise those of qk_tile.
template <DType W>
inline __m512 super_scales(const uint8_t* super) {
  const __m512 sc = _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(super + 192))));
  return _mm512_mul_ps(_mm512_set1_ps(qk::f16_at(super + 208)), sc);
}

// The quants of blocks 2s and 2s + 1 of a super-block.
template <DType W>
inline __m512i super_quants(const uint8_t* super, int s) {
  const int half = s / 2, high = s % 2;  // quarters 2 high, 2 high + 1 of the half
  const __m512i ql = _mm512_loadu_si512(super + 64 * half);
  const __m512i lo =
      _mm512_and_si512(_mm512_srl_epi16(ql, _mm_cvtsi32_si128(4 * high)), _mm512_set1_epi8(0x0f));
  const __m512i qh = _mm512_broadcast_i64x4(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 128 + 32 * half)));
  const __m512i shifts = _mm512_mask_blend_epi16(0xffff0000u, _mm512_set1_epi16(4 * high),
                                                 _mm512_set1_epi16(4 * high + 2));
  const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qh, shifts), _mm512_set1_epi8(0x03));
  return _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
}

// Lane indices into super_scales() for step s: group 4 s + lane / 4.
template <DType W>
inline __m512i scale_index(int s) {
  return _mm512_add_epi32(_mm512_set1_epi32(4 * s),
                          _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
}

template <class Dot, DType W, int MR, int NR, bool PF>
void qk_tile_super(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t supers = blocks / 8;
  const int64_t row_bytes = supers * qk::kStoredBytes<W>;
  const uint8_t* wr[NR];
  DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c)
    wr[c] = static_cast<const uint8_t*>(a.w) + (j0 + min64(c, cols - 1)) * row_bytes;
  __m512 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();

  for (int64_t sb = 0; sb < supers; ++sb) {
    __m512 table[NR];
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      const uint8_t* super = wr[c] + sb * qk::kStoredBytes<W>;
      if constexpr (PF) {
        for (int64_t line = 0; line < qk::kStoredBytes<W>; line += 64)
          _mm_prefetch(reinterpret_cast<const char*>(super + NR * row_bytes + line), _MM_HINT_T0);
      }
      table[c] = super_scales<W>(super);
    }
    DEEPINFER_UNROLL
    for (int s = 0; s < 4; ++s) {
      const int64_t b = sb * 8 + 2 * s;
      XStep x[MR];
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) x[r] = qk_x_step<W, false>(a, i0 + r, b, blocks);
      const __m512i d_index = scale_index<W>(s);
      const __m512i m_index = _mm512_add_epi32(d_index, _mm512_set1_epi32(8));
      DEEPINFER_UNROLL
      for (int c = 0; c < NR; ++c) {
        const uint8_t* super = wr[c] + sb * qk::kStoredBytes<W>;
        const __m512i wq = super_quants<W>(super, s);
        const __m512 dw = _mm512_permutexvar_ps(d_index, table[c]);
        const __m512 mw = kWithMin<W> ? _mm512_permutexvar_ps(m_index, table[c]) : dw;
        DEEPINFER_UNROLL
        for (int r = 0; r < MR; ++r) {
          const __m512i t = Dot::unsigned_dot(x[r].offset, wq, x[r].q);
          acc[r][c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, x[r].d), _mm512_cvtepi32_ps(t), acc[r][c]);
          if constexpr (kWithMin<W>) acc[r][c] = _mm512_fmadd_ps(mw, x[r].ds, acc[r][c]);
        }
      }
    }
  }
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

template <class Dot, DType W, int MR, int NR, bool PF>
void qk_tiles(const LinearArgs& a, int64_t i0, int64_t j_begin, int64_t j_end) {
  for (int64_t j = j_begin; j < j_end; j += NR)
    if constexpr (qk::kSubBlocks<W> == 8) {
      qk_tile_super<Dot, W, MR, NR, PF>(a, i0, j, min64(NR, j_end - j));
    } else {
      qk_tile<Dot, W, MR, NR, PF>(a, i0, j, min64(NR, j_end - j));
    }
}

template <class Dot, DType W, bool PF>
void qk_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t jp = n0; jp < n1; jp += kQkPanelRows) {
    const int64_t jp_end = min64(jp + kQkPanelRows, n1);
    int64_t i = m0;
    for (; i + 4 <= m1; i += 4) qk_tiles<Dot, W, 4, 4, PF>(a, i, jp, jp_end);
    switch (m1 - i) {
      case 3:
        qk_tiles<Dot, W, 3, 4, PF>(a, i, jp, jp_end);
        break;
      case 2:
        qk_tiles<Dot, W, 2, 4, PF>(a, i, jp, jp_end);
        break;
      case 1:
        qk_tiles<Dot, W, 1, 4, true>(a, i, jp, jp_end);
        break;
      default:
        break;
    }
  }
}

template <class Dot, DType W>
void qk_rows_of(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (m1 - m0 <= kQkStreamRows) return qk_rows<Dot, W, true>(a, m0, m1, n0, n1);
  qk_rows<Dot, W, false>(a, m0, m1, n0, n1);
}

template <class Dot>
void qk_linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  switch (a.w_dtype) {
    case DType::q5_1:
      return qk_rows_of<Dot, DType::q5_1>(a, m0, m1, n0, n1);
    default:
      return qk_rows_of<Dot, DType::q6_k>(a, m0, m1, n0, n1);
  }
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx512
