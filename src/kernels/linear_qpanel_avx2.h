#pragma once
// AVX2 prefill GEMM for q6_k and q5_1, whose f32 work is per 4-element lane (kernels.h):
// the weight blocks of a panel of kPanelCols rows are decoded once (quants, lane scales, lane mins:
// qk::WBlock) into a thread-local buffer and every x row of the call runs over them, 4 rows x 2
// outputs per register tile. The streaming tile decodes a block again for every pair of x rows;
// here the decode is paid once per panel.
//
// The arithmetic is kernels.h's exactly: per output, lane accumulators for the even blocks
// and for the odd blocks, each in block order. The even blocks run first, then the odd ones
// (each chain still sees its blocks in order), which halves the live accumulators and so
// allows the larger tile; then y = hsum(even + odd), as the streaming tile computes it.
// Include from linear_q8_avx2.cpp / linear_qk_avx2.cpp only (internal linkage).
#include <vector>

#include "kernels/backend.h"
#include "kernels/linear_qk_decode.h"
#include "kernels/simd_avx2.h"

namespace deepinfer::kernels::detail::avx2::qpanel {
namespace {

constexpr int64_t kPanelCols = 4;  // weight rows decoded at a time
constexpr int kTileRows = 4;

template <DType W>
constexpr bool kWithMin = qk::kWithMin<W>;
// Bytes of one weight row of `blocks` 32-element blocks.
template <DType W>
constexpr int64_t row_bytes(int64_t blocks) {
  return blocks / qk::kSubBlocks<W> * qk::kStoredBytes<W>;
}

// acc + per 32-bit lane the sum of 4 products u8 (<= 63) by s8 (exact: no int16 saturation).
inline __m256i lane_dot(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

constexpr int kTileCols = 2;

// The chain of the blocks of one parity (0: even, 1: odd) for x rows i0 .. i0 + MR - 1 by the
// weight rows w[0], w[1] (decoded blocks), from zero into acc.
template <DType W, int MR>
inline void parity_chain(const LinearArgs& a, const qk::WBlock* const* w, int64_t blocks,
                         int64_t i0, int64_t parity, __m256 (&acc)[MR][kTileCols]) {
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) DEEPINFER_UNROLL
  for (int n = 0; n < kTileCols; ++n) acc[r][n] = _mm256_setzero_ps();
  for (int64_t b = parity; b < blocks; b += 2) {
    DEEPINFER_UNROLL
    for (int r = 0; r < MR; ++r) {
      const int64_t row = i0 + r;
      const int64_t at = (row * blocks + b) * 8;
      const __m256i xq =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + row * a.k + b * kQuantBlock));
      const __m256 xd = _mm256_broadcast_ss(a.xd + at);  // one d_x per 32-element block
      const __m256i xt = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xt + at));
      // The types with a min have no integer start (quantize_x_blocks).
      const __m256i offset = kWithMin<W> ? _mm256_setzero_si256() : xt;
      DEEPINFER_UNROLL
      for (int n = 0; n < kTileCols; ++n) {
        const qk::WBlock& wb = w[n][b];
        const __m256i t = lane_dot(offset, wb.q, xq);
        acc[r][n] = _mm256_fmadd_ps(_mm256_mul_ps(wb.d, xd), _mm256_cvtepi32_ps(t), acc[r][n]);
        if constexpr (kWithMin<W>)
          acc[r][n] = _mm256_fmadd_ps(wb.m, _mm256_castsi256_ps(xt), acc[r][n]);
      }
    }
  }
}

// Outputs j0, j0 + 1 (the panel's columns c, c + 1; only the first `cols` are stored) of x
// rows i0 .. i0 + MR - 1.
template <DType W, int MR>
void panel_tile(const LinearArgs& a, const qk::WBlock* panel, int64_t blocks, int64_t i0, int64_t c,
                int64_t j0, int64_t cols) {
  const qk::WBlock* w[kTileCols] = {panel + c * blocks, panel + (c + 1) * blocks};
  __m256 even[MR][kTileCols], odd[MR][kTileCols];
  parity_chain<W, MR>(a, w, blocks, i0, 0, even);
  parity_chain<W, MR>(a, w, blocks, i0, 1, odd);
  DEEPINFER_UNROLL
  for (int r = 0; r < MR; ++r) {
    float* yr = a.y + (i0 + r) * a.n + j0;
    DEEPINFER_UNROLL
    for (int n = 0; n < kTileCols; ++n) {
      if (n < cols) {
        const float v = hsum(_mm256_add_ps(even[r][n], odd[r][n]));
        yr[n] = a.bias ? v + a.bias[j0 + n] : v;
      }
    }
  }
}

template <DType W, int MR>
void panel_rows(const LinearArgs& a, const qk::WBlock* panel, int64_t blocks, int64_t i0,
                int64_t j0, int64_t cols) {
  for (int64_t c = 0; c < cols; c += kTileCols)
    panel_tile<W, MR>(a, panel, blocks, i0, c, j0 + c, min64(kTileCols, cols - c));
}

// Rows m0 .. m1 - 1 by outputs n0 .. n1 - 1.
template <DType W>
void linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t blocks = a.k / kQuantBlock;
  const int64_t stride = row_bytes<W>(blocks);
  thread_local std::vector<qk::WBlock> buffer;
  if (buffer.size() < static_cast<size_t>(kPanelCols * blocks))
    buffer.resize(static_cast<size_t>(kPanelCols * blocks));
  qk::WBlock* panel = buffer.data();
  for (int64_t j = n0; j < n1; j += kPanelCols) {
    const int64_t cols = min64(kPanelCols, n1 - j);
    for (int64_t c = 0; c < cols; ++c) {
      const auto* row = static_cast<const uint8_t*>(a.w) + (j + c) * stride;
      for (int64_t b = 0; b < blocks; ++b) panel[c * blocks + b] = qk::decode<W>(row, b);
    }
    int64_t i = m0;
    for (; i + kTileRows <= m1; i += kTileRows)
      panel_rows<W, kTileRows>(a, panel, blocks, i, j, cols);
    switch (m1 - i) {
      case 3:
        panel_rows<W, 3>(a, panel, blocks, i, j, cols);
        break;
      case 2:
        panel_rows<W, 2>(a, panel, blocks, i, j, cols);
        break;
      case 1:
        panel_rows<W, 1>(a, panel, blocks, i, j, cols);
        break;
      default:
        break;
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels::detail::avx2::qpanel
