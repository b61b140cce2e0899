// The scalar reference of the W8A8 linear (linear_w8a8.h).
#include <cmath>

#include "kernels/linear_w8a8.h"

namespace deepinfer::kernels::detail::scalar {

void linear_w8a8_rows(const W8a8Args& a, int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
  for (int64_t i = r0; i < r1; ++i) {
    const int8_t* x = a.xq + i * a.x_stride;
    for (int64_t j = j0; j < j1; ++j) {
      const int8_t* w = a.w + j * a.k;
      int32_t t = 0;
      for (int64_t c = 0; c < a.k; ++c) t += static_cast<int32_t>(w[c]) * x[c];
      const float s = a.w_scale[j] * a.x_scale[i];
      const float out =
          a.bias ? std::fma(static_cast<float>(t), s, a.bias[j]) : static_cast<float>(t) * s;
      a.y[i * a.n + j] = out;
    }
  }
}

}  // namespace deepinfer::kernels::detail::scalar
