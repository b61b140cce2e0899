#pragma once
// AVX-512 q4_0 linear, included by linear_q8_avx512.h (both of its translation units: BW and
// VNNI supply Dot). One vector lane per weight row: a block of 16 weight rows is transposed
// into 8 vectors u[o] (lane r: the 4 nibbles of elements 4o .. 4o + 3 of row r) and the 16
// scales, so one vpdpbusd against 4 x bytes broadcast does 4 elements of 16 outputs, and a
// block's whole 32-element integer dot is done before its one f32 scale and FMA (kernels.h,
// q4_0). The transposition is shared by every x row of a tile: small calls (decode) transpose
// each block as they stream it; calls of kPanelMinRows rows or more transpose a panel of 32
// weight rows once per kPanelBlocks blocks and run all their x rows over it, 4 rows x 32
// outputs per tile. Each output's FMAs run in block order whatever the path, so results do
// not depend on m, on the row's place in the batch or on the thread split.
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int64_t kQ40BlockBytes = 18;
constexpr int kQ40Group = 16;         // weight rows per vector, one per lane
constexpr int64_t kPanelBlocks = 32;  // blocks per panel chunk: 2 x 32 x 576 B = 36 KiB
constexpr int64_t kPanelMinRows = 8;  // x rows from which transposing a panel pays off

// Block b of 16 weight rows, transposed (see the top of the file).
struct alignas(64) Q40Group {
  __m512i u[8];
  __m512 d;
};

// The 16 weight rows of a group starting at row j0 of a.w (rows past `cols` repeat the last).
struct Q40Rows {
  const uint8_t* row[kQ40Group];
  __m512i offsets;  // byte offset of each row from row[0], for the scale gather
};

inline Q40Rows q40_rows(const LinearArgs& a, int64_t j0, int64_t cols, int64_t row_bytes) {
  Q40Rows g;
  const auto* base = static_cast<const uint8_t*>(a.w) + j0 * row_bytes;
  alignas(64) int32_t off[kQ40Group];
  for (int r = 0; r < kQ40Group; ++r) {
    const int64_t at = min64(r, cols - 1) * row_bytes;
    g.row[r] = base + at;
    off[r] = static_cast<int32_t>(at);
  }
  g.offsets = _mm512_load_si512(off);
  return g;
}

// Transposes block b of the group: 16 x 16 quant bytes as 4 registers of 4 rows each (lane
// group l of register z holds row z + 4l), a 4 x 4 transpose of 32-bit words within every
// 128-bit lane group (word o of all 16 rows, in row order), then the nibbles.
inline void q40_transpose(const Q40Rows& g, int64_t b, Q40Group& out) {
  const int64_t at = b * kQ40BlockBytes + 2;
  auto quants = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.row[r] + at));
  };
  __m512i z[4];
  DEEPINFER_UNROLL
  for (int r = 0; r < 4; ++r) {
    __m512i v = _mm512_castsi128_si512(quants(r));
    v = _mm512_inserti32x4(v, quants(r + 4), 1);
    v = _mm512_inserti32x4(v, quants(r + 8), 2);
    z[r] = _mm512_inserti32x4(v, quants(r + 12), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  const __m512i words[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                            _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
  const __m512i low = _mm512_set1_epi8(0x0f);
  DEEPINFER_UNROLL
  for (int o = 0; o < 4; ++o) {
    out.u[o] = _mm512_and_si512(words[o], low);                            // elements 4o..
    out.u[o + 4] = _mm512_and_si512(_mm512_srli_epi32(words[o], 4), low);  // 16 + 4o..
  }
  const __m512i d = _mm512_i32gather_epi32(g.offsets, g.row[0] + b * kQ40BlockBytes, 1);
  out.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d));
}

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

