#include "cache/kv_quant.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace deepinfer::cache {

void store_kv_row(const float* x, int64_t n, DType dtype, int64_t group, void* dst, float* scales) {
  if (dtype != DType::i8) {
    convert_from_f32(x, dst, dtype, static_cast<size_t>(n));
    return;
  }
  auto* q = static_cast<int8_t*>(dst);
  for (int64_t g0 = 0; g0 < n; g0 += group) {
    float max_abs = 0.0f;
    bool finite = true;
    for (int64_t i = g0; i < g0 + group; ++i) {
      finite = finite && std::isfinite(x[i]);
      max_abs = std::fmax(max_abs, std::fabs(x[i]));
    }
    // A NaN or inf cannot be represented: the whole group reads back as NaN (as an f32 cache
    // would propagate it) instead of as plausible finite values.
    const float scale = finite ? max_abs / 127.0f : std::numeric_limits<float>::quiet_NaN();
    scales[g0 / group] = scale;
    for (int64_t i = g0; i < g0 + group; ++i) {
      const float r = finite && scale > 0.0f ? std::round(x[i] / scale) : 0.0f;
      q[i] = static_cast<int8_t>(std::fmax(-127.0f, std::fmin(127.0f, r)));
    }
  }
}

void load_kv_row(const void* src, int64_t n, DType dtype, int64_t group, const float* scales,
                 float* out) {
  if (dtype != DType::i8) {
    convert_to_f32(src, dtype, out, static_cast<size_t>(n));
    return;
  }
  dequantize_i8(static_cast<const int8_t*>(src), scales, group, static_cast<size_t>(n), out);
}

}  // namespace deepinfer::cache
