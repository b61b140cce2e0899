#pragma once
// --precision of deepinfer convert: the names of --quantization (q8_0, q4_0, ..., int8, int4,
// w8a8, fp8) plus the float types fp32 / fp16 / bf16,
// as the LoadOptions a load with the same setting would use, so what is written is what that
// load would hold.
#include <string>
#include <string_view>

#include "model/weights.h"

namespace deepinfer::convert {

struct Precision {
  std::string name;  // canonical: "fp32", "fp16", "bf16", "q8_0", ...
  model::LoadOptions load;
};

// Throws Error naming the value: unknown names list the choices; names of types whose
// quantizer has not landed yet say so ("not available yet").
Precision parse_precision(std::string_view name);
std::string precision_choices();

}  // namespace deepinfer::convert
