#pragma once
// AVX2 q4_0 linear, included by linear_q8_avx2.cpp. One vector lane per weight row: block b of
// a group of 8 weight rows is transposed into 8 vectors u[o] (lane r: the 4 nibbles of
// elements 4o .. 4o + 3 of row r, o < 4, or of elements 16 + 4(o - 4) .. for o >= 4, as
// unsigned bytes) and the 8 scales, so one vpmaddubsw against 4 x bytes broadcast does 4
// elements of 8 outputs. The 8 products of a block are summed in int16 (exact: each vpmaddubsw
// lane is at most 2 * 15 * 127 and 8 of them 30480 < 2^15), then one vpmaddwd by 1 gives each
// row's whole 32-element dot in int32 before its one f32 scale and FMA (kernels.h, q4_0).
// The transposition is shared by every x row of a tile: small calls (decode) transpose each
// block as they stream it; calls of kQ40PanelMinRows rows or more transpose a panel of
// kQ40PanelGroups groups once per kQ40PanelBlocks blocks and run all their x rows over it.
// Each output's FMAs run in block order whatever the path, so results do not depend on m, on
// the row's place in the batch or on the thread split.
#include "kernels/backend.h"
#include "kernels/simd_avx2.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

constexpr int64_t kQ40BlockBytes = 18;
constexpr int kQ40Group = 8;             // weight rows per vector, one per lane
constexpr int64_t kQ40PanelBlocks = 32;  // blocks per panel chunk
constexpr int kQ40PanelGroups = 2;       // groups per panel: 2 x 32 x 288 B = 18 KiB, in L1
constexpr int64_t kQ40PanelMinRows = 8;  // x rows from which transposing a panel pays off
// x rows per panel tile of 2 groups (16 outputs) and of a lone group: each (row, group) pair
// holds an f32 accumulator and an int16 sum in registers, so 2 x 2 leaves room for the weight
// and x vectors (3 x 2 measured slower here, and 4 x 2 spills).
constexpr int kQ40TileRows2 = 2;
constexpr int kQ40TileRows1 = 4;

// Block b of 8 weight rows, transposed (see the top of the file).
struct alignas(32) Q40Group {
  __m256i u[8];
  __m256 d;
};

// The 8 weight rows of a group starting at row j0 of a.w (rows past `cols` repeat the last).
struct Q40Rows {
  const uint8_t* row[kQ40Group];
  const uint8_t* at(int r) const { return row[r]; }
};

// A whole group as its first row and the row stride: the streaming loop then addresses its 8
// rows from a few registers instead of reloading 8 pointers from the stack every block.
struct Q40Strided {
  const uint8_t* base;
  int64_t stride;
  const uint8_t* at(int r) const { return base + r * stride; }
};

inline Q40Rows q40_group_rows(const LinearArgs& a, int64_t j0, int64_t cols, int64_t row_bytes) {
  Q40Rows g;
  const auto* base = static_cast<const uint8_t*>(a.w) + j0 * row_bytes;
  for (int r = 0; r < kQ40Group; ++r) g.row[r] = base + min64(r, cols - 1) * row_bytes;
  return g;
}

inline int load_u16(const uint8_t* p) {
  uint16_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

// Transposes block b of the group: the 8 x 16 quant bytes as 4 registers of 2 rows each (row z
// in the low half, row z + 4 in the high half), a 4 x 4 transpose of 32-bit words within each
// half (word o of rows 0..3 | of rows 4..7), then the nibbles.
template <class Rows>
inline void q40_transpose(const Rows& g, int64_t b, Q40Group& out) {
  const int64_t at = b * kQ40BlockBytes;
  auto quants = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.at(r) + at + 2));
  };
  __m256i z[4];
  DEEPINFER_UNROLL
  for (int r = 0; r < 4; ++r)
    z[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(quants(r)), quants(r + 4), 1);
  const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
  const __m256i words[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                            _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
  const __m256i low = _mm256_set1_epi8(0x0f);
  DEEPINFER_UNROLL
  for (int o = 0; o < 4; ++o) {
    out.u[o] = _mm256_and_si256(words[o], low);                            // elements 4o..
    out.u[o + 4] = _mm256_and_si256(_mm256_srli_epi16(words[o], 4), low);  // 16 + 4o..
  }
  // The 8 f16 scales (AVX2 has no cheap 16-bit gather): one vpinsrw from memory each.
  __m128i d = _mm_cvtsi32_si128(load_u16(g.at(0) + at));
  d = _mm_insert_epi16(d, load_u16(g.at(1) + at), 1);
  d = _mm_insert_epi16(d, load_u16(g.at(2) + at), 2);
  d = _mm_insert_epi16(d, load_u16(g.at(3) + at), 3);
  d = _mm_insert_epi16(d, load_u16(g.at(4) + at), 4);
  d = _mm_insert_epi16(d, load_u16(g.at(5) + at), 5);
  d = _mm_insert_epi16(d, load_u16(g.at(6) + at), 6);
  d = _mm_insert_epi16(d, load_u16(g.at(7) + at), 7);
  out.d = _mm256_cvtph_ps(d);
}

