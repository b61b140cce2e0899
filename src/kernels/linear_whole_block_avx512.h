#pragma once
// AVX-512 linear for the block types whose f32 work is per whole 32-element block (kernels.h:
// q4_0, q5_0, q8_0, and the sub-blocks of q4_k / q5_k), included by linear_q8_avx512.h (both of
// its translation units: BW and VNNI supply Dot). One vector lane per weight row: block b of a
// group of 16 weight rows is transposed into 8 vectors u[o] (lane r: the 4 quants of elements
// 4o .. 4o + 3 of row r: q4_0's / q4_k's nibbles, q5_0's / q5_k's nibbles with their fifth bit,
// q8_0's int8 as Dot::q8_weights prepares them) and the 16 scales (q4_k / q5_k: d * the
// sub-block's scale, and the min term -dmin * its min), so one vpdpbusd (BW: vpmaddubsw +
// vpmaddwd) against 4 x bytes broadcast does 4 elements of 16 outputs, and a block's whole
// 32-element integer dot is done before its one f32 scale and FMA (a second FMA adds the min
// term times d_x * the x sum). The integer start of a block is the x block term
// quantize_x_blocks stores (-8 / -16 times the x sum for q4_0 / q5_0; for q8_0 -128 times it
// where VNNI takes the weights as w + 128, and 0 where BW moves their signs onto x; 0 for the
// k-quants, whose term is the f32 d_x * the x sum). A k-quant super-block is transposed whole:
// its 8 sub-blocks share the scale bytes.
// The transposition is shared by every x row of a tile: small calls (decode) transpose each
// block as they stream it; calls of kWbPanelMinRows rows or more transpose a panel of 32
// weight rows once per kWbPanelBlocks blocks and run all their x rows over it, 4 rows x 32
// outputs per tile. q4_0, q5_0, q8_0 and q4_k repacked at load (a.w_repacked;
// whole_block_layout.h) are read as two 8-row groups per vector, already transposed. Each
// output's FMAs run in block order whatever the path, so results do not depend on m, on the row's
// place in the batch, on the thread split or on the layout.
#include "kernels/simd_avx512.h"  // first: see the note there

#include <climits>
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/whole_block_layout.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

using wb::kQuantsAt;
using wb::kStoredBytes;
using wb::kSub;
using wb::kWithMin;
constexpr int kWbGroup = 16;  // weight rows per vector, one per lane
// Blocks per panel chunk (a multiple of the k-quants' 8): 2 x 32 x 576 B = 36 KiB, 40 KiB with
// the k-quants' min terms.
constexpr int64_t kWbPanelBlocks = 32;
constexpr int64_t kWbPanelMinRows = 8;  // x rows from which transposing a panel pays off

// Block b of 16 weight rows, transposed (see the top of the file); with the min term for the
// k-quants.
struct alignas(64) WbGroup {
  __m512i u[8];
  __m512 d;
};
struct alignas(64) WbGroupMin : WbGroup {
  __m512 m;
};
template <DType W>
using WbGroupOf = std::conditional_t<kWithMin<W>, WbGroupMin, WbGroup>;

// The 16 weight rows of a group starting at row j0 of a.w (rows past `cols` repeat the last).
struct WbRows {
  const uint8_t* row[kWbGroup];
  __m512i offsets;  // byte offset of each row from row[0], for the gathers
  const uint8_t* at(int r) const { return row[r]; }
};

// A whole group as its first row and the row stride: the streaming loop then addresses its 16
// rows from a few registers instead of reloading 16 pointers from the stack every block.
struct WbStrided {
  const uint8_t* base;
  int64_t stride;
  __m512i offsets;
  const uint8_t* at(int r) const { return base + r * stride; }
};

inline WbStrided wb_strided(const LinearArgs& a, int64_t j0, int64_t row_bytes) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return {static_cast<const uint8_t*>(a.w) + j0 * row_bytes, row_bytes,
          _mm512_mullo_epi32(lanes, _mm512_set1_epi32(static_cast<int32_t>(row_bytes)))};
}

