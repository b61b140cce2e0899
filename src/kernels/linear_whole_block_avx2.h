#pragma once
// AVX2 linear for the block types whose f32 work is per whole 32-element block (kernels.h:
// q4_0, q5_0, q8_0, and the sub-blocks of q4_k / q5_k), included by linear_q8_avx2.cpp. One
// vector lane per weight row: block b of a group of 8 weight rows is transposed into 8 vectors
// u[o] (lane r: the 4 quants of elements 4o .. 4o + 3 of row r as unsigned bytes: q4_0's /
// q4_k's nibbles, q5_0's / q5_k's nibbles with their fifth bit, q8_0's magnitudes, whose signs
// s[o] move onto x) and the 8 scales (q4_k / q5_k: d * the sub-block's scale, and the min term
// -dmin * its min), so one vpmaddubsw against 4 x bytes broadcast does 4 elements of 8 outputs.
// Each row's 32 products are summed exactly: 4-bit quants in int16 (each vpmaddubsw lane is at
// most 2 * 15 * 127 and 8 of them 30480 < 2^15), 5-bit ones in int16 per 4 of them
// (4 * 2 * 31 * 127 < 2^15), q8_0 in int32; then the whole block's dot in int32 gets its one f32
// scale and FMA (kernels.h; the k-quants a second FMA for the min term). A k-quant super-block is
// transposed whole: its 8 sub-blocks share the scale bytes.
// The transposition is shared by every x row of a tile: small calls (decode) transpose each
// block as they stream it; calls of kWbPanelMinRows rows or more transpose a panel of
// kWbPanelGroups groups once per kWbPanelBlocks<W> blocks and run all their x rows over it.
// Each output's FMAs run in block order whatever the path, so results do not depend on m, on
// the row's place in the batch or on the thread split.
#include <climits>
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/simd_avx2.h"
#include "kernels/whole_block_layout.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

using wb::kFiveBits;
using wb::kQuantsAt;
using wb::kStoredBytes;
using wb::kSub;
using wb::kWithMin;
constexpr int kWbGroup = 8;  // weight rows per vector, one per lane
// Blocks per panel chunk: 2 groups of 32 blocks of 288 B (q4_0, q5_0) = 18 KiB or of 320 B
// (q4_k, q5_k: 4 super-blocks, with the min terms) = 20 KiB, of 16 blocks of q8_0's 544 B =
// 17 KiB, in L1.
template <DType W>
constexpr int64_t kWbPanelBlocks = W == DType::q8_0 ? 16 : 32;
constexpr int kWbPanelGroups = 2;
constexpr int64_t kWbPanelMinRows = 8;  // x rows from which transposing a panel pays off
// x rows per panel tile of 2 groups (16 outputs) and of a lone group: each (row, group) pair
// holds an f32 accumulator and an integer sum in registers, so 2 x 2 leaves room for the
// weight and x vectors (3 x 2 measured slower here, and 4 x 2 spills).
constexpr int kWbTileRows2 = 2;
constexpr int kWbTileRows1 = 4;

// Block b of 8 weight rows, transposed (see the top of the file); q8_0 keeps the signed quants
// beside their magnitudes.
template <DType W>
struct alignas(32) WbGroup {
  __m256i u[8];
  __m256 d;
};
template <>
struct alignas(32) WbGroup<DType::q8_0> {
  __m256i u[8];
  __m256i s[8];
  __m256 d;
};
template <>
struct alignas(32) WbGroup<DType::q4_k> {
  __m256i u[8];
  __m256 d;
  __m256 m;
};
template <>
struct alignas(32) WbGroup<DType::q5_k> : WbGroup<DType::q4_k> {};

// The 8 weight rows of a group starting at row j0 of a.w (rows past `cols` repeat the last).
struct WbRows {
  const uint8_t* row[kWbGroup];
  const uint8_t* at(int r) const { return row[r]; }
};

// A whole group as its first row and the row stride: the streaming loop then addresses its 8
// rows from a few registers instead of reloading 8 pointers from the stack every block.
struct WbStrided {
  const uint8_t* base;
  int64_t stride;
  const uint8_t* at(int r) const { return base + r * stride; }
};

// A group of a repacked matrix (wb::repack_rows: q4_0, q5_0, q8_0, q4_k): its blocks, already
// transposed. at() is the group's start, as for WbStrided (the next group follows 8 stored rows
// later).
struct WbRepacked {
  const uint8_t* base;
  const uint8_t* at(int) const { return base; }
};

