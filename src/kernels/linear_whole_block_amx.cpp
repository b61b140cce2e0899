// AMX-INT8 block-weight linear for the whole-block types (kernels.h: q4_0, q5_0, q8_0, q4_k,
// q5_k), calls of kAmxMinRows x rows or more. Bitwise the AVX-512 VNNI kernel's results: a
// block's 32-element integer dot is exact whichever unit sums it, and the f32 work after it is
// the same per output and block, in block order (kernels.h):
//   A = fma(d_w * d_x, float(t), A)  (k-quants then A = fma(m_w, d_x * s, A)).
//
// Tiles (Intel SDM, TDPBSSD): C[16 x 16] int32 += A[16 x 32 B] . B[8 x 64 B], where A is 16 x
// rows' block b as quantized (q_x, int8, from x copied in tile order) and B is block b of
// 16 weight rows in the VNNI layout, row o holding, for each of the 16 weight rows, the 4 quants
// of elements 4o .. 4o + 3. That is exactly the transposed group of the AVX-512 panel kernel
// (linear_whole_block_avx512.h: WbGroup::u), so panels are built by the same code, once per
// chunk of blocks, and every 16-row x tile of the call runs over them. The weights must enter
// as the signed integer w_int of kernels.h: q8_0 as stored (no + 128), q4_0 / q5_0 quants minus
// 8 / 16, the k-quants' plain quants (0 .. 31 fit int8). One C tile holds one block's dots only,
// since every block has its own f32 scale: it is stored after each TDPBSSD and scaled into 16
// f32 accumulators (one per x row) by AVX-512, with blocks in flight so that the tile unit
// computes some while the vector units scale others (issue_pair). The x terms come in tile order
// (LinearArgs::xtd), and so is x (xtq, 16 rows a tile: a tail tile's rows past m repeat its last
// row, are computed and never stored).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/backend.h"
#include "kernels/linear_whole_block_avx512.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int kTileRows = 16;    // x rows per tile (and C rows)
constexpr int kBlockBytes = 32;  // one block of q_x per A row

// Blocks per panel chunk (a multiple of the k-quants' 8): 32 x 576 B = 18 KiB of q8_0, 20 KiB
// with the k-quants' min terms, in L1 while every x tile of the call passes over it.
constexpr int64_t kAmxChunkBlocks = 32;

// The panel's weights as kernels.h's signed w_int; the transposition leaves q8_0 as stored and
// the 4- and 5-bit quants unsigned.
struct DotSigned {
  static __m512i q8_weights(__m512i w) { return w; }
};

template <DType W>
DEEPINFER_INLINE void to_signed_quants(WbGroupOf<W>& g) {
  if constexpr (W == DType::q4_0 || W == DType::q5_0) {
    const __m512i offset = _mm512_set1_epi8(W == DType::q4_0 ? 8 : 16);
    DEEPINFER_UNROLL
    for (int o = 0; o < 8; ++o) g.u[o] = _mm512_sub_epi8(g.u[o], offset);
  }
}

// A pair of blocks to the tile unit: C tiles 0, 1 or 2, 3 (Set), A tiles 4, 5, B tiles 6, 7.
// (Measured on this Xeon VM: a TDPBSSD of 32 bytes takes about 12 cycles, a C store of 1 KiB
// about 12, the A and B loads about 10, and scaling a block's 16 rows about 25.)
template <int Set, DType W>
DEEPINFER_INLINE void issue_pair(const int8_t* xa, const WbGroupOf<W>* w, bool two) {
  constexpr int64_t kNext = kTileRows * kBlockBytes;  // A of the pair's second block
  if constexpr (Set == 0) {
    _tile_zero(0);
    _tile_loadd(4, xa, kBlockBytes);
    _tile_loadd(6, w[0].u, 64);
    _tile_dpbssd(0, 4, 6);
    if (two) {
      _tile_zero(1);
      _tile_loadd(5, xa + kNext, kBlockBytes);
      _tile_loadd(7, w[1].u, 64);
      _tile_dpbssd(1, 5, 7);
    }
  } else {
    _tile_zero(2);
    _tile_loadd(4, xa, kBlockBytes);
    _tile_loadd(6, w[0].u, 64);
    _tile_dpbssd(2, 4, 6);
    if (two) {
      _tile_zero(3);
      _tile_loadd(5, xa + kNext, kBlockBytes);
      _tile_loadd(7, w[1].u, 64);
      _tile_dpbssd(3, 5, 7);
    }
  }
}