inline WbRows wb_rows(const LinearArgs& a, int64_t j0, int64_t cols, int64_t row_bytes) {
  WbRows g;
  const auto* base = static_cast<const uint8_t*>(a.w) + j0 * row_bytes;
  alignas(64) int32_t off[kWbGroup];
  for (int r = 0; r < kWbGroup; ++r) {
    const int64_t at = min64(r, cols - 1) * row_bytes;
    g.row[r] = base + at;
    off[r] = static_cast<int32_t>(at);
  }
  g.offsets = _mm512_load_si512(off);
  return g;
}

// A group of a repacked matrix (wb::repack_rows: q4_0, q5_0, q8_0, q4_k): one unit of the
// AVX-512 layout, two 8-row groups interleaved block by block, rows 0 .. 7 at base and rows
// 8 .. 15 at hi, a repacked block later (the padding rows of a matrix's last unit are zero and
// never stored). Their blocks are already transposed, so a vector is two 32-byte loads from one
// run of 64 bytes. at() is the group's start, as for WbStrided (the next group follows 16 stored
// rows later).
struct WbRepacked {
  const uint8_t* base;
  const uint8_t* hi;
  const uint8_t* at(int) const { return base; }
  // Block data at byte `p` of a repacked block: lanes 0 .. 7 from base, 8 .. 15 from hi.
  __m512i bytes(int64_t p) const {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + p));
    const __m256i up = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + p));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), up, 1);
  }
  __m512 f16s(int64_t p) const {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + p));
    const __m128i up = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + p));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), up, 1));
  }
};

// Where stored offset `at` (sb * kStoredBytes: block or super-block sb) is in a repacked unit:
// each stored block of its 16 rows is two repacked blocks.
constexpr int64_t repacked_at(int64_t at) {
  return at * wb::kRepackRows * 2;
}

template <DType W>
WbRepacked wb_repacked(const LinearArgs& a, int64_t j0, int64_t row_bytes) {
  static_assert(wb::interleaved_groups(Isa::avx512) == 2, "WbRepacked reads pairs of groups");
  const auto* base = static_cast<const uint8_t*>(a.w) + j0 * row_bytes;
  return {base, base + wb::kRepackedBytes<W>};
}