inline int32_t q40_load_i32(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

// Block b of x rows i0 .. i0 + MR - 1 against NG transposed groups, into acc.
template <int MR, int NG>
inline void q40_block(const LinearArgs& a, int64_t i0, int64_t b, int64_t blocks,
                      const Q40Group* const* w, __m256 (&acc)[MR][NG]) {
  __m256i t[MR][NG];  // int16 sums of the block's products, 2 per row lane
  const int8_t* xq = a.xq + i0 * a.k + b * kQuantBlock;
  DEEPINFER_UNROLL
  for (int o = 0; o < 8; ++o) {
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m256i xb = _mm256_set1_epi32(q40_load_i32(xq + r * a.k + 4 * o));
      DEEPINFER_UNROLL
      for (int g = 0; g < NG; ++g) {
        const __m256i p = _mm256_maddubs_epi16(w[g]->u[o], xb);
        t[r][g] = o == 0 ? p : _mm256_add_epi16(t[r][g], p);
        // Keeps the sum a running one: GCC otherwise reassociates the integer adds into a tree
        // over all 8 products of every (row, group), which spills them to the stack (1.5x
        // slower prefill). A lone output vector (decode) has the registers for the tree.
        if constexpr (MR * NG > 1) asm("" : "+x"(t[r][g]));
      }
    }
  }
  const __m256i ones = _mm256_set1_epi16(1);
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    const int64_t at = ((i0 + r) * blocks + b) * 8;
    // -8 * (the block's x sum): the offset of the unsigned nibbles (quantize_x_blocks).
    const __m256i start = _mm256_set1_epi32(a.xt[at]);
    const __m256 dx = _mm256_set1_ps(a.xd[at]);
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g) {
      const __m256i dot = _mm256_add_epi32(start, _mm256_madd_epi16(t[r][g], ones));
      acc[r][g] = _mm256_fmadd_ps(_mm256_mul_ps(w[g]->d, dx), _mm256_cvtepi32_ps(dot), acc[r][g]);
    }
  }
}

// acc into y[i0 : i0 + MR, j0 : j0 + cols] (cols <= 8 * NG); with the bias when `last`.
template <int MR, int NG>
inline void q40_store(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols, bool last,
                      __m256 (&acc)[MR][NG]) {
  DEEPINFER_UNROLL
  for (int g = 0; g < NG; ++g) {
    const int64_t jg = j0 + g * kQ40Group;
    const int64_t width = cols - g * kQ40Group;
    const __m256i mask = first_lanes(width);
    const bool full = width >= kQ40Group;
    const bool bias = last && a.bias;
    const __m256 b = !bias  ? _mm256_setzero_ps()
                     : full ? _mm256_loadu_ps(a.bias + jg)
                            : _mm256_maskload_ps(a.bias + jg, mask);
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m256 v = bias ? _mm256_add_ps(acc[r][g], b) : acc[r][g];
      float* out = a.y + (i0 + r) * a.n + jg;
      if (full) {
        _mm256_storeu_ps(out, v);
      } else {
        _mm256_maskstore_ps(out, mask, v);
      }
    }
  }
}

// Small calls: x rows i0 .. i0 + MR - 1 by one group of weight rows (starting at row j0, cols
// of them), each block transposed as it streams, prefetching the next group's rows
// (contiguous after these) at the pace this tile streams them: per block, the 3 lines that
// cover the next 8 * 18 bytes. (Tiles of 2 groups, which halve the x loads, measured no faster
// at m = 1 here: decode is bound by DRAM.)
template <int MR, class Rows>
void q40_stream_tile(const LinearArgs& a, int64_t i0, const Rows& g, int64_t j0, int64_t cols,
                     int64_t blocks, int64_t row_bytes) {
  __m256 acc[MR][1];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) acc[r][0] = _mm256_setzero_ps();
  constexpr int64_t stride = kQ40Group * kQ40BlockBytes;
  const char* next = reinterpret_cast<const char*>(g.at(0) + kQ40Group * row_bytes);
  for (int64_t b = 0; b < blocks; ++b) {
    DEEPINFER_UNROLL
    for (int q = 0; q < 3; ++q) _mm_prefetch(next + b * stride + q * 64, _MM_HINT_T0);
    Q40Group w;
    q40_transpose(g, b, w);
    const Q40Group* groups[1] = {&w};
    q40_block<MR, 1>(a, i0, b, blocks, groups, acc);
  }
  q40_store<MR, 1>(a, i0, j0, cols, true, acc);
}

