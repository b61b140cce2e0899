// AVX-512 micro-kernels of the packed-panel GEMM (gemm_packed.h has the layout and the one
// accumulation chain every output follows).
//
// Register tile: MR rows of x by NP panels (2·NP zmm of 16 outputs). Per k step a tile loads
// 2·NP weight vectors and broadcasts one x value per row (an embedded-broadcast operand of the
// FMA), so MR·2·NP FMAs cost 2·NP + MR loads. Zen 4/5 and Intel cores retire two 512-bit FMAs
// a cycle with a 4-cycle latency: a tile needs at least 8 independent accumulators.
//  - m <= 6 (decode, small batches): one pass over all of k with 1, 2 or 4 panels at once (enough
//    accumulators for the FMA latency), prefetching the weight streams ahead: DRAM-bound;
//  - m up to 14 (12 for exact bf16, which needs two widened vectors per load): one row tile per
//    panel over all of k, prefetching: each panel is read once;
//  - larger m: k in chunks (chunk_k), every row tile of the block passing over a panel's chunk
//    while it is in cache; the x block of the chunk stays in L2 across panels. Exact bf16:
//    tiles of up to 12 rows by one panel, the chunk in L1. f32 and bf16 activations: tiles of up
//    to 6 rows by two panels (24 accumulators, 4 weight loads per 24 FMAs), the pair's chunk
//    read from L2. Before, f32 ran 14 rows by one panel over 256-step chunks in L1, at 83-91 %
//    of the FMA peak on Zen 4; the pairs run at 90-96 % (kernels_bench --gemm, m = 32-512):
//    fewer loads per FMA, and a row tile's partial sums go through y once per 1024 steps, not
//    256. bf16 activations (vdpbf16ps): 85-90 % -> 86-94 %.
// GCC 12 flags its own _mm512_undefined_*() idiom inside the intrinsic headers (bug 105593)
// as plain -Wuninitialized once the tiles get inlined (as in linear_dpbf16_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/gemm_packed.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int64_t kSmallRows = 6;
// Bytes of one k step (f32) or one k pair (bf16) of a panel: 32 weights × 4 bytes.
constexpr int64_t kStepBytes = 128;
constexpr int64_t kPrefetchSteps = 16;  // 2 KiB ahead in each panel's stream
constexpr int64_t kGroupPanels = 8;     // large m: 256 outputs per row between k chunks

constexpr int max_rows(PackedKind kind) {
  return kind == PackedKind::bf16 ? 12 : 14;
}
// k per pass for large m: exact bf16 512 (a panel's chunk, 512 × 32 × 2 B = 32 KiB, stays in
// L1); f32 and bf16 activations 1024 (a panel pair's chunk, 1024 × 64 × 4 or 2 B, stays in L2).
constexpr int64_t chunk_k(PackedKind kind) {
  return kind == PackedKind::bf16 ? 512 : 1024;
}
// f32 and bf16 activations, large m: rows of a two-panel tile (exact bf16 widens two vectors
// per weight load: its pairs would not fit the registers).
constexpr int64_t kPairRows = 6;

inline __m512bh as_bh(__m512i v) {
  return __builtin_bit_cast(__m512bh, v);
}

