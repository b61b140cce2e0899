#include "model/weights.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/quant_blocks.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "model/fp8_weights.h"
#include "model/w8a8_weights.h"
#include "model/weight_quantization.h"

namespace deepinfer::model {
namespace {

const char* kept_reason(MatrixUse use) {
  switch (use) {
    case MatrixUse::embedding:
      return "embedding";
    case MatrixUse::tied_embedding:
      return "tied embedding";
    case MatrixUse::lm_head:
      return "lm_head";
    case MatrixUse::expert:
      return "routed-expert";
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
  // Routed experts are quantized as projections (they are most of an MoE model's bytes); a
  // stack of them ([experts, rows, cols]) is quantized row by row like one matrix.
  const bool expert_stack = use == MatrixUse::expert && tensor.ndim() == 3;
  const bool head = options_.quantization->lm_head &&
                    (use == MatrixUse::lm_head || use == MatrixUse::tied_embedding);
  if ((use != MatrixUse::projection && use != MatrixUse::expert && !head) ||
      (tensor.ndim() != 2 && !expert_stack)) {
    ++kept_[kept_reason(use)];
    return std::nullopt;
  }
  const DType asked = options_.quantization->type;
  if (asked == DType::f8_e4m3) {  // fp8: 128x128 block scales, any shape
    // Routed experts one matrix at a time (ExpertStack stacks them with their scales, and cuts
    // a checkpoint's fused 3-D stacks into matrices through quantize_fp8_expert); a 3-D stack
    // that reaches here keeps its dtype (its scales would need whole blocks).
    if (tensor.ndim() != 2) {
      ++kept_["routed-expert (3-D stacks: no fp8)"];
      return std::nullopt;
    }
    return to_fp8(name, tensor, stored);
  }
  if (asked == DType::i8) {  // w8a8: any row length; routed experts as matrices or stacks
    ++quantized_[std::string(dtype_name(stored))];
    const Shape shape = tensor.shape();
    // A stack [experts, rows, cols] is rows of one matrix: its scales come out [experts, rows].
    W8a8Matrix w8a8 = quantize_w8a8_matrix(
        expert_stack ? tensor.reshape({shape[0] * shape[1], shape[2]}) : tensor);
    loaded_bytes_["i8"] += static_cast<int64_t>(w8a8.scale.nbytes());  // beside the int8
    w8a8_scales_[name] = expert_stack ? w8a8.scale.reshape({shape[0], shape[1]}) : w8a8.scale;
    return w8a8.q.reshape(shape);
  }
  // The type for this matrix: the one asked for, q4_k_m's choice, or llama-quantize's
  // fallback when the rows are not whole 256-element super-blocks.
  // Chosen for the whole rows (expected), so that a tensor-parallel rank quantizes its columns
  // in the blocks one process uses.
  const int64_t whole = expected.back();
  const QuantizationTarget target = head ? lm_head_target(*options_.quantization, whole)
                                         : quantization_target(*options_.quantization, name, whole);
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
  if (expert_stack) {
    const Shape shape = tensor.shape();
    return quantize_matrix(tensor.reshape({shape[0] * shape[1], shape[2]}), *target.type)
        .reshape(shape);
  }
  return quantize_matrix(tensor, *target.type);
}

Tensor WeightLoader::to_fp8(const std::string& name, const Tensor& tensor, DType stored) {
  ++quantized_[std::string(dtype_name(stored))];
  // DeepSeek-V3's 128 x 128 blocks, or an FP8 checkpoint's own (a part re-quantized under
  // tensor parallelism), so that one weight_block_size describes every FP8 tensor a converted
  // checkpoint holds.
  const io::Fp8BlockQuantization block = fp8_.value_or(io::Fp8BlockQuantization{128, 128});
  Fp8Matrix fp8 = quantize_fp8_matrix(tensor, block.block_rows, block.block_cols);
  loaded_bytes_["f8_e4m3"] += static_cast<int64_t>(fp8.scale.nbytes());  // beside the FP8
  fp8_scales_[name] = {std::move(fp8.scale), block};
  return std::move(fp8.q);
}

Tensor WeightLoader::stored_stack_rows(const std::string& name, const Shape& full, int64_t begin,
                                       int64_t end) {
  DI_CHECK(!full.empty() && begin >= 0 && begin < end && end <= full[0], name, ": rows [", begin,
           ", ", end, ") outside ", shape_to_string(full));
  const bool all = begin == 0 && end == full[0];
  return fetch_part(name, full, all ? std::nullopt : std::optional(Slice{0, begin, end}));
}

Tensor WeightLoader::quantize_fp8_expert(const std::string& name, const Tensor& matrix) {
  DI_CHECK(quantizes_to_fp8(), "internal: ", name,
           ": quantize_fp8_expert without --quantization fp8");
  const DType stored = matrix.dtype();
  DI_CHECK(stored == DType::f32 || stored == DType::bf16 || stored == DType::f16, checkpoint_.dir(),
           ": tensor '", name, "' is ", dtype_name(stored),
           "; only f32, bf16 and f16 experts are quantized to fp8");
  Tensor q = loaded(to_fp8(name, matrix, stored));
  record(name, q, MatrixUse::expert, q.shape(), std::nullopt);
  return q;
}

bool WeightLoader::keeps_fp8(MatrixUse use) const {
  // Only what kernels::linear_fp8 runs (projections and lm_head through Linear, routed experts
  // through ExpertStack); MLA's kv_b (read by element) and a forced --dtype are widened.
  // --quantization fp8 keeps FP8 as stored too (it is that type already).
  const bool quantizing = options_.quantization && !(*options_.quantization == DType::f8_e4m3);
  return fp8_ && !options_.weight_dtype && !quantizing &&
         (use == MatrixUse::projection || use == MatrixUse::lm_head || use == MatrixUse::expert) &&
         fp8_->block_cols % 16 == 0;
}

const WeightLoader::Fp8Scales& WeightLoader::fp8_scale(const std::string& name) const {
  const auto it = fp8_scales_.find(name);
  DI_CHECK(it != fp8_scales_.end(), checkpoint_.dir(), ": tensor '", name,
           "' was not kept in FP8, so it has no block scales");
  return it->second;
}

const Tensor& WeightLoader::w8a8_scale(const std::string& name) const {
  const auto it = w8a8_scales_.find(name);
  DI_CHECK(it != w8a8_scales_.end(), checkpoint_.dir(), ": tensor '", name,
           "' was not quantized to w8a8, so it has no row scales");
  return it->second;
}

void WeightLoader::record(const std::string& name, const Tensor& out, MatrixUse use,
                          const Shape& expected, const std::optional<Slice>& slice) {
  if (!recorder_) return;
  recorder_->record(name, out, use, stored_slice(expected, slice));
  // The scales go beside their matrix under the names the loader reads back (load_int8, FP8's
  // `_scale_inv`). A w8a8 scale is per output row: sliced as the rows are, whole for a
  // slice of the columns (the last dimension).
  if (out.dtype() == DType::i8) {
    const Tensor& scale = w8a8_scale(name);
    Shape shape = scale.shape();
    shape.push_back(1);
    Shape whole = expected;
    whole.back() = 1;
    recorder_->record(name + "_scale", scale.reshape(shape), MatrixUse::by_element,
                      stored_slice(whole, scale_slice(expected, slice)));
  } else if (out.dtype() == DType::f8_e4m3) {
    recorder_->record(name + "_scale_inv", fp8_scale(name).scale, MatrixUse::by_element,
                      std::nullopt);
  }
}

std::optional<Slice> WeightLoader::scale_slice(const Shape& expected,
                                               const std::optional<Slice>& slice) {
  if (!slice || slice->dim == static_cast<int>(expected.size()) - 1) return std::nullopt;
  return slice;
}

Tensor WeightLoader::matrix(const std::string& name, const Shape& expected, MatrixUse use,
                            std::optional<Slice> slice) {
  Tensor out = load_matrix(name, expected, use, slice);
  record(name, out, use, expected, slice);
  return out;
}

Tensor WeightLoader::matrix_rows(const std::string& name, const Shape& full, int64_t begin,
                                 int64_t end, MatrixUse use) {
  DI_CHECK(!full.empty() && begin >= 0 && begin < end && end <= full[0], name, ": rows [", begin,
           ", ", end, ") outside ", shape_to_string(full));
  const bool all = begin == 0 && end == full[0];
  return matrix(name, full, use, all ? std::nullopt : std::optional(Slice{0, begin, end}));
}

std::optional<io::TensorSlice> WeightLoader::stored_slice(const Shape& expected,
                                                          const std::optional<Slice>& slice) {
  if (!slice) return std::nullopt;
  return io::TensorSlice{slice->dim, slice->begin, slice->end,
                         expected[static_cast<size_t>(slice->dim)]};
}

Tensor WeightLoader::fetch_part(const std::string& name, const Shape& expected,
                                const std::optional<Slice>& slice) {
  const std::optional<io::TensorSlice> stored = checkpoint_.slice(name);
  if (!stored) {
    const Tensor whole = fetch(name, expected);
    return slice ? take(name, whole, *slice) : whole;
  }
  // A converted per-rank shard holds just this rank's part (its manifest says which): it is
  // returned as stored, never sliced twice.
  const std::optional<io::TensorSlice> wanted = stored_slice(expected, slice);
  if (stored != wanted) {
    const std::string loads = wanted ? str_cat("[", wanted->begin, ", ", wanted->end, ") of ",
                                               wanted->full, " along dimension ", wanted->dim)
                                     : std::string("all of it");
    fail(checkpoint_.dir(), ": tensor '", name, "' holds [", stored->begin, ", ", stored->end,
         ") of ", stored->full, " along dimension ", stored->dim, " but this rank loads ", loads,
         " (the checkpoint was converted for another parallel layout)");
  }
  Shape part = expected;
  part[static_cast<size_t>(stored->dim)] = stored->end - stored->begin;
  return fetch(name, part);
}

bool WeightLoader::fp8_slice_on_blocks(const Shape& whole, const Slice& slice) const {
  if (!fp8_ || whole.size() != 2) return false;
  const int64_t block = slice.dim == 0 ? fp8_->block_rows : fp8_->block_cols;
  const int64_t extent = whole[static_cast<size_t>(slice.dim)];
  return slice.begin % block == 0 && (slice.end % block == 0 || slice.end == extent);
}

Tensor WeightLoader::load_matrix(const std::string& name, const Shape& expected, MatrixUse use,
                                 const std::optional<Slice>& slice) {
  if (checkpoint_.contains(name) && checkpoint_.info(name).dtype == DType::i8)
    return load_int8(name, expected, use, slice);
  if (checkpoint_.contains(name) && checkpoint_.info(name).dtype == DType::f8_e4m3) {
    // A whole FP8 matrix is sliced after dequantizing (its block scales cover the whole
    // matrix). A converted shard may instead hold this rank's part, quantized to FP8 by itself
    // as --quantization fp8 does under tensor parallelism, with its own block scales: that part
    // is then the whole matrix as far as FP8 goes.
    const bool shard_part = checkpoint_.slice(name).has_value();
    Tensor tensor = shard_part ? fetch_part(name, expected, slice) : fetch(name, expected);
    std::optional<Slice> rest = shard_part ? std::nullopt : slice;  // still to take
    const DType stored = tensor.dtype();
    DI_CHECK(fp8_.has_value(), checkpoint_.dir(), ": tensor '", name,
             "' is F8_E4M3 but config.json has no quantization_config {\"quant_method\": "
             "\"fp8\", \"weight_block_size\": [...]} saying how it is scaled");
    DI_CHECK(expected.size() == 2, checkpoint_.dir(), ": tensor '", name, "' is F8_E4M3 with ",
             expected.size(), " dimensions; block scales are supported for matrices only");
    Tensor scale = fetch(name + "_scale_inv", io::fp8_scale_shape(tensor.shape(), *fp8_));
    if (rest && fp8_slice_on_blocks(expected, *rest)) {
      // On block bounds: the part keeps its stored bytes, with the scales of its blocks.
      const int64_t block = rest->dim == 0 ? fp8_->block_rows : fp8_->block_cols;
      const Slice blocks{rest->dim, rest->begin / block, (rest->end + block - 1) / block};
      tensor = take(name, tensor, *rest);
      scale = take(name + "_scale_inv", scale, blocks);
      rest.reset();
    }
    // Kept FP8 runs the exact dequantized weights; what is widened beside it (MLA's kv_b) then
    // becomes f32, so the model is the dequantize-at-load f32 one up to summation order.
    // A tensor-parallel slice is widened too: its block scales would need the slice to fall on
    // block bounds.
    const DType widened =
        options_.weight_dtype.value_or(keeps_fp8(MatrixUse::projection) ? DType::f32 : DType::bf16);
    const bool keep = keeps_fp8(use) && !rest;
    const auto part = [&](const Tensor& whole) { return rest ? take(name, whole, *rest) : whole; };
    if (options_.quantization && !keep) {
      // Quantized from the exact FP8 values (f32), not from a bf16 rounding of them.
      const Tensor exact = part(io::dequantize_fp8_blocks(tensor, scale, *fp8_, DType::f32));
      if (auto quantized = maybe_quantize(name, exact, use, stored, expected, slice))
        return loaded(std::move(*quantized));
      return loaded(exact.to(widened));
    }
    if (keep) {
      // Kept as stored (zero-copy), its scales beside it; kernels::linear_fp8 widens in register.
      Tensor scales = scale.to(DType::f32);
      loaded_bytes_["f8_e4m3"] += static_cast<int64_t>(tensor.nbytes() + scales.nbytes());
      fp8_scales_[name] = {std::move(scales), *fp8_};
      ++kept_fp8_;
      return tensor;
    }
    return loaded(part(io::dequantize_fp8_blocks(tensor, scale, *fp8_, widened)));
  }
  const Tensor tensor = fetch_part(name, expected, slice);  // this rank's part
  const DType stored = tensor.dtype();
  const bool blocks = is_block_dtype(stored);
  DI_CHECK(blocks || stored == DType::f32 || stored == DType::bf16 || stored == DType::f16,
           checkpoint_.dir(), ": tensor '", name, "' is ", dtype_name(stored),
           "; only f32, bf16, f16 and the ggml block types (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, "
           "q5_k, q6_k) are supported here");
  DI_CHECK(!blocks || expected.size() == 2 || (use == MatrixUse::expert && expected.size() == 3),
           checkpoint_.dir(), ": tensor '", name, "' is ", dtype_name(stored), " with ",
           expected.size(),
           " dimensions; block-quantized weights are supported for matrices and expert stacks "
           "only");
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

Tensor WeightLoader::load_int8(const std::string& name, const Shape& expected, MatrixUse use,
                               const std::optional<Slice>& slice) {
  const std::string scale_name = name + "_scale";
  DI_CHECK(checkpoint_.contains(scale_name), checkpoint_.dir(), ": tensor '", name,
           "' is I8 without a '", scale_name,
           "' beside it; int8 weights load only as channel-wise W8A8 (quantization_config "
           "w8a8_int8 or compressed-tensors int8 channel-wise; docs/QUANTIZATION.md)");
  const Tensor q = fetch_part(name, expected, slice);  // this rank's part
  Shape scale_shape = expected;
  scale_shape.back() = 1;  // one scale per output row: [rows, 1] (SGLang, compressed-tensors)
  Tensor scale = fetch_part(scale_name, scale_shape, scale_slice(expected, slice));
  const Shape row_shape(q.shape().begin(), q.shape().end() - 1);
  scale = scale.to(DType::f32).reshape(row_shape);  // zero-copy when stored in f32
  // Kept int8 (zero-copy) where kernels::linear_w8a8 runs it and nothing asks for another type.
  const bool other_quantization = options_.quantization && !(*options_.quantization == DType::i8);
  if (!options_.weight_dtype && !other_quantization &&
      (use == MatrixUse::projection || use == MatrixUse::lm_head || use == MatrixUse::expert)) {
    loaded_bytes_["i8"] += static_cast<int64_t>(q.nbytes() + scale.nbytes());
    w8a8_scales_[name] = scale;
    ++kept_int8_;
    return q;
  }
  // Anything else (read by element, --dtype, another --quantization) gets the real values
  // q * scale, computed in f32.
  const int64_t cols = q.dim(-1), count = q.numel() / std::max<int64_t>(cols, 1);
  Tensor w = Tensor::zeros(q.shape(), DType::f32);
  const Tensor qc = q.is_contiguous() ? q : q.clone();
  const int8_t* src = qc.data<int8_t>();
  const float* s = scale.data<float>();
  float* dst = w.data<float>();
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      dst[r * cols + c] = static_cast<float>(src[r * cols + c]) * s[r];
  }
  if (auto quantized = maybe_quantize(name, w, use, DType::i8, expected, slice))
    return loaded(std::move(*quantized));
  return loaded(w.to(options_.weight_dtype.value_or(DType::f32)));
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
  if (kept_fp8_ > 0) {
    if (!out.empty()) out += "; ";
    out += str_cat(kept_fp8_, " f8_e4m3 matrices kept in FP8 with ", fp8_->block_rows, "x",
                   fp8_->block_cols, " block scales (", kernels::isa_name(kernels::active_isa()),
                   " FP8 kernel)");
  }
  if (kept_int8_ > 0) {
    if (!out.empty()) out += "; ";
    out += str_cat(kept_int8_, " i8 matrices kept as stored with row scales (",
                   kernels::isa_name(kernels::active_isa()), " W8A8 kernel)");
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
      str_cat("quantized at load to ", options_.quantization->name(),
              options_.quantization->lm_head ? " (lm_head too)" : "", ": ", total, " matrices");
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
  const Tensor tensor = fetch_part(name, expected, slice);
  if (recorder_)
    recorder_->record(name, tensor, MatrixUse::by_element, stored_slice(expected, slice));
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
