// Activation rows to 8-bit blocks for the block-weight linear (backend.h, quantize_x_blocks):
// the baseline statement of the arithmetic; the AVX2 / AVX-512 quantizers
// (quantize_x_avx2.cpp, quantize_x_avx512.cpp) store the same bytes.
#include <cmath>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/quantize_x_terms.h"

namespace deepinfer::kernels::detail {

qx::Terms qx::terms_of(DType w_dtype) {
  Terms terms{0, false, false};
  switch (w_dtype) {
    case DType::q4_0:
      terms.offset = 8;
      break;
    case DType::q5_0:
      terms.offset = 16;
      break;
    case DType::q6_k:
      terms.offset = 32;
      break;
    case DType::q8_0:
      terms.offset = 128;
      break;
    default:
      break;
  }
  terms.float_term = terms.offset == 0;
  terms.whole_block = is_whole_block_dtype(w_dtype);
  return terms;
}

void quantize_x_blocks(const float* x, int64_t m, int64_t k, DType w_dtype, int8_t* q, float* d,
                       int32_t* t) {
  const int64_t blocks = k / kQuantBlock;
  const qx::Terms terms = qx::terms_of(w_dtype);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* v = x + i * k + b * kQuantBlock;
      int8_t* out = q + i * k + b * kQuantBlock;
      float amax = 0.0f;
      bool nan = false;
      for (int64_t e = 0; e < kQuantBlock; ++e) {
        const float a = std::fabs(v[e]);
        if (std::isnan(a)) nan = true;
        if (a > amax) amax = a;
      }
      const float scale = qx::block_scale(amax, nan);
      const float inverse = qx::block_inverse(scale);
      for (int64_t e = 0; e < kQuantBlock; ++e) {
        float r = v[e] * inverse;
        if (std::isnan(r)) r = 0.0f;  // inf * 0 (an infinite block); the scale carries it
        r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
        // nearbyint() without a libm call (the baseline ISA has no roundss): adding and
        // subtracting 1.5 * 2^23 rounds |r| < 2^22 to an integer, to nearest even as the
        // default rounding mode does (the SIMD quantizers' cvtps2dq).
        const float rounded = (r + 12582912.0f) - 12582912.0f;
        out[e] = static_cast<int8_t>(static_cast<int>(rounded));
      }
      int32_t s[8];
      for (int64_t l = 0; l < 8; ++l)
        s[l] = out[4 * l] + out[4 * l + 1] + out[4 * l + 2] + out[4 * l + 3];
      const int64_t at = (i * blocks + b) * 8;
      qx::store_terms(terms, scale, s, d + at, t + at);
    }
  }
}

}  // namespace deepinfer::kernels::detail
