#pragma once
// W8A8 weights (--quantization w8a8): per-output-channel symmetric int8 with one f32 scale per
// row, as SGLang's / vLLM's w8a8_int8 keep them; kernels::linear_w8a8 runs them with per-token
// int8 activations.
#include "core/tensor.h"

namespace deepinfer::model {

struct W8a8Matrix {
  Tensor q;      // i8 [rows, cols]
  Tensor scale;  // f32 [rows]: W[r, c] = q[r, c] * scale[r]
};

// Quantizes a [rows, cols] f32 / bf16 / f16 matrix row by row with kernels::quantize_w8a8_row
// (scale = max|row| / 127, round to nearest even, clamp to +-127).
W8a8Matrix quantize_w8a8_matrix(const Tensor& matrix);

}  // namespace deepinfer::model