// The 16 bytes at offset `at` of the group's 16 rows as 32-bit words: words[o] lane r is word
// o of row r. Loaded as 4 registers of 4 rows each (lane group l of register z holds row
// z + 4l), then a 4 x 4 transpose of 32-bit words within every 128-bit lane group.
template <class Rows>
DEEPINFER_INLINE void wb_words(const Rows& g, int64_t at, __m512i (&words)[4]) {
  auto bytes = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.at(r) + at));
  };
  __m512i z[4];
  DEEPINFER_UNROLL
  for (int r = 0; r < 4; ++r) {
    __m512i v = _mm512_castsi128_si512(bytes(r));
    v = _mm512_inserti32x4(v, bytes(r + 4), 1);
    v = _mm512_inserti32x4(v, bytes(r + 8), 2);
    z[r] = _mm512_inserti32x4(v, bytes(r + 12), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  words[0] = _mm512_unpacklo_epi64(t0, t2);
  words[1] = _mm512_unpackhi_epi64(t0, t2);
  words[2] = _mm512_unpacklo_epi64(t1, t3);
  words[3] = _mm512_unpackhi_epi64(t1, t3);
}

// q5_0's fifth bits as 0x10 in the bytes of u[o]: byte c of lane r is element 4o + c of row r,
// whose bit sits in byte o / 2 of the row's 32-bit qh at bit 4 (o % 2) + c. One gather brings
// the 16 qh words (lane r: row r), a byte shuffle copies the lane's qh byte into its 4 bytes,
// and a per-byte bit test picks bit c.
template <class Rows>
DEEPINFER_INLINE void q50_high_bits(const Rows& g, int64_t at, __m512i (&u)[8]) {
  const __m512i qh = _mm512_i32gather_epi32(g.offsets, g.at(0) + at, 1);
  DEEPINFER_UNROLL
  for (int o = 0; o < 8; ++o) {
    const char s = static_cast<char>(o / 2);
    const __m128i lane = _mm_setr_epi8(s, s, s, s, s + 4, s + 4, s + 4, s + 4, s + 8, s + 8, s + 8,
                                       s + 8, s + 12, s + 12, s + 12, s + 12);
    const __m512i spread = _mm512_shuffle_epi8(qh, _mm512_broadcast_i32x4(lane));
    const __m512i bit = _mm512_set1_epi32(o % 2 == 0 ? 0x08040201 : static_cast<int>(0x80402010));
    const __mmask64 set = _mm512_test_epi8_mask(spread, bit);
    u[o] = _mm512_mask_add_epi8(u[o], set, u[o], _mm512_set1_epi8(0x10));  // bit 4 is clear
  }
}

// The scale bytes of a q4_k / q5_k super-block at `at` for the 16 rows: d and dmin (f16) at 0
// and 2, then 12 bytes of 6-bit scales and mins as ggml's get_scale_min_k4 packs them
// (sub-block j < 4: the low 6 bits of bytes j and j + 4; j >= 4: the nibbles of byte j + 4 with
// the top 2 bits of bytes j - 4 and j), as three words per lane; q5_k's 32 bytes of fifth bits
// (bit j of byte e: element e of sub-block j) transposed as the quants are.
struct K4Super {
  __m512 d, dmin;
  __m512i s0, s1, s2;
  __m512i high_lo[4], high_hi[4];  // q5_k: elements 4o .. 4o + 3, 16 + 4o .. 16 + 4o + 3
};

template <DType W, class Rows>
DEEPINFER_INLINE void k4_super(const Rows& g, int64_t at, K4Super& k) {
  if constexpr (std::is_same_v<Rows, WbRepacked>) {  // d, dmin, the 3 scale words (q4_k)
    const int64_t p = repacked_at(at);
    k.d = g.f16s(p);
    k.dmin = g.f16s(p + 16);
    k.s0 = g.bytes(p + 32);
    k.s1 = g.bytes(p + 64);
    k.s2 = g.bytes(p + 96);
  } else {
    // The 16 header bytes of the 16 rows, transposed as the quants are (instead of 4 gathers).
    __m512i words[4];
    wb_words(g, at, words);
    k.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words[0]));
    k.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(words[0], 16)));
    k.s0 = words[1];
    k.s1 = words[2];
    k.s2 = words[3];
  }
  if constexpr (W == DType::q5_k) {
    wb_words(g, at + 16, k.high_lo);
    wb_words(g, at + 32, k.high_hi);
  }
}

// Sub-block j's weight scale and min term in each lane: the scalar decoder's arithmetic,
// d * float(scale) and -(dmin * float(min)), exact in f32.
DEEPINFER_INLINE void k4_scale_min(const K4Super& k, int j, WbGroupMin& out) {
  const __m512i six = _mm512_set1_epi32(63), four = _mm512_set1_epi32(15);
  const __m512i two = _mm512_set1_epi32(3);
  __m512i scale, min;
  if (j < 4) {
    scale = _mm512_and_si512(_mm512_srli_epi32(k.s0, 8 * j), six);
    min = _mm512_and_si512(_mm512_srli_epi32(k.s1, 8 * j), six);
  } else {
    const int q = 8 * (j - 4);
    const __m512i top_scale = _mm512_and_si512(_mm512_srli_epi32(k.s0, q + 6), two);
    const __m512i top_min = _mm512_and_si512(_mm512_srli_epi32(k.s1, q + 6), two);
    scale = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(k.s2, q), four),
                            _mm512_slli_epi32(top_scale, 4));
    min = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(k.s2, q + 4), four),
                          _mm512_slli_epi32(top_min, 4));
  }
  out.d = _mm512_mul_ps(k.d, _mm512_cvtepi32_ps(scale));
  const __m512 m = _mm512_mul_ps(k.dmin, _mm512_cvtepi32_ps(min));
  out.m = _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(m), _mm512_set1_epi32(INT32_MIN)));  // -m exactly
}

