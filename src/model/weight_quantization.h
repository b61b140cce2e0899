#pragma once
// --quantization (key `quantization`): which block type a checkpoint's projections are
// quantized to while loading, and the quantizing itself. The policy of which matrices it
// applies to lives in WeightLoader::matrix (MatrixUse) and docs/QUANTIZATION.md.
#include <optional>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace deepinfer::model {

// The block type a --quantization name asks for: q8_0 (alias int8), q4_0, q4_1 (the types with
// kernels); "none" is nullopt. Throws Error naming the value and what this build quantizes to
// for a type it does not build yet (q4_k, w8a8, fp8, ...) or an unknown name.
std::optional<DType> parse_quantization(std::string_view name);
// The problem with a --quantization name without repeating it ("" when it is accepted), for
// config errors that name the value themselves.
std::string quantization_problem(std::string_view name);
// "q8_0 (alias int8), q4_0, q4_1": what parse_quantization accepts besides none.
std::string quantization_choices();

// A [rows, cols] f32 / bf16 / f16 matrix quantized row by row to block type `target` with the
// reference quantizers (core/quantize_blocks.h); cols must be whole blocks.
Tensor quantize_matrix(const Tensor& matrix, DType target);

}  // namespace deepinfer::model