inline WbRows wb_group_rows(const LinearArgs& a, int64_t j0, int64_t cols, int64_t row_bytes) {
  WbRows g;
  const auto* base = static_cast<const uint8_t*>(a.w) + j0 * row_bytes;
  for (int r = 0; r < kWbGroup; ++r) g.row[r] = base + min64(r, cols - 1) * row_bytes;
  return g;
}

inline int load_u16(const uint8_t* p) {
  uint16_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

inline int32_t load_i32(const void* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

// The 16 bytes at offset `at` of the group's 8 rows as 32-bit words: words[o] lane r is word o
// of row r. Loaded as 4 registers of 2 rows each (row z in the low half, row z + 4 in the high
// half), then a 4 x 4 transpose of words within each half.
template <class Rows>
DEEPINFER_INLINE void wb_words(const Rows& g, int64_t at, __m256i (&words)[4]) {
  auto bytes = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.at(r) + at));
  };
  __m256i z[4];
  DEEPINFER_UNROLL
  for (int r = 0; r < 4; ++r)
    z[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(bytes(r)), bytes(r + 4), 1);
  const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
  words[0] = _mm256_unpacklo_epi64(t0, t2);
  words[1] = _mm256_unpackhi_epi64(t0, t2);
  words[2] = _mm256_unpacklo_epi64(t1, t3);
  words[3] = _mm256_unpackhi_epi64(t1, t3);
}

// q5_0's fifth bits as 0x10 in the bytes of u[o]: byte c of lane r is element 4o + c of row r,
// whose bit sits in byte o / 2 of the row's 32-bit qh at bit 4 (o % 2) + c. A byte shuffle
// copies that qh byte into the lane's 4 bytes, and a per-byte bit test picks bit c.
template <class Rows>
DEEPINFER_INLINE void q50_high_bits(const Rows& g, int64_t at, __m256i (&u)[8]) {
  const __m256i qh =
      _mm256_setr_epi32(load_i32(g.at(0) + at), load_i32(g.at(1) + at), load_i32(g.at(2) + at),
                        load_i32(g.at(3) + at), load_i32(g.at(4) + at), load_i32(g.at(5) + at),
                        load_i32(g.at(6) + at), load_i32(g.at(7) + at));
  const __m256i fifth = _mm256_set1_epi8(0x10);
  DEEPINFER_UNROLL
  for (int o = 0; o < 8; ++o) {
    const char s = static_cast<char>(o / 2);
    const __m256i spread = _mm256_shuffle_epi8(
        qh, _mm256_setr_epi8(s, s, s, s, s + 4, s + 4, s + 4, s + 4, s + 8, s + 8, s + 8, s + 8,
                             s + 12, s + 12, s + 12, s + 12, s, s, s, s, s + 4, s + 4, s + 4, s + 4,
                             s + 8, s + 8, s + 8, s + 8, s + 12, s + 12, s + 12, s + 12));
    const __m256i bit = _mm256_set1_epi32(o % 2 == 0 ? 0x08040201 : static_cast<int>(0x80402010));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    u[o] = _mm256_or_si256(u[o], _mm256_and_si256(set, fifth));
  }
}

// The 8 f16 at offset `at` of the group's rows as f32 (AVX2 has no cheap 16-bit gather: one
// vpinsrw from memory each).
template <class Rows>
DEEPINFER_INLINE __m256 wb_f16s(const Rows& g, int64_t at) {
  __m128i d = _mm_cvtsi32_si128(load_u16(g.at(0) + at));
  d = _mm_insert_epi16(d, load_u16(g.at(1) + at), 1);
  d = _mm_insert_epi16(d, load_u16(g.at(2) + at), 2);
  d = _mm_insert_epi16(d, load_u16(g.at(3) + at), 3);
  d = _mm_insert_epi16(d, load_u16(g.at(4) + at), 4);
  d = _mm_insert_epi16(d, load_u16(g.at(5) + at), 5);
  d = _mm_insert_epi16(d, load_u16(g.at(6) + at), 6);
  d = _mm_insert_epi16(d, load_u16(g.at(7) + at), 7);
  return _mm256_cvtph_ps(d);
}

