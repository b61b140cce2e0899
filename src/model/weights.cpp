#include "model/weights.h"

#include "core/error.h"
#include "kernels/kernels.h"

namespace deepinfer::model {

WeightLoader::WeightLoader(const io::Checkpoint& checkpoint, LoadOptions options)
    : checkpoint_(checkpoint), options_(options) {}

Tensor WeightLoader::fetch(const std::string& name, const Shape& expected) {
  DI_CHECK(checkpoint_.contains(name), checkpoint_.dir(), ": missing tensor '", name,
           "' (the checkpoint does not match its config.json architecture)");
  Tensor tensor = checkpoint_.get(name);
  DI_CHECK(tensor.shape() == expected, checkpoint_.dir(), ": tensor '", name, "' has shape ",
           shape_to_string(tensor.shape()), " but config.json implies ", shape_to_string(expected));
  if (used_.insert(name).second) loaded_bytes_ += static_cast<int64_t>(tensor.nbytes());
  return tensor;
}

std::shared_ptr<parallel::Communicator> WeightLoader::expert_group() {
  if (!expert_group_) {
    expert_group_ = options_.parallel ? options_.parallel->expert_group()
                                      : std::make_shared<parallel::SingleProcessCommunicator>();
  }
  return expert_group_;
}

Tensor WeightLoader::matrix(const std::string& name, const Shape& expected) {
  Tensor tensor = fetch(name, expected);
  const DType stored = tensor.dtype();
  if (stored == DType::f8_e4m3) {
    DI_CHECK(fp8_.has_value(), checkpoint_.dir(), ": tensor '", name,
             "' is F8_E4M3 but config.json has no quantization_config {\"quant_method\": "
             "\"fp8\", \"weight_block_size\": [...]} saying how it is scaled");
    DI_CHECK(expected.size() == 2, checkpoint_.dir(), ": tensor '", name, "' is F8_E4M3 with ",
             expected.size(), " dimensions; block scales are supported for matrices only");
    const Tensor scale = fetch(name + "_scale_inv", io::fp8_scale_shape(expected, *fp8_));
    return io::dequantize_fp8_blocks(tensor, scale, *fp8_,
                                     options_.weight_dtype.value_or(DType::bf16));
  }
  const bool blocks = is_block_dtype(stored);
  DI_CHECK(blocks || stored == DType::f32 || stored == DType::bf16 || stored == DType::f16,
           checkpoint_.dir(), ": tensor '", name, "' is ", dtype_name(stored),
           "; only f32, bf16, f16, q8_0, q4_0 and q4_1 weights are supported here");
  DI_CHECK(!blocks || expected.size() == 2, checkpoint_.dir(), ": tensor '", name, "' is ",
           dtype_name(stored), " with ", expected.size(),
           " dimensions; block-quantized weights are supported for matrices only");
  const DType dtype = options_.weight_dtype.value_or(stored);
  if (blocks)
    ++(dtype == stored ? native_blocks_ : dequantized_blocks_)[std::string(dtype_name(stored))];
  return tensor.to(dtype);
}

std::string WeightLoader::block_summary() const {
  std::string out;
  const auto list = [](const std::map<std::string, int64_t>& counts) {
    std::string text;
    for (const auto& [type, count] : counts) {
      if (!text.empty()) text += ", ";
      text += std::to_string(count) + " " + type;
    }
    return text;
  };
  if (!native_blocks_.empty()) {
    out = list(native_blocks_) + " matrices run natively (" +
          std::string(kernels::block_linear_path()) + " block kernels)";
  }
  if (!dequantized_blocks_.empty()) {
    if (!out.empty()) out += "; ";
    out += list(dequantized_blocks_) + " matrices dequantized to " +
           std::string(dtype_name(*options_.weight_dtype)) + " at load (--dtype)";
  }
  return out;
}

Tensor WeightLoader::vector_f32(const std::string& name, const Shape& expected) {
  Tensor tensor = fetch(name, expected);
  Tensor out = tensor.to(DType::f32);
  return out.is_borrowed() ? out.clone() : out;
}

bool WeightLoader::skip(const std::string& name) {
  if (!checkpoint_.contains(name)) return false;
  used_.insert(name);
  return true;
}

int64_t WeightLoader::skip_prefix(const std::string& prefix) {
  int64_t count = 0;
  for (const auto& name : checkpoint_.names()) {
    if (name.compare(0, prefix.size(), prefix) == 0 && used_.insert(name).second) ++count;
  }
  return count;
}

std::vector<std::string> WeightLoader::unused() const {
  std::vector<std::string> out;
  for (const auto& name : checkpoint_.names()) {
    if (!used_.count(name)) out.push_back(name);
  }
  return out;
}

}  // namespace deepinfer::model
