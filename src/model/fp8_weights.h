#pragma once
// --quantization fp8: a f32 / bf16 / f16 matrix quantized to FP8 E4M3 with block scales, the
// layout DeepSeek-V3 publishes (io/fp8.h), which kernels::linear_fp8 then runs as it runs an
// FP8 checkpoint kept in memory.
#include <cstdint>

#include "core/tensor.h"

namespace deepinfer::model {

// The E4M3 ("fn") byte nearest to v, ties to even; magnitudes above 448 saturate to 448; NaN
// gives 0x7f. Exact inverse of core/dtype.h's f8_e4m3_to_f32 on its finite values.
uint8_t f32_to_f8_e4m3(float v);

struct Fp8Matrix {
  Tensor q;      // f8_e4m3 [rows, cols]
  Tensor scale;  // f32 [ceil(rows / block_rows), ceil(cols / block_cols)]
};

// Per block: scale = max|w| / 448 (1 for an all-zero block), q = e4m3(w / scale); the value
// is then q * scale, as DeepSeek-V3's weight_dequant reads it.
Fp8Matrix quantize_fp8_matrix(const Tensor& matrix, int64_t block_rows, int64_t block_cols);

}  // namespace deepinfer::model
