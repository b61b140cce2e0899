#pragma once
// Byte-level access to the experts of a stacked [experts, rows, cols] weight tensor in any
// weight type. A block type (q8_0, q4_k, ...) has no bytes per element, so every offset here
// is a whole number of rows, each of dtype_bytes(dtype, cols) bytes (the traits table's row
// bytes), never elements x element size.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace deepinfer::model {

// Bytes of one expert's [rows, cols] matrix of a contiguous 3-D stack.
size_t expert_matrix_bytes(const Tensor& stack);

// The first byte of expert j's matrix in a contiguous 3-D stack.
const std::byte* expert_matrix(const Tensor& stack, int64_t j);

// Copies the 2-D matrix `src` [r, cols] into rows [row, row + r) of expert j of `dst`. An
// element-typed src is converted to dst's dtype first; a block-typed dst needs src in the same
// block type (quantizing is the loader's job, not a copy's). Error naming `where` otherwise.
void copy_into_expert(const Tensor& dst, int64_t j, int64_t row, const Tensor& src,
                      const std::string& where);

}  // namespace deepinfer::model
