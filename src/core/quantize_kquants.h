#pragma once
// Reference quantizers of ggml's K-quant super-blocks (256 elements): Q4_K, Q5_K, Q6_K, with
// the arithmetic of ggml's quantize_row_q{4,5,6}_K_ref (no importance matrix), so a block holds
// the same bytes as `llama-quantize` writes without --imatrix. Used through quantize_row()
// (core/quantize_blocks.h); the layouts are those the dequantizers of core/quant_blocks.h read.
#include <cstdint>

namespace deepinfer::kquants {

constexpr int kSuperBlock = 256;

// Each quantizes one super-block of 256 floats into its block bytes (144, 176 or 210).
void quantize_q4_k_block(const float* x, uint8_t* block);
void quantize_q5_k_block(const float* x, uint8_t* block);
void quantize_q6_k_block(const float* x, uint8_t* block);

}  // namespace deepinfer::kquants
