// The scalar reference of the FP8 block-scaled linear: the arithmetic of linear_fp8.h, spelled
// out element by element.
#include <cmath>

#include "core/dtype.h"
#include "kernels/linear_fp8.h"

namespace deepinfer::kernels::detail::scalar {

void linear_fp8_rows(const Fp8LinearArgs& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
  const int64_t padded = (a.k + kFp8Lanes - 1) / kFp8Lanes * kFp8Lanes;
  for (int64_t i = r0; i < r1; ++i) {
    const float* x = a.x + i * a.k;
    for (int64_t j = j0; j < j1; ++j) {
      const uint8_t* q = a.w + j * a.k;
      const float* s = a.scale + (j / a.block_rows) * a.scale_cols;
      float acc[kFp8Lanes] = {};
      for (int64_t c = 0; c < padded; ++c) {
        const float w = c < a.k ? f8_e4m3_to_f32(q[c]) * s[c / a.block_cols] : 0.0f;
        const float xv = c < a.k ? x[c] : 0.0f;
        acc[c % kFp8Lanes] = std::fma(xv, w, acc[c % kFp8Lanes]);
      }
      float h[8];
      for (int l = 0; l < 8; ++l) h[l] = acc[l] + acc[l + 8];
      float out = ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
      if (a.bias) out += a.bias[j];
      a.y[i * a.n + j] = out;
    }
  }
}

}  // namespace deepinfer::kernels::detail::scalar
