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
  const char* alias;  // another accepted name, or nullptr
};

// The types quantize-at-load writes: a block type with both a reference quantizer and
// kernels::linear kernels. A new one is a row here (and out of kNotBuilt) once its DType and
// kernels exist: q5_0 / q5_1 have quantizers already.
constexpr Choice kChoices[] = {
    {"q8_0", DType::q8_0, "int8"},
    {"q4_0", DType::q4_0, nullptr},
    {"q4_1", DType::q4_1, nullptr},
};

// Named by issue #11 (and by llama.cpp / vLLM), not built yet: refused with a message, never
// silently replaced by another type.
constexpr const char* kNotBuilt[] = {"q5_0", "q5_1", "q4_k", "q4_k_m", "int4",
                                     "q5_k", "q6_k", "w8a8", "fp8",    "w4a8"};

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

std::optional<DType> parse_quantization(std::string_view name) {
  const std::string problem = quantization_problem(name);
  if (!problem.empty()) fail("--quantization ", name, ": ", problem);
  const Choice* choice = find_choice(lower(name));
  if (!choice) return std::nullopt;  // none
  return choice->dtype;
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
