// Portable linear: the fallback when the CPU has no AVX2. Same structure as the SIMD paths
// (register tiles of x rows × weight rows, kLanes independent partial sums per output, a
// fixed reduction tree, then the k % kLanes tail in order), written so that compilers can
// vectorise the lane loops with the baseline SSE2.
#include <algorithm>

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::scalar {
namespace {

constexpr int kLanes = 8;
constexpr int kTileRows = 2;  // x rows per register tile
constexpr int kTileCols = 2;  // weight rows per register tile

// The one reduction order of an output element; every tile shape uses it.
float reduce_lanes(const float* a) {
  const float s0 = (a[0] + a[4]) + (a[2] + a[6]);
  const float s1 = (a[1] + a[5]) + (a[3] + a[7]);
  return s0 + s1;
}

template <int MR>
void tile(const float* const* xr, const float* const* wr, int64_t k, float (*out)[kTileCols]) {
  float acc[MR][kTileCols][kLanes] = {};
  const int64_t k_vec = k - k % kLanes;
  for (int64_t p = 0; p < k_vec; p += kLanes)
    for (int r = 0; r < MR; ++r)
      for (int c = 0; c < kTileCols; ++c)
        for (int l = 0; l < kLanes; ++l) acc[r][c][l] += xr[r][p + l] * wr[c][p + l];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < kTileCols; ++c) {
      float sum = reduce_lanes(acc[r][c]);
      for (int64_t p = k_vec; p < k; ++p) sum += xr[r][p] * wr[c][p];
      out[r][c] = sum;
    }
  }
}

void widen_row(const void* w, DType dtype, int64_t row, int64_t k, float* dst) {
  const uint16_t* src = static_cast<const uint16_t*>(w) + row * k;
  if (dtype == DType::bf16) {
    for (int64_t p = 0; p < k; ++p) dst[p] = bf16_to_f32(src[p]);
  } else {
    for (int64_t p = 0; p < k; ++p) dst[p] = f16_to_f32(src[p]);
  }
}

}  // namespace

int64_t linear_tile_n() {
  return 8 * kTileCols;
}
int64_t linear_pack_stride(int64_t, DType) {
  return 0;
}
void linear_pack_x(const float*, int64_t, int64_t, DType, float*) {}

int64_t linear_scratch_floats(int64_t k, DType w_dtype) {
  return w_dtype == DType::f32 ? 0 : kTileCols * k;
}

void linear_rows(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                 float* scratch) {
  const int64_t k = a.k;
  for (int64_t j0 = n0; j0 < n1; j0 += kTileCols) {
    const int64_t cols = std::min<int64_t>(kTileCols, n1 - j0);
    // Weight rows of this tile as f32; a short tile repeats its last row (results dropped).
    const float* wr[kTileCols];
    for (int c = 0; c < kTileCols; ++c) {
      const int64_t row = j0 + std::min<int64_t>(c, cols - 1);
      if (a.w_dtype == DType::f32) {
        wr[c] = static_cast<const float*>(a.w) + row * k;
      } else {
        if (c < cols) widen_row(a.w, a.w_dtype, row, k, scratch + c * k);
        wr[c] = scratch + std::min<int64_t>(c, cols - 1) * k;
      }
    }
    for (int64_t i0 = m0; i0 < m1; i0 += kTileRows) {
      const int64_t rows = std::min<int64_t>(kTileRows, m1 - i0);
      const float* xr[kTileRows];
      for (int r = 0; r < kTileRows; ++r)
        xr[r] = a.x + (i0 + std::min<int64_t>(r, rows - 1)) * a.x_stride;
      float out[kTileRows][kTileCols];
      if (rows == kTileRows) {
        tile<kTileRows>(xr, wr, k, out);
      } else {
        tile<1>(xr, wr, k, out);
      }
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          float v = out[r][c];
          if (a.bias) v += a.bias[j0 + c];
          a.y[(i0 + r) * a.n + j0 + c] = v;
        }
      }
    }
  }
}

}  // namespace deepinfer::kernels::detail::scalar
