#include "model/w8a8_weights.h"

#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"

namespace deepinfer::model {

W8a8Matrix quantize_w8a8_matrix(const Tensor& matrix) {
  DI_CHECK(matrix.ndim() == 2 && matrix.is_contiguous() && !is_block_dtype(matrix.dtype()),
           "quantizing ", matrix.describe(),
           " to w8a8: only contiguous f32 / bf16 / f16 matrices are quantized");
  const int64_t rows = matrix.dim(0), cols = matrix.dim(1);
  W8a8Matrix out{Tensor::zeros({rows, cols}, DType::i8), Tensor::zeros({rows}, DType::f32)};
  const auto* src = static_cast<const std::byte*>(matrix.raw());
  const size_t in_row = dtype_bytes(matrix.dtype(), cols);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    convert_to_f32(src + static_cast<size_t>(r) * in_row, matrix.dtype(), row.data(),
                   static_cast<size_t>(cols));
    kernels::quantize_w8a8_row(row.data(), cols, out.q.data<int8_t>() + r * cols,
                               out.scale.data<float>() + r);
  }
  return out;
}

}  // namespace deepinfer::model
