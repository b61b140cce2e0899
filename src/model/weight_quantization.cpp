#include "model/weight_quantization.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "core/error.h"
#include "core/quant_blocks.h"
#include "core/quantize_blocks.h"

namespace deepinfer::model {
namespace {

struct Choice {
  const char* name;
  DType dtype;
  bool mix;           // llama.cpp's q4_k_m (dtype is its base type)
  const char* alias;  // another accepted name, or nullptr
};

// The types quantize-at-load writes: a block type with both a reference quantizer and
// kernels::linear kernels. A new one is a row here (and out of kNotBuilt) once its DType,
// quantizer and kernels exist.
constexpr Choice kChoices[] = {
    {"q8_0", DType::q8_0, false, "int8"},
    {"q4_0", DType::q4_0, false, nullptr},
    {"q4_1", DType::q4_1, false, nullptr},
    {"q5_0", DType::q5_0, false, nullptr},
    {"q5_1", DType::q5_1, false, nullptr},
    {"q4_k", DType::q4_k, false, nullptr},
    {"q5_k", DType::q5_k, false, nullptr},
    {"q6_k", DType::q6_k, false, nullptr},
    {"q4_k_m", DType::q4_k, true, "int4"},
    // Not a block type: int8 rows with an f32 scale each (model/w8a8_weights.h).
    {"w8a8", DType::i8, false, nullptr},
    // FP8 E4M3 with 128x128 block scales, DeepSeek-V3's layout (model/fp8_weights.h).
    {"fp8", DType::f8_e4m3, false, nullptr},
};

// Named by issue #11 (and by vLLM), not built yet: refused with a message, never silently
// replaced by another type.
constexpr const char* kNotBuilt[] = {"w4a8"};

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

const Choice* find_choice(const std::string& key) {
  for (const Choice& c : kChoices) {
    if (key == c.name || (c.alias && key == c.alias)) return &c;
  }
  return nullptr;
}

// The decoder layer of a checkpoint name ("model.layers.12.mlp.down_proj.weight" -> 12), or
// nullopt for names outside the layers.
std::optional<int64_t> layer_of(const std::string& name) {
  const std::string key = "layers.";
  const size_t at = name.find(key);
  if (at == std::string::npos) return std::nullopt;
  size_t end = at + key.size();
  int64_t layer = 0;
  bool digits = false;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) {
    layer = layer * 10 + (name[end++] - '0');
    digits = true;
  }
  if (!digits || end >= name.size() || name[end] != '.') return std::nullopt;
  return layer;
}

bool contains(const std::string& name, const char* part) {
  return name.find(part) != std::string::npos;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third one
// between them get the larger type.
bool use_more_bits(int64_t layer, int64_t layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

// LLAMA_FTYPE_MOSTLY_Q4_K_M's choice (llama_tensor_get_type) for the tensors our policy
// quantizes, named as in HF checkpoints: llama.cpp's attn_v (also a fused qkv), attn_k,
// attn_output and ffn_down (also a shared expert's). The attn_v counter of llama.cpp runs over
// the layers in order, one attn_v each, so it is the layer index here; the ffn_down layer is
// the layer index in llama.cpp too.
DType mix_type(const Quantization& q, const std::string& name) {
  DI_CHECK(q.layers > 0, "--quantization q4_k_m: ", name,
           ": the mix needs the model's layer count (with_model_shape)");
  const std::optional<int64_t> layer = layer_of(name);
  if (!layer) return DType::q4_k;
  const bool eight_experts = q.experts == 8;  // llama.cpp's Mixtral-shaped exceptions
  if (contains(name, ".v_proj.") || contains(name, ".qkv_proj.") ||
      contains(name, ".query_key_value.")) {
    if (eight_experts) return DType::q8_0;
    return use_more_bits(*layer, q.layers) ? DType::q6_k : DType::q4_k;
  }
  if (contains(name, ".k_proj.")) return eight_experts ? DType::q8_0 : DType::q4_k;
  if (contains(name, ".o_proj.")) return eight_experts ? DType::q5_k : DType::q4_k;
  // ".w2." is a Mixtral-style expert's down projection (MiniMax-M2: experts.{e}.w2).
  if (contains(name, ".down_proj.") || (contains(name, ".experts.") && contains(name, ".w2.")))
    return use_more_bits(*layer, q.layers) ? DType::q6_k : DType::q4_k;
  return DType::q4_k;
}

// llama-quantize's replacement for a K-quant whose super-blocks do not divide a row.
std::optional<DType> fallback_type(DType type) {
  switch (type) {
    case DType::q4_k:
      return DType::q5_0;
    case DType::q5_k:
      return DType::q5_1;
    case DType::q6_k:
      return DType::q8_0;
    default:
      return std::nullopt;  // a 32-element type has no smaller block (llama.cpp keeps F16)
  }
}

}  // namespace

std::string quantization_choices() {
  std::string out;
  for (const Choice& c : kChoices) {
    out +=
        str_cat(out.empty() ? "" : ", ", c.name, c.alias ? str_cat(" (alias ", c.alias, ")") : "");
  }
  return out;
}

std::string quantization_problem(std::string_view name) {
  const std::string key = lower(name);
  if (key == "none" || find_choice(key)) return "";
  for (const char* other : kNotBuilt) {
    if (key == other) {
      return str_cat("not built yet: this build quantizes weights at load to ",
                     quantization_choices(), " (or none)");
    }
  }
  return str_cat("unknown weight quantization (expected ", quantization_choices(),
                 " or none; see docs/QUANTIZATION.md)");
}

std::optional<Quantization> parse_quantization(std::string_view name) {
  const std::string problem = quantization_problem(name);
  if (!problem.empty()) fail("--quantization ", name, ": ", problem);
  const Choice* choice = find_choice(lower(name));
  if (!choice) return std::nullopt;  // none
  return choice->mix ? Quantization::q4_k_m() : Quantization(choice->dtype);
}

std::string Quantization::name() const {
  if (mix) return "q4_k_m";
  if (type == DType::i8) return "w8a8";
  if (type == DType::f8_e4m3) return "fp8";
  return std::string(dtype_name(type));
}

Quantization with_model_shape(Quantization q, const io::ModelConfig& config) {
  q.layers = config.num_hidden_layers;
  q.experts = 0;
  for (const char* key : {"num_experts", "n_routed_experts", "num_local_experts"}) {
    const auto it = config.raw.find(key);
    if (it != config.raw.end() && it->is_number_integer()) q.experts = it->get<int64_t>();
  }
  return q;
}

QuantizationTarget quantization_target(const Quantization& q, const std::string& name,
                                       int64_t cols) {
  DType type = q.mix ? mix_type(q, name) : q.type;
  QuantizationTarget target;
  if (cols % block_traits(type)->block_size != 0) {
    // llama-quantize's tensor_type_fallback: a K-quant whose 256-element super-blocks do not
    // divide the row becomes the 32-element type of about the same size.
    const std::optional<DType> smaller = fallback_type(type);
    if (!smaller || cols % block_traits(*smaller)->block_size != 0) return target;  // kept
    type = *smaller;
    target.fallback = true;
  }
  target.type = type;
  return target;
}

Quantization with_lm_head(Quantization q) {
  DI_CHECK(block_traits(q.type) != nullptr,
           "the lm_head is quantized to a ggml block type (q6_k "
           "or q8_0, as llama-quantize does), with the block types of --quantization (q8_0, "
           "q4_0, ..., q4_k_m); ",
           q.name(), " quantizes the projections only");
  q.lm_head = true;
  return q;
}

QuantizationTarget lm_head_target(const Quantization& q, int64_t cols) {
  QuantizationTarget target;
  if (cols % block_traits(DType::q8_0)->block_size != 0) return target;  // kept
  const bool super_blocks = cols % block_traits(DType::q6_k)->block_size == 0;
  target.type = !super_blocks || q == DType::q8_0 ? DType::q8_0 : DType::q6_k;
  target.fallback = !super_blocks && !(q == DType::q8_0);
  return target;
}

Tensor quantize_matrix(const Tensor& matrix, DType target) {
  const QuantTraits* traits = block_traits(target);
  DI_CHECK(traits != nullptr && can_quantize(traits->type), "cannot quantize to ",
           dtype_name(target), " (quantizers: ", quantizable_types(), ")");
  DI_CHECK(matrix.ndim() == 2 && matrix.is_contiguous(), "quantizing ", matrix.describe(), " to ",
           dtype_name(target), ": only contiguous matrices are quantized");
  const DType source = matrix.dtype();
  DI_CHECK(source == DType::f32 || source == DType::bf16 || source == DType::f16, "quantizing ",
           matrix.describe(), " to ", dtype_name(target), ": the source must be f32, bf16 or f16");
  const int64_t rows = matrix.dim(0);
  const int64_t cols = matrix.dim(1);
  Tensor out = Tensor::zeros({rows, cols}, target);
  const size_t in_row = dtype_bytes(source, cols);
  const size_t out_row = dtype_bytes(target, cols);
  const auto* in = static_cast<const std::byte*>(matrix.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    convert_to_f32(in + static_cast<size_t>(r) * in_row, source, row.data(),
                   static_cast<size_t>(cols));
    quantize_row(traits->type, row.data(), dst + static_cast<size_t>(r) * out_row, cols);
  }
  return out;
}

}  // namespace deepinfer::model
