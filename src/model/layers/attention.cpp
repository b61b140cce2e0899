#include "model/layers/attention.h"

#include <cmath>
#include <vector>

namespace deepinfer::model {

std::unique_ptr<GqaAttention> GqaAttention::load(WeightLoader& weights, const std::string& prefix,
                                                 const AttentionShape& shape,
                                                 const GqaTensors& tensors, double norm_eps) {
  auto attn = std::make_unique<GqaAttention>();
  attn->shape_ = shape;
  attn->attend_ = kernels::paged_attention_kernel(weights.fused_attention());
  const int64_t q_width = shape.heads * shape.head_dim;
  const int64_t kv_width = shape.kv_heads * shape.head_dim;
  const bool qkv_bias = tensors.qkv_bias;
  attn->q_proj_ = Linear::load(weights, prefix + ".q_proj", shape.hidden, q_width, qkv_bias);
  attn->k_proj_ = Linear::load(weights, prefix + ".k_proj", shape.hidden, kv_width, qkv_bias);
  attn->v_proj_ = Linear::load(weights, prefix + ".v_proj", shape.hidden, kv_width, qkv_bias);
  attn->o_proj_ = Linear::load(weights, prefix + ".o_proj", q_width, shape.hidden, tensors.o_bias);
  if (tensors.qk_norm) {
    attn->q_norm_ = RmsNorm::load(weights, prefix + ".q_norm.weight", shape.head_dim, norm_eps);
    attn->k_norm_ = RmsNorm::load(weights, prefix + ".k_norm.weight", shape.head_dim, norm_eps);
  }
  return attn;
}

void GqaAttention::forward(const float* x, const ForwardBatch& batch, const float* cos,
                           const float* sin, cache::KvCache& cache, int64_t layer, float* out,
                           ThreadPool& pool) const {
  const auto tokens = static_cast<int64_t>(batch.tokens.size());
  const int64_t q_width = shape_.heads * shape_.head_dim;
  const int64_t kv_width = shape_.kv_heads * shape_.head_dim;
  std::vector<float> q(static_cast<size_t>(tokens * q_width));
  std::vector<float> k(static_cast<size_t>(tokens * kv_width));
  std::vector<float> v(static_cast<size_t>(tokens * kv_width));
  q_proj_.forward(x, tokens, q.data(), pool);
  k_proj_.forward(x, tokens, k.data(), pool);
  v_proj_.forward(x, tokens, v.data(), pool);
  if (q_norm_) {
    q_norm_->forward(q.data(), tokens * shape_.heads, q.data());
    k_norm_->forward(k.data(), tokens * shape_.kv_heads, k.data());
  }
  kernels::rope(q.data(), tokens, shape_.heads, shape_.head_dim, shape_.rotary_dim, cos, sin,
                shape_.rope_layout);
  kernels::rope(k.data(), tokens, shape_.kv_heads, shape_.head_dim, shape_.rotary_dim, cos, sin,
                shape_.rope_layout);

  std::vector<float> attended(static_cast<size_t>(tokens * q_width));
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape_.head_dim));
  for (const auto& seq : batch.sequences) {
    const int32_t* positions = batch.positions.data() + seq.begin;
    cache.write(layer, seq.block_table, positions, seq.count, k.data() + seq.begin * kv_width,
                v.data() + seq.begin * kv_width);
    attend_(q.data() + seq.begin * q_width, seq.count, positions, shape_.heads,
            cache.view(layer, seq.block_table), scale, attended.data() + seq.begin * q_width, pool);
  }
  o_proj_.forward(attended.data(), tokens, out, pool);
}

}  // namespace deepinfer::model
