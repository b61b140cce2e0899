#include "model/layers/mla/dsa_indexer.h"

#include <cmath>

#include "cache/kv_cache.h"
#include "core/error.h"
#include "core/scratch.h"
#include "kernels/lightning_index.h"

namespace deepinfer::model {
namespace {

// transformers: nn.LayerNorm(index_head_dim, eps=1e-6).
constexpr float kKeyNormEps = 1e-6f;

}  // namespace

std::unique_ptr<DsaIndexer> DsaIndexer::load(WeightLoader& weights, const std::string& prefix,
                                             const DsaShape& shape) {
  DI_CHECK(shape.heads > 0 && shape.head_dim > 0 && shape.topk > 0 && shape.q_lora_rank > 0, prefix,
           ": invalid indexer geometry (index_n_heads, index_head_dim, index_topk and ",
           "q_lora_rank must be positive)");
  DI_CHECK(shape.rope_dim > 0 && shape.rope_dim % 2 == 0 && shape.rope_dim <= shape.head_dim,
           prefix, ": qk_rope_head_dim ", shape.rope_dim,
           " must be even and fit in index_head_dim ", shape.head_dim);
  auto indexer = std::make_unique<DsaIndexer>();
  indexer->shape_ = shape;
  indexer->wq_b_ = Linear::load(weights, prefix + ".wq_b", shape.q_lora_rank,
                                shape.heads * shape.head_dim, false);
  indexer->wk_ = Linear::load(weights, prefix + ".wk", shape.hidden, shape.head_dim, false);
  indexer->weights_proj_ =
      Linear::load(weights, prefix + ".weights_proj", shape.hidden, shape.heads, false);
  indexer->k_norm_weight_ = weights.vector_f32(prefix + ".k_norm.weight", {shape.head_dim});
  indexer->k_norm_bias_ = weights.vector_f32(prefix + ".k_norm.bias", {shape.head_dim});
  return indexer;
}

void DsaIndexer::forward(const float* x, const float* q_resid, const ForwardBatch& batch,
                         const float* cos, const float* sin, cache::KvCache& cache, int64_t layer,
                         DsaSelection& selection, ThreadPool& pool) const {
  const auto& s = shape_;
  const auto tokens = static_cast<int64_t>(batch.tokens.size());
  const int64_t dim = s.head_dim;
  const int64_t rope_half = s.rope_dim / 2;

  // Keys and head weights of every new token (wk and weights_proj share x).
  ScratchFloats keys(static_cast<size_t>(tokens * dim));
  ScratchFloats weights(static_cast<size_t>(tokens * s.heads));
  const Linear* projections[] = {&wk_, &weights_proj_};
  float* outputs[] = {keys.data(), weights.data()};
  forward_same_input(projections, x, tokens, outputs, pool);
  kernels::layer_norm(keys.data(), k_norm_weight_.data<float>(), k_norm_bias_.data<float>(), tokens,
                      dim, kKeyNormEps, keys.data());
  kernels::rope(keys.data(), tokens, 1, dim, s.rope_dim, cos, sin, s.rope_layout);
  for (const auto& seq : batch.sequences) {
    if (seq.count == 0) continue;
    cache.write_index(layer, seq.block_table, batch.positions.data() + seq.begin, seq.count,
                      keys.data() + seq.begin * dim);
  }

  // Which tokens choose (in batch order): those whose causal context exceeds topk.
  std::vector<int64_t> sequence_of(static_cast<size_t>(tokens), -1);
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const auto& seq = batch.sequences[i];
    for (int64_t t = seq.begin; t < seq.begin + seq.count; ++t)
      sequence_of[static_cast<size_t>(t)] = static_cast<int64_t>(i);
  }
  std::vector<int64_t> choosing;
  selection.batch = &batch;
  selection.offsets.assign(static_cast<size_t>(tokens) + 1, 0);
  for (int64_t t = 0; t < tokens; ++t) {
    const bool chooses = sequence_of[static_cast<size_t>(t)] >= 0 &&
                         batch.positions[static_cast<size_t>(t)] + 1 > s.topk;
    if (chooses) choosing.push_back(t);
    selection.offsets[static_cast<size_t>(t) + 1] =
        selection.offsets[static_cast<size_t>(t)] + (chooses ? s.topk : 0);
  }
  selection.positions.resize(choosing.size() * static_cast<size_t>(s.topk));
  if (choosing.empty()) return;

  // Queries of the choosing tokens only.
  const auto n = static_cast<int64_t>(choosing.size());
  ScratchFloats resid(static_cast<size_t>(n * s.q_lora_rank));
  ScratchFloats chosen_cos(static_cast<size_t>(n * rope_half));
  ScratchFloats chosen_sin(static_cast<size_t>(n * rope_half));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = choosing[static_cast<size_t>(i)];
    std::copy_n(q_resid + t * s.q_lora_rank, s.q_lora_rank, &resid[i * s.q_lora_rank]);
    std::copy_n(cos + t * rope_half, rope_half, &chosen_cos[i * rope_half]);
    std::copy_n(sin + t * rope_half, rope_half, &chosen_sin[i * rope_half]);
  }
  ScratchFloats queries(static_cast<size_t>(n * s.heads * dim));
  wq_b_.forward(resid.data(), n, queries.data(), pool);
  kernels::rope(queries.data(), n, s.heads, dim, s.rope_dim, chosen_cos.data(), chosen_sin.data(),
                s.rope_layout);

  const float head_weight = 1.0f / std::sqrt(static_cast<float>(s.heads));
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  std::vector<float> w(static_cast<size_t>(s.heads));
  int64_t max_context = 0;
  for (int64_t t : choosing)
    max_context = std::max<int64_t>(max_context, batch.positions[static_cast<size_t>(t)] + 1);
  std::vector<float> scores(static_cast<size_t>(max_context));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = choosing[static_cast<size_t>(i)];
    const auto& seq = batch.sequences[static_cast<size_t>(sequence_of[static_cast<size_t>(t)])];
    const int64_t context = batch.positions[static_cast<size_t>(t)] + 1;
    for (int64_t h = 0; h < s.heads; ++h)
      w[static_cast<size_t>(h)] = weights[t * s.heads + h] * head_weight;
    kernels::lightning_index_scores(&queries[i * s.heads * dim], w.data(), s.heads, scale,
                                    cache.index_view(layer, seq.block_table), context,
                                    scores.data(), pool);
    kernels::top_k_positions(scores.data(), context, s.topk,
                             selection.positions.data() + i * s.topk);
  }
}

}  // namespace deepinfer::model