// Block b of x rows i0 .. i0 + MR - 1 against NG transposed groups, into acc.
template <class Dot, int MR, int NG>
inline void q40_block(const LinearArgs& a, int64_t i0, int64_t b, int64_t blocks,
                      const Q40Group* const* w, __m512 (&acc)[MR][NG]) {
  __m512i t[MR][NG];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    // -8 * (the block's x sum): the offset of the unsigned nibbles (quantize_x_blocks).
    const __m512i start = _mm512_set1_epi32(a.xt[((i0 + r) * blocks + b) * 8]);
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g) t[r][g] = start;
  }
  DEEPINFER_UNROLL
  for (int o = 0; o < 8; ++o) {
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m512i xb =
          _mm512_set1_epi32(load_i32(a.xq + (i0 + r) * a.k + b * kQuantBlock + 4 * o));
      DEEPINFER_UNROLL
      for (int g = 0; g < NG; ++g) t[r][g] = Dot::unsigned_dot(t[r][g], w[g]->u[o], xb);
    }
  }
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    const __m512 dx = _mm512_set1_ps(a.xd[((i0 + r) * blocks + b) * 8]);
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g)
      acc[r][g] =
          _mm512_fmadd_ps(_mm512_mul_ps(w[g]->d, dx), _mm512_cvtepi32_ps(t[r][g]), acc[r][g]);
  }
}

inline __mmask16 q40_mask(int64_t cols) {
  return cols >= kQ40Group ? __mmask16{0xffff} : static_cast<__mmask16>((1u << cols) - 1);
}

// acc into y[i0 : i0 + MR, j0 : j0 + cols] (cols <= 16 * NG); with the bias when `last`.
template <int MR, int NG>
inline void q40_store(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols, bool last,
                      __m512 (&acc)[MR][NG]) {
  DEEPINFER_UNROLL
  for (int g = 0; g < NG; ++g) {
    const int64_t jg = j0 + g * kQ40Group;
    const __mmask16 mask = q40_mask(cols - g * kQ40Group);
    const __m512 bias =
        last && a.bias ? _mm512_maskz_loadu_ps(mask, a.bias + jg) : _mm512_setzero_ps();
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m512 v = last && a.bias ? _mm512_add_ps(acc[r][g], bias) : acc[r][g];
      _mm512_mask_storeu_ps(a.y + (i0 + r) * a.n + jg, mask, v);
    }
  }
}

// Small calls: rows i0 .. i0 + MR - 1 by one group of weight rows, each block transposed as it
// streams; PF prefetches the next group's rows (contiguous after these) 5 lines per block,
// which covers their 16 x 18 bytes per block.
template <class Dot, int MR, bool PF>
void q40_stream_tile(const LinearArgs& a, int64_t i0, const Q40Rows& g, int64_t j0, int64_t cols,
                     int64_t blocks, int64_t row_bytes) {
  __m512 acc[MR][1];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) acc[r][0] = _mm512_setzero_ps();
  const char* next = reinterpret_cast<const char*>(g.row[0] + kQ40Group * row_bytes);
  for (int64_t b = 0; b < blocks; ++b) {
    if constexpr (PF) {
      DEEPINFER_UNROLL
      for (int q = 0; q < 5; ++q) _mm_prefetch(next + (b * 5 + q) * 64, _MM_HINT_T0);
    }
    Q40Group w;
    q40_transpose(g, b, w);
    const Q40Group* groups[1] = {&w};
    q40_block<Dot, MR, 1>(a, i0, b, blocks, groups, acc);
  }
  q40_store<MR, 1>(a, i0, j0, cols, true, acc);
}

template <class Dot, bool PF>
void q40_stream(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks * kQ40BlockBytes;
  for (int64_t j = n0; j < n1; j += kQ40Group) {
    const int64_t cols = min64(kQ40Group, n1 - j);
    const Q40Rows g = q40_rows(a, j, cols, row_bytes);
    int64_t i = m0;
    for (; i + 4 <= m1; i += 4) q40_stream_tile<Dot, 4, PF>(a, i, g, j, cols, blocks, row_bytes);
    switch (m1 - i) {
      case 3:
        q40_stream_tile<Dot, 3, PF>(a, i, g, j, cols, blocks, row_bytes);
        break;
      case 2:
        q40_stream_tile<Dot, 2, PF>(a, i, g, j, cols, blocks, row_bytes);
        break;
      case 1:
        q40_stream_tile<Dot, 1, PF>(a, i, g, j, cols, blocks, row_bytes);
        break;
      default:
        break;
    }
  }
}

