#pragma once
// Grouped-query self-attention (MHA when kv_heads == heads) over the paged KV cache:
// q/k/v projections (optional bias), optional q/k RMSNorm (per head: Qwen3; over the whole
// projection: MiniMax-M2), RoPE, cache write, paged attention per sequence, output projection
// (optional bias).
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

// The q_norm / k_norm RMSNorm applied to the q and k projections before RoPE.
enum class QkNorm {
  none,
  per_head,  // weights [head_dim]: each head normalised apart (Qwen3, GLM-4.5's use_qk_norm)
  // weights [heads * head_dim] / [kv_heads * head_dim]: one RMS over all heads of a token
  // (MiniMax-M2). Under tensor parallelism each rank holds its heads' part of the row and the
  // sum of squares is all-reduced over the tensor group (SplitRmsNorm).
  whole_projection,
};

// The optional tensors of a GQA layer, beyond the four projection weights.
struct GqaTensors {
  bool qkv_bias = false;  // q/k/v_proj.bias (Qwen2, GLM, Llama's attention_bias)
  bool o_bias = false;    // o_proj.bias (Llama's attention_bias)
  QkNorm qk_norm = QkNorm::none;
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
  AttentionShape shape_;                                          // this rank's heads and KV heads
  kernels::PagedAttentionFn attend_ = &kernels::paged_attention;  // enable_atb_attention
  Linear q_proj_, k_proj_, v_proj_;
  RowParallelLinear o_proj_;
  std::optional<RmsNorm> q_norm_, k_norm_;               // QkNorm::per_head
  std::optional<SplitRmsNorm> q_row_norm_, k_row_norm_;  // QkNorm::whole_projection
};

}  // namespace deepinfer::model
