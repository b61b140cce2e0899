#pragma once
// Pulls named tensors out of a checkpoint with the shape the config implies, converting
// only when needed: matrices keep the stored dtype (zero-copy) unless a compute dtype is
// forced; small vectors (norms, biases) become f32.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/fp8.h"
#include "io/safetensors.h"
#include "parallel/parallel_context.h"

namespace deepinfer::model {

struct LoadOptions {
  std::optional<DType> weight_dtype;  // nullopt: as stored (f32, bf16, f16 and the ggml block
                                      // types q8_0 / q4_0 / q4_1 all run; FP8 blocks are
                                      // dequantized to bf16); set: every matrix in this dtype
  // The process's parallel layout (parallel_context.h); null: one process. MoE builders take
  // their expert group's communicator from it and load only this rank's experts.
  std::shared_ptr<const parallel::ParallelContext> parallel = nullptr;
};

class WeightLoader {
 public:
  WeightLoader(const io::Checkpoint& checkpoint, LoadOptions options);

  bool has(const std::string& name) const { return checkpoint_.contains(name); }
  // Block-wise FP8 announced by config.json (io::parse_fp8_quantization): F8_E4M3 matrices
  // are then dequantized at load with their `<name>_scale_inv` blocks.
  void set_fp8(std::optional<io::Fp8BlockQuantization> quant) { fp8_ = quant; }
  // A matrix for kernels::linear in the compute dtype; Error if missing or misshaped. Block
  // types (q8_0 / q4_0 / q4_1) stay as stored (zero-copy) unless a weight_dtype is forced.
  Tensor matrix(const std::string& name, const Shape& expected);
  // What matrix() did with block-quantized matrices, for the load log: "30 q4_1, 1 q8_0
  // matrices run natively (AVX-512 VNNI block kernels)"; empty when there were none.
  std::string block_summary() const;
  // f32 copy of a small tensor (norm weights, biases).
  Tensor vector_f32(const std::string& name, const Shape& expected);
  // Checkpoint tensors no layer asked for (reported so silent mismatches are visible).
  std::vector<std::string> unused() const;
  // Marks every tensor whose name starts with `prefix` as deliberately unused (e.g. DeepSeek-V3's
  // multi-token-prediction layers); returns how many there were.
  int64_t skip_prefix(const std::string& prefix);
  // Marks one tensor as deliberately unused (another rank's expert); false when absent.
  bool skip(const std::string& name);
  const io::Checkpoint& checkpoint() const { return checkpoint_; }
  // The communicator MoE layers dispatch over (a SingleProcessCommunicator for one process),
  // one object shared by every layer.
  std::shared_ptr<parallel::Communicator> expert_group();
  // Whether every rank of the expert group runs the same tokens (MoeConfig::replicated_tokens).
  bool expert_tokens_replicated() const {
    return options_.parallel && options_.parallel->expert_tokens_replicated();
  }
  // Stored bytes of the tensors read so far (what this rank holds, for the load log; a fused
  // expert tensor counts whole even when only this rank's slice of it is used).
  int64_t loaded_bytes() const { return loaded_bytes_; }

 private:
  Tensor fetch(const std::string& name, const Shape& expected);
  const io::Checkpoint& checkpoint_;
  LoadOptions options_;
  std::optional<io::Fp8BlockQuantization> fp8_;
  std::set<std::string> used_;
  std::shared_ptr<parallel::Communicator> expert_group_;
  int64_t loaded_bytes_ = 0;
  std::map<std::string, int64_t> native_blocks_;       // dtype name -> matrices kept in blocks
  std::map<std::string, int64_t> dequantized_blocks_;  // ... dequantized by weight_dtype
};

}  // namespace deepinfer::model