// Sub-blocks 2p and 2p + 1 of the super-block at `at`: the low and high nibbles of the 32 bytes
// at kQuantsAt + 32 p (q5_k: with their fifth bits), and their scales.
template <DType W, class Rows>
DEEPINFER_INLINE void k4_pair(const Rows& g, int64_t at, int p, const K4Super& k, WbGroupMin* out) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  if constexpr (std::is_same_v<Rows, WbRepacked>) {  // word 8 p + o: u[o] of both sub-blocks
    DEEPINFER_UNROLL
    for (int o = 0; o < 8; ++o) {
      const __m512i words = g.bytes(repacked_at(at) + 128 + 32 * (8 * p + o));
      out[0].u[o] = _mm512_and_si512(words, low);
      out[1].u[o] = _mm512_and_si512(_mm512_srli_epi32(words, 4), low);
    }
  } else {
    __m512i lo[4], hi[4];  // elements 0 .. 15, 16 .. 31 of the pair
    wb_words(g, at + kQuantsAt<W> + 32 * p, lo);
    wb_words(g, at + kQuantsAt<W> + 32 * p + 16, hi);
    DEEPINFER_UNROLL
    for (int o = 0; o < 4; ++o) {
      out[0].u[o] = _mm512_and_si512(lo[o], low);
      out[0].u[o + 4] = _mm512_and_si512(hi[o], low);
      out[1].u[o] = _mm512_and_si512(_mm512_srli_epi32(lo[o], 4), low);
      out[1].u[o + 4] = _mm512_and_si512(_mm512_srli_epi32(hi[o], 4), low);
    }
  }
  DEEPINFER_UNROLL
  for (int s = 0; s < 2; ++s) {
    const int j = 2 * p + s;
    if constexpr (W == DType::q5_k) {
      const __m512i bit = _mm512_set1_epi8(static_cast<char>(1 << j));
      const __m512i fifth = _mm512_set1_epi8(0x10);
      DEEPINFER_UNROLL
      for (int o = 0; o < 8; ++o) {
        const __m512i high = o < 4 ? k.high_lo[o] : k.high_hi[o - 4];
        out[s].u[o] =
            _mm512_mask_add_epi8(out[s].u[o], _mm512_test_epi8_mask(high, bit), out[s].u[o], fifth);
      }
    }
    k4_scale_min(k, j, out[s]);
  }
}

// Stored block at byte `at` of the 16 rows (q4_0, q5_0, q8_0), transposed.
template <class Dot, DType W, class Rows>
DEEPINFER_INLINE void wb_transpose_stored(const Rows& g, int64_t at, WbGroupOf<W>* out) {
  if constexpr (W == DType::q8_0) {
    __m512i lo[4], hi[4];  // elements 0 .. 15, 16 .. 31
    wb_words(g, at + 2, lo);
    wb_words(g, at + 18, hi);
    DEEPINFER_UNROLL
    for (int o = 0; o < 4; ++o) {
      out->u[o] = Dot::q8_weights(lo[o]);
      out->u[o + 4] = Dot::q8_weights(hi[o]);
    }
  } else {
    __m512i words[4];
    wb_words(g, at + kQuantsAt<W>, words);
    const __m512i low = _mm512_set1_epi8(0x0f);
    DEEPINFER_UNROLL
    for (int o = 0; o < 4; ++o) {
      out->u[o] = _mm512_and_si512(words[o], low);                            // elements 4o..
      out->u[o + 4] = _mm512_and_si512(_mm512_srli_epi32(words[o], 4), low);  // 16 + 4o..
    }
    if constexpr (W == DType::q5_0) q50_high_bits(g, at + 2, out->u);
  }
  const __m512i d = _mm512_i32gather_epi32(g.offsets, g.at(0) + at, 1);
  out->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d));
}