// The 32-bit word at offset `at` of each of the group's 8 rows (lane r: row r).
template <class Rows>
DEEPINFER_INLINE __m256i wb_u32s(const Rows& g, int64_t at) {
  return _mm256_setr_epi32(load_i32(g.at(0) + at), load_i32(g.at(1) + at), load_i32(g.at(2) + at),
                           load_i32(g.at(3) + at), load_i32(g.at(4) + at), load_i32(g.at(5) + at),
                           load_i32(g.at(6) + at), load_i32(g.at(7) + at));
}

// Sub-block scales and min terms of a q4_k / q5_k super-block at `at` for the 8 rows (as the
// AVX-512 k4_scales: ggml's get_scale_min_k4 per lane, d * float(scale), -(dmin * float(min))).
// From the 8 rows' d and dmin and their scale bytes as three 32-bit words (lane r: row r).
template <DType W>
DEEPINFER_INLINE void k4_scales(__m256 d, __m256 dmin, __m256i s0, __m256i s1, __m256i s2,
                                WbGroup<W>* out) {
  const __m256i six = _mm256_set1_epi32(63), four = _mm256_set1_epi32(15);
  const __m256i two = _mm256_set1_epi32(3), sign = _mm256_set1_epi32(INT32_MIN);
  DEEPINFER_UNROLL
  for (int j = 0; j < 8; ++j) {
    __m256i scale, min;
    if (j < 4) {
      scale = _mm256_and_si256(_mm256_srli_epi32(s0, 8 * j), six);
      min = _mm256_and_si256(_mm256_srli_epi32(s1, 8 * j), six);
    } else {
      const int q = 8 * (j - 4);
      const __m256i top_scale = _mm256_and_si256(_mm256_srli_epi32(s0, q + 6), two);
      const __m256i top_min = _mm256_and_si256(_mm256_srli_epi32(s1, q + 6), two);
      scale = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s2, q), four),
                              _mm256_slli_epi32(top_scale, 4));
      min = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s2, q + 4), four),
                            _mm256_slli_epi32(top_min, 4));
    }
    out[j].d = _mm256_mul_ps(d, _mm256_cvtepi32_ps(scale));
    const __m256 m = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(min));
    out[j].m = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(m), sign));  // -m exactly
  }
}

template <DType W, class Rows>
DEEPINFER_INLINE void k4_scales(const Rows& g, int64_t at, WbGroup<W>* out) {
  k4_scales<W>(wb_f16s(g, at), wb_f16s(g, at + 2), wb_u32s(g, at + 4), wb_u32s(g, at + 8),
               wb_u32s(g, at + 12), out);
}

// The 8 sub-blocks of a q4_k / q5_k super-block at `at` (as the AVX-512 k4_quants).
template <DType W, class Rows>
DEEPINFER_INLINE void k4_quants(const Rows& g, int64_t at, WbGroup<W>* out) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  DEEPINFER_UNROLL
  for (int p = 0; p < 4; ++p) {
    __m256i lo[4], hi[4];  // elements 0 .. 15, 16 .. 31 of the pair
    wb_words(g, at + kQuantsAt<W> + 32 * p, lo);
    wb_words(g, at + kQuantsAt<W> + 32 * p + 16, hi);
    DEEPINFER_UNROLL
    for (int o = 0; o < 4; ++o) {
      out[2 * p].u[o] = _mm256_and_si256(lo[o], low);
      out[2 * p].u[o + 4] = _mm256_and_si256(hi[o], low);
      out[2 * p + 1].u[o] = _mm256_and_si256(_mm256_srli_epi16(lo[o], 4), low);
      out[2 * p + 1].u[o + 4] = _mm256_and_si256(_mm256_srli_epi16(hi[o], 4), low);
    }
  }
  if constexpr (W == DType::q5_k) {
    __m256i lo[4], hi[4];  // the 32 bytes of fifth bits: elements 4o .., then 16 + 4o ..
    wb_words(g, at + 16, lo);
    wb_words(g, at + 32, hi);
    const __m256i fifth = _mm256_set1_epi8(0x10);
    DEEPINFER_UNROLL
    for (int j = 0; j < 8; ++j) {
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << j));
      DEEPINFER_UNROLL
      for (int o = 0; o < 8; ++o) {
        const __m256i bits = o < 4 ? lo[o] : hi[o - 4];
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bits, bit), bit);
        out[j].u[o] = _mm256_or_si256(out[j].u[o], _mm256_and_si256(set, fifth));
      }
    }
  }
}

