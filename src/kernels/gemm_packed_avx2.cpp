// AVX2 micro-kernels of the packed-panel GEMM: the panels of gemm_packed.h read 8 columns
// (one ymm) at a time, and every output follows the same chain over k as on AVX-512 (FMA is
// exactly rounded either way), so packed results are bitwise the same on both ISAs.
//
// 16 ymm registers: a tile is MR rows by NU ymm columns (8 outputs each) with MR·NU
// accumulators, NU weight vectors (two per load for exact bf16) and one broadcast x:
//  - m <= 6 (f32; 5 for exact bf16): one pass over all of k per tile, 4 ymm columns (one panel)
//    for m <= 2 (exact bf16: m = 1), else 2, prefetching the panel ahead (DRAM-bound);
//  - larger m: tiles of up to 6 (5) rows by half a panel, k in chunks of 1024 that every row
//    tile passes over while they are in cache (L2), panels in groups whose partial
//    sums stay in L2 between chunks.
#include "kernels/simd_avx2.h"  // first: see the note in simd_avx512.h

#include "kernels/gemm_packed.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

constexpr int64_t kStepBytes = 128;  // one k step (f32) or k pair (bf16) of a panel
constexpr int64_t kPrefetchSteps = 16;
constexpr int64_t kGroupPanels = 8;
#ifndef DI_C2
#define DI_C2 1024
#endif
constexpr int64_t kChunk = DI_C2;  // even: bf16 pairs never straddle two chunks

constexpr int max_rows(PackedKind kind) {
  return kind == PackedKind::bf16 ? 5 : 6;
}

