#include "io/fp8.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "io/json_fields.h"

namespace deepinfer::io {

std::optional<Fp8BlockQuantization> parse_fp8_quantization(const ModelConfig& config,
                                                           const std::string& source) {
  const auto it = config.raw.find("quantization_config");
  if (it == config.raw.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) {
    fail(source, ": quantization_config: expected an object, got ", it->type_name());
  }
  const JsonFields q(*it, source, "quantization_config.");
  const std::string method = q.string("quant_method").value_or("");
  if (method != "fp8") {
    q.fail_key("quant_method", "\"", method,
               "\" is not supported (supported: \"fp8\" with weight_block_size, as DeepSeek-V3 "
               "publishes, and the int8 channel-wise \"w8a8_int8\" / \"compressed-tensors\"); "
               "convert the checkpoint to bf16 or fp8 blocks first");
  }
  const std::string fmt = q.string("fmt").value_or("e4m3");
  if (fmt != "e4m3") q.fail_key("fmt", "\"", fmt, "\" is not supported (only e4m3)");
  const std::string activations = q.string("activation_scheme").value_or("dynamic");
  if (activations != "dynamic") {
    q.fail_key("activation_scheme", "\"", activations,
               "\" is not supported (only dynamic: weights are dequantized at load and "
               "activations stay in floating point)");
  }
  const nlohmann::json* block = q.find("weight_block_size");
  if (block == nullptr) {
    q.fail_key("weight_block_size",
               "missing: per-tensor FP8 scales are not supported, only "
               "block-wise ones (e.g. [128, 128])");
  }
  if (!block->is_array() || block->size() != 2 || !(*block)[0].is_number_integer() ||
      !(*block)[1].is_number_integer() || (*block)[0].get<int64_t>() <= 0 ||
      (*block)[1].get<int64_t>() <= 0) {
    q.fail_key("weight_block_size", "expected two positive integers, got ", block->dump());
  }
  return Fp8BlockQuantization{(*block)[0].get<int64_t>(), (*block)[1].get<int64_t>()};
}

Shape fp8_scale_shape(const Shape& weight, const Fp8BlockQuantization& quant) {
  DI_CHECK(weight.size() == 2, "FP8 block scales are defined for matrices, not for shape ",
           shape_to_string(weight));
  return {(weight[0] + quant.block_rows - 1) / quant.block_rows,
          (weight[1] + quant.block_cols - 1) / quant.block_cols};
}

Tensor dequantize_fp8_blocks(const Tensor& weight, const Tensor& scale_inv,
                             const Fp8BlockQuantization& quant, DType out) {
  DI_CHECK(weight.dtype() == DType::f8_e4m3 && weight.is_contiguous(),
           "dequantize_fp8_blocks: expected a contiguous f8_e4m3 matrix, got ", weight.describe());
  const Shape scale_shape = fp8_scale_shape(weight.shape(), quant);
  DI_CHECK(scale_inv.shape() == scale_shape, "dequantize_fp8_blocks: ", weight.describe(), " in ",
           quant.block_rows, "x", quant.block_cols, " blocks needs scales ",
           shape_to_string(scale_shape), ", got ", scale_inv.describe());
  const Tensor scales = scale_inv.to(DType::f32);
  const int64_t rows = weight.dim(0);
  const int64_t cols = weight.dim(1);
  Tensor result = Tensor::zeros(weight.shape(), DType::f32);
  const auto* q = static_cast<const uint8_t*>(weight.raw());
  const float* s = scales.data<float>();
  float* w = result.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* s_row = s + (r / quant.block_rows) * scale_shape[1];
    for (int64_t c = 0; c < cols; ++c) {
      w[r * cols + c] = f8_e4m3_to_f32(q[r * cols + c]) * s_row[c / quant.block_cols];
    }
  }
  return result.to(out);
}

}  // namespace deepinfer::io
