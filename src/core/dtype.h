#pragma once
// Element types of tensors and checkpoints, and the scalar conversions between them.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace deepinfer {

enum class DType : uint8_t {
  f32,
  f16,
  bf16,
  f8_e4m3,  // DeepSeek-V3 FP8 checkpoints (block scales kept beside the tensor)
  i8,       // quantized weights / KV (scales kept beside the tensor)
  i32,
  i64,
  u8,
  boolean,
  // ggml block types (core/quant_blocks.h holds their layouts, one traits row each): a
  // tensor of these has whole blocks along its last dimension and no per-element size.
  q8_0,
  q4_0,
  q4_1,
  q5_0,
  q5_1,
  q4_k,  // k-quants: 256-element super-blocks
  q5_k,
  q6_k,
};

// Bytes of one element; throws Error for block types (use dtype_bytes()).
size_t dtype_size(DType dtype);
bool is_block_dtype(DType dtype);
// Bytes of n consecutive elements: n * dtype_size() for element types; for block types the
// row bytes of the traits table (n must then be a whole number of blocks, else Error).
size_t dtype_bytes(DType dtype, int64_t n);
std::string_view dtype_name(DType dtype);  // "f32", "bf16", ...
DType parse_dtype(std::string_view name);  // accepts our names; throws Error otherwise

inline float bf16_to_f32(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

// Round to nearest even, as torch does; NaN stays a (quiet) NaN.
inline uint16_t f32_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);
float f8_e4m3_to_f32(uint8_t bits);

// Converts n elements of any float type (f32/f16/bf16/f8_e4m3) to f32.
void convert_to_f32(const void* src, DType src_dtype, float* dst, size_t n);
// Symmetric int8 with one scale per `group` consecutive elements (n a multiple of group):
// scale = max|x| / 127, q = round(x / scale) (ties away from zero) clamped to [-127, 127]; an
// all-zero group gets scale 0 and q = 0, a group holding NaN or inf gets scale NaN (it reads
// back as NaN) and q = 0.
void quantize_i8(const float* src, int64_t group, size_t n, int8_t* dst, float* scales);
// dst[i] = scales[i / group] * src[i] for i < n (symmetric int8 with group scales).
void dequantize_i8(const int8_t* src, const float* scales, int64_t group, size_t n, float* dst);
// Converts n f32 values to f32/f16/bf16.
void convert_from_f32(const float* src, void* dst, DType dst_dtype, size_t n);

}  // namespace deepinfer
