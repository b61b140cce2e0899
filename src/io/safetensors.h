#pragma once
// safetensors checkpoints, memory-mapped and validated; tensors are zero-copy views.
// Format: 8-byte little-endian header length N, N bytes of JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data section; offsets are relative to the data section.
#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"
#include "io/converted_manifest.h"

namespace deepinfer::io {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  size_t data_begin = 0;  // absolute byte offset in the file
  size_t data_end = 0;
};

// The parsed and validated header of a safetensors file held in memory.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in header (name) order
  std::map<std::string, std::string> metadata;
  size_t data_offset = 0;  // 8 + header length: where the data section starts
};

// Validates `file` (the whole file's bytes) exactly as SafetensorsFile::open does, without
// any I/O; `path` only names the file in error messages. Used by open() and the fuzzer.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file,
                                           const std::string& path);

// Safetensors dtype names ("F32", "BF16", "F8_E4M3", ...) <-> DType.
std::string_view safetensors_dtype_name(DType dtype);

class SafetensorsFile {
 public:
  // Maps and validates the whole header: length vs file size, JSON, known dtypes,
  // shape x dtype size == byte range, ranges inside the data section, no overlap,
  // no integer overflow. Throws Error("<path>: <problem>") on the first violation.
  static SafetensorsFile open(const std::string& path, const MemoryOptions& memory = {});

  const std::string& path() const { return file_->path(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws Error naming file + tensor
  Tensor get(const std::string& name) const;              // zero-copy view into the mapping

 private:
  std::shared_ptr<MappedFile> file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

class GgufTensors;

// A model directory: one model.safetensors, or shards listed by model.safetensors.index.json
// (its weight_map must name existing files and each tensor must be in the shard it names);
// or a llama.cpp .gguf file (the path of the file, or of a directory holding only it),
// whose tensors appear under their Hugging Face names (io/gguf_tensors.h).
class Checkpoint {
 public:
  // `memory`: how the weight files are held (mapped or read, huge pages, mlock; core/memory.h).
  static Checkpoint open(const std::string& dir, const MemoryOptions& memory = {});
  // The files holding the weights of the model at `path` (its *.safetensors, or the .gguf),
  // sorted; cheap (no file is parsed), for sizing and prefaulting before open().
  static std::vector<std::string> weight_files(const std::string& path);

  const std::string& dir() const { return dir_; }
  bool contains(const std::string& name) const;
  Tensor get(const std::string& name) const;  // throws Error naming the tensor and directory
  const TensorInfo& info(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  size_t total_bytes() const;              // of all tensor data (as stored)
  // Stored bytes per storage type ("BF16", "Q4_1", ...).
  std::map<std::string, size_t> bytes_by_type() const;
  // The part of `name` this directory holds when it is one rank's shard of a conversion
  // (deepinfer_manifest.json "sliced_tensors"); nullopt: the whole tensor.
  std::optional<TensorSlice> slice(const std::string& name) const;

 private:
  // A converted directory (deepinfer convert) is checked against its manifest before use;
  // shards that say they were converted but have no manifest are refused.
  bool check_manifest();                    // true when the directory has one
  void refuse_unlisted_conversion() const;  // converted shards without a manifest
  // A multimodal checkpoint whose text model is a served decoder (Kimi-K2.5 stores it as
  // language_model.model.* and language_model.lm_head.*, transformers 5 as model.language_model.*
  // and lm_head.*): its tensors appear under the decoder's own names (model.*, lm_head.*), the
  // vision tower's and projector's are left out (text generation only).
  void expose_text_model();
  const std::string& stored_name(const std::string& name) const;
  std::map<std::string, TensorSlice> slices_;
  std::string dir_;
  std::shared_ptr<const GgufTensors> gguf_;  // set for a .gguf model
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> owner_;              // tensor name -> index into files_
  std::map<std::string, std::string> stored_names_;  // exposed name -> name in the file
};

// Writes tensors (any dtype; block types under their names Q8_0, Q4_0, ...) to a single
// safetensors file, atomically (temp file + fsync + rename). `alignment` 0: the reference
// writer's layout byte for byte; a power of two >= 8: the data section starts at a multiple of
// it, and so does every block-type tensor (zero bytes fill the gaps before them).
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       size_t alignment = 0);

}  // namespace deepinfer::io
