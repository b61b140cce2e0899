#pragma once
// The Llama-shaped dense decoder that Qwen2/2.5 and Qwen3 share: embedding, N x
// [RMSNorm, GQA attention, residual, RMSNorm, SwiGLU MLP, residual], final RMSNorm,
// lm_head (optionally tied to the embedding). Families differ only in DenseDecoderOptions.
#include <memory>
#include <vector>

#include "model/causal_lm.h"
#include "model/layers/attention.h"
#include "model/layers/embedding.h"
#include "model/layers/gated_mlp.h"
#include "model/layers/rotary_embedding.h"

namespace deepinfer::model {

struct DenseDecoderOptions {
  bool qkv_bias = false;  // Qwen2: always on
  bool qk_norm = false;   // Qwen3: per-head RMSNorm on q and k before RoPE
};

class DenseDecoder : public CausalLM {
 public:
  DenseDecoder(const io::ModelConfig& config, WeightLoader& weights, DenseDecoderOptions options);

  const io::ModelConfig& config() const override { return config_; }
  KvLayout kv_layout() const override;
  void forward(const ForwardBatch& batch, cache::KvCache& cache, float* logits,
               ThreadPool& pool) override;

 private:
  struct Layer {
    RmsNorm input_norm;
    GqaAttention attention;
    RmsNorm post_attention_norm;
    GatedMlp mlp;
  };

  io::ModelConfig config_;
  AttentionShape shape_;
  Embedding embedding_;
  std::vector<Layer> layers_;
  RmsNorm final_norm_;
  Linear lm_head_;
  std::unique_ptr<RotaryEmbedding> rope_;
};

}  // namespace deepinfer::model
