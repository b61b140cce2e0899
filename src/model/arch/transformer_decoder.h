#pragma once
// The pre-norm decoder every served family shares: embedding, N x [RMSNorm, attention,
// residual, RMSNorm, feed-forward, residual], final RMSNorm, lm_head (optionally tied).
// A family is a DecoderSpec: which attention and feed-forward each layer gets (GQA or
// MLA; dense MLP or MoE), the rope table width, and GLM-4's extra "sandwich" norms.
//
// Pipeline parallelism (the loader's ParallelContext, pipeline size > 1): this rank loads and
// runs only its stage's layers (parallel/pipeline_split.h); the first stage embeds, the
// others receive the hidden states from the stage before over the pipeline group; the last
// stage holds the final norm and lm_head and sends the step's logits back to the first. The
// KV cache of a stage holds only its layers (kv_layout().num_layers). With micro-batches
// (LoadOptions::num_micro_batches) the step's sequences travel the stages in parts, so stage
// s computes part j while stage s + 1 computes part j - 1.
#include <chrono>
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
#include "model/micro_batches.h"
#include "parallel/communicator.h"
#include "parallel/pipeline_split.h"

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
  ~TransformerDecoder() override;  // logs a pipeline stage's compute / wait time

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

  bool first_stage() const { return stage_ == 0; }
  bool last_stage() const { return stage_ == stages_ - 1; }
  // One micro-batch (or the whole step) through this stage: embed or receive, the layers,
  // then send on, or (last stage) the logits of its logit rows.
  void forward_part(const ForwardBatch& batch, cache::KvCache& cache, float* logits,
                    ThreadPool& pool);
  void run_layers(const ForwardBatch& batch, cache::KvCache& cache, std::vector<float>& residual,
                  ThreadPool& pool);
  void compute_logits(const ForwardBatch& batch, const std::vector<float>& residual, float* logits,
                      ThreadPool& pool);

  // Seconds this stage spent computing and waiting on its neighbours (send / recv).
  struct StageTimes {
    double compute = 0;
    double wait = 0;
    int64_t steps = 0;
  };

  io::ModelConfig config_;
  DecoderSpec spec_;
  parallel::LayerRange layer_range_;  // the decoder layers this rank holds
  int64_t stage_ = 0;
  int64_t stages_ = 1;
  int64_t num_micro_batches_ = 1;
  std::shared_ptr<parallel::Communicator> pipeline_;  // pipeline rank = stage
  StageTimes times_;
  Embedding embedding_;
  std::vector<Layer> layers_;  // layers_[i] is decoder layer layer_range_.begin + i
  RmsNorm final_norm_;
  LmHead lm_head_;
  std::unique_ptr<RotaryEmbedding> rope_;
};

}  // namespace deepinfer::model
