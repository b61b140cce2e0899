#pragma once
// The tensors of a GGUF model under their Hugging Face names, so the family builders load a
// .gguf file exactly as a checkpoint directory. llama.cpp's converter renamed the tensors
// (blk.N.attn_q.weight), permuted the Q/K rows of Llama models for its interleaved rotary
// embedding, stacked MoE experts into one tensor per layer and split DeepSeek's kv_b_proj;
// each of those is undone here, on read.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/safetensors.h"

namespace deepinfer::io {

class GgufTensors {
 public:
  static std::shared_ptr<const GgufTensors> open(const std::string& path,
                                                 const MemoryOptions& memory = {});

  const std::string& path() const { return file_.path(); }
  const GgufFile& file() const { return file_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // dtype: what get() returns
  // F32/F16/BF16 and the block types with kernels: zero-copy where no reordering is needed
  // (Llama Q/K rows are reordered into an owned copy of the same dtype; MoE expert stacks
  // and single experts are views). DeepSeek's joined kv_b of those block types, and every
  // other block type: dequantized to f32 (the latter logged once per type). MoE stacks
  // blk.N.ffn_{gate,up,down}_exps appear whole as model.layers.N.mlp.experts.{gate,up,down}_proj
  // [E, rows, cols] and per expert as model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight.
  Tensor get(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t total_bytes() const;                           // stored bytes of all tensors
  std::map<std::string, size_t> bytes_by_type() const;  // stored bytes per ggml type name

  struct Entry;

 private:
  explicit GgufTensors(GgufFile file) : file_(std::move(file)) {}
  GgufFile file_;
  std::map<std::string, std::shared_ptr<const Entry>> entries_;
};

}  // namespace deepinfer::io