// x rows m0 .. m1 in tiles of MR rows, the rest in smaller ones.
template <int MR, class Rows>
void q40_stream_rows(const LinearArgs& a, int64_t m0, int64_t m1, const Rows& g, int64_t j,
                     int64_t cols, int64_t blocks, int64_t row_bytes) {
  int64_t i = m0;
  for (; i + MR <= m1; i += MR) q40_stream_tile<MR>(a, i, g, j, cols, blocks, row_bytes);
  if constexpr (MR > 1)
    if (i < m1) q40_stream_rows<MR - 1>(a, i, m1, g, j, cols, blocks, row_bytes);
}

void q40_stream(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks * kQ40BlockBytes;
  for (int64_t j = n0; j < n1; j += kQ40Group) {
    const int64_t cols = min64(kQ40Group, n1 - j);
    if (cols == kQ40Group) {
      const Q40Strided g{static_cast<const uint8_t*>(a.w) + j * row_bytes, row_bytes};
      q40_stream_rows<4>(a, m0, m1, g, j, cols, blocks, row_bytes);
    } else {
      q40_stream_rows<4>(a, m0, m1, q40_group_rows(a, j, cols, row_bytes), j, cols, blocks,
                         row_bytes);
    }
  }
}

// Blocks [b0, b1) of x rows i0 .. i0 + MR - 1 by the NG transposed groups of panel (indexed
// [g][b - b0]); starts from y unless b0 == 0, and adds the bias when b1 is the last block.
template <int MR, int NG>
void q40_panel_tile(const LinearArgs& a, int64_t i0, const Q40Group* panel, int64_t j0,
                    int64_t cols, int64_t b0, int64_t b1, int64_t blocks) {
  __m256 acc[MR][NG];
  DEEPINFER_UNROLL
  for (int g = 0; g < NG; ++g) {
    const int64_t width = cols - g * kQ40Group;
    const __m256i mask = first_lanes(width);
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const float* from = a.y + (i0 + r) * a.n + j0 + g * kQ40Group;
      acc[r][g] = b0 == 0              ? _mm256_setzero_ps()
                  : width >= kQ40Group ? _mm256_loadu_ps(from)
                                       : _mm256_maskload_ps(from, mask);
    }
  }
  for (int64_t b = b0; b < b1; ++b) {
    const Q40Group* groups[NG];
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g) groups[g] = panel + g * kQ40PanelBlocks + (b - b0);
    q40_block<MR, NG>(a, i0, b, blocks, groups, acc);
  }
  q40_store<MR, NG>(a, i0, j0, cols, b1 == blocks, acc);
}

template <int MR, int NG>
void q40_panel_rows(const LinearArgs& a, int64_t m0, int64_t m1, const Q40Group* panel, int64_t j0,
                    int64_t cols, int64_t b0, int64_t b1, int64_t blocks) {
  int64_t i = m0;
  for (; i + MR <= m1; i += MR) q40_panel_tile<MR, NG>(a, i, panel, j0, cols, b0, b1, blocks);
  if constexpr (MR > 1)
    if (i < m1) q40_panel_rows<MR - 1, NG>(a, i, m1, panel, j0, cols, b0, b1, blocks);
}

void q40_panels(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks * kQ40BlockBytes;
  Q40Group panel[kQ40PanelGroups * kQ40PanelBlocks];
  for (int64_t j = n0; j < n1; j += kQ40PanelGroups * kQ40Group) {
    const int64_t cols = min64(kQ40PanelGroups * kQ40Group, n1 - j);
    const int ng = static_cast<int>((cols + kQ40Group - 1) / kQ40Group);
    Q40Rows g[kQ40PanelGroups];
    for (int p = 0; p < ng; ++p)
      g[p] =
          q40_group_rows(a, j + p * kQ40Group, min64(kQ40Group, cols - p * kQ40Group), row_bytes);
    for (int64_t b0 = 0; b0 < blocks; b0 += kQ40PanelBlocks) {
      const int64_t b1 = min64(blocks, b0 + kQ40PanelBlocks);
      for (int p = 0; p < ng; ++p)
        for (int64_t b = b0; b < b1; ++b)
          q40_transpose(g[p], b, panel[p * kQ40PanelBlocks + b - b0]);
      if (ng == 2) {
        q40_panel_rows<kQ40TileRows2, 2>(a, m0, m1, panel, j, cols, b0, b1, blocks);
      } else {
        q40_panel_rows<kQ40TileRows1, 1>(a, m0, m1, panel, j, cols, b0, b1, blocks);
      }
    }
  }
}

void q40_linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (m1 - m0 >= kQ40PanelMinRows) return q40_panels(a, m0, m1, n0, n1);
  q40_stream(a, m0, m1, n0, n1);
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx2