DEEPINFER_INLINE __m256i load_256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
DEEPINFER_INLINE __m256 load_f16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Repacked block p (wb::repack_rows) into out[0 .. kSub<W>): loads, the nibble split, q5_0's
// fifth bits each one shift into bit 4 of its byte, and q8_0's magnitudes beside its quants.
template <DType W>
DEEPINFER_INLINE void wb_unpack_repacked(const uint8_t* p, WbGroup<W>* out) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  if constexpr (W == DType::q4_k) {
    k4_scales<W>(load_f16x8(p), load_f16x8(p + 16), load_256(p + 32), load_256(p + 64),
                 load_256(p + 96), out);
    DEEPINFER_UNROLL
    for (int pair = 0; pair < 4; ++pair) {  // word 8 pair + o: sub-blocks 2 pair and 2 pair + 1
      DEEPINFER_UNROLL
      for (int o = 0; o < 8; ++o) {
        const __m256i words = load_256(p + 128 + 32 * (8 * pair + o));
        out[2 * pair].u[o] = _mm256_and_si256(words, low);
        out[2 * pair + 1].u[o] = _mm256_and_si256(_mm256_srli_epi16(words, 4), low);
      }
    }
  } else if constexpr (W == DType::q8_0) {  // the signed quants and their magnitudes
    DEEPINFER_UNROLL
    for (int o = 0; o < 8; ++o) {
      out->s[o] = load_256(p + 32 * o);
      out->u[o] = _mm256_sign_epi8(out->s[o], out->s[o]);
    }
    out->d = load_f16x8(p + 256);
  } else {
    static_assert(W == DType::q4_0 || W == DType::q5_0, "q4_0, q5_0, q8_0 and q4_k are repacked");
    DEEPINFER_UNROLL
    for (int o = 0; o < 4; ++o) {
      const __m256i words = load_256(p + 32 * o);
      out->u[o] = _mm256_and_si256(words, low);
      out->u[o + 4] = _mm256_and_si256(_mm256_srli_epi16(words, 4), low);
    }
    int64_t at = 128;
    if constexpr (W == DType::q5_0) {
      const __m256i bits = load_256(p + at), fifth = _mm256_set1_epi8(0x10);
      DEEPINFER_UNROLL
      for (int o = 0; o < 8; ++o) {  // bit o + 8c to bit 4 + 8c
        const __m256i moved =
            o <= 4 ? _mm256_slli_epi32(bits, 4 - o) : _mm256_srli_epi32(bits, o - 4);
        out->u[o] = _mm256_or_si256(out->u[o], _mm256_and_si256(moved, fifth));
      }
      at += 32;
    }
    out->d = load_f16x8(p + at);
  }
}

// Transposes stored block sb of the group into out[0 .. kSub<W>) (see the top of the file).
template <DType W, class Rows>
DEEPINFER_INLINE void wb_transpose(const Rows& g, int64_t sb, WbGroup<W>* out) {
  [[maybe_unused]] const int64_t at = sb * kStoredBytes<W>;
  if constexpr (std::is_same_v<Rows, WbRepacked>) {
    wb_unpack_repacked<W>(g.base + sb * wb::kRepackedBytes<W>, out);
  } else if constexpr (kWithMin<W>) {
    k4_scales<W>(g, at, out);
    k4_quants<W>(g, at, out);
  } else {
    if constexpr (W == DType::q8_0) {
      __m256i lo[4], hi[4];  // elements 0 .. 15, 16 .. 31
      wb_words(g, at + 2, lo);
      wb_words(g, at + 18, hi);
      DEEPINFER_UNROLL
      for (int o = 0; o < 4; ++o) {
        out->s[o] = lo[o];
        out->s[o + 4] = hi[o];
      }
      DEEPINFER_UNROLL
      for (int o = 0; o < 8; ++o) out->u[o] = _mm256_sign_epi8(out->s[o], out->s[o]);
    } else {
      __m256i words[4];
      wb_words(g, at + kQuantsAt<W>, words);
      const __m256i low = _mm256_set1_epi8(0x0f);
      DEEPINFER_UNROLL
      for (int o = 0; o < 4; ++o) {
        out->u[o] = _mm256_and_si256(words[o], low);                            // elements 4o..
        out->u[o + 4] = _mm256_and_si256(_mm256_srli_epi16(words[o], 4), low);  // 16 + 4o..
      }
      if constexpr (W == DType::q5_0) q50_high_bits(g, at + 2, out->u);
    }
    out->d = wb_f16s(g, at);
  }
}

