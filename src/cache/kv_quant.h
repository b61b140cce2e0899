#pragma once
// Conversions between f32 K/V rows and the cache's storage types. int8 is symmetric with one
// f32 scale per `group` consecutive elements: scale = max|x| / 127, q = round(x / scale)
// (ties away from zero), value = scale * q; an all-zero group stores scale 0, a group holding
// NaN or inf stores scale NaN (it reads back as NaN).
#include <cstdint>

#include "core/dtype.h"

namespace deepinfer::cache {

// Stores x[0, n) as `dtype` at dst; i8 also writes scales[n / group].
void store_kv_row(const float* x, int64_t n, DType dtype, int64_t group, void* dst, float* scales);

// The inverse: out[0, n) as f32 (exact for f32/bf16/f16 storage of what store_kv_row wrote).
void load_kv_row(const void* src, int64_t n, DType dtype, int64_t group, const float* scales,
                 float* out);

}  // namespace deepinfer::cache
