#include "model/weights.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/quant_blocks.h"
#include "kernels/kernels.h"
#include "model/weight_quantization.h"

namespace deepinfer::model {
namespace {

const char* kept_reason(MatrixUse use) {
  switch (use) {
    case MatrixUse::embedding:
      return "embedding";
    case MatrixUse::lm_head:
      return "lm_head";
    case MatrixUse::expert:
      return "routed-expert";  // the MoE expert stacks run f32 / bf16 / f16 only
    case MatrixUse::by_element:
      return "read-by-element";  // MLA's kv_b_proj is split per head by element
    case MatrixUse::projection:
      break;
  }
  return "projection";
}

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return str_cat(bytes, " B");
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace

std::string describe_weight_bytes(const WeightBytes& bytes) {
  std::string out;
  for (const auto& [dtype, count] : bytes) {
    out += str_cat(out.empty() ? "" : ", ", dtype, " ", human_bytes(count));
  }
  return out;
}

WeightLoader::WeightLoader(const io::Checkpoint& checkpoint, LoadOptions options)
    : checkpoint_(checkpoint), options_(options) {}

Tensor WeightLoader::fetch(const std::string& name, const Shape& expected) {
  DI_CHECK(checkpoint_.contains(name), checkpoint_.dir(), ": missing tensor '", name,
           "' (the checkpoint does not match its config.json architecture)");
  Tensor tensor = checkpoint_.get(name);
  DI_CHECK(tensor.shape() == expected, checkpoint_.dir(), ": tensor '", name, "' has shape ",
           shape_to_string(tensor.shape()), " but config.json implies ", shape_to_string(expected));
  used_.insert(name);
  return tensor;
}

std::shared_ptr<parallel::Communicator> WeightLoader::expert_group() {
  if (!expert_group_) {
    expert_group_ = options_.parallel ? options_.parallel->expert_group()
                                      : std::make_shared<parallel::SingleProcessCommunicator>();
  }
  return expert_group_;
}

std::shared_ptr<parallel::Communicator> WeightLoader::tensor_group() {
  if (!tensor_group_) {
    tensor_group_ = options_.parallel ? options_.parallel->tensor_group()
                                      : std::make_shared<parallel::SingleProcessCommunicator>();
  }
  return tensor_group_;
}

std::shared_ptr<parallel::Communicator> WeightLoader::moe_tensor_group() {
  if (!moe_tensor_group_) {
    moe_tensor_group_ = options_.parallel ? options_.parallel->moe_tensor_group()
                                          : std::make_shared<parallel::SingleProcessCommunicator>();
  }
  return moe_tensor_group_;
}

Tensor WeightLoader::take(const std::string& name, const Tensor& tensor, const Slice& slice) const {
  const int last = tensor.ndim() - 1;
  DI_CHECK(slice.dim == 0 || slice.dim == last, checkpoint_.dir(), ": tensor '", name,
           "': a slice along dimension ", slice.dim, " of ", shape_to_string(tensor.shape()),
           " (only rows or the last dimension can be split)");
  const int64_t extent = tensor.dim(slice.dim);
  DI_CHECK(0 <= slice.begin && slice.begin <= slice.end && slice.end <= extent, checkpoint_.dir(),
           ": tensor '", name, "': slice [", slice.begin, ", ", slice.end, ") of dimension ",
           slice.dim, " outside its ", extent, " elements");
  if (slice.dim == 0) return tensor.slice_rows(slice.begin, slice.end);
  if (const QuantTraits* blocks = block_traits(tensor.dtype())) {
    const int64_t block = blocks->block_size;
    DI_CHECK(slice.begin % block == 0 && slice.end % block == 0, checkpoint_.dir(), ": tensor '",
             name, "' is ", dtype_name(tensor.dtype()), " (blocks of ", block,
             " elements) but this rank's columns [", slice.begin, ", ", slice.end, ") of its ",
             extent, " split a block; choose a tensor-parallel size that keeps whole blocks");
  }
  Shape shape = tensor.shape();
  shape[static_cast<size_t>(last)] = slice.end - slice.begin;
  Tensor out = Tensor::zeros(shape, tensor.dtype());
  const int64_t rows = extent == 0 ? 0 : tensor.numel() / extent;
  const size_t src_row = dtype_bytes(tensor.dtype(), extent);
  const size_t dst_row = dtype_bytes(tensor.dtype(), slice.end - slice.begin);
  const size_t skip = dtype_bytes(tensor.dtype(), slice.begin);
  const auto* src = static_cast<const std::byte*>(tensor.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + static_cast<size_t>(r) * dst_row,
                src + static_cast<size_t>(r) * src_row + skip, dst_row);
  }
  return out;
}

std::shared_ptr<parallel::EplbState> WeightLoader::eplb_state(const parallel::Communicator& group) {
  if (!eplb_state_) {
    eplb_state_ = std::make_shared<parallel::EplbState>(options_.moe.eplb, group.world_size(),
                                                        group.rank() == 0);
  }
  return eplb_state_;
}

Tensor WeightLoader::loaded(Tensor tensor) {
  loaded_bytes_[std::string(dtype_name(tensor.dtype()))] += static_cast<int64_t>(tensor.nbytes());
  return tensor;
}

std::optional<Tensor> WeightLoader::maybe_quantize(const std::string& name, const Tensor& tensor,
                                                   MatrixUse use, DType stored,
                                                   const Shape& expected,
                                                   const std::optional<Slice>& slice) {
  if (!options_.quantization) return std::nullopt;
  if (use != MatrixUse::projection || tensor.ndim() != 2) {
    ++kept_[kept_reason(use)];
    return std::nullopt;
  }
  // The type for this matrix: the one asked for, q4_k_m's choice, or llama-quantize's
  // fallback when the rows are not whole 256-element super-blocks.
  // Chosen for the whole rows (expected), so that a tensor-parallel rank quantizes its columns
  // in the blocks one process uses.
  const int64_t whole = expected.back();
  const QuantizationTarget target = quantization_target(*options_.quantization, name, whole);
  if (!target.type) {
    // A row must be whole 32-element blocks (the K-quants fall back to those); such
    // matrices keep their dtype, as llama.cpp keeps them in F16.
    ++kept_["partial-block (rows not whole 32-element blocks)"];
    if (first_partial_rows_.empty())
      first_partial_rows_ = str_cat(name, ", rows of ", whole, " elements");
    return std::nullopt;
  }
  if (slice && slice->dim != 0) {
    const int64_t block = block_traits(*target.type)->block_size;
    DI_CHECK(slice->begin % block == 0 && slice->end % block == 0, checkpoint_.dir(), ": tensor '",
             name, "': --quantization quantizes its rows of ", whole, " elements to ",
             dtype_name(*target.type), " in blocks of ", block, " but this rank's columns [",
             slice->begin, ", ", slice->end,
             ") split a block; choose a tensor-parallel size that keeps whole blocks");
  }
  ++quantized_[std::string(dtype_name(stored))];
  ++quantized_to_[std::string(dtype_name(*target.type))];
  return quantize_matrix(tensor, *target.type);
}

Tensor WeightLoader::matrix(const std::string& name, const Shape& expected, MatrixUse use,
                            std::optional<Slice> slice) {
  Tensor tensor = fetch(name, expected);
  const DType stored = tensor.dtype();
  if (stored == DType::f8_e4m3) {
    DI_CHECK(fp8_.has_value(), checkpoint_.dir(), ": tensor '", name,
             "' is F8_E4M3 but config.json has no quantization_config {\"quant_method\": "
             "\"fp8\", \"weight_block_size\": [...]} saying how it is scaled");
    DI_CHECK(expected.size() == 2, checkpoint_.dir(), ": tensor '", name, "' is F8_E4M3 with ",
             expected.size(), " dimensions; block scales are supported for matrices only");
    const Tensor scale = fetch(name + "_scale_inv", io::fp8_scale_shape(expected, *fp8_));
    const DType widened = options_.weight_dtype.value_or(DType::bf16);
    const auto part = [&](const Tensor& whole) {
      return slice ? take(name, whole, *slice) : whole;
    };
    if (options_.quantization) {
      // Quantized from the exact FP8 values (f32), not from a bf16 rounding of them.
      const Tensor exact = part(io::dequantize_fp8_blocks(tensor, scale, *fp8_, DType::f32));
      if (auto quantized = maybe_quantize(name, exact, use, stored, expected, slice))
        return loaded(std::move(*quantized));
      return loaded(exact.to(widened));
    }
    return loaded(part(io::dequantize_fp8_blocks(tensor, scale, *fp8_, widened)));
  }
  const bool blocks = is_block_dtype(stored);
  DI_CHECK(blocks || stored == DType::f32 || stored == DType::bf16 || stored == DType::f16,
           checkpoint_.dir(), ": tensor '", name, "' is ", dtype_name(stored),
           "; only f32, bf16, f16 and the ggml block types (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, "
           "q5_k, q6_k) are supported here");
  DI_CHECK(!blocks || expected.size() == 2, checkpoint_.dir(), ": tensor '", name, "' is ",
           dtype_name(stored), " with ", expected.size(),
           " dimensions; block-quantized weights are supported for matrices only");
  if (slice) tensor = take(name, tensor, *slice);
  if (!blocks) {
    if (auto quantized = maybe_quantize(name, tensor, use, stored, expected, slice))
      return loaded(std::move(*quantized));
  }
  // With --quantization a matrix stored in blocks stays in them (it is quantized already).
  const DType dtype =
      blocks && options_.quantization ? stored : options_.weight_dtype.value_or(stored);
  if (blocks)
    ++(dtype == stored ? native_blocks_ : dequantized_blocks_)[std::string(dtype_name(stored))];
  return loaded(tensor.to(dtype));
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

std::string WeightLoader::quantization_summary() const {
  if (!options_.quantization) return "";
  const auto list = [](const std::map<std::string, int64_t>& counts, const char* prefix) {
    std::string text;
    for (const auto& [what, count] : counts) {
      text += str_cat(text.empty() ? "" : ", ", count, " ", prefix, what);
    }
    return text;
  };
  int64_t total = 0;
  for (const auto& [from, count] : quantized_) total += count;
  std::string out =
      str_cat("quantized at load to ", options_.quantization->name(), ": ", total, " matrices");
  if (!quantized_.empty()) out += " (" + list(quantized_, "from ") + ")";
  // A mix or a fallback gives more than the one type asked for: say which.
  if (quantized_to_.size() > 1 ||
      (quantized_to_.size() == 1 &&
       quantized_to_.begin()->first != dtype_name(options_.quantization->type)))
    out += " as " + list(quantized_to_, "");
  if (!kept_.empty()) {
    out += "; not quantized (docs/QUANTIZATION.md): " + list(kept_, "");
    if (!first_partial_rows_.empty()) out += " (first: " + first_partial_rows_ + ")";
  }
  return out;
}

Tensor WeightLoader::vector_f32(const std::string& name, const Shape& expected,
                                std::optional<Slice> slice) {
  Tensor tensor = fetch(name, expected);
  if (slice) tensor = take(name, tensor, *slice);
  Tensor out = tensor.to(DType::f32);
  return loaded(out.is_borrowed() ? out.clone() : out);
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
