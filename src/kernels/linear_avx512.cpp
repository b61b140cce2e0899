// AVX-512 linear: y = x · w^T with f32, bf16 or f16 weights widened to f32 in registers.
//
// Every output element y[i, j] owns one 16-lane accumulator that walks k in whole vectors
// (the last one zero-masked), then goes through hsum() — the same instructions in the same
// order for every tile shape, so results are bitwise independent of m, of the row's place in
// the batch and of the thread split (kernels.h, batch invariance).
//
// bf16: a 64-byte load holds 32 weights as 16 pairs (w[2l], w[2l+1]) per 32-bit lane;
// `lane << 16` is w[2l] as f32 and `lane & 0xffff0000` is w[2l+1], two cheap ALU ops and no
// shuffles. x is packed once per call to match: per 32 k, its 16 even then its 16 odd values.
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int kTileRows = 4;        // x rows per register tile
constexpr int kTileCols = 4;        // weight rows per register tile (m >= 2)
constexpr int kDecodeCols = 8;      // weight rows in flight for a single x row
constexpr int64_t kPanelRows = 64;  // weight rows kept in L2 while every x tile passes over them
constexpr int64_t kBf16Chunk = 32;

inline __m512 bf16_even(__m512i raw) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
}
inline __m512 bf16_odd(__m512i raw) {
  return _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(-65536)));
}

// Decode (a few x rows) is bound by DRAM latency as much as bandwidth: each tile's rows are
// short streams the hardware prefetcher barely ramps up on. So while a tile reads offset p of
// its NR rows, it prefetches offset p of the next NR rows (contiguous in [n, k] storage).
// Prefetches never fault, so running past the last row is harmless. Large m (PF = false)
// reads each weight panel from L2 for all but its first row tile: no prefetch there.
constexpr int64_t kStreamRows = 8;  // up to this many x rows per call: prefetch weights

template <bool PF, int NR, typename T>
inline void prefetch_next_tile(const T* row, int64_t k, int64_t p) {
  if constexpr (PF) _mm_prefetch(reinterpret_cast<const char*>(row + NR * k + p), _MM_HINT_T0);
}

template <int MR, int NR>
inline void reduce_tile(__m512 (*acc)[NR], float (*out)[NR]) {
  if constexpr (MR * NR == 16) {
    hsum16(&acc[0][0], &out[0][0]);
  } else {
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) out[r][c] = hsum(acc[r][c]);
  }
}

template <int MR, int NR, bool PF>
inline void tile_f32(const float* const* xr, const float* const* wr, int64_t k, float (*out)[NR]) {
  __m512 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
  auto step = [&](int64_t p, __mmask16 mask) {
    __m512 xv[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) xv[r] = _mm512_maskz_loadu_ps(mask, xr[r] + p);
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      prefetch_next_tile<PF, NR>(wr[c], k, p);
      const __m512 wv = _mm512_maskz_loadu_ps(mask, wr[c] + p);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  };
  int64_t p = 0;
  for (; p + kLanes <= k; p += kLanes) step(p, 0xffff);
  if (p < k) step(p, first_lanes(k - p));
  reduce_tile<MR, NR>(acc, out);
}

template <int MR, int NR, bool PF>
inline void tile_f16(const float* const* xr, const uint16_t* const* wr, int64_t k,
                     float (*out)[NR]) {
  __m512 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
  auto step = [&](int64_t p, __mmask16 mask) {
    __m512 xv[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) xv[r] = _mm512_maskz_loadu_ps(mask, xr[r] + p);
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      prefetch_next_tile<PF, NR>(wr[c], k, p);
      const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, wr[c] + p));
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  };
  int64_t p = 0;
  for (; p + kLanes <= k; p += kLanes) step(p, 0xffff);
  if (p < k) step(p, first_lanes(k - p));
  reduce_tile<MR, NR>(acc, out);
}