// y[i0 : i0 + MR, panels panel .. panel + NP), k steps [p0, p1) of the chain: first starts
// it from 0, otherwise it continues from the partial sums in y; last adds the bias.
template <PackedKind K, int MR, int NP, bool PF>
void tile(const PackedArgs& a, int64_t i0, int64_t panel, int64_t p0, int64_t p1, bool first,
          bool last, L2Lines l2) {
  constexpr int NC = 2 * NP;
  const int64_t col0 = panel * kPanel;
  const int64_t panel_elems =
      packed_panel_elements(a.k, K == PackedKind::f32 ? DType::f32 : DType::bf16);
  __mmask16 mask[NC];
  DEEPINFER_UNROLL
  for (int c = 0; c < NC; ++c) {
    const int64_t left = a.n - (col0 + kLanes * c);
    mask[c] = left >= kLanes ? __mmask16{0xffff} : first_lanes(left > 0 ? left : 0);
  }
  __m512 acc[MR][NC];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    DEEPINFER_UNROLL
    for (int c = 0; c < NC; ++c)
      acc[r][c] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(mask[c], a.y + (i0 + r) * a.n + col0 + kLanes * c);
  }
  auto prefetch = [&](const void* panel_start, int64_t step) {
    if constexpr (PF) {
      const char* at = static_cast<const char*>(panel_start) + (step + kPrefetchSteps) * kStepBytes;
      _mm_prefetch(at, _MM_HINT_T0);
      _mm_prefetch(at + 64, _MM_HINT_T0);
    }
    prefetch_l2_step(l2);
  };

  if constexpr (K == PackedKind::f32) {
    const float* wc[NC];
    const float* xr[MR];
    DEEPINFER_UNROLL
    for (int c = 0; c < NC; ++c)
      wc[c] = static_cast<const float*>(a.w) + (panel + c / 2) * panel_elems + kLanes * (c % 2);
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) xr[r] = a.x + (i0 + r) * a.x_stride;
    for (int64_t p = p0; p < p1; ++p) {
      __m512 wv[NC];
      DEEPINFER_UNROLL
      for (int c = 0; c < NC; ++c) wv[c] = _mm512_load_ps(wc[c] + p * kPanel);
      DEEPINFER_UNROLL
      for (int c = 0; c < NC; c += 2) prefetch(wc[c], p);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) {
        const __m512 xv = _mm512_set1_ps(xr[r][p]);
        DEEPINFER_UNROLL
        for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    }
  } else {
    const uint16_t* wc[NC];
    DEEPINFER_UNROLL
    for (int c = 0; c < NC; ++c)
      wc[c] =
          static_cast<const uint16_t*>(a.w) + (panel + c / 2) * panel_elems + 2 * kLanes * (c % 2);
    // p0 is even (chunks are); a pair q covers k = 2q, 2q + 1.
    const int64_t q0 = p0 / 2;
    if constexpr (K == PackedKind::bf16) {
      const float* xr[MR];
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) xr[r] = a.x + (i0 + r) * a.x_stride;
      const __m512i high = _mm512_set1_epi32(-65536);
      int64_t q = q0;
      for (; 2 * q + 2 <= p1; ++q) {
        __m512 we[NC], wo[NC];
        DEEPINFER_UNROLL
        for (int c = 0; c < NC; ++c) {
          const __m512i raw = _mm512_load_si512(wc[c] + q * 2 * kPanel);
          we[c] = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
          wo[c] = _mm512_castsi512_ps(_mm512_and_si512(raw, high));
        }
        DEEPINFER_UNROLL
        for (int c = 0; c < NC; c += 2) prefetch(wc[c], q);
        DEEPINFER_UNROLL
        for (int r = 0; r < MR; ++r) {
          const __m512 xe = _mm512_set1_ps(xr[r][2 * q]);
          DEEPINFER_UNROLL
          for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_fmadd_ps(xe, we[c], acc[r][c]);
          const __m512 xo = _mm512_set1_ps(xr[r][2 * q + 1]);
          DEEPINFER_UNROLL
          for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_fmadd_ps(xo, wo[c], acc[r][c]);
        }
      }
      if (2 * q < p1) {  // odd k: the last pair's even half only (x has no element k)
        DEEPINFER_UNROLL
        for (int c = 0; c < NC; ++c) {
          const __m512 we =
              _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(wc[c] + q * 2 * kPanel), 16));
          DEEPINFER_UNROLL
          for (int r = 0; r < MR; ++r)
            acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(xr[r][2 * q]), we, acc[r][c]);
        }
      }
    } else {
      // x rows are bf16 with an even stride, zero-padded: every pair is whole.
      const uint16_t* xr[MR];
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) xr[r] = a.xb + (i0 + r) * a.x_stride;
      const int64_t q1 = (p1 + 1) / 2;
      for (int64_t q = q0; q < q1; ++q) {
        __m512i wv[NC];
        DEEPINFER_UNROLL
        for (int c = 0; c < NC; ++c) wv[c] = _mm512_load_si512(wc[c] + q * 2 * kPanel);
        DEEPINFER_UNROLL
        for (int c = 0; c < NC; c += 2) prefetch(wc[c], q);
        DEEPINFER_UNROLL
        for (int r = 0; r < MR; ++r) {
          int32_t pair;
          __builtin_memcpy(&pair, xr[r] + 2 * q, sizeof(pair));
          const __m512bh xv = as_bh(_mm512_set1_epi32(pair));
          DEEPINFER_UNROLL
          for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xv, as_bh(wv[c]));
        }
      }
    }
  }

  DEEPINFER_UNROLL
  for (int c = 0; c < NC; ++c) {
    const int64_t col = col0 + kLanes * c;
    const __m512 b =
        last && a.bias ? _mm512_maskz_loadu_ps(mask[c], a.bias + col) : _mm512_setzero_ps();
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      // Adding +0 when there is no bias would turn a -0 sum into +0: add only a real bias.
      const __m512 v = last && a.bias ? _mm512_add_ps(acc[r][c], b) : acc[r][c];
      _mm512_mask_storeu_ps(a.y + (i0 + r) * a.n + col, mask[c], v);
    }
  }
}