// Keeps a sum a running one: GCC otherwise reassociates the integer adds into a tree over all
// 8 products of every (row, group), which spills them to the stack (1.5x slower prefill). A
// lone output vector (decode) has the registers for the tree.
template <int Live>
inline void keep_running(__m256i& v) {
  if constexpr (Live > 1) asm("" : "+x"(v));
}

// Block b of x rows i0 .. i0 + MR - 1 against NG transposed groups, into acc.
template <DType W, int MR, int NG>
DEEPINFER_INLINE void wb_block(const LinearArgs& a, int64_t i0, int64_t b, int64_t blocks,
                               const WbGroup<W>* const* w, __m256 (&acc)[MR][NG]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i t[MR][NG];    // int16 sums of products, 2 per row lane (q8_0: int32 sums)
  __m256i t32[MR][NG];  // 5-bit quants: the int32 dot of the first 16 elements
  const int8_t* xq = a.xq + i0 * a.k + b * kQuantBlock;
  DEEPINFER_UNROLL
  for (int o = 0; o < 8; ++o) {
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m256i xb = _mm256_set1_epi32(load_i32(xq + r * a.k + 4 * o));
      DEEPINFER_UNROLL
      for (int g = 0; g < NG; ++g) {
        if constexpr (W == DType::q8_0) {
          const __m256i p = _mm256_madd_epi16(
              _mm256_maddubs_epi16(w[g]->u[o], _mm256_sign_epi8(xb, w[g]->s[o])), ones);
          t[r][g] = o == 0 ? p : _mm256_add_epi32(t[r][g], p);
        } else {
          const __m256i p = _mm256_maddubs_epi16(w[g]->u[o], xb);
          const bool first = o == 0 || (kFiveBits<W> && o == 4);
          t[r][g] = first ? p : _mm256_add_epi16(t[r][g], p);
          if constexpr (kFiveBits<W>)
            if (o == 3) t32[r][g] = _mm256_madd_epi16(t[r][g], ones);
        }
        keep_running<MR * NG>(t[r][g]);
      }
    }
  }
  const BlockTerms x = block_terms(a);
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    const int64_t at = ((i0 + r) * blocks + b) * x.stride;
    // q4_0 / q5_0: -8 / -16 * (the block's x sum), the offset of the unsigned quants
    // (quantize_x_blocks); q8_0's signed quants take none (its term is for VNNI), nor do the
    // k-quants' plain ones (theirs is the f32 d_x * the x sum of the min term).
    const bool offset = W == DType::q4_0 || W == DType::q5_0;
    const __m256i start = offset ? _mm256_set1_epi32(x.t[at]) : _mm256_setzero_si256();
    const __m256 dx = _mm256_set1_ps(x.d[at]);
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g) {
      __m256i dot;
      if constexpr (W == DType::q8_0) {
        dot = t[r][g];
      } else {
        dot = _mm256_add_epi32(start, _mm256_madd_epi16(t[r][g], ones));
        if constexpr (kFiveBits<W>) dot = _mm256_add_epi32(dot, t32[r][g]);
      }
      acc[r][g] = _mm256_fmadd_ps(_mm256_mul_ps(w[g]->d, dx), _mm256_cvtepi32_ps(dot), acc[r][g]);
      if constexpr (kWithMin<W>) {
        const __m256 dxs = _mm256_castsi256_ps(_mm256_set1_epi32(x.t[at]));
        acc[r][g] = _mm256_fmadd_ps(w[g]->m, dxs, acc[r][g]);
      }
    }
  }
}