// y[i0 : i0 + MR, ymm columns u0 .. u0 + NU) (8 outputs each; within a panel, except the
// two-panel bf16 decode tile),
// k steps [p0, p1); first / last as in gemm_packed_avx512.cpp.
template <PackedKind K, int MR, int NU, bool PF>
void tile(const PackedArgs& a, int64_t i0, int64_t u0, int64_t p0, int64_t p1, bool first,
          bool last, L2Lines l2) {
  const int64_t col0 = u0 * kLanes;
  [[maybe_unused]] const int64_t panel = u0 / 4, unit0 = u0 % 4;
  const int64_t panel_elems =
      packed_panel_elements(a.k, K == PackedKind::f32 ? DType::f32 : DType::bf16);
  __m256i mask[NU];
  bool full[NU];
  DEEPINFER_UNROLL
  for (int c = 0; c < NU; ++c) {
    const int64_t left = a.n - (col0 + kLanes * c);
    full[c] = left >= kLanes;
    mask[c] = first_lanes(left > 0 ? left : 0);
  }
  auto load_y = [&](const float* p, int c) {
    return full[c] ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask[c]);
  };
  __m256 acc[MR][NU];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    DEEPINFER_UNROLL
    for (int c = 0; c < NU; ++c)
      acc[r][c] = first ? _mm256_setzero_ps() : load_y(a.y + (i0 + r) * a.n + col0 + kLanes * c, c);
  }
  auto prefetch = [&](const void* panel_start, int64_t step) {
    if constexpr (PF) {
      const char* at = static_cast<const char*>(panel_start) + (step + kPrefetchSteps) * kStepBytes;
      _mm_prefetch(at, _MM_HINT_T0);
      _mm_prefetch(at + 64, _MM_HINT_T0);
    }
  };

  if constexpr (K == PackedKind::f32) {
    const float* wp = static_cast<const float*>(a.w) + panel * panel_elems + unit0 * kLanes;
    static_assert(NU <= 4, "f32 tiles stay within one panel");
    const float* xr[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) xr[r] = a.x + (i0 + r) * a.x_stride;
    for (int64_t p = p0; p < p1; ++p) {
      __m256 wv[NU];
      DEEPINFER_UNROLL
      for (int c = 0; c < NU; ++c) wv[c] = _mm256_load_ps(wp + p * kPanel + kLanes * c);
      if (unit0 == 0) prefetch(wp, p);
      prefetch_l2_step(l2);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) {
        const __m256 xv = _mm256_broadcast_ss(xr[r] + p);
        DEEPINFER_UNROLL
        for (int c = 0; c < NU; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    }
  } else {
    // bf16 exact (no vdpbf16ps on AVX2; MatmulPrecision::bf16 arrives as rounded f32 x).
    // Unit u of the tile is panel (u0 + u) / 4, 8-column group (u0 + u) % 4.
    const uint16_t* wc[NU];
    DEEPINFER_UNROLL
    for (int c = 0; c < NU; ++c)
      wc[c] = static_cast<const uint16_t*>(a.w) + (u0 + c) / 4 * panel_elems +
              (u0 + c) % 4 * 2 * kLanes;
    const float* xr[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) xr[r] = a.x + (i0 + r) * a.x_stride;
    const __m256i high = _mm256_set1_epi32(-65536);
    int64_t q = p0 / 2;
    for (; 2 * q + 2 <= p1; ++q) {
      DEEPINFER_UNROLL
      for (int c = 0; c < NU; ++c)
        if ((u0 + c) % 4 == 0) prefetch(wc[c], q);
      prefetch_l2_step(l2);
      if constexpr (MR == 1) {
        // Decode: widen one column at a time, so that 8 columns (two panels) of accumulators
        // fit the 16 registers and hide the FMA latency.
        const __m256 xe = _mm256_broadcast_ss(xr[0] + 2 * q);
        const __m256 xo = _mm256_broadcast_ss(xr[0] + 2 * q + 1);
        DEEPINFER_UNROLL
        for (int c = 0; c < NU; ++c) {
          const __m256i raw =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(wc[c] + q * 2 * kPanel));
          acc[0][c] =
              _mm256_fmadd_ps(xe, _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16)), acc[0][c]);
          acc[0][c] =
              _mm256_fmadd_ps(xo, _mm256_castsi256_ps(_mm256_and_si256(raw, high)), acc[0][c]);
        }
      } else {
        __m256 we[NU], wo[NU];
        DEEPINFER_UNROLL
        for (int c = 0; c < NU; ++c) {
          const __m256i raw =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(wc[c] + q * 2 * kPanel));
          we[c] = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
          wo[c] = _mm256_castsi256_ps(_mm256_and_si256(raw, high));
        }
        DEEPINFER_UNROLL
        for (int r = 0; r < MR; ++r) {
          const __m256 xe = _mm256_broadcast_ss(xr[r] + 2 * q);
          DEEPINFER_UNROLL
          for (int c = 0; c < NU; ++c) acc[r][c] = _mm256_fmadd_ps(xe, we[c], acc[r][c]);
          const __m256 xo = _mm256_broadcast_ss(xr[r] + 2 * q + 1);
          DEEPINFER_UNROLL
          for (int c = 0; c < NU; ++c) acc[r][c] = _mm256_fmadd_ps(xo, wo[c], acc[r][c]);
        }
      }
    }
    if (2 * q < p1) {  // odd k: the last pair's even half only
      DEEPINFER_UNROLL
      for (int c = 0; c < NU; ++c) {
        const __m256i raw =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(wc[c] + q * 2 * kPanel));
        const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
        DEEPINFER_UNROLL
        for (int r = 0; r < MR; ++r)
          acc[r][c] = _mm256_fmadd_ps(_mm256_broadcast_ss(xr[r] + 2 * q), we, acc[r][c]);
      }
    }
  }

  DEEPINFER_UNROLL
  for (int c = 0; c < NU; ++c) {
    const int64_t col = col0 + kLanes * c;
    if (col >= a.n) continue;
    const __m256 b = last && a.bias ? load_y(a.bias + col, c) : _mm256_setzero_ps();
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m256 v = last && a.bias ? _mm256_add_ps(acc[r][c], b) : acc[r][c];
      float* at = a.y + (i0 + r) * a.n + col;
      if (full[c]) {
        _mm256_storeu_ps(at, v);
      } else {
        _mm256_maskstore_ps(at, mask[c], v);
      }
    }
  }
}

