// Activation rows to 8-bit blocks for the block-weight linear (backend.h, quantize_x_blocks).
// Baseline code called by every ISA's path, so all of them multiply the same integers.
#include <cmath>
#include <cstring>

#include "kernels/backend.h"

namespace deepinfer::kernels::detail {
namespace {

// The offset o of the unsigned weight quants (the term is -o s; q8_0's 128 serves the kernels
// that take its signed quants as w + 128, VNNI's vpdpbusd), or 0 for the types whose lane term
// is d * float(s) (weights with a min).
int32_t quant_offset(DType w_dtype) {
  switch (w_dtype) {
    case DType::q4_0:
      return 8;
    case DType::q5_0:
      return 16;
    case DType::q6_k:
      return 32;
    case DType::q8_0:
      return 128;
    default:
      return 0;
  }
}

}  // namespace

void quantize_x_blocks(const float* x, int64_t m, int64_t k, DType w_dtype, int8_t* q, float* d,
                       int32_t* t) {
  const int64_t blocks = k / kQuantBlock;
  const int32_t offset = quant_offset(w_dtype);
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
      // A NaN anywhere makes the block's scale NaN, so it reaches the outputs as in f32.
      const float scale = nan ? NAN : amax / 127.0f;
      const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
      for (int64_t e = 0; e < kQuantBlock; ++e) {
        float r = v[e] * inverse;
        if (std::isnan(r)) r = 0.0f;  // inf * 0 (an infinite block); the scale carries it
        r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
        // nearbyint() without a libm call (the baseline ISA has no roundss): adding and
        // subtracting 1.5 * 2^23 rounds |r| < 2^22 to an integer, to nearest even as the
        // default rounding mode does.
        const float rounded = (r + 12582912.0f) - 12582912.0f;
        out[e] = static_cast<int8_t>(static_cast<int>(rounded));
      }
      const int64_t at = (i * blocks + b) * 8;
      if (is_whole_block_dtype(w_dtype)) {
        // Whole-block dot products (kernels.h): the term is -offset * the block's sum, or
        // for the types with a min (q4_k, q5_k) the f32 bits of d * float(sum).
        int32_t sum = 0;
        for (int64_t e = 0; e < kQuantBlock; ++e) sum += out[e];
        const float term = scale * static_cast<float>(sum);
        for (int64_t l = 0; l < 8; ++l) {
          d[at + l] = scale;
          if (w_dtype == DType::q4_k || w_dtype == DType::q5_k) {
            std::memcpy(&t[at + l], &term, sizeof(term));
          } else {
            t[at + l] = -offset * sum;
          }
        }
        continue;
      }
      for (int64_t l = 0; l < 8; ++l) {
        const int32_t sum = out[4 * l] + out[4 * l + 1] + out[4 * l + 2] + out[4 * l + 3];
        d[at + l] = scale;
        if (offset == 0) {
          const float term = scale * static_cast<float>(sum);
          std::memcpy(&t[at + l], &term, sizeof(term));
        } else {
          t[at + l] = -offset * sum;
        }
      }
    }
  }
}

}  // namespace deepinfer::kernels::detail
