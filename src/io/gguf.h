#pragma once
// GGUF files (llama.cpp's model format, versions 2 and 3), memory-mapped and validated.
// Layout: magic "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata
// key/values, the tensor infos (name, dims, ggml type, offset), padding to general.alignment
// (default 32), then the data section; tensor offsets are relative to it.
// Dimensions in a GGUF file are ggml's `ne` (fastest-varying first); GgufTensorInfo::shape is
// reversed into row-major order, so a [in, out] ggml matrix is shape {out, in} as in a
// Hugging Face checkpoint, with the same bytes.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "core/quant_blocks.h"
#include "core/tensor.h"

namespace deepinfer::io {

// A metadata value. Integer types are widened to int64_t / uint64_t, floats to double; an
// array holds one of these vectors (GGUF arrays are homogeneous; nested arrays are refused).
struct GgufArray;
using GgufValue =
    std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<const GgufArray>>;
struct GgufArray {
  std::variant<std::vector<uint64_t>, std::vector<int64_t>, std::vector<double>, std::vector<bool>,
               std::vector<std::string>>
      values;
  size_t size() const;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::f32;
  Shape shape;            // row-major (reversed ggml ne)
  size_t data_begin = 0;  // absolute byte offset in the file
  size_t nbytes = 0;
};

struct GgufHeader {
  uint32_t version = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;  // file order
  size_t data_offset = 0;               // absolute start of the data section
};

// Validates `file` (the whole file) without I/O: magic, version 2/3, counts and string and
// array lengths against the bytes left (a 2^40-byte string is refused, never allocated),
// known value types, unique keys and tensor names, dims > 0 without overflow, known ggml
// types, row length a multiple of the block size, alignment a power of two, offsets
// aligned, each tensor inside the file, no overlap. Throws Error("<path>: <problem>").
GgufHeader parse_gguf_header(std::span<const std::byte> file, const std::string& path);

class GgufFile {
 public:
  static GgufFile open(const std::string& path, const MemoryOptions& memory = {});

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return header_.version; }
  const std::map<std::string, GgufValue>& metadata() const { return header_.metadata; }
  const std::vector<GgufTensorInfo>& tensors() const { return header_.tensors; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;  // nullptr when absent
  std::span<const std::byte> bytes(const GgufTensorInfo& tensor) const;

  // Typed metadata access: nullopt when absent; Error naming the key when of another type
  // (any integer type converts to an integer request when it fits).
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;  // also accepts integers
  std::optional<bool> get_bool(const std::string& key) const;
  const GgufArray* get_array(const std::string& key) const;

  // F32 / F16 / BF16 and the block types with a DType (Q8_0, Q4_0, Q4_1; QuantTraits::dtype):
  // a zero-copy view into the mapping with that dtype. Other block types: an owned f32 tensor
  // dequantized with the reference dequantizer. Error naming the tensor and its type for
  // types without a dequantizer.
  Tensor to_tensor(const GgufTensorInfo& tensor) const;

 private:
  std::shared_ptr<MappedFile> file_;
  GgufHeader header_;
  std::map<std::string, size_t> index_;
};

}  // namespace deepinfer::io
