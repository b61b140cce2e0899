#pragma once
// Reference quantizers: rows of f32 into ggml's legacy block types (Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1) and K-quants (Q4_K, Q5_K, Q6_K; core/quantize_kquants.h), bit-identical to ggml's
// quantize_row_*_ref (ggml-quants.c, "reference implementation for deterministic creation of
// model files"; the legacy types also to gguf-py's gguf.quants.quantize), so a matrix quantized
// at load holds the same bytes as the same matrix in a GGUF file quantized by llama-quantize
// without an importance matrix. The layouts are those the dequantizers of core/quant_blocks.h
// read.
#include <cstdint>
#include <string>

#include "core/quant_blocks.h"

namespace deepinfer {

// True when quantize_row() can write `type`.
bool can_quantize(GgmlType type);

// Quantizes n floats (a whole number of blocks: 32 elements, 256 for K-quants) into
// quant_row_bytes(type, n) bytes at dst. Throws Error for a type without a quantizer or a row that
// is not whole blocks.
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

// The types quantize_row() writes, for messages: "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, ...".
std::string quantizable_types();

}  // namespace deepinfer