// tile<K, rows, NP, PF> for a run-time row count (1 ..  the largest that fits the registers).
template <PackedKind K, int NP, bool PF>
void tile_rows(int64_t rows, const PackedArgs& a, int64_t i0, int64_t panel, int64_t p0, int64_t p1,
               bool first, bool last, L2Lines l2 = {}) {
  constexpr int kMax = NP == 1 ? max_rows(K) : NP == 2 && K != PackedKind::bf16 ? 6 : 2;
#define DI_TILE_CASE(R)                                          \
  case R:                                                        \
    if constexpr (R <= kMax) {                                   \
      tile<K, R, NP, PF>(a, i0, panel, p0, p1, first, last, l2); \
      return;                                                    \
    }                                                            \
    break;
  switch (rows) {
    DI_TILE_CASE(1)
    DI_TILE_CASE(2)
    DI_TILE_CASE(3)
    DI_TILE_CASE(4)
    DI_TILE_CASE(5)
    DI_TILE_CASE(6)
    DI_TILE_CASE(7)
    DI_TILE_CASE(8)
    DI_TILE_CASE(9)
    DI_TILE_CASE(10)
    DI_TILE_CASE(11)
    DI_TILE_CASE(12)
    DI_TILE_CASE(13)
    DI_TILE_CASE(14)
    default:
      break;
  }
#undef DI_TILE_CASE
  __builtin_trap();  // the callers never ask for more rows than kMax
}

// Large m: rows m0 .. m1 by panels panel, panel + 1 over k steps [p0, p1), in row tiles
// of near-equal size up to kPairRows. The first half of the tiles brings the next step's
// weights into L2, the second half the step's after (the walk's next pair).
template <PackedKind K>
void pair_tiles(const PackedArgs& a, int64_t m0, int64_t m1, int64_t group, int64_t group_end,
                int64_t pb, int64_t panel, int64_t p0, int64_t p1) {
  const int64_t tiles = (m1 - m0 + kPairRows - 1) / kPairRows, half = (tiles + 1) / 2;
  L2Lines next[2];
  WalkStep step{group, group_end, panel + 1, p0};
  for (L2Lines& lines : next)
    if (next_step(a, chunk_k(K), pb, step))
      lines = step_lines(a, K == PackedKind::f32, chunk_k(K), step);
  int64_t i = m0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t r = next_tile_rows(m1 - i, tiles - t);
    const L2Lines share =
        t < half ? l2_share(next[0], t, half) : l2_share(next[1], t - half, tiles - half);
    tile_rows<K, 2, false>(r, a, i, panel, p0, p1, p0 == 0, p1 == a.k, share);
    i += r;
  }
}

