#pragma once
// Multi-head Latent Attention (DeepSeek-V2 / V3), as transformers' DeepseekV2Attention /
// DeepseekV3Attention compute it:
//   q      = q_b_proj(q_a_layernorm(q_a_proj(x)))   (or q_proj(x) without q LoRA)
//            per head [qk_nope | qk_rope]
//   kv_a   = kv_a_proj_with_mqa(x) = [latent (kv_lora_rank) | k_pe (qk_rope_head_dim)]
//   c      = kv_a_layernorm(latent);  q_pe, k_pe roped (k_pe is one head shared by all)
//   kv_b_proj(c) per head = [k_nope (qk_nope) | v (v_head_dim)] = [W_UK c | W_UV c]
//   attention with key [k_nope | k_pe], scale qk_head_dim^-0.5 (x mscale^2 under yarn), o_proj.
//
// The KV cache keeps only [c | roped k_pe] per token and layer (kv_heads 1, head_dim
// kv_lora_rank + qk_rope_head_dim, no V): the compression MLA exists for. Two equal forms:
//   expanded  kv_b_proj over the cached latents of the attended range gives per-head K/V, then
//             ordinary attention. Costs ~context x kv_lora x heads x (nope + v) per chunk:
//             good when many new tokens share that cost (long prefill).
//   absorbed  q_nope . k_nope = (W_UK^T q_nope) . c, so each head's query is moved into latent
//             space and attends directly over the cached rows [c | k_pe] (MQA, one KV head);
//             the result, a latent, goes through W_UV. No per-token expansion: decode.
// Tensor parallelism splits the heads: q_proj / q_b_proj and kv_b_proj keep this rank's heads
// rows, o_proj is row parallel; q_a_proj, kv_a_proj_with_mqa and their norms are per token and
// replicated, so the cache ([c | k_pe]) is the same on every rank, and both forms run on the
// local heads unchanged.
// The form is chosen per sequence per call from a cost estimate (MlaForm::automatic), or
// forced (tests, benchmarks). The forms agree to rounding; a sequence's result therefore
// depends on how its prompt was chunked only through that choice, never on other sequences.
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "kernels/kernels.h"
#include "model/layers/attention_layer.h"
#include "model/layers/linear.h"
#include "model/layers/mla/dsa_indexer.h"
#include "model/layers/rms_norm.h"
#include "model/layers/tensor_parallel.h"
#include "model/weights.h"

namespace deepinfer::model {

enum class MlaForm { automatic, expanded, absorbed };

struct MlaShape {
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t q_lora_rank = 0;  // 0: no q LoRA (q_proj), as in DeepSeek-V2-Lite
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool bias = false;  // attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj
  kernels::RopeLayout rope_layout = kernels::RopeLayout::interleaved;
  float softmax_scale = 1.0f;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t cache_width() const { return kv_lora_rank + qk_rope_head_dim; }
};

// DeepSeek Sparse Attention of one layer (dsa_indexer.h): its own indexer, or (GLM-5's
// "shared" layers) none, reusing what the layer before chose for the same step. Both hold the
// model's one selection. Without a selection the layer is dense MLA.
struct MlaSparsity {
  std::optional<DsaShape> indexer;
  std::shared_ptr<DsaSelection> selection;
};

// Largest per-head K/V expansion (bytes, whole context) the automatic choice allows.
inline constexpr int64_t kMaxExpandedBytes = int64_t{512} << 20;

// The form `automatic` picks for `tokens` new tokens of a sequence attending to `context`
// positions (the new ones included): the one with fewer multiply-adds, unless expanding the
// context would take more than kMaxExpandedBytes.
MlaForm choose_mla_form(const MlaShape& shape, int64_t tokens, int64_t context);

// Sparse attention rows of one sequence's tokens (DSA): the step's selection and the batch row
// of the first of them; no selection: dense.
struct MlaSparseRows {
  const DsaSelection* selection = nullptr;
  int64_t first_token = 0;
};

class MlaAttention : public AttentionLayer {
 public:
  // The absorbed form's per-head matrices: head h's rows x cols matrix at base + h * head_bytes.
  struct PerHead {
    const char* base;
    size_t head_bytes;
    DType dtype;
  };
  // Loads <prefix>.{q_proj | q_a_proj, q_a_layernorm, q_b_proj}, kv_a_proj_with_mqa,
  // kv_a_layernorm, kv_b_proj, o_proj: this rank's heads of the loader's tensor group.
  static std::unique_ptr<MlaAttention> load(WeightLoader& weights, const std::string& prefix,
                                            const MlaShape& shape, MlaForm form,
                                            MlaSparsity sparsity = {});

  // cos/sin: [tokens, qk_rope_head_dim / 2]. Writes [c | k_pe] of the new tokens to the cache.
  void forward(const float* x, const ForwardBatch& batch, const float* cos, const float* sin,
               cache::KvCache& cache, int64_t layer, float* out, ThreadPool& pool) const override;

  const MlaShape& shape() const { return shape_; }

 private:
  // q [tokens, heads, qk_head] with q_pe roped; kv [tokens, cache_width] = [c | roped k_pe].
  // q_resid (optional, [tokens, q_lora_rank]): keeps q_a_layernorm's output for the indexer.
  void project(const float* x, int64_t tokens, const float* cos, const float* sin, float* q,
               float* kv, float* q_resid, ThreadPool& pool) const;
  // Both write attended [tokens, heads, v_head_dim] for one sequence's new tokens.
  void attend_expanded(const float* q, int64_t tokens, const int32_t* positions,
                       const cache::KvCache& cache, int64_t layer,
                       std::span<const int32_t> block_table, float* attended,
                       ThreadPool& pool) const;
  void attend_absorbed(const float* q, int64_t tokens, const int32_t* positions,
                       const cache::KvCache& cache, int64_t layer,
                       std::span<const int32_t> block_table, float* attended, ThreadPool& pool,
                       MlaSparseRows sparse = {}) const;
  // The latent-space attention of attend_absorbed: dense, or per token over its selection.
  void attend_latent(const float* q_latent, int64_t tokens, const int32_t* positions,
                     const kernels::PagedKv& kv, float* out_latent, ThreadPool& pool,
                     MlaSparseRows sparse) const;
  PerHead w_uk_t() const;
  PerHead w_uv() const;  // w_uv_, or the W_UV rows of kv_b_proj

  MlaShape shape_;         // heads: this rank's
  int64_t all_heads_ = 0;  // of the layer: the form choice is every rank's, and one process's
  kernels::PagedAttentionFn attend_ = &kernels::paged_attention;  // enable_atb_attention
  MlaForm form_ = MlaForm::automatic;
  std::optional<Linear> q_proj_;  // no q LoRA
  std::optional<Linear> q_a_proj_, q_b_proj_;
  std::optional<RmsNorm> q_a_norm_;
  Linear kv_a_proj_;
  RmsNorm kv_a_norm_;
  Linear kv_b_proj_;  // [heads * (nope + v), kv_lora]: per head W_UK rows then W_UV rows
  // W_UK transposed per head ([heads * kv_lora, nope]; absorbed queries) and, where a GGUF file
  // stores them in a block type, its attn_k_b as stored and its attn_v_b (W_UV per head,
  // [heads * v, kv_lora]; else empty: W_UV is read from kv_b_proj).
  Tensor w_uk_t_;
  Tensor w_uv_;
  RowParallelLinear o_proj_;
  std::unique_ptr<DsaIndexer> indexer_;
  std::shared_ptr<DsaSelection> selection_;  // DSA layers only
};

}  // namespace deepinfer::model
