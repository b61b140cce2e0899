#pragma once
// One element of a paged K or V store as f32, in the store's dtype (f32, bf16, f16 or int8 with
// per-group scales): the element-at-a-time read of the reference and unfused attention paths.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace deepinfer::kernels::detail {

// Element i of the row starting at element `at` of `store` (kv.k or kv.v, with its scales).
inline float kv_element(const PagedKv& kv, const void* store, const float* scales, int64_t at,
                        int64_t i) {
  switch (kv.dtype) {
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(store)[at + i]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(store)[at + i]);
    case DType::i8:
      return scales[(at + i) / kv.quant_group] *
             static_cast<float>(static_cast<const int8_t*>(store)[at + i]);
    default:
      return static_cast<const float*>(store)[at + i];
  }
}

}  // namespace deepinfer::kernels::detail