// Repacked block at byte p of the group (wb::repack_rows; q4_0, q5_0, q8_0): loads, the
// nibble split, q5_0's fifth bits each one shift into bit 4 of its byte, and q8_0's int8 as
// Dot::q8_weights prepares them.
template <class Dot, DType W>
DEEPINFER_INLINE void wb_unpack_repacked(const WbRepacked& g, int64_t p, WbGroupOf<W>* out) {
  static_assert(W == DType::q4_0 || W == DType::q5_0 || W == DType::q8_0,
                "q4_0, q5_0, q8_0 and q4_k are repacked");
  int64_t scales = p + 128;
  if constexpr (W == DType::q8_0) {
    DEEPINFER_UNROLL
    for (int o = 0; o < 8; ++o) out->u[o] = Dot::q8_weights(g.bytes(p + 32 * o));
    scales = p + 256;
  } else {
    const __m512i low = _mm512_set1_epi8(0x0f);
    DEEPINFER_UNROLL
    for (int o = 0; o < 4; ++o) {
      const __m512i words = g.bytes(p + 32 * o);
      out->u[o] = _mm512_and_si512(words, low);
      out->u[o + 4] = _mm512_and_si512(_mm512_srli_epi32(words, 4), low);
    }
  }
  if constexpr (W == DType::q5_0) {
    const __m512i bits = g.bytes(scales), fifth = _mm512_set1_epi8(0x10);
    DEEPINFER_UNROLL
    for (int o = 0; o < 8; ++o) {  // bit o + 8c to bit 4 + 8c (bit 4 is clear)
      const __m512i moved =
          o <= 4 ? _mm512_slli_epi32(bits, 4 - o) : _mm512_srli_epi32(bits, o - 4);
      out->u[o] = _mm512_or_si512(out->u[o], _mm512_and_si512(moved, fifth));
    }
    scales += 32;
  }
  out->d = g.f16s(scales);
}

// Block sb of the group into out[0 .. kSub<W>): stored blocks transposed (see the top of the
// file), repacked ones unpacked.
template <class Dot, DType W, class Rows>
DEEPINFER_INLINE void wb_transpose(const Rows& g, int64_t sb, WbGroupOf<W>* out) {
  const int64_t at = sb * kStoredBytes<W>;
  if constexpr (kWithMin<W>) {
    K4Super k;
    k4_super<W>(g, at, k);
    for (int p = 0; p < 4; ++p) k4_pair<W>(g, at, p, k, out + 2 * p);
  } else if constexpr (std::is_same_v<Rows, WbRepacked>) {
    wb_unpack_repacked<Dot, W>(g, repacked_at(at), out);
  } else {
    wb_transpose_stored<Dot, W>(g, at, out);
  }
}

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

// Block b of x rows i0 .. i0 + MR - 1 against NG transposed groups, into acc.
template <class Dot, DType W, int MR, int NG>
DEEPINFER_INLINE void wb_block(const LinearArgs& a, int64_t i0, int64_t b, int64_t blocks,
                               const WbGroupOf<W>* const* w, __m512 (&acc)[MR][NG]) {
  constexpr bool kStart =
      W == DType::q4_0 || W == DType::q5_0 || (W == DType::q8_0 && Dot::kQ8Offset);
  // The block's 8 dot steps per (row, group) in kChains independent integer chains, summed
  // after (exact): a tile of few accumulators (decode) would otherwise wait on one chain of 8
  // dependent vpdpbusd per block.
  constexpr int kChains = MR * NG >= 4 ? 1 : MR * NG == 1 ? 4 : 2;
  __m512i t[kChains][MR][NG];
  const BlockTerms x = block_terms(a);
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    const __m512i start = kStart ? _mm512_set1_epi32(x.t[((i0 + r) * blocks + b) * x.stride])
                                 : _mm512_setzero_si512();
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g) {
      t[0][r][g] = start;
      DEEPINFER_UNROLL
      for (int c = 1; c < kChains; ++c) t[c][r][g] = _mm512_setzero_si512();
    }
  }
  DEEPINFER_UNROLL
  for (int o = 0; o < 8; ++o) {
    const int c = o % kChains;
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m512i xb =
          _mm512_set1_epi32(load_i32(a.xq + (i0 + r) * a.k + b * kQuantBlock + 4 * o));
      DEEPINFER_UNROLL
      for (int g = 0; g < NG; ++g) {
        if constexpr (W == DType::q8_0) {
          t[c][r][g] = Dot::q8_dot(t[c][r][g], w[g]->u[o], xb);
        } else {
          t[c][r][g] = Dot::unsigned_dot(t[c][r][g], w[g]->u[o], xb);
        }
      }
    }
  }
  DEEPINFER_UNROLL
  for (int c = 1; c < kChains; ++c) {
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      DEEPINFER_UNROLL
      for (int g = 0; g < NG; ++g) t[0][r][g] = _mm512_add_epi32(t[0][r][g], t[c][r][g]);
    }
  }
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    const int64_t at = ((i0 + r) * blocks + b) * x.stride;
    const __m512 dx = _mm512_set1_ps(x.d[at]);
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g) {
      acc[r][g] =
          _mm512_fmadd_ps(_mm512_mul_ps(w[g]->d, dx), _mm512_cvtepi32_ps(t[0][r][g]), acc[r][g]);
      if constexpr (kWithMin<W>) {  // + min term * d_x * the x sum (its f32 bits in xt)
        const __m512 dxs = _mm512_castsi512_ps(_mm512_set1_epi32(x.t[at]));
        acc[r][g] = _mm512_fmadd_ps(w[g]->m, dxs, acc[r][g]);
      }
    }
  }
}

