#include "core/dtype.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/quant_blocks.h"

namespace deepinfer {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::f8_e4m3:
      return 1;
    case DType::i8:
      return 1;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::u8:
      return 1;
    case DType::boolean:
      return 1;
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
      fail("dtype_size(", dtype_name(dtype), "): a block-quantized type has no element size; ",
           "its bytes are per row of whole blocks (dtype_bytes, core/quant_blocks.h)");
  }
  fail("invalid dtype value ", static_cast<int>(dtype));
}

bool is_block_dtype(DType dtype) {
  return block_traits(dtype) != nullptr;
}

size_t dtype_bytes(DType dtype, int64_t n) {
  if (const QuantTraits* traits = block_traits(dtype)) return quant_row_bytes(traits->type, n);
  DI_CHECK(n >= 0, "dtype_bytes of ", n, " elements");
  return static_cast<size_t>(n) * dtype_size(dtype);
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f8_e4m3:
      return "f8_e4m3";
    case DType::i8:
      return "i8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::u8:
      return "u8";
    case DType::boolean:
      return "bool";
    case DType::q8_0:
      return "q8_0";
    case DType::q4_0:
      return "q4_0";
    case DType::q4_1:
      return "q4_1";
    case DType::q5_0:
      return "q5_0";
    case DType::q5_1:
      return "q5_1";
    case DType::q4_k:
      return "q4_k";
    case DType::q5_k:
      return "q5_k";
    case DType::q6_k:
      return "q6_k";
  }
  return "invalid";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "fp32") return DType::f32;
  if (name == "f16" || name == "float16" || name == "fp16") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "i8" || name == "int8") return DType::i8;
  fail("unknown dtype '", name, "' (expected f32, f16, bf16 or int8)");
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else {  // subnormal: value = mantissa * 2^-24
      const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
      std::memcpy(&out, &magnitude, sizeof(out));
      out |= sign;
    }
  } else if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else {
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &out, sizeof(value));
  return value;
}

uint16_t f32_to_f16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // overflow to inf (after rounding)
  if (abs_bits < 0x38800000u) {                        // subnormal or zero in f16
    float magnitude;
    std::memcpy(&magnitude, &abs_bits, sizeof(magnitude));
    // nearbyint uses the default round-to-nearest-even mode.
    const auto scaled = static_cast<uint16_t>(std::nearbyint(std::ldexp(magnitude, 24)));
    return sign | scaled;
  }
  const uint32_t rounding = 0xfffu + ((abs_bits >> 13) & 1u);
  const uint32_t rebased = abs_bits - (112u << 23) + rounding;
  return sign | static_cast<uint16_t>(rebased >> 13);
}

float f8_e4m3_to_f32(uint8_t bits) {
  // OCP FP8 E4M3 ("fn"): bias 7, no infinities, S.1111.111 is NaN.
  const bool negative = (bits & 0x80u) != 0;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = NAN;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  }
  return negative ? -magnitude : magnitude;
}

void convert_to_f32(const void* src, DType src_dtype, float* dst, size_t n) {
  switch (src_dtype) {
    case DType::f32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::bf16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(in[i]);
      return;
    }
    case DType::f16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(in[i]);
      return;
    }
    case DType::f8_e4m3: {
      const auto* in = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f8_e4m3_to_f32(in[i]);
      return;
    }
    default:
      fail("cannot convert ", dtype_name(src_dtype), " to f32");
  }
}

namespace {

// std::round (halves away from zero) for |v| < 2^31, without the library call: the truncation
// and v - trunc(v) are exact, so this is the same value, and the loop vectorizes.
inline float round_half_away(float v) {
  const auto t = static_cast<float>(static_cast<int32_t>(v));
  const float d = v - t;
  return t + (d >= 0.5f ? 1.0f : 0.0f) - (d <= -0.5f ? 1.0f : 0.0f);
}

}  // namespace

void quantize_i8(const float* src, int64_t group, size_t n, int8_t* dst, float* scales) {
  const auto g = static_cast<size_t>(group);
  constexpr float kMaxFinite = std::numeric_limits<float>::max();
  for (size_t g0 = 0; g0 < n; g0 += g) {
    float max_abs = 0.0f;
    bool finite = true;
    for (size_t i = g0; i < g0 + g; ++i) {
      const float a = std::fabs(src[i]);
      finite = finite && a <= kMaxFinite;  // false for NaN and inf
      max_abs = a > max_abs ? a : max_abs;
    }
    // A NaN or inf cannot be represented: the whole group reads back as NaN instead of as
    // plausible finite values.
    const float scale = finite ? max_abs / 127.0f : std::numeric_limits<float>::quiet_NaN();
    scales[g0 / g] = scale;
    const bool nonzero = finite && scale > 0.0f;
    for (size_t i = g0; i < g0 + g; ++i) {
      // |src / scale| <= 127 up to rounding: the clamp only guards that last ulp.
      const float r = nonzero ? round_half_away(src[i] / scale) : 0.0f;
      dst[i] = static_cast<int8_t>(r < -127.0f ? -127.0f : (r > 127.0f ? 127.0f : r));
    }
  }
}

void dequantize_i8(const int8_t* src, const float* scales, int64_t group, size_t n, float* dst) {
  const auto g = static_cast<size_t>(group);
  for (size_t i = 0; i < n; ++i) dst[i] = scales[i / g] * static_cast<float>(src[i]);
}

void convert_from_f32(const float* src, void* dst, DType dst_dtype, size_t n) {
  switch (dst_dtype) {
    case DType::f32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::bf16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::f16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = f32_to_f16(src[i]);
      return;
    }
    default:
      fail("cannot convert f32 to ", dtype_name(dst_dtype));
  }
}

}  // namespace deepinfer
