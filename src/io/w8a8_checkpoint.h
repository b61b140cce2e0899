#pragma once
// Int8 channel-wise (W8A8) checkpoints, in the two layouts serving stacks publish:
//   SGLang's w8a8_int8 (e.g. DeepSeek-R1-Channel-INT8): quantization_config {"quant_method":
//     "w8a8_int8"}; each quantized Linear stores an I8 `weight` [out, in] and a float
//     `weight_scale` [out, 1]; activations are quantized per token at run time;
//   compressed-tensors int8 channel-wise (llm-compressor's W8A8 recipe, vLLM's
//     CompressedTensorsW8A8Int8): {"quant_method": "compressed-tensors", "format":
//     "int-quantized", "config_groups": {...: {"weights": {"num_bits": 8, "type": "int",
//     "symmetric": true, "strategy": "channel", "dynamic": false}, "input_activations":
//     {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "token", "dynamic": true}}}}
//     with the same `weight` / `weight_scale` pair.
// Both mean W[r, c] = weight[r, c] * weight_scale[r], which kernels::linear_w8a8 runs with
// per-token int8 activations (WeightLoader keeps the int8 zero-copy). Modules the config
// leaves unquantized ("ignore") are stored in floating point and load as such.
#include <string>

#include "io/hf_config.h"

namespace deepinfer::io {

// True when config.json's quantization_config is one of the two W8A8 layouts; false when it
// has none or another quant_method (io/fp8.h judges those). Throws Error naming the key for
// any variant this engine cannot run as W8A8: other bit widths, group-wise or per-tensor
// weight scales, asymmetric (zero points), static or per-tensor activation scales, packed
// formats, quantized KV caches or output activations.
bool parse_w8a8_quantization(const ModelConfig& config, const std::string& source);

}  // namespace deepinfer::io
