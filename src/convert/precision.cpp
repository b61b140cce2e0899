#include "convert/precision.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "model/weight_quantization.h"

namespace deepinfer::convert {
namespace {

struct FloatChoice {
  const char* name;
  const char* alias;
  DType dtype;
};
constexpr FloatChoice kFloats[] = {
    {"fp32", "f32", DType::f32}, {"fp16", "f16", DType::f16}, {"bf16", "bfloat16", DType::bf16}};

// Quantizations whose scales the loader keeps beside the matrices, unrecorded (parse_precision).
bool needs_scales(std::string_view quantization) {
  return quantization == "w8a8" || quantization == "fp8";
}

}  // namespace

std::string precision_choices() {
  std::string out = "fp32, fp16, bf16";
  const std::string all = model::quantization_choices();  // "q8_0 (alias int8), q4_0, ..."
  for (size_t at = 0; at < all.size();) {
    const size_t comma = std::min(all.find(", ", at), all.size());
    const std::string choice = all.substr(at, comma - at);
    if (!needs_scales(choice)) out += ", " + choice;
    at = comma + 2;
  }
  return out;
}

Precision parse_precision(std::string_view name) {
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const FloatChoice& f : kFloats) {
    if (key == f.name || key == f.alias) {
      Precision p{f.name, {}};
      p.load.weight_dtype = f.dtype;
      return p;
    }
  }
  const std::string problem =
      key == "none" ? "unknown precision" : model::quantization_problem(key);
  if (problem.rfind("not built yet", 0) == 0) {
    fail("--precision ", name, ": not available yet: this build converts to ", precision_choices(),
         " (the ", key, " quantizer has not landed; docs/CONVERT.md)");
  }
  if (!problem.empty()) {
    fail("--precision ", name, ": unknown precision (expected one of ", precision_choices(),
         "; docs/CONVERT.md)");
  }
  Precision p;
  p.load.quantization = model::parse_quantization(key);
  p.name = p.load.quantization->name();
  // The loader keeps w8a8 row scales and FP8 block scales beside their matrices, outside what
  // it hands out (model::TensorRecorder sees the matrices only): an output without them would
  // load as garbage, so these wait until the converter writes the scales too.
  if (needs_scales(p.name)) {
    fail("--precision ", name, ": not available yet: convert does not write ",
         p.name == "w8a8" ? "w8a8 row scales" : "FP8 block scales",
         " (load the source with --quantization ", p.name, "; docs/CONVERT.md)");
  }
  return p;
}

}  // namespace deepinfer::convert
