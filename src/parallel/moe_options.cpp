#include "parallel/moe_options.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace deepinfer::parallel {

CommunicationDType parse_communication_dtype(const std::string& name, const std::string& where) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "fp32" || lower == "f32" || lower == "float32") return CommunicationDType::f32;
  if (lower == "bf16" || lower == "bfloat16") return CommunicationDType::bf16;
  if (lower == "fp16" || lower == "f16" || lower == "float16") return CommunicationDType::f16;
  fail(where, " = \"", name, "\": expected fp32, bf16 or fp16");
}

const char* communication_dtype_name(CommunicationDType dtype) {
  switch (dtype) {
    case CommunicationDType::bf16:
      return "bf16";
    case CommunicationDType::f16:
      return "f16";
    case CommunicationDType::f32:
      break;
  }
  return "f32";
}

int64_t communication_dtype_bytes(CommunicationDType dtype) {
  return dtype == CommunicationDType::f32 ? 4 : 2;
}

}  // namespace deepinfer::parallel