inline __mmask16 wb_mask(int64_t cols) {
  return cols >= kWbGroup ? __mmask16{0xffff} : static_cast<__mmask16>((1u << cols) - 1);
}

// acc into y[i0 : i0 + MR, j0 : j0 + cols] (cols <= 16 * NG); with the bias when `last`.
template <int MR, int NG>
inline void wb_store(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols, bool last,
                     __m512 (&acc)[MR][NG]) {
  DEEPINFER_UNROLL
  for (int g = 0; g < NG; ++g) {
    const int64_t jg = j0 + g * kWbGroup;
    const __mmask16 mask = wb_mask(cols - g * kWbGroup);
    const __m512 bias =
        last && a.bias ? _mm512_maskz_loadu_ps(mask, a.bias + jg) : _mm512_setzero_ps();
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m512 v = last && a.bias ? _mm512_add_ps(acc[r][g], bias) : acc[r][g];
      _mm512_mask_storeu_ps(a.y + (i0 + r) * a.n + jg, mask, v);
    }
  }
}

// The largest next group prefetched into L1; larger ones go to L2. Into L1, a group of long
// rows (16 x 4864 q4_k elements is 44 KB) evicted itself before its loads came, and the
// prefetches took the L1's miss buffers from this group's loads: q4_k decode at k = 4864 ran
// 26-28 -> 34-37 GB/s (kernels_bench --decode, 2 threads, Zen 4). Short rows stay in L1: q5_0
// at k = 896 (10 KB groups) spent 20 % longer per call with them in L2.
constexpr int64_t kNextGroupL1Bytes = 16 << 10;

// Lines [from, to) at p into L2 (`to_l2`) or L1.
DEEPINFER_INLINE void prefetch_next_group(const char* p, int from, int to, bool to_l2) {
  if (to_l2) {
    for (int q = from; q < to; ++q) _mm_prefetch(p + q * 64, _MM_HINT_T1);
  } else {
    for (int q = from; q < to; ++q) _mm_prefetch(p + q * 64, _MM_HINT_T0);
  }
}

// Small calls: rows i0 .. i0 + MR - 1 by one group of weight rows, each block transposed as it
// streams; PF prefetches the next group's rows (contiguous after these) at the pace this tile
// streams them: per block, the lines that cover the next 16 rows' bytes of one block (for a
// k-quant super-block, a quarter of them per pair of sub-blocks: all 36 lines at once filled
// the line fill buffers and stalled the loop there; spread, a cold 1 x 2048 x 102400 q4_k
// decode ran 5-17 % faster).
template <class Dot, DType W, int MR, bool PF, class Rows>
void wb_stream_tile(const LinearArgs& a, int64_t i0, const Rows& g, int64_t j0, int64_t cols,
                    int64_t blocks, int64_t row_bytes) {
  __m512 acc[MR][1];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) acc[r][0] = _mm512_setzero_ps();
  constexpr int64_t stride = kWbGroup * kStoredBytes<W>;
  constexpr int lines = static_cast<int>((stride + 63) / 64);
  const char* next = reinterpret_cast<const char*>(g.at(0) + kWbGroup * row_bytes);
  const bool to_l2 = kWbGroup * row_bytes > kNextGroupL1Bytes;
  for (int64_t sb = 0; sb < blocks / kSub<W>; ++sb) {
    if constexpr (PF && !kWithMin<W>) prefetch_next_group(next + sb * stride, 0, lines, to_l2);
    if constexpr (kWithMin<W>) {
      // A pair of sub-blocks at a time, so that its transposed quants stay in registers.
      const int64_t at = sb * kStoredBytes<W>;
      K4Super k;
      k4_super<W>(g, at, k);
      for (int p = 0; p < 4; ++p) {
        if constexpr (PF)
          prefetch_next_group(next + sb * stride, p * lines / 4, (p + 1) * lines / 4, to_l2);
        WbGroupMin w[2];
        k4_pair<W>(g, at, p, k, w);
        DEEPINFER_UNROLL
        for (int s = 0; s < 2; ++s) {
          const WbGroupMin* groups[1] = {&w[s]};
          wb_block<Dot, W, MR, 1>(a, i0, sb * 8 + 2 * p + s, blocks, groups, acc);
        }
      }
    } else {
      WbGroupOf<W> w;
      wb_transpose<Dot, W>(g, sb, &w);
      const WbGroupOf<W>* groups[1] = {&w};
      wb_block<Dot, W, MR, 1>(a, i0, sb, blocks, groups, acc);
    }
  }
  wb_store<MR, 1>(a, i0, j0, cols, true, acc);
}

