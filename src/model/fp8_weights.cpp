#include "model/fp8_weights.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace deepinfer::model {

uint8_t f32_to_f8_e4m3(float v) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const float a = std::min(std::fabs(v), 448.0f);
  // Below the smallest normal 2^-6 the grid is k * 2^-9 (k < 8; k = 8 is the smallest normal,
  // whose bits are 0x08 too). Scaling by powers of two is exact, nearbyint rounds to even.
  if (a < 0x1p-6f) return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exponent = e - 1;               // a = (2m) * 2^exponent, 2m in [1, 2)
  int mantissa = static_cast<int>(std::nearbyint((2.0f * m - 1.0f) * 8.0f));
  if (mantissa == 8) {
    mantissa = 0;
    ++exponent;
  }
  // 448 = 1.75 * 2^8 is the largest finite value; the clamp above keeps a at most that.
  return sign | static_cast<uint8_t>(((exponent + 7) << 3) | mantissa);
}

Fp8Matrix quantize_fp8_matrix(const Tensor& matrix, int64_t block_rows, int64_t block_cols) {
  DI_CHECK(matrix.ndim() == 2 && matrix.is_contiguous() && !is_block_dtype(matrix.dtype()),
           "quantizing ", matrix.describe(),
           " to fp8: only contiguous f32 / bf16 / f16 matrices are quantized");
  DI_CHECK(block_rows > 0 && block_cols > 0, "fp8 block scales need positive block sizes");
  const int64_t rows = matrix.dim(0), cols = matrix.dim(1);
  const int64_t scale_rows = (rows + block_rows - 1) / block_rows;
  const int64_t scale_cols = (cols + block_cols - 1) / block_cols;
  const Tensor w = matrix.to(DType::f32);
  const float* src = w.data<float>();
  Fp8Matrix out{Tensor::zeros({rows, cols}, DType::f8_e4m3),
                Tensor::zeros({scale_rows, scale_cols}, DType::f32)};
  auto* q = static_cast<uint8_t*>(out.q.raw());
  float* scale = out.scale.data<float>();
  for (int64_t br = 0; br < scale_rows; ++br) {
    const int64_t r0 = br * block_rows, r1 = std::min(rows, r0 + block_rows);
    for (int64_t bc = 0; bc < scale_cols; ++bc) {
      const int64_t c0 = bc * block_cols, c1 = std::min(cols, c0 + block_cols);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(src[r * cols + c]));
      const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
      scale[br * scale_cols + bc] = s;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) q[r * cols + c] = f32_to_f8_e4m3(src[r * cols + c] / s);
    }
  }
  return out;
}

}  // namespace deepinfer::model
