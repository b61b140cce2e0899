#include "model/layers/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/scratch.h"

namespace deepinfer::model {

int64_t kv_heads_per_rank(int64_t heads, int64_t kv_heads, int64_t tp) {
  DI_CHECK(heads % tp == 0, "tensor parallel size ", tp, " does not divide num_attention_heads ",
           heads, ": every rank must hold the same number of heads");
  if (kv_heads % tp == 0) return kv_heads / tp;
  DI_CHECK(tp % kv_heads == 0, "tensor parallel size ", tp, " and num_key_value_heads ", kv_heads,
           ": the KV heads must split evenly (tp divides them) or be replicated (they divide tp)");
  return 1;
}

std::unique_ptr<GqaAttention> GqaAttention::load(WeightLoader& weights, const std::string& prefix,
                                                 const AttentionShape& shape,
                                                 const GqaTensors& tensors, double norm_eps) {
  auto attn = std::make_unique<GqaAttention>();
  const TensorSplit split = TensorSplit::over(weights.tensor_group());
  const int64_t local_kv = kv_heads_per_rank(shape.heads, shape.kv_heads, split.size);
  const int64_t local_heads = shape.heads / split.size;
  const int64_t hd = shape.head_dim;
  const int64_t q_begin = split.rank * local_heads;
  // Query head h reads KV head h / (heads / kv_heads): the first of mine decides where my
  // KV heads start (replicated ones included).
  const int64_t kv_begin = q_begin / (shape.heads / shape.kv_heads);
  attn->shape_ = shape;
  attn->shape_.heads = local_heads;
  attn->shape_.kv_heads = local_kv;
  attn->attend_ = kernels::paged_attention_kernel(weights.fused_attention());
  const int64_t q_width = shape.heads * hd;
  const int64_t kv_width = shape.kv_heads * hd;
  const bool qkv_bias = tensors.qkv_bias;
  attn->q_proj_ = load_column_parallel(weights, prefix + ".q_proj", shape.hidden, q_width, qkv_bias,
                                       q_begin * hd, (q_begin + local_heads) * hd);
  attn->k_proj_ = load_column_parallel(weights, prefix + ".k_proj", shape.hidden, kv_width,
                                       qkv_bias, kv_begin * hd, (kv_begin + local_kv) * hd);
  attn->v_proj_ = load_column_parallel(weights, prefix + ".v_proj", shape.hidden, kv_width,
                                       qkv_bias, kv_begin * hd, (kv_begin + local_kv) * hd);
  attn->o_proj_ =
      RowParallelLinear::load(weights, prefix + ".o_proj", q_width, shape.hidden, tensors.o_bias,
                              q_begin * hd, (q_begin + local_heads) * hd, split);
  if (tensors.qk_norm == QkNorm::per_head) {
    attn->q_norm_ = RmsNorm::load(weights, prefix + ".q_norm.weight", shape.head_dim, norm_eps);
    attn->k_norm_ = RmsNorm::load(weights, prefix + ".k_norm.weight", shape.head_dim, norm_eps);
  } else if (tensors.qk_norm == QkNorm::whole_projection) {
    attn->q_row_norm_ =
        SplitRmsNorm::load(weights, prefix + ".q_norm.weight", q_width, q_begin * hd,
                           (q_begin + local_heads) * hd, norm_eps, split.reduce);
    // KV heads replicated over tp / kv_heads ranks (kv_heads < tp): only the first rank of
    // each replica set adds its squares, so every KV head counts once.
    const int64_t replicas = split.size / std::min(split.size, shape.kv_heads);
    attn->k_row_norm_ = SplitRmsNorm::load(weights, prefix + ".k_norm.weight", kv_width,
                                           kv_begin * hd, (kv_begin + local_kv) * hd, norm_eps,
                                           split.reduce, split.rank % replicas == 0);
  }
  return attn;
}

void GqaAttention::forward(const float* x, const ForwardBatch& batch, const float* cos,
                           const float* sin, cache::KvCache& cache, int64_t layer, float* out,
                           ThreadPool& pool) const {
  const auto tokens = static_cast<int64_t>(batch.tokens.size());
  const int64_t q_width = shape_.heads * shape_.head_dim;
  const int64_t kv_width = shape_.kv_heads * shape_.head_dim;
  auto q = ScratchFloats::uninitialized(static_cast<size_t>(tokens * q_width));
  auto k = ScratchFloats::uninitialized(static_cast<size_t>(tokens * kv_width));
  auto v = ScratchFloats::uninitialized(static_cast<size_t>(tokens * kv_width));
  const Linear* projections[] = {&q_proj_, &k_proj_, &v_proj_};
  float* outputs[] = {q.data(), k.data(), v.data()};
  forward_same_input(projections, x, tokens, outputs, pool);
  if (q_norm_) {
    q_norm_->forward(q.data(), tokens * shape_.heads, q.data());
    k_norm_->forward(k.data(), tokens * shape_.kv_heads, k.data());
  } else if (q_row_norm_) {
    q_row_norm_->forward(q.data(), tokens, q.data());
    k_row_norm_->forward(k.data(), tokens, k.data());
  }
  kernels::rope(q.data(), tokens, shape_.heads, shape_.head_dim, shape_.rotary_dim, cos, sin,
                shape_.rope_layout);
  kernels::rope(k.data(), tokens, shape_.kv_heads, shape_.head_dim, shape_.rotary_dim, cos, sin,
                shape_.rope_layout);

  ScratchFloats attended(static_cast<size_t>(tokens * q_width));
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
