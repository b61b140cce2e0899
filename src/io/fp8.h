#pragma once
// Block-wise FP8 checkpoints as DeepSeek-V3 / R1 (and Qwen3-FP8) publish them: config.json's
// quantization_config {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
// "weight_block_size": [128, 128]} announces that Linear weights are stored as F8_E4M3 with a
// float32 `<name>_scale_inv` of shape [ceil(rows / 128), ceil(cols / 128)] beside each one.
// The real value of weight[r, c] is fp8(r, c) * scale_inv[r / 128, c / 128] (DeepSeek-V3's
// weight_dequant); blocks at the right and bottom edges may be partial (V3's
// kv_a_proj_with_mqa has 576 rows: 4.5 blocks).
#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "io/hf_config.h"

namespace deepinfer::io {

struct Fp8BlockQuantization {
  int64_t block_rows = 128;
  int64_t block_cols = 128;
};

// nullopt when config.json has no quantization_config. Throws Error for any quantization this
// engine cannot load (other quant_method, static activation scales, other fp8 formats).
// `source` names the file in messages (e.g. "<dir>/config.json").
std::optional<Fp8BlockQuantization> parse_fp8_quantization(const ModelConfig& config,
                                                           const std::string& source);

// [ceil(rows / block_rows), ceil(cols / block_cols)]
Shape fp8_scale_shape(const Shape& weight, const Fp8BlockQuantization& quant);

// weight (f8_e4m3 [rows, cols]) x its block scales (f32, fp8_scale_shape) -> `out` dtype
// (f32, bf16 or f16), each element computed as f32(fp8) * scale and then rounded once.
Tensor dequantize_fp8_blocks(const Tensor& weight, const Tensor& scale_inv,
                             const Fp8BlockQuantization& quant, DType out);

}  // namespace deepinfer::io