template <PackedKind K>
void rows_of_kind(const PackedArgs& a, int64_t m0, int64_t m1, int64_t pa, int64_t pb) {
  const int64_t rows = m1 - m0;
  if (rows <= kSmallRows) {
    // Panels per tile: enough accumulators for the FMA latency within the 32 registers (exact
    // bf16 holds two widened vectors per weight load).
    int64_t panel = pa;
    if constexpr (K != PackedKind::bf16) {
      if (rows <= 2) {
        for (; panel + 4 <= pb; panel += 4)
          tile_rows<K, 4, true>(rows, a, m0, panel, 0, a.k, true, true);
      }
    }
    if (K != PackedKind::bf16 || rows <= 2) {
      for (; panel + 2 <= pb; panel += 2)
        tile_rows<K, 2, true>(rows, a, m0, panel, 0, a.k, true, true);
    }
    for (; panel < pb; ++panel) tile_rows<K, 1, true>(rows, a, m0, panel, 0, a.k, true, true);
    return;
  }
  constexpr int64_t kMax = max_rows(K);
  if (rows <= kMax) {
    // One row tile: each panel is read once, so there is nothing to keep in L1. Stream all of
    // k and prefetch (batched decode, the lm_head of a few rows: weights from DRAM).
    for (int64_t panel = pa; panel < pb; ++panel)
      tile_rows<K, 1, true>(rows, a, m0, panel, 0, a.k, true, true);
    return;
  }
  // Row tiles of near-equal size (32 rows: 11 + 11 + 10), each at least 8 accumulators wide.
  // Panels go in groups whose partial sums (rows x 256 f32 outputs: 256 KiB) stay in L2 from
  // one k chunk to the next; the x block of a chunk is re-read per group (from L2 or L3).
  const int64_t tiles = (rows + kMax - 1) / kMax;
  for (int64_t group = pa; group < pb; group += kGroupPanels) {
    const int64_t group_end = min64(pb, group + kGroupPanels);
    for (int64_t p0 = 0; p0 < a.k; p0 += chunk_k(K)) {
      const int64_t p1 = min64(a.k, p0 + chunk_k(K));
      int64_t panel = group;
      if constexpr (K != PackedKind::bf16) {
        for (; panel + 2 <= group_end; panel += 2)
          pair_tiles<K>(a, m0, m1, group, group_end, pb, panel, p0, p1);
      }
      for (; panel < group_end; ++panel) {
        // The next work's weights come from DRAM: every row tile brings a share into L2.
        const L2Lines next =
            next_chunk_lines(a, K == PackedKind::f32, chunk_k(K), group, group_end, pb, panel, p0);
        int64_t i = m0;
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t r = next_tile_rows(m1 - i, tiles - t);
          const L2Lines share = l2_share(next, t, tiles);
          // The first row tile brings the panel's chunk into L1 for the others: it prefetches
          // ahead (weights that do not stay in cache between calls, e.g. MoE experts).
          if (t == 0) {
            tile_rows<K, 1, true>(r, a, i, panel, p0, p1, p0 == 0, p1 == a.k, share);
          } else {
            tile_rows<K, 1, false>(r, a, i, panel, p0, p1, p0 == 0, p1 == a.k, share);
          }
          i += r;
        }
      }
    }
  }
}

}  // namespace

int64_t panels_per_tile(PackedKind kind, int64_t rows) {
  if (rows <= 2 && kind != PackedKind::bf16) return 4;
  if (rows <= kSmallRows) return kind != PackedKind::bf16 || rows <= 2 ? 2 : 1;
  return rows > max_rows(kind) && kind != PackedKind::bf16 ? 2 : 1;  // pair_tiles
}

void gemm_packed_rows(const PackedArgs& a, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  switch (a.kind) {
    case PackedKind::f32:
      return rows_of_kind<PackedKind::f32>(a, m0, m1, p0, p1);
    case PackedKind::bf16:
      return rows_of_kind<PackedKind::bf16>(a, m0, m1, p0, p1);
    case PackedKind::bf16_dpbf:
      return rows_of_kind<PackedKind::bf16_dpbf>(a, m0, m1, p0, p1);
  }
}

}  // namespace deepinfer::kernels::detail::avx512
