#pragma once
// Block-quantized weight types with the bit layouts of llama.cpp's ggml (ggml-common.h), so
// GGUF files map without conversion. One traits row per type: block size, bytes per block,
// and the scalar reference dequantizer. A new type is one row here plus its tests.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"

namespace deepinfer {

// Values are ggml's `ggml_type` numbers (they appear in GGUF tensor infos).
enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  bf16 = 30,
};

struct QuantTraits {
  GgmlType type;
  std::string_view name;  // ggml's spelling: "Q4_1", "F32", ...
  int64_t block_size;     // elements per block (1 for f32/f16/bf16)
  size_t block_bytes;     // bytes per block
  // Reference dequantization of n elements (n a multiple of block_size) into f32;
  // nullptr for a type we can read the size of but not decode.
  void (*dequantize_row)(const void* src, float* dst, int64_t n);
  // The DType a Tensor holds this type as, unchanged (zero-copy); nullopt for types that are
  // only read by dequantizing. Block types get one when kernels::linear runs them natively.
  std::optional<DType> dtype;
};

// The traits of a known ggml type number; nullopt for numbers we do not know at all.
std::optional<QuantTraits> quant_traits(uint32_t ggml_type);
const QuantTraits& quant_traits(GgmlType type);  // throws Error for an unknown type

// The traits row of a block DType (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k); nullptr for
// element types (f32, ...).
const QuantTraits* block_traits(DType dtype);

// Bytes of a row of n elements; throws Error when n is not a multiple of the block size.
size_t quant_row_bytes(GgmlType type, int64_t n);

}  // namespace deepinfer