// x rows m0 .. m1 in tiles of MR rows, the rest in smaller ones.
template <class Dot, DType W, int MR, bool PF, class Rows>
void wb_stream_rows(const LinearArgs& a, int64_t m0, int64_t m1, const Rows& g, int64_t j,
                    int64_t cols, int64_t blocks, int64_t row_bytes) {
  int64_t i = m0;
  for (; i + MR <= m1; i += MR) wb_stream_tile<Dot, W, MR, PF>(a, i, g, j, cols, blocks, row_bytes);
  if constexpr (MR > 1)
    if (i < m1) wb_stream_rows<Dot, W, MR - 1, PF>(a, i, m1, g, j, cols, blocks, row_bytes);
}

// Repacked: n0 is a multiple of 16 (linear_tile_n), so group j / 16 starts j stored rows' bytes
// in.
template <class Dot, DType W, bool PF, bool Repacked>
void wb_stream(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks / kSub<W> * kStoredBytes<W>;
  for (int64_t j = n0; j < n1; j += kWbGroup) {
    const int64_t cols = min64(kWbGroup, n1 - j);
    if constexpr (Repacked) {
      wb_stream_rows<Dot, W, 4, PF>(a, m0, m1, wb_repacked<W>(a, j, row_bytes), j, cols, blocks,
                                    row_bytes);
    } else if (cols == kWbGroup) {
      wb_stream_rows<Dot, W, 4, PF>(a, m0, m1, wb_strided(a, j, row_bytes), j, cols, blocks,
                                    row_bytes);
    } else {
      wb_stream_rows<Dot, W, 4, PF>(a, m0, m1, wb_rows(a, j, cols, row_bytes), j, cols, blocks,
                                    row_bytes);
    }
  }
}

// Blocks [b0, b1) of x rows i0 .. i0 + MR - 1 by the NG transposed groups of panel (indexed
// [g][b - b0]); starts from y unless b0 == 0, and adds the bias when b1 is the last block.
template <class Dot, DType W, int MR, int NG>
void wb_panel_tile(const LinearArgs& a, int64_t i0, const WbGroupOf<W>* panel, int64_t j0,
                   int64_t cols, int64_t b0, int64_t b1, int64_t blocks) {
  __m512 acc[MR][NG];
  DEEPINFER_UNROLL
  for (int g = 0; g < NG; ++g) {
    const __mmask16 mask = wb_mask(cols - g * kWbGroup);
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r)
      acc[r][g] = b0 == 0 ? _mm512_setzero_ps()
                          : _mm512_maskz_loadu_ps(mask, a.y + (i0 + r) * a.n + j0 + g * kWbGroup);
  }
  for (int64_t b = b0; b < b1; ++b) {
    const WbGroupOf<W>* groups[NG];
    DEEPINFER_UNROLL
    for (int g = 0; g < NG; ++g) groups[g] = panel + g * kWbPanelBlocks + (b - b0);
    wb_block<Dot, W, MR, NG>(a, i0, b, blocks, groups, acc);
  }
  wb_store<MR, NG>(a, i0, j0, cols, b1 == blocks, acc);
}

