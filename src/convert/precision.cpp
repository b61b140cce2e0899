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

}  // namespace

std::string precision_choices() {
  return "fp32, fp16, bf16, " + model::quantization_choices();
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
  return p;
}

}  // namespace deepinfer::convert
