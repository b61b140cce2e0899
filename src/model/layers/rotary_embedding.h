#pragma once
// Rotary position embedding tables for every rope_type the served configs use, following
// transformers' modeling_rope_utils: default, linear, yarn (with its attention factor,
// which scales cos and sin), llama3. "dynamic" NTK depends on the batch's longest
// sequence in transformers, which no batch-invariant engine can reproduce: rejected.
#include <cstdint>
#include <vector>

#include "io/hf_config.h"

namespace deepinfer::model {

class RotaryEmbedding {
 public:
  // rotary_dim: the rotated features per head (head_dim * partial_rotary_factor).
  RotaryEmbedding(const io::ModelConfig& config, int64_t rotary_dim);

  int64_t rotary_dim() const { return rotary_dim_; }
  float attention_scaling() const { return attention_scaling_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  // cos/sin [n, rotary_dim / 2] for each position, already multiplied by attention_scaling.
  void compute(const int32_t* positions, int64_t n, float* cos, float* sin) const;

 private:
  int64_t rotary_dim_;
  std::vector<float> inv_freq_;
  float attention_scaling_ = 1.0f;
};

}  // namespace deepinfer::model
