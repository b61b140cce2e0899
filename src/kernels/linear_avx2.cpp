// AVX2 linear: y = x · w^T with f32, bf16 or f16 weights widened to f32 in registers. Same
// scheme as linear_avx512.cpp (read its header comment) with 8-lane vectors: one accumulator
// per output element over whole vectors of k, a zero-padded last vector, then hsum().
// AVX2 has no 16-bit masked loads, so the last partial vector of a bf16/f16 weight row is
// copied into a zeroed buffer first.
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/simd_avx2.h"

namespace deepinfer::kernels::detail::avx2 {
namespace {

constexpr int64_t kPanelRows = 64;  // weight rows kept in L2 while every x tile passes over them
constexpr int64_t kBf16Chunk = 16;  // k per bf16 step: 8 (even, odd) pairs

inline __m256 bf16_even(__m256i raw) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
}
inline __m256 bf16_odd(__m256i raw) {
  return _mm256_castsi256_ps(_mm256_and_si256(raw, _mm256_set1_epi32(-65536)));
}

// The first n (< 16) 16-bit values at p, zero-extended to a full 16-value vector.
inline __m256i load_u16_tail(const uint16_t* p, int64_t n) {
  alignas(32) uint16_t buf[16] = {};
  for (int64_t i = 0; i < n; ++i) buf[i] = p[i];
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(buf));
}

// Decode prefetch of the next tile's rows, for calls of at most kStreamRows x rows: see
// linear_avx512.cpp.
constexpr int64_t kStreamRows = 8;

template <bool PF, int NR, typename T>
inline void prefetch_next_tile(const T* row, int64_t k, int64_t p) {
  if constexpr (PF) _mm_prefetch(reinterpret_cast<const char*>(row + NR * k + p), _MM_HINT_T0);
}

template <int MR, int NR>
inline void reduce_tile(__m256 (*acc)[NR], float (*out)[NR]) {
  if constexpr (MR * NR == 8) {
    hsum8(&acc[0][0], &out[0][0]);
  } else {
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) out[r][c] = hsum(acc[r][c]);
  }
}

template <int MR, int NR, bool PF>
inline void tile_f32(const float* const* xr, const float* const* wr, int64_t k, float (*out)[NR]) {
  __m256 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_setzero_ps();
  auto step = [&](int64_t p, auto mask) {
    __m256 xv[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) xv[r] = load(xr[r] + p, mask);
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      prefetch_next_tile<PF, NR>(wr[c], k, p);
      const __m256 wv = load(wr[c] + p, mask);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  };
  for_each_vector(k, step);
  reduce_tile<MR, NR>(acc, out);
}

template <int MR, int NR, bool PF>
inline void tile_f16(const float* const* xr, const uint16_t* const* wr, int64_t k,
                     float (*out)[NR]) {
  __m256 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_setzero_ps();
  auto step = [&](int64_t p, auto mask) {
    __m256 xv[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) xv[r] = load(xr[r] + p, mask);
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      prefetch_next_tile<PF, NR>(wr[c], k, p);
      __m128i raw;
      if constexpr (std::is_same_v<decltype(mask), Full>) {
        raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wr[c] + p));
      } else {
        raw = _mm256_castsi256_si128(load_u16_tail(wr[c] + p, k - p));
      }
      const __m256 wv = _mm256_cvtph_ps(raw);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  };
  for_each_vector(k, step);
  reduce_tile<MR, NR>(acc, out);
}

// xr rows are packed per 16 k as 8 even then 8 odd values, zero-padded to a multiple of 16.
template <int MR, int NR, bool PF>
inline void tile_bf16(const float* const* xr, const uint16_t* const* wr, int64_t k,
                      float (*out)[NR]) {
  __m256 acc[MR][NR];
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int c = 0; c < NR; ++c) acc[r][c] = _mm256_setzero_ps();
  auto step = [&](int64_t p, bool full) {
    __m256 xe[MR], xo[MR];
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      xe[r] = _mm256_loadu_ps(xr[r] + p);
      xo[r] = _mm256_loadu_ps(xr[r] + p + kLanes);
    }
    DEEPINFER_UNROLL
    for (int c = 0; c < NR; ++c) {
      prefetch_next_tile<PF, NR>(wr[c], k, p);
      const __m256i raw = full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[c] + p))
                               : load_u16_tail(wr[c] + p, k - p);
      const __m256 we = bf16_even(raw), wo = bf16_odd(raw);
      DEEPINFER_UNROLL
      for (int r = 0; r < MR; ++r) {
        acc[r][c] = _mm256_fmadd_ps(xe[r], we, acc[r][c]);
        acc[r][c] = _mm256_fmadd_ps(xo[r], wo, acc[r][c]);
      }
    }
  };
  int64_t p = 0;
  for (; p + kBf16Chunk <= k; p += kBf16Chunk) step(p, true);
  if (p < k) step(p, false);
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

// Register tiles (16 ymm): MR x rows by NR weight rows, then smaller MR for leftover rows
// and 1 x 8 for single rows (decode: 8 weight rows streaming at once).
template <int MR, int NR, bool PF>
void rows_tiled(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t jp = n0; jp < n1; jp += kPanelRows) {
    const int64_t jp_end = min64(jp + kPanelRows, n1);
    int64_t i = m0;
    for (; i + MR <= m1; i += MR) run_tiles<MR, NR, PF>(a, i, jp, jp_end);
    const int64_t left = m1 - i;
    if (left >= 2 && MR > 2) {
      if (left == 3) run_tiles<3, NR, PF>(a, i, jp, jp_end);
      if (left == 2) run_tiles<2, NR, PF>(a, i, jp, jp_end);
    } else if (left == 1) {
      run_tiles<1, 8, true>(a, i, jp, jp_end);
    }
  }
}

}  // namespace

int64_t linear_tile_n() {
  return 16;
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

void linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float*) {
  // bf16 needs two x vectors per row (even, odd), so it takes fewer x rows per tile.
  const bool stream = m1 - m0 <= kStreamRows;
  if (a.w_dtype == DType::bf16) {
    stream ? rows_tiled<2, 4, true>(a, m0, m1, n0, n1) : rows_tiled<2, 4, false>(a, m0, m1, n0, n1);
  } else {
    stream ? rows_tiled<4, 2, true>(a, m0, m1, n0, n1) : rows_tiled<4, 2, false>(a, m0, m1, n0, n1);
  }
}

}  // namespace deepinfer::kernels::detail::avx2
