#pragma once
// The pre-norm decoder every served family shares: embedding, N x [RMSNorm, attention,
// residual, RMSNorm, feed-forward, residual], final RMSNorm, lm_head (optionally tied).
// A family is a DecoderSpec: which attention and feed-forward each layer gets (GQA or
// MLA; dense MLP or MoE), the rope table width, and GLM-4's extra "sandwich" norms.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "model/layers/attention_layer.h"
#include "model/layers/embedding.h"
#include "model/layers/feed_forward.h"
#include "model/layers/linear.h"
#include "model/layers/rms_norm.h"
#include "model/layers/rotary_embedding.h"

namespace deepinfer::model {

struct DecoderSpec {
  int64_t rotary_dim = 0;  // width of the rope tables handed to every attention layer
  KvLayout kv_layout;
  // Build layer i's blocks from tensors under `prefix` ("model.layers.i").
  std::function<std::unique_ptr<AttentionLayer>(WeightLoader&, const std::string& prefix,
                                                int64_t layer)>
      attention;
  std::function<std::unique_ptr<FeedForward>(WeightLoader&, const std::string& prefix,
                                             int64_t layer)>
      feed_forward;
  // GLM-4: RMSNorm on the attention and MLP outputs before each residual add
  // (post_self_attn_layernorm / post_mlp_layernorm).
  bool sandwich_norms = false;
  // Tensor names of the norms around attention/MLP (GLM and Qwen use the same ones).
  std::string input_norm = "input_layernorm";
  std::string post_attention_norm = "post_attention_layernorm";
};

class TransformerDecoder : public CausalLM {
 public:
  TransformerDecoder(const io::ModelConfig& config, WeightLoader& weights, DecoderSpec spec);

  const io::ModelConfig& config() const override { return config_; }
  KvLayout kv_layout() const override { return spec_.kv_layout; }
  void forward(const ForwardBatch& batch, cache::KvCache& cache, float* logits,
               ThreadPool& pool) override;
  std::vector<std::vector<uint64_t>> expert_load() const override;
  void reset_expert_load() override;

 private:
  struct Layer {
    RmsNorm input_norm;
    std::unique_ptr<AttentionLayer> attention;
    RmsNorm post_attention_norm;
    std::unique_ptr<FeedForward> feed_forward;
    RmsNorm post_self_attn_norm;  // sandwich norms only
    RmsNorm post_mlp_norm;
  };

  io::ModelConfig config_;
  DecoderSpec spec_;
  Embedding embedding_;
  std::vector<Layer> layers_;
  RmsNorm final_norm_;
  LmHead lm_head_;
  std::unique_ptr<RotaryEmbedding> rope_;
};

}  // namespace deepinfer::model
