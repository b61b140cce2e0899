#pragma once
// Grouped-query self-attention (MHA when kv_heads == heads) over the paged KV cache:
// q/k/v projections (optional bias), optional per-head q/k RMSNorm (Qwen3), RoPE,
// cache write, paged attention per sequence, output projection (optional bias).
#include <memory>
#include <optional>
#include <string>

#include "cache/kv_cache.h"
#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/layers/attention_layer.h"
#include "model/layers/linear.h"
#include "model/layers/rms_norm.h"
#include "model/layers/tensor_parallel.h"

namespace deepinfer::model {

struct AttentionShape {
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // <= head_dim (partial rotary)
  kernels::RopeLayout rope_layout = kernels::RopeLayout::half_split;
};

// Tensor parallelism splits the heads: rank r of tp holds query heads [r h / tp, (r + 1) h / tp)
// and the KV heads they read: kv_heads / tp of them when tp divides kv_heads, else (kv_heads <
// tp, tp % kv_heads == 0) the one KV head its query heads share, replicated on tp / kv_heads
// ranks. Any other pairing is refused naming the numbers.
int64_t kv_heads_per_rank(int64_t heads, int64_t kv_heads, int64_t tp);

// The optional tensors of a GQA layer, beyond the four projection weights.
struct GqaTensors {
  bool qkv_bias = false;  // q/k/v_proj.bias (Qwen2, GLM, Llama's attention_bias)
  bool o_bias = false;    // o_proj.bias (Llama's attention_bias)
  bool qk_norm = false;   // per-head q_norm / k_norm RMSNorm before RoPE (Qwen3)
};

class GqaAttention : public AttentionLayer {
 public:
  // Loads <prefix>.{q,k,v,o}_proj (+ biases and q_norm/k_norm as `tensors` says): this
  // rank's heads of the loader's tensor group (o_proj row parallel over it).
  static std::unique_ptr<GqaAttention> load(WeightLoader& weights, const std::string& prefix,
                                            const AttentionShape& shape, const GqaTensors& tensors,
                                            double norm_eps);

  void forward(const float* x, const ForwardBatch& batch, const float* cos, const float* sin,
               cache::KvCache& cache, int64_t layer, float* out, ThreadPool& pool) const override;

 private:
  AttentionShape shape_;  // this rank's heads and KV heads
  Linear q_proj_, k_proj_, v_proj_;
  RowParallelLinear o_proj_;
  std::optional<RmsNorm> q_norm_, k_norm_;
};

}  // namespace deepinfer::model
