#pragma once
// Portable widening of bf16 / f16 / int8 KV cache rows to f32 (attention reads these).
#include <cstring>

#include "kernels/backend.h"

namespace deepinfer::kernels::detail::scalar {

// Internal linkage: included by ops_scalar.cpp only, where attend() inlines it.
static inline void widen_kv_row(const void* src, DType dtype, const float* scales, int64_t group,
                                int64_t n, float* dst) {
  if (dtype == DType::i8) {
    const auto* q = static_cast<const int8_t*>(src);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = scales ? scales[i / group] * static_cast<float>(q[i]) : static_cast<float>(q[i]);
    return;
  }
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i)
    dst[i] = dtype == DType::f16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
}

}  // namespace deepinfer::kernels::detail::scalar