// xr rows are packed (see the file comment) and zero-padded to a multiple of 32.
template <int MR, int NR, bool PF>
inline void tile_bf16(const float* const* xr, const uint16_t* const* wr, int64_t k,
                      float (*out)[NR]) {
  __m512 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
  auto step = [&](int64_t p, __mmask32 mask) {
    __m512 xe[MR], xo[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      xe[r] = _mm512_loadu_ps(xr[r] + p);
      xo[r] = _mm512_loadu_ps(xr[r] + p + kLanes);
    }
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      prefetch_next_tile<PF, NR>(wr[c], k, p);
      const __m512i raw = _mm512_maskz_loadu_epi16(mask, wr[c] + p);
      const __m512 we = bf16_even(raw), wo = bf16_odd(raw);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) {
        acc[r][c] = _mm512_fmadd_ps(xe[r], we, acc[r][c]);
        acc[r][c] = _mm512_fmadd_ps(xo[r], wo, acc[r][c]);
      }
    }
  };
  int64_t p = 0;
  for (; p + kBf16Chunk <= k; p += kBf16Chunk) step(p, 0xffffffffu);
  if (p < k) step(p, static_cast<__mmask32>((1ull << (k - p)) - 1u));
  reduce_tile<MR, NR>(acc, out);
}

// y[i0 : i0 + MR, j0 : j0 + cols] (cols <= NR; missing weight rows repeat the last one).
template <int MR, int NR, bool PF>
void run_tile(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols) {
  const float* xr[MR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) xr[r] = a.x + (i0 + r) * a.x_stride;
  float out[MR][NR];
  if (a.w_dtype == DType::f32) {
    const float* wr[NR];
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c)
      wr[c] = static_cast<const float*>(a.w) + (j0 + min64(c, cols - 1)) * a.k;
    tile_f32<MR, NR, PF>(xr, wr, a.k, out);
  } else {
    const uint16_t* wr[NR];
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c)
      wr[c] = static_cast<const uint16_t*>(a.w) + (j0 + min64(c, cols - 1)) * a.k;
    if (a.w_dtype == DType::bf16) {
      tile_bf16<MR, NR, PF>(xr, wr, a.k, out);
    } else {
      tile_f16<MR, NR, PF>(xr, wr, a.k, out);
    }
  }
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    float* yr = a.y + (i0 + r) * a.n + j0;
    for (int64_t c = 0; c < cols; ++c) yr[c] = a.bias ? out[r][c] + a.bias[j0 + c] : out[r][c];
  }
}

template <int MR, int NR, bool PF>
void run_tiles(const LinearArgs& a, int64_t i0, int64_t j_begin, int64_t j_end) {
  for (int64_t j = j_begin; j < j_end; j += NR)
    run_tile<MR, NR, PF>(a, i0, j, min64(NR, j_end - j));
}

}  // namespace

int64_t linear_tile_n() {
  return 2 * kDecodeCols;
}

int64_t linear_pack_stride(int64_t k, DType w_dtype) {
  return w_dtype == DType::bf16 ? (k + kBf16Chunk - 1) / kBf16Chunk * kBf16Chunk : 0;
}

void linear_pack_x(const float* x, int64_t m, int64_t k, DType, float* packed) {
  const int64_t stride = linear_pack_stride(k, DType::bf16);
  for (int64_t i = 0; i < m; ++i) {
    const float* src = x + i * k;
    float* dst = packed + i * stride;
    for (int64_t p = 0; p < stride; p += kBf16Chunk) {
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t even = p + 2 * l, odd = even + 1;
        dst[p + l] = even < k ? src[even] : 0.0f;
        dst[p + kLanes + l] = odd < k ? src[odd] : 0.0f;
      }
    }
  }
}

int64_t linear_scratch_floats(int64_t, DType) {
  return 0;
}

namespace {

template <bool PF>
void rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t jp = n0; jp < n1; jp += kPanelRows) {
    const int64_t jp_end = min64(jp + kPanelRows, n1);
    int64_t i = m0;
    for (; i + kTileRows <= m1; i += kTileRows)
      run_tiles<kTileRows, kTileCols, PF>(a, i, jp, jp_end);
    switch (m1 - i) {
      case 3:
        run_tiles<3, kTileCols, PF>(a, i, jp, jp_end);
        break;
      case 2:
        run_tiles<2, kTileCols, PF>(a, i, jp, jp_end);
        break;
      case 1:
        run_tiles<1, kDecodeCols, true>(a, i, jp, jp_end);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float*) {
  if (m1 - m0 <= kStreamRows) {
    rows<true>(a, m0, m1, n0, n1);
  } else {
    rows<false>(a, m0, m1, n0, n1);
  }
}

}  // namespace deepinfer::kernels::detail::avx512
