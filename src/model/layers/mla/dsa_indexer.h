#pragma once
// DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2, GLM-5), as transformers'
// DeepseekV32Indexer computes it, for one MLA layer:
//   q_I  = wq_b(q_resid) per head [rope | pass] (q_resid: the MLA's q_a_layernorm output)
//   k_I  = LayerNorm(wk(x)) [rope | pass], one key per token shared by the heads
//   the first rope_dim features of q_I and k_I rotate with the layer's rope tables
//   w    = weights_proj(x) * heads^-0.5
//   I[t, j] = sum_h w[t, h] * relu(q_I[t, h] . k_I[j] / sqrt(head_dim)),  j <= position of t
// and token t attends only to its index_topk best positions. The keys live in the paged KV
// cache beside the latent (KvCache::write_index), so decode reads one narrow row per past token
// here and at most index_topk latent rows in attention: the cost of attention stops growing with
// the context. A token whose causal context is at most index_topk selects every position, and
// then attends densely (the same result, by construction).
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/layers/linear.h"
#include "model/weights.h"

namespace deepinfer::cache {
class KvCache;
}

namespace deepinfer::model {

struct DsaShape {
  int64_t hidden = 0;
  int64_t q_lora_rank = 0;
  int64_t heads = 0;     // index_n_heads
  int64_t head_dim = 0;  // index_head_dim
  int64_t rope_dim = 0;  // qk_rope_head_dim: the rotated leading features of each head
  int64_t topk = 0;      // index_topk
  kernels::RopeLayout rope_layout = kernels::RopeLayout::half_split;  // V3.2; GLM-5 interleaves
};

// The positions each token of a batch attends to: token t's are positions[offsets[t],
// offsets[t + 1]) in ascending order; none means its whole causal context (dense). Written by
// an indexer layer, read by it and by GLM-5's "shared" layers after it in the same step.
struct DsaSelection {
  std::vector<int64_t> offsets;
  std::vector<int32_t> positions;
  const ForwardBatch* batch = nullptr;  // the step it was made for

  bool sparse(int64_t token) const {
    return offsets[static_cast<size_t>(token) + 1] > offsets[static_cast<size_t>(token)];
  }
};

class DsaIndexer {
 public:
  // <prefix>.{wq_b, wk, k_norm (weight, bias), weights_proj}; replicated on every tensor
  // parallel rank (the keys are per token, like MLA's latent).
  static std::unique_ptr<DsaIndexer> load(WeightLoader& weights, const std::string& prefix,
                                          const DsaShape& shape);

  // x [tokens, hidden] (the layer input), q_resid [tokens, q_lora_rank]; cos/sin as MLA's.
  // Writes every new token's key to the cache, then selects for each token whose context
  // exceeds topk.
  void forward(const float* x, const float* q_resid, const ForwardBatch& batch, const float* cos,
               const float* sin, cache::KvCache& cache, int64_t layer, DsaSelection& selection,
               ThreadPool& pool) const;

  const DsaShape& shape() const { return shape_; }

 private:
  DsaShape shape_;
  Linear wq_b_, wk_, weights_proj_;
  Tensor k_norm_weight_, k_norm_bias_;
};

}  // namespace deepinfer::model