// acc into y[i0 : i0 + MR, j0 : j0 + cols] (cols <= 8 * NG); with the bias when `last`.
template <int MR, int NG>
inline void wb_store(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols, bool last,
                     __m256 (&acc)[MR][NG]) {
  DEEPINFER_UNROLL
  for (int g = 0; g < NG; ++g) {
    const int64_t jg = j0 + g * kWbGroup;
    const int64_t width = cols - g * kWbGroup;
    const __m256i mask = first_lanes(width);
    const bool full = width >= kWbGroup;
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

// The largest next group prefetched into L1; larger ones go to L2, where they do not evict
// themselves before their loads come (8 rows x 4864 q8_0 elements is 41 KB, the L1 32-48 KB):
// q8_0 decode at k = 4864 ran 16-17 -> 21-26 GB/s on one thread, 27-31 -> 34-36 on two
// (kernels_bench --decode --isa avx2, Zen 4). Groups of k = 896 (8 KB) stay in L1: into L2
// they ran no faster, the lm_head slower.
constexpr int64_t kNextGroupL1Bytes = 16 << 10;

// Small calls: x rows i0 .. i0 + MR - 1 by one group of weight rows (starting at row j0, cols
// of them), each block transposed as it streams, prefetching the next group's rows
// (contiguous after these) at the pace this tile streams them: per block, the lines that cover
// the next 8 blocks' bytes. (Tiles of 2 groups, which halve the x loads, measured no faster
// at m = 1 here: decode is bound by DRAM.)
template <DType W, int MR, class Rows>
void wb_stream_tile(const LinearArgs& a, int64_t i0, const Rows& g, int64_t j0, int64_t cols,
                    int64_t blocks, int64_t row_bytes) {
  __m256 acc[MR][1];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) acc[r][0] = _mm256_setzero_ps();
  constexpr int64_t stride = kWbGroup * kStoredBytes<W>;
  constexpr int lines = static_cast<int>((stride + 63) / 64);
  const char* next = reinterpret_cast<const char*>(g.at(0) + kWbGroup * row_bytes);
  const bool to_l2 = kWbGroup * row_bytes > kNextGroupL1Bytes;
  for (int64_t sb = 0; sb < blocks / kSub<W>; ++sb) {
    WbGroup<W> w[kSub<W>];
    wb_transpose<W>(g, sb, w);
    DEEPINFER_UNROLL
    for (int s = 0; s < kSub<W>; ++s) {
      // The lines spread over the sub-blocks: a burst of a whole super-block's stalls.
      for (int q = s * lines / kSub<W>; q < (s + 1) * lines / kSub<W>; ++q) {
        if (to_l2) {
          _mm_prefetch(next + sb * stride + q * 64, _MM_HINT_T1);
        } else {
          _mm_prefetch(next + sb * stride + q * 64, _MM_HINT_T0);
        }
      }
      const WbGroup<W>* groups[1] = {&w[s]};
      wb_block<W, MR, 1>(a, i0, sb * kSub<W> + s, blocks, groups, acc);
    }
  }
  wb_store<MR, 1>(a, i0, j0, cols, true, acc);
}

// x rows m0 .. m1 in tiles of MR rows, the rest in smaller ones.
template <DType W, int MR, class Rows>
void wb_stream_rows(const LinearArgs& a, int64_t m0, int64_t m1, const Rows& g, int64_t j,
                    int64_t cols, int64_t blocks, int64_t row_bytes) {
  int64_t i = m0;
  for (; i + MR <= m1; i += MR) wb_stream_tile<W, MR>(a, i, g, j, cols, blocks, row_bytes);
  if constexpr (MR > 1)
    if (i < m1) wb_stream_rows<W, MR - 1>(a, i, m1, g, j, cols, blocks, row_bytes);
}

template <DType W>
void wb_stream(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks / kSub<W> * kStoredBytes<W>;
  for (int64_t j = n0; j < n1; j += kWbGroup) {
    const int64_t cols = min64(kWbGroup, n1 - j);
    if (cols == kWbGroup) {
      const WbStrided g{static_cast<const uint8_t*>(a.w) + j * row_bytes, row_bytes};
      wb_stream_rows<W, 4>(a, m0, m1, g, j, cols, blocks, row_bytes);
    } else {
      wb_stream_rows<W, 4>(a, m0, m1, wb_group_rows(a, j, cols, row_bytes), j, cols, blocks,
                           row_bytes);
    }
  }
}

// wb_stream over a repacked matrix: n0 is a multiple of 8 (linear_tile_n), so group j / 8
// starts j stored rows' bytes in.
template <DType W>
void wb_stream_repacked(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks / kSub<W> * kStoredBytes<W>;
  for (int64_t j = n0; j < n1; j += kWbGroup) {
    const WbRepacked g{static_cast<const uint8_t*>(a.w) + j * row_bytes};
    wb_stream_rows<W, 4>(a, m0, m1, g, j, min64(kWbGroup, n1 - j), blocks, row_bytes);
  }
}

// Blocks [b0, b1) of x rows i0 .. i0 + MR - 1 by the NG transposed groups of panel (indexed
// [g][b - b0]); starts from y unless b0 == 0, and adds the bias when b1 is the last block.
template <DType W, int MR, int NG>
void wb_panel_tile(const LinearArgs& a, int64_t i0, const WbGroup<W>* panel, int64_t j0,
                   int64_t cols, int64_t b0, int64_t b1, int64_t blocks) {
  __m256 acc[MR][NG];
  DEEPINFER_UNROLL
  for (int g = 0; g < NG; ++g) {
    const int64_t width = cols - g * kWbGroup;
    const __m256i mask = first_lanes(width);
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const float* from = a.y + (i0 + r) * a.n + j0 + g * kWbGroup;
      acc[r][g] = b0 == 0             ? _mm256_setzero_ps()
                  : width >= kWbGroup ? _mm256_loadu_ps(from)
                                      : _mm256_maskload_ps(from, mask);
    }
  }
  for (int64_t b = b0; b < b1; ++b) {
    const WbGroup<W>* groups[NG];
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g) groups[g] = panel + g * kWbPanelBlocks<W> + (b - b0);
    wb_block<W, MR, NG>(a, i0, b, blocks, groups, acc);
  }
  wb_store<MR, NG>(a, i0, j0, cols, b1 == blocks, acc);
}