// Blocks [b0, b1) of x rows i0 .. i0 + MR - 1 by the NG transposed groups of panel (indexed
// [g][b - b0]); starts from y unless b0 == 0, and adds the bias when b1 is the last block.
template <class Dot, int MR, int NG>
void q40_panel_tile(const LinearArgs& a, int64_t i0, const Q40Group* panel, int64_t j0,
                    int64_t cols, int64_t b0, int64_t b1, int64_t blocks) {
  __m512 acc[MR][NG];
  DEEPINFER_UNROLL
  for (int g = 0; g < NG; ++g) {
    const __mmask16 mask = q40_mask(cols - g * kQ40Group);
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r)
      acc[r][g] = b0 == 0 ? _mm512_setzero_ps()
                          : _mm512_maskz_loadu_ps(mask, a.y + (i0 + r) * a.n + j0 + g * kQ40Group);
  }
  for (int64_t b = b0; b < b1; ++b) {
    const Q40Group* groups[NG];
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g) groups[g] = panel + g * kPanelBlocks + (b - b0);
    q40_block<Dot, MR, NG>(a, i0, b, blocks, groups, acc);
  }
  q40_store<MR, NG>(a, i0, j0, cols, b1 == blocks, acc);
}

template <class Dot, int NG>
void q40_panel_rows(const LinearArgs& a, int64_t m0, int64_t m1, const Q40Group* panel, int64_t j0,
                    int64_t cols, int64_t b0, int64_t b1, int64_t blocks) {
  int64_t i = m0;
  for (; i + 4 <= m1; i += 4) q40_panel_tile<Dot, 4, NG>(a, i, panel, j0, cols, b0, b1, blocks);
  switch (m1 - i) {
    case 3:
      return q40_panel_tile<Dot, 3, NG>(a, i, panel, j0, cols, b0, b1, blocks);
    case 2:
      return q40_panel_tile<Dot, 2, NG>(a, i, panel, j0, cols, b0, b1, blocks);
    case 1:
      return q40_panel_tile<Dot, 1, NG>(a, i, panel, j0, cols, b0, b1, blocks);
    default:
      return;
  }
}

template <class Dot>
void q40_panels(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks * kQ40BlockBytes;
  Q40Group panel[2 * kPanelBlocks];
  for (int64_t j = n0; j < n1; j += 2 * kQ40Group) {
    const int64_t cols = min64(2 * kQ40Group, n1 - j);
    const int ng = cols > kQ40Group ? 2 : 1;
    Q40Rows g[2];
    for (int p = 0; p < ng; ++p)
      g[p] = q40_rows(a, j + p * kQ40Group, min64(kQ40Group, cols - p * kQ40Group), row_bytes);
    for (int64_t b0 = 0; b0 < blocks; b0 += kPanelBlocks) {
      const int64_t b1 = min64(blocks, b0 + kPanelBlocks);
      for (int p = 0; p < ng; ++p)
        for (int64_t b = b0; b < b1; ++b) q40_transpose(g[p], b, panel[p * kPanelBlocks + b - b0]);
      if (ng == 2) {
        q40_panel_rows<Dot, 2>(a, m0, m1, panel, j, cols, b0, b1, blocks);
      } else {
        q40_panel_rows<Dot, 1>(a, m0, m1, panel, j, cols, b0, b1, blocks);
      }
    }
  }
}

template <class Dot>
void q40_linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (m1 - m0 >= kPanelMinRows) return q40_panels<Dot>(a, m0, m1, n0, n1);
  return m1 - m0 <= 2 ? q40_stream<Dot, true>(a, m0, m1, n0, n1)
                      : q40_stream<Dot, false>(a, m0, m1, n0, n1);
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx512