template <class Dot, DType W, int MR, int NG>
void wb_panel_rows(const LinearArgs& a, int64_t m0, int64_t m1, const WbGroupOf<W>* panel,
                   int64_t j0, int64_t cols, int64_t b0, int64_t b1, int64_t blocks) {
  int64_t i = m0;
  for (; i + MR <= m1; i += MR)
    wb_panel_tile<Dot, W, MR, NG>(a, i, panel, j0, cols, b0, b1, blocks);
  if constexpr (MR > 1)
    if (i < m1) wb_panel_rows<Dot, W, MR - 1, NG>(a, i, m1, panel, j0, cols, b0, b1, blocks);
}

template <class Dot, DType W, bool Repacked>
void wb_panels(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks / kSub<W> * kStoredBytes<W>;
  WbGroupOf<W> panel[2 * kWbPanelBlocks];
  for (int64_t j = n0; j < n1; j += 2 * kWbGroup) {
    const int64_t cols = min64(2 * kWbGroup, n1 - j);
    const int ng = cols > kWbGroup ? 2 : 1;
    std::conditional_t<Repacked, WbRepacked, WbRows> g[2];
    for (int p = 0; p < ng; ++p) {
      const int64_t jg = j + p * kWbGroup, width = min64(kWbGroup, cols - p * kWbGroup);
      if constexpr (Repacked) {
        g[p] = wb_repacked<W>(a, jg, row_bytes);
      } else {
        g[p] = wb_rows(a, jg, width, row_bytes);
      }
    }
    for (int64_t b0 = 0; b0 < blocks; b0 += kWbPanelBlocks) {
      const int64_t b1 = min64(blocks, b0 + kWbPanelBlocks);
      for (int p = 0; p < ng; ++p)
        for (int64_t b = b0; b < b1; b += kSub<W>)
          wb_transpose<Dot, W>(g[p], b / kSub<W>, &panel[p * kWbPanelBlocks + b - b0]);
      if (ng == 2) {
        wb_panel_rows<Dot, W, 4, 2>(a, m0, m1, panel, j, cols, b0, b1, blocks);
      } else {
        wb_panel_rows<Dot, W, 4, 1>(a, m0, m1, panel, j, cols, b0, b1, blocks);
      }
    }
  }
}

template <class Dot, DType W>
void wb_linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const bool panels = m1 - m0 >= kWbPanelMinRows, prefetch = m1 - m0 <= 2;
  if constexpr (wb::has_repacked_layout(W)) {
    if (a.w_repacked) {
      if (panels) return wb_panels<Dot, W, true>(a, m0, m1, n0, n1);
      // q8_0: a thread's units are one run of bytes, which the hardware prefetcher alone
      // reads faster (Qwen2.5-0.5B q8_0 decode, alternating: 52.6-53.6 -> 55.0-64.1 tok/s).
      // q4_0 and q4_k, with more work per byte, streamed at half the rate or less without the
      // next group prefetched (kernels_bench --decode: q4_k 26-49 against 15-18 GB/s).
      constexpr bool kPrefetch = W != DType::q8_0;
      return prefetch && kPrefetch ? wb_stream<Dot, W, true, true>(a, m0, m1, n0, n1)
                                   : wb_stream<Dot, W, false, true>(a, m0, m1, n0, n1);
    }
  }
  if (panels) return wb_panels<Dot, W, false>(a, m0, m1, n0, n1);
  return prefetch ? wb_stream<Dot, W, true, false>(a, m0, m1, n0, n1)
                  : wb_stream<Dot, W, false, false>(a, m0, m1, n0, n1);
}

// The whole-block types' linear (q4_0, q5_0, q8_0, q4_k, q5_k) over rows m0 .. m1, outputs
// n0 .. n1; q4_0, q5_0, q8_0 and q4_k also repacked (a.w_repacked).
template <class Dot>
void whole_block_linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  wb::with_whole_block_type(
      a.w_dtype, [&](auto type) { wb_linear_rows<Dot, decltype(type)::value>(a, m0, m1, n0, n1); });
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx512