template <PackedKind K, int NU, bool PF>
void tile_rows(int64_t rows, const PackedArgs& a, int64_t i0, int64_t u0, int64_t p0, int64_t p1,
               bool first, bool last, L2Lines l2 = {}) {
  constexpr int kMax = NU == 8 ? 1 : NU == 4 ? (K == PackedKind::f32 ? 2 : 1) : max_rows(K);
#define DI_TILE_CASE(R)                                       \
  case R:                                                     \
    if constexpr (R <= kMax) {                                \
      tile<K, R, NU, PF>(a, i0, u0, p0, p1, first, last, l2); \
      return;                                                 \
    }                                                         \
    break;
  switch (rows) {
    DI_TILE_CASE(1)
    DI_TILE_CASE(2)
    DI_TILE_CASE(3)
    DI_TILE_CASE(4)
    DI_TILE_CASE(5)
    DI_TILE_CASE(6)
    default:
      break;
  }
#undef DI_TILE_CASE
  __builtin_trap();  // the callers never ask for more rows than kMax
}

template <PackedKind K>
void rows_of_kind(const PackedArgs& a, int64_t m0, int64_t m1, int64_t pa, int64_t pb) {
  const int64_t rows = m1 - m0;
  constexpr int64_t kMax = max_rows(K);
  if (rows <= kMax) {
    // A whole panel per tile where the registers allow (f32 up to 2 rows; exact bf16 decode:
    // two panels): enough accumulators and one pass over each panel's stream.
    const bool whole_panel = rows <= (K == PackedKind::f32 ? 2 : 1);
    int64_t first_panel = pa;
    if constexpr (K == PackedKind::bf16) {
      if (rows == 1)
        for (; first_panel + 2 <= pb; first_panel += 2)
          tile_rows<K, 8, true>(rows, a, m0, 4 * first_panel, 0, a.k, true, true);
    }
    for (int64_t panel = first_panel; panel < pb; ++panel) {
      if (whole_panel) {
        tile_rows<K, 4, true>(rows, a, m0, 4 * panel, 0, a.k, true, true);
      } else {
        tile_rows<K, 2, true>(rows, a, m0, 4 * panel, 0, a.k, true, true);
        tile_rows<K, 2, true>(rows, a, m0, 4 * panel + 2, 0, a.k, true, true);
      }
    }
    return;
  }
  const int64_t tiles = (rows + kMax - 1) / kMax;
  for (int64_t group = pa; group < pb; group += kGroupPanels) {
    const int64_t group_end = min64(pb, group + kGroupPanels);
    for (int64_t p0 = 0; p0 < a.k; p0 += kChunk) {
      const int64_t p1 = min64(a.k, p0 + kChunk);
      for (int64_t panel = group; panel < group_end; ++panel) {
        // The next work's weights come from DRAM: every row tile brings a share into L2.
        const L2Lines next =
            next_chunk_lines(a, K == PackedKind::f32, kChunk, group, group_end, pb, panel, p0);
        for (int64_t half = 0; half < 2; ++half) {
          int64_t i = m0;
          for (int64_t t = 0; t < tiles; ++t) {
            const int64_t r = next_tile_rows(m1 - i, tiles - t);
            tile_rows<K, 2, false>(r, a, i, 4 * panel + 2 * half, p0, p1, p0 == 0, p1 == a.k,
                                   l2_share(next, half * tiles + t, 2 * tiles));
            i += r;
          }
        }
      }
    }
  }
}

}  // namespace

int64_t panels_per_tile(PackedKind kind, int64_t rows) {
  return kind != PackedKind::f32 && rows == 1 ? 2 : 1;  // the two-panel bf16 decode tile
}

void gemm_packed_rows(const PackedArgs& a, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  switch (a.kind) {
    case PackedKind::f32:
      return rows_of_kind<PackedKind::f32>(a, m0, m1, p0, p1);
    case PackedKind::bf16:
    case PackedKind::bf16_dpbf:  // never sent here: no vdpbf16ps on AVX2
      return rows_of_kind<PackedKind::bf16>(a, m0, m1, p0, p1);
  }
}

}  // namespace deepinfer::kernels::detail::avx2
