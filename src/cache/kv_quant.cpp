#include "cache/kv_quant.h"

namespace deepinfer::cache {

void store_kv_row(const float* x, int64_t n, DType dtype, int64_t group, void* dst, float* scales) {
  if (dtype != DType::i8) {
    convert_from_f32(x, dst, dtype, static_cast<size_t>(n));
    return;
  }
  quantize_i8(x, group, static_cast<size_t>(n), static_cast<int8_t*>(dst), scales);
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
