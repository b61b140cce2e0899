// AVX512_BF16 linear for MatmulPrecision::bf16: y = bf16(x) · w^T with bf16 weights.
//
// x arrives already rounded to bf16 and packed (kernels.cpp), so a 64-byte load of x and one
// of a weight row are 32 bf16 each, and one vdpbf16ps adds the 16 pair products
// x[2l]·w[2l] + x[2l+1]·w[2l+1] into lane l of an f32 accumulator: one instruction per 32
// multiply-adds instead of two FMAs and two widening ops on the exact path.
//
// As on the exact path, every output element owns one accumulator that walks k in whole
// vectors (the weight tail zero-masked, the x tail zero-padded) and then goes through the
// ISA's one hsum tree, whatever the tile shape: results are bitwise independent of m, of the
// row's place in the batch and of the thread split.
// GCC 12 flags its own _mm512_undefined_*() idiom inside the intrinsic headers (as in
// simd_avx512.h, bug 105593) here as plain -Wuninitialized once the tiles get inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/simd_avx512.h"  // first: see the note there

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::avx512 {
namespace {

constexpr int kTileRows = 6;        // x rows per register tile: 24 accumulators + 6 x + 1 w
constexpr int kTileCols = 4;        // weight rows per register tile (m >= 2)
constexpr int kDecodeCols = 8;      // weight rows in flight for a single x row
constexpr int64_t kPanelRows = 64;  // weight rows kept in L2 while every x tile passes over them
constexpr int64_t kChunk = 32;      // bf16 per vector

inline __m512bh as_bh(__m512i v) {
  return __builtin_bit_cast(__m512bh, v);
}

// hsum16() over whole groups of 16 accumulators, hsum() for the rest: bitwise the same.
template <int MR, int NR>
inline void reduce_tile(__m512 (*acc)[NR], float (*out)[NR]) {
  constexpr int kCount = MR * NR, kGrouped = kCount / 16 * 16;
  __m512* a = &acc[0][0];
  float* o = &out[0][0];
  DEEPINFER_UNROLL
  for (int g = 0; g < kGrouped; g += 16) hsum16(a + g, o + g);
  DEEPINFER_UNROLL
  for (int i = kGrouped; i < kCount; ++i) o[i] = hsum(a[i]);
}

template <int MR, int NR, bool PF>
inline void tile(const uint16_t* const* xr, const uint16_t* const* wr, int64_t k,
                 float (*out)[NR]) {
  __m512 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
  auto step = [&](int64_t p, __mmask32 mask) {
    __m512bh xv[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) xv[r] = as_bh(_mm512_loadu_si512(xr[r] + p));
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      // Decode streams weights from DRAM: fetch the next tile's rows ahead (see linear_avx512).
      if constexpr (PF)
        _mm_prefetch(reinterpret_cast<const char*>(wr[c] + NR * k + p), _MM_HINT_T0);
      const __m512bh wv = as_bh(_mm512_maskz_loadu_epi16(mask, wr[c] + p));
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xv[r], wv);
    }
  };
  int64_t p = 0;
  for (; p + kChunk <= k; p += kChunk) step(p, 0xffffffffu);
  if (p < k) step(p, static_cast<__mmask32>((1ull << (k - p)) - 1u));
  reduce_tile<MR, NR>(acc, out);
}

// y[i0 : i0 + MR, j0 : j0 + cols] (cols <= NR; missing weight rows repeat the last one).
template <int MR, int NR, bool PF>
void run_tile(const LinearArgs& a, int64_t i0, int64_t j0, int64_t cols) {
  const uint16_t* xr[MR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) xr[r] = a.xb + (i0 + r) * a.x_stride;
  const uint16_t* wr[NR];
  DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c)
    wr[c] = static_cast<const uint16_t*>(a.w) + (j0 + min64(c, cols - 1)) * a.k;
  float out[MR][NR];
  tile<MR, NR, PF>(xr, wr, a.k, out);
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

// Up to this many x rows per call (decode), weights come from DRAM: prefetch them.
constexpr int64_t kStreamRows = 8;

template <bool PF>
void rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t jp = n0; jp < n1; jp += kPanelRows) {
    const int64_t jp_end = min64(jp + kPanelRows, n1);
    int64_t i = m0;
    for (; i + kTileRows <= m1; i += kTileRows)
      run_tiles<kTileRows, kTileCols, PF>(a, i, jp, jp_end);
    switch (m1 - i) {
      case 5:
        run_tiles<5, kTileCols, PF>(a, i, jp, jp_end);
        break;
      case 4:
        run_tiles<4, kTileCols, PF>(a, i, jp, jp_end);
        break;
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

int64_t linear_bf16_x_stride(int64_t k) {
  return (k + kChunk - 1) / kChunk * kChunk;
}

// vcvtne2ps2bf16 rounds to nearest even like f32_to_bf16(), but reads denormals as zero;
// vdpbf16ps reads bf16 denormals as zero too, so the products are the same.
void linear_pack_x_bf16(const float* x, int64_t m, int64_t k, uint16_t* xb) {
  const int64_t stride = linear_bf16_x_stride(k);
  for (int64_t i = 0; i < m; ++i) {
    const float* src = x + i * k;
    uint16_t* dst = xb + i * stride;
    for (int64_t p = 0; p < stride; p += kChunk) {
      const int64_t left = k - p;
      const __mmask16 lo = left >= kLanes ? __mmask16{0xffff} : first_lanes(left > 0 ? left : 0);
      const int64_t left_hi = left - kLanes;
      const __mmask16 hi =
          left_hi >= kLanes ? __mmask16{0xffff} : first_lanes(left_hi > 0 ? left_hi : 0);
      const __m512bh packed = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, src + p + kLanes),
                                                  _mm512_maskz_loadu_ps(lo, src + p));
      _mm512_storeu_si512(dst + p, __builtin_bit_cast(__m512i, packed));
    }
  }
}

void linear_rows_dpbf16(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (m1 - m0 <= kStreamRows) {
    rows<true>(a, m0, m1, n0, n1);
  } else {
    rows<false>(a, m0, m1, n0, n1);
  }
}

}  // namespace deepinfer::kernels::detail::avx512