using BlockDots = int32_t[kTileRows][16];  // one C tile: x row r, weight row c
// Loop step p issues pair p (C tiles 0, 1 or 2, 3 by p's parity), stores pair p - 1's C tiles and
// scales pair p - 2. The tile unit runs its instructions in order, so a pair's C store placed
// right after its own products would wait out their latency with every tile instruction behind
// it; after the next pair's products it finds them done. Scaling reads stores one step old.
constexpr int64_t kRing = 4;  // pairs of stored dots, p % kRing

template <int Set>
DEEPINFER_INLINE void store_pair(BlockDots* out, bool two) {
  if constexpr (Set == 0) {
    _tile_stored(0, out[0], 64);
    if (two) _tile_stored(1, out[1], 64);
  } else {
    _tile_stored(2, out[0], 64);
    if (two) _tile_stored(3, out[1], 64);
  }
}

// Scales one block's integer dots t into acc (x row r into acc[r]): d and, for the k-quants, the
// f32 bits of d * the x sum of the tile's 16 rows (xtd / xtt of this block).
template <DType W>
DEEPINFER_INLINE void scale_block(const BlockDots& t, const WbGroupOf<W>& w, const float* d,
                                  const int32_t* term, __m512 (&acc)[kTileRows]) {
  DEEPINFER_UNROLL
  for (int r = 0; r < kTileRows; ++r) {
    const __m512 ti = _mm512_cvtepi32_ps(_mm512_load_si512(t[r]));
    acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(w.d, _mm512_set1_ps(d[r])), ti, acc[r]);
    if constexpr (kWithMin<W>)
      acc[r] = _mm512_fmadd_ps(w.m, _mm512_castsi512_ps(_mm512_set1_epi32(term[r])), acc[r]);
  }
}

// Pair p's blocks (2p, and 2p + 1 when below nb; indexed from the chunk's first) into acc.
template <DType W>
DEEPINFER_INLINE void scale_pair(const BlockDots* dots, const WbGroupOf<W>* panel, const float* d,
                                 const int32_t* term, int64_t p, int64_t nb,
                                 __m512 (&acc)[kTileRows]) {
  const int64_t first = 2 * p;
  scale_block<W>(dots[0], panel[first], d + first * kTileRows, term + first * kTileRows, acc);
  if (first + 1 < nb)
    scale_block<W>(dots[1], panel[first + 1], d + (first + 1) * kTileRows,
                   term + (first + 1) * kTileRows, acc);
}