template <DType W, int MR, int NG>
void wb_panel_rows(const LinearArgs& a, int64_t m0, int64_t m1, const WbGroup<W>* panel, int64_t j0,
                   int64_t cols, int64_t b0, int64_t b1, int64_t blocks) {
  int64_t i = m0;
  for (; i + MR <= m1; i += MR) wb_panel_tile<W, MR, NG>(a, i, panel, j0, cols, b0, b1, blocks);
  if constexpr (MR > 1)
    if (i < m1) wb_panel_rows<W, MR - 1, NG>(a, i, m1, panel, j0, cols, b0, b1, blocks);
}

template <DType W, bool Repacked>
void wb_panels(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks / kSub<W> * kStoredBytes<W>;
  constexpr int64_t chunk = kWbPanelBlocks<W>;
  WbGroup<W> panel[kWbPanelGroups * chunk];
  for (int64_t j = n0; j < n1; j += kWbPanelGroups * kWbGroup) {
    const int64_t cols = min64(kWbPanelGroups * kWbGroup, n1 - j);
    const int ng = static_cast<int>((cols + kWbGroup - 1) / kWbGroup);
    std::conditional_t<Repacked, WbRepacked, WbRows> g[kWbPanelGroups];
    for (int p = 0; p < ng; ++p) {
      const int64_t jg = j + p * kWbGroup;
      if constexpr (Repacked) {
        g[p] = WbRepacked{static_cast<const uint8_t*>(a.w) + jg * row_bytes};
      } else {
        g[p] = wb_group_rows(a, jg, min64(kWbGroup, cols - p * kWbGroup), row_bytes);
      }
    }
    for (int64_t b0 = 0; b0 < blocks; b0 += chunk) {
      const int64_t b1 = min64(blocks, b0 + chunk);
      for (int p = 0; p < ng; ++p)
        for (int64_t b = b0; b < b1; b += kSub<W>)
          wb_transpose<W>(g[p], b / kSub<W>, &panel[p * chunk + b - b0]);
      if (ng == 2) {
        wb_panel_rows<W, kWbTileRows2, 2>(a, m0, m1, panel, j, cols, b0, b1, blocks);
      } else {
        wb_panel_rows<W, kWbTileRows1, 1>(a, m0, m1, panel, j, cols, b0, b1, blocks);
      }
    }
  }
}

// The whole-block types' linear (q4_0, q5_0, q8_0, q4_k, q5_k) over rows m0 .. m1, outputs
// n0 .. n1; q4_0, q5_0, q8_0 and q4_k also repacked (a.w_repacked).
inline void whole_block_linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0,
                                    int64_t n1) {
  const bool panels = m1 - m0 >= kWbPanelMinRows;
  wb::with_whole_block_type(a.w_dtype, [&](auto type) {
    constexpr DType W = decltype(type)::value;
    if constexpr (wb::has_repacked_layout(W)) {
      if (a.w_repacked)
        return panels ? wb_panels<W, true>(a, m0, m1, n0, n1)
                      : wb_stream_repacked<W>(a, m0, m1, n0, n1);
    }
    return panels ? wb_panels<W, false>(a, m0, m1, n0, n1) : wb_stream<W>(a, m0, m1, n0, n1);
  });
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx2
