#include "model/layers/moe/expert_slices.h"

#include <cstring>

#include "core/error.h"

namespace deepinfer::model {

size_t expert_matrix_bytes(const Tensor& stack) {
  DI_CHECK(stack.ndim() == 3 && stack.is_contiguous(),
           "expert stacks are contiguous [experts, rows, cols], got ", stack.describe());
  return static_cast<size_t>(stack.dim(1)) * dtype_bytes(stack.dtype(), stack.dim(2));
}

const std::byte* expert_matrix(const Tensor& stack, int64_t j) {
  DI_CHECK(j >= 0 && j < stack.dim(0), "expert ", j, " outside the stack ", stack.describe());
  return static_cast<const std::byte*>(stack.raw()) +
         static_cast<size_t>(j) * expert_matrix_bytes(stack);
}

void copy_into_expert(const Tensor& dst, int64_t j, int64_t row, const Tensor& src,
                      const std::string& where) {
  DI_CHECK(
      src.ndim() == 2 && src.dim(1) == dst.dim(2) && row >= 0 && row + src.dim(0) <= dst.dim(1),
      where, ": ", src.describe(), " does not fit rows [", row, ", ", row + src.dim(0),
      ") of an expert of ", dst.describe());
  DI_CHECK(src.dtype() == dst.dtype() || !is_block_dtype(dst.dtype()), where, ": ", src.describe(),
           " cannot join a ", dtype_name(dst.dtype()),
           " expert stack (the experts of one projection must share one block type)");
  const Tensor converted = src.to(dst.dtype());
  const size_t row_bytes = dtype_bytes(dst.dtype(), dst.dim(2));
  auto* base = const_cast<std::byte*>(expert_matrix(dst, j)) + static_cast<size_t>(row) * row_bytes;
  std::memcpy(base, converted.raw(), static_cast<size_t>(src.dim(0)) * row_bytes);
}

}  // namespace deepinfer::model