// x rows i0 .. i0 + rows - 1 (tile T = i0 / 16 of the call) by the 16 weight rows of `panel`
// (indexed b - b0), blocks [b0, b1): into y, from y unless b0 == 0, with the bias when b1 is
// the last block.
template <DType W>
void amx_tile(const LinearArgs& a, int64_t i0, int rows, int64_t m_end, const WbGroupOf<W>* panel,
              int64_t j0, int64_t cols, int64_t b0, int64_t b1, int64_t blocks) {
  const __mmask16 mask = wb_mask(cols);
  __m512 acc[kTileRows];
  DEEPINFER_UNROLL
  for (int r = 0; r < kTileRows; ++r)
    acc[r] = b0 == 0 || r >= rows ? _mm512_setzero_ps()
                                  : _mm512_maskz_loadu_ps(mask, a.y + (i0 + r) * a.n + j0);
  const int64_t terms = (i0 / kTileRows * blocks + b0) * kTileRows;
  const int8_t* xa = a.xtq + terms * kBlockBytes;
  const float* d = a.xtd + terms;
  const int32_t* term = a.xtt + terms;
  alignas(64) BlockDots ring[kRing][2];  // pair p's dots in ring[p % kRing]
  const int64_t nb = b1 - b0, pairs = (nb + 1) / 2;
  // The next tile's x and terms of this chunk into L1 as this one runs: a tile load that misses
  // L1 holds up the tile unit behind it.
  const bool prefetch = i0 + kTileRows < m_end;
  const int64_t next = prefetch ? blocks * kTileRows : 0;  // no pointer past the last tile
  const char* next_x = reinterpret_cast<const char*>(xa + next * kBlockBytes);
  const char* next_d = reinterpret_cast<const char*>(d + next);
  const char* next_t = reinterpret_cast<const char*>(term + next);
  for (int64_t p = 0; p < pairs + 2; ++p) {
    const bool issue = p < pairs;
    if (issue && prefetch) {
      const bool two = 2 * p + 1 < nb;
      for (int64_t l = 0; l < (two ? 16 : 8); ++l)
        _mm_prefetch(next_x + 2 * p * kTileRows * kBlockBytes + l * 64, _MM_HINT_T0);
      _mm_prefetch(next_d + 2 * p * 64, _MM_HINT_T0);
      _mm_prefetch(next_d + 2 * p * 64 + 64, _MM_HINT_T0);
      if constexpr (kWithMin<W>) {
        _mm_prefetch(next_t + 2 * p * 64, _MM_HINT_T0);
        _mm_prefetch(next_t + 2 * p * 64 + 64, _MM_HINT_T0);
      }
    }
    if (issue) {
      const int8_t* x = xa + 2 * p * kTileRows * kBlockBytes;
      const bool two = 2 * p + 1 < nb;
      if (p % 2 == 0) {
        issue_pair<0, W>(x, panel + 2 * p, two);
      } else {
        issue_pair<1, W>(x, panel + 2 * p, two);
      }
    }
    if (p >= 1 && p <= pairs) {
      const int64_t q = p - 1;
      const bool two = 2 * q + 1 < nb;
      if (q % 2 == 0) {
        store_pair<0>(ring[q % kRing], two);
      } else {
        store_pair<1>(ring[q % kRing], two);
      }
    }
    if (p >= 2) scale_pair<W>(ring[(p - 2) % kRing], panel, d, term, p - 2, nb, acc);
  }
  const bool last = b1 == blocks;
  const __m512 bias =
      last && a.bias ? _mm512_maskz_loadu_ps(mask, a.bias + j0) : _mm512_setzero_ps();
  DEEPINFER_UNROLL
  for (int r = 0; r < kTileRows; ++r) {  // unrolled: acc stays in registers
    if (r >= rows) break;
    const __m512 v = last && a.bias ? _mm512_add_ps(acc[r], bias) : acc[r];
    _mm512_mask_storeu_ps(a.y + (i0 + r) * a.n + j0, mask, v);
  }
}

template <DType W, bool Repacked>
void amx_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  configure_tiles(AmxTiles::int8_blocks);
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t row_bytes = blocks / kSub<W> * kStoredBytes<W>;
  WbGroupOf<W> panel[kAmxChunkBlocks];
  for (int64_t j = n0; j < n1; j += kWbGroup) {
    const int64_t cols = min64(kWbGroup, n1 - j);
    std::conditional_t<Repacked, WbRepacked, WbRows> g;
    if constexpr (Repacked) {
      g = wb_repacked<W>(a, j, row_bytes);
    } else {
      g = wb_rows(a, j, cols, row_bytes);
    }
    for (int64_t b0 = 0; b0 < blocks; b0 += kAmxChunkBlocks) {
      const int64_t b1 = min64(blocks, b0 + kAmxChunkBlocks);
      for (int64_t b = b0; b < b1; b += kSub<W>) {
        wb_transpose<DotSigned, W>(g, b / kSub<W>, &panel[b - b0]);
        for (int s = 0; s < kSub<W>; ++s) to_signed_quants<W>(panel[b - b0 + s]);
      }
      for (int64_t i0 = m0; i0 < m1; i0 += kTileRows)
        amx_tile<W>(a, i0, static_cast<int>(min64(kTileRows, m1 - i0)), m1, panel, j, cols, b0, b1,
                    blocks);
    }
  }
}

template <DType W>
void amx_linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if constexpr (wb::has_repacked_layout(W)) {
    if (a.w_repacked) return amx_rows<W, true>(a, m0, m1, n0, n1);
  }
  amx_rows<W, false>(a, m0, m1, n0, n1);
}

}  // namespace

void linear_rows_q8_amx(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  // Whole-block types only (kernels.cpp sends no other here): with_whole_block_type reads any
  // other as q8_0.
  if (m1 - m0 < kAmxMinRows || a.xtq == nullptr) return linear_rows_q8_vnni(a, m0, m1, n0, n1);
  wb::with_whole_block_type(
      a.w_dtype, [&](auto type) { amx_linear_rows<decltype(type)::value>(a, m0, m1, n0, n1); });
}

}  // namespace deepinfer::kernels::detail::avx512
