#include "model/layers/mla/mla_attention.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/scratch.h"

namespace deepinfer::model {
namespace {

// transformers builds q_a_layernorm / kv_a_layernorm as DeepseekV2RMSNorm(rank) without
// passing config.rms_norm_eps, so they always use the default 1e-6 (as DeepSeek's own code).
constexpr double kLatentNormEps = 1e-6;

void copy_floats(float* dst, const float* src, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// y[h] = x[h] W_h^T for every head h: x [heads][tokens][cols], y [heads][tokens][rows], head
// h's rows x cols matrix at w.base + h * w.head_bytes. Block types run as one grouped call; the
// others take whole heads per thread, each head's product inline on its thread (a nested call),
// where there are at least as many heads as threads.
// Either way each head's result is what kernels::linear gives it alone.
void per_head_linear(const float* x, int64_t heads, int64_t tokens, int64_t cols,
                     const MlaAttention::PerHead& w, int64_t rows, float* y, ThreadPool& pool) {
  if (is_block_dtype(w.dtype)) {
    std::vector<kernels::LinearJob> jobs(static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h)
      jobs[static_cast<size_t>(h)] = {x + h * tokens * cols, tokens,
                                      w.base + static_cast<size_t>(h) * w.head_bytes,
                                      y + h * tokens * rows};
    kernels::linear_grouped(jobs, cols, w.dtype, rows, pool);
    return;
  }
  const auto heads_from = [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h)
      kernels::linear(x + h * tokens * cols, tokens, cols,
                      w.base + static_cast<size_t>(h) * w.head_bytes, w.dtype, rows, nullptr,
                      y + h * tokens * rows, pool);
  };
  // Fewer heads than threads (a tensor-parallel rank's few heads): each product gets the pool.
  if (heads < pool.size()) return heads_from(0, heads);
  pool.parallel_for(heads, heads_from);
}

}  // namespace

std::unique_ptr<MlaAttention> MlaAttention::load(WeightLoader& weights, const std::string& prefix,
                                                 const MlaShape& shape, MlaForm form,
                                                 MlaSparsity sparsity) {
  DI_CHECK(shape.heads > 0 && shape.kv_lora_rank > 0 && shape.qk_nope_head_dim > 0 &&
               shape.qk_rope_head_dim > 0 && shape.qk_rope_head_dim % 2 == 0 &&
               shape.v_head_dim > 0 && shape.q_lora_rank >= 0,
           prefix,
           ": invalid MLA geometry (heads, kv_lora_rank, qk_nope_head_dim, v_head_dim must "
           "be positive, qk_rope_head_dim positive and even)");
  auto attn = std::make_unique<MlaAttention>();
  const TensorSplit split = TensorSplit::over(weights.tensor_group());
  const auto [h0, h1] =
      split.part(shape.heads, prefix + "'s attention heads (num_attention_heads)");
  attn->shape_ = shape;
  attn->shape_.heads = h1 - h0;
  attn->all_heads_ = shape.heads;
  attn->form_ = form;
  attn->selection_ = std::move(sparsity.selection);
  if (sparsity.indexer) {
    DI_CHECK(shape.q_lora_rank > 0, prefix,
             ": sparse attention's indexer reads the q LoRA latent, but q_lora_rank is absent");
    DI_CHECK(attn->selection_ != nullptr, prefix, ": an indexer layer needs the model's selection");
    attn->indexer_ = DsaIndexer::load(weights, prefix + ".indexer", *sparsity.indexer);
  }
  attn->attend_ = kernels::paged_attention_kernel(weights.fused_attention());
  const int64_t qk = shape.qk_head_dim();
  const int64_t q_width = shape.heads * qk;
  if (shape.q_lora_rank > 0) {
    attn->q_a_proj_ =
        Linear::load(weights, prefix + ".q_a_proj", shape.hidden, shape.q_lora_rank, shape.bias);
    attn->q_a_norm_ =
        RmsNorm::load(weights, prefix + ".q_a_layernorm.weight", shape.q_lora_rank, kLatentNormEps);
    attn->q_b_proj_ = load_column_parallel(weights, prefix + ".q_b_proj", shape.q_lora_rank,
                                           q_width, false, h0 * qk, h1 * qk);
  } else {
    attn->q_proj_ = load_column_parallel(weights, prefix + ".q_proj", shape.hidden, q_width, false,
                                         h0 * qk, h1 * qk);
  }
  attn->kv_a_proj_ = Linear::load(weights, prefix + ".kv_a_proj_with_mqa", shape.hidden,
                                  shape.cache_width(), shape.bias);
  attn->kv_a_norm_ =
      RmsNorm::load(weights, prefix + ".kv_a_layernorm.weight", shape.kv_lora_rank, kLatentNormEps);
  const int64_t per_head = shape.qk_nope_head_dim + shape.v_head_dim;
  attn->kv_b_proj_ = load_column_parallel(weights, prefix + ".kv_b_proj", shape.kv_lora_rank,
                                          shape.heads * per_head, false, h0 * per_head,
                                          h1 * per_head, MatrixUse::by_element);
  const int64_t v = shape.v_head_dim;
  attn->o_proj_ = RowParallelLinear::load(weights, prefix + ".o_proj", shape.heads * v,
                                          shape.hidden, shape.bias, h0 * v, h1 * v, split);

  // kv_b_proj is read in per-head row slices (and transposed below), which block types do not
  // allow: a block-quantized one (GGUF attn_kv_b) runs dequantized to f32.
  if (is_block_dtype(attn->kv_b_proj_.weight.dtype())) {
    attn->kv_b_proj_.weight = attn->kv_b_proj_.weight.to(DType::f32);
    attn->kv_b_proj_.packed = {};  // a block repacking (Linear::pack) would never be read
  }
  const int64_t rank = shape.kv_lora_rank;
  const int64_t nope = shape.qk_nope_head_dim;
  // A GGUF file's block-typed attn_k_b / attn_v_b (io/gguf_tensors.cpp): the absorbed decode
  // runs this rank's heads of them as stored, so that it reads the quantized bytes and not
  // kv_b_proj's f32 widening of them (which the expanded form keeps using).
  const std::string k_b = prefix + ".k_b_proj.weight", v_b = prefix + ".v_b_proj.weight";
  if (weights.has(v_b))
    attn->w_uv_ =
        weights.matrix_rows(v_b, {shape.heads * v, rank}, h0 * v, h1 * v, MatrixUse::by_element);
  if (weights.has(k_b)) {
    attn->w_uk_t_ = weights.matrix_rows(k_b, {shape.heads * rank, nope}, h0 * rank, h1 * rank,
                                        MatrixUse::by_element);
    return attn;
  }
  // W_UK^T per head, in kv_b_proj's dtype (a transpose: exact in any dtype).
  const Tensor kv_b = attn->kv_b_proj_.weight.to(DType::f32);
  const int64_t heads = attn->shape_.heads;
  Tensor uk_t = Tensor::zeros({heads * rank, nope}, DType::f32);
  const float* src = kv_b.data<float>();
  float* dst = uk_t.data<float>();
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t d = 0; d < nope; ++d) {
      const float* row = src + (h * per_head + d) * rank;
      for (int64_t c = 0; c < rank; ++c) dst[(h * rank + c) * nope + d] = row[c];
    }
  }
  attn->w_uk_t_ = uk_t.to(attn->kv_b_proj_.weight.dtype());
  return attn;
}

MlaForm choose_mla_form(const MlaShape& shape, int64_t tokens, int64_t context) {
  // Multiply-adds per head. Expanded: kv_b_proj over the whole context, then attention with
  // qk_head-wide keys and v_head-wide values. Absorbed: W_UK^T / W_UV per new token, then
  // attention with cache_width-wide keys and values.
  const auto& s = shape;
  const double t = static_cast<double>(tokens);
  const double ctx = static_cast<double>(context);
  const double rank = static_cast<double>(s.kv_lora_rank);
  const double nope_v = static_cast<double>(s.qk_nope_head_dim + s.v_head_dim);
  const double expanded =
      ctx * rank * nope_v + t * ctx * static_cast<double>(s.qk_head_dim() + s.v_head_dim);
  const double absorbed = t * rank * nope_v + t * ctx * 2.0 * static_cast<double>(s.cache_width());
  // The expanded K/V of the whole context are materialised at once; past a budget (long
  // contexts of many-head models, e.g. ~3K positions of DeepSeek-V3) the absorbed form,
  // which reads the cache in place, is taken whatever it costs in arithmetic.
  const double expanded_bytes = ctx * static_cast<double>(s.heads) *
                                static_cast<double>(s.qk_head_dim() + s.v_head_dim) * sizeof(float);
  if (expanded_bytes > static_cast<double>(kMaxExpandedBytes)) return MlaForm::absorbed;
  return absorbed <= expanded ? MlaForm::absorbed : MlaForm::expanded;
}

void MlaAttention::project(const float* x, int64_t tokens, const float* cos, const float* sin,
                           float* q, float* kv, float* q_resid, ThreadPool& pool) const {
  const auto& s = shape_;
  // The query's first projection and kv_a share x: one grouped call where the weights allow.
  ScratchFloats q_a_scratch(q_proj_ || q_resid ? 0 : static_cast<size_t>(tokens * s.q_lora_rank));
  float* q_a = q_resid ? q_resid : q_a_scratch.data();
  const Linear* projections[] = {q_proj_ ? &*q_proj_ : &*q_a_proj_, &kv_a_proj_};
  float* outputs[] = {q_proj_ ? q : q_a, kv};
  forward_same_input(projections, x, tokens, outputs, pool);
  if (!q_proj_) {
    q_a_norm_->forward(q_a, tokens, q_a);
    q_b_proj_->forward(q_a, tokens, q, pool);
  }
  const int64_t width = s.cache_width();
  for (int64_t t = 0; t < tokens; ++t) kv_a_norm_.forward(kv + t * width, 1, kv + t * width);
  // The rope part sits after the nope part of each query head and after the latent of each
  // kv row: rotate "heads" of stride qk_head_dim (resp. cache_width) starting there.
  kernels::rope(q + s.qk_nope_head_dim, tokens, s.heads, s.qk_head_dim(), s.qk_rope_head_dim, cos,
                sin, s.rope_layout);
  kernels::rope(kv + s.kv_lora_rank, tokens, 1, width, s.qk_rope_head_dim, cos, sin, s.rope_layout);
}

void MlaAttention::forward(const float* x, const ForwardBatch& batch, const float* cos,
                           const float* sin, cache::KvCache& cache, int64_t layer, float* out,
                           ThreadPool& pool) const {
  const auto& s = shape_;
  const auto tokens = static_cast<int64_t>(batch.tokens.size());
  const int64_t q_row = s.heads * s.qk_head_dim();
  const int64_t kv_row = s.cache_width();
  const int64_t out_row = s.heads * s.v_head_dim;
  DI_CHECK(
      cache.spec().kv_heads == 1 && cache.spec().head_dim == kv_row && cache.spec().v_head_dim == 0,
      "MLA layer ", layer, ": the KV cache must be K-only with one head of width ", kv_row,
      " (kv_lora_rank + qk_rope_head_dim); build it from the model's kv_layout()");
  ScratchFloats q(static_cast<size_t>(tokens * q_row));
  ScratchFloats kv(static_cast<size_t>(tokens * kv_row));
  ScratchFloats attended(static_cast<size_t>(tokens * out_row));
  ScratchFloats q_resid(indexer_ ? static_cast<size_t>(tokens * s.q_lora_rank) : 0);
  project(x, tokens, cos, sin, q.data(), kv.data(), indexer_ ? q_resid.data() : nullptr, pool);
  MlaShape whole = s;
  whole.heads = all_heads_;
  if (indexer_) {
    indexer_->forward(x, q_resid.data(), batch, cos, sin, cache, layer, *selection_, pool);
  } else if (selection_) {
    DI_CHECK(selection_->batch == &batch &&
                 selection_->offsets.size() == static_cast<size_t>(tokens) + 1,
             "MLA layer ", layer,
             ": shares the top-k of an earlier indexer layer that did not run in this step");
  }

  for (const auto& seq : batch.sequences) {
    if (seq.count == 0) continue;
    const int32_t* positions = batch.positions.data() + seq.begin;
    cache.write(layer, seq.block_table, positions, seq.count, kv.data() + seq.begin * kv_row,
                nullptr);
    // Tokens whose causal context exceeds the indexer's top-k attend to their selection (a
    // trailing run: positions grow within a chunk), in the absorbed form, which reads the
    // selected latent rows in place; the others are dense MLA, exactly as without an indexer.
    int64_t dense = seq.count;
    while (selection_ && dense > 0 && selection_->sparse(seq.begin + dense - 1)) --dense;
    if (dense < seq.count) {
      const int64_t first = seq.begin + dense;
      attend_absorbed(q.data() + first * q_row, seq.count - dense, positions + dense, cache, layer,
                      seq.block_table, attended.data() + first * out_row, pool,
                      {selection_.get(), first});
    }
    if (dense == 0) continue;
    const int64_t context = 1 + *std::max_element(positions, positions + dense);
    const float* q_seq = q.data() + seq.begin * q_row;
    float* out_seq = attended.data() + seq.begin * out_row;
    const MlaForm form =
        form_ == MlaForm::automatic ? choose_mla_form(whole, dense, context) : form_;
    if (form == MlaForm::expanded) {
      attend_expanded(q_seq, dense, positions, cache, layer, seq.block_table, out_seq, pool);
    } else {
      attend_absorbed(q_seq, dense, positions, cache, layer, seq.block_table, out_seq, pool);
    }
  }
  o_proj_.forward(attended.data(), tokens, out, pool);
}

MlaAttention::PerHead MlaAttention::w_uk_t() const {
  const DType dtype = w_uk_t_.dtype();
  const size_t head_bytes =
      static_cast<size_t>(shape_.kv_lora_rank) * dtype_bytes(dtype, shape_.qk_nope_head_dim);
  return {static_cast<const char*>(w_uk_t_.raw()), head_bytes, dtype};
}

MlaAttention::PerHead MlaAttention::w_uv() const {
  const int64_t rank = shape_.kv_lora_rank, v = shape_.v_head_dim;
  if (w_uv_.defined()) {
    const DType dtype = w_uv_.dtype();
    return {static_cast<const char*>(w_uv_.raw()),
            static_cast<size_t>(v) * dtype_bytes(dtype, rank), dtype};
  }
  // kv_b_proj: per head, nope rows of W_UK then v rows of W_UV.
  const DType dtype = kv_b_proj_.weight.dtype();
  const size_t row_bytes = dtype_bytes(dtype, rank);
  const auto* base = static_cast<const char*>(kv_b_proj_.weight.raw());
  return {base + static_cast<size_t>(shape_.qk_nope_head_dim) * row_bytes,
          static_cast<size_t>(shape_.qk_nope_head_dim + v) * row_bytes, dtype};
}

void MlaAttention::attend_expanded(const float* q, int64_t tokens, const int32_t* positions,
                                   const cache::KvCache& cache, int64_t layer,
                                   std::span<const int32_t> block_table, float* attended,
                                   ThreadPool& pool) const {
  const auto& s = shape_;
  const int64_t context = 1 + *std::max_element(positions, positions + tokens);
  const int64_t width = s.cache_width();
  const int64_t rank = s.kv_lora_rank;
  const int64_t nope = s.qk_nope_head_dim;
  const int64_t rope = s.qk_rope_head_dim;
  const int64_t qk = s.qk_head_dim();
  const int64_t v_dim = s.v_head_dim;
  const int64_t per_head = nope + v_dim;

  ScratchFloats rows(static_cast<size_t>(context * width));
  cache.gather_k(layer, block_table, context, rows.data());
  ScratchFloats latent(static_cast<size_t>(context * rank));
  for (int64_t p = 0; p < context; ++p) copy_floats(&latent[p * rank], &rows[p * width], rank);
  ScratchFloats kv_b(static_cast<size_t>(context * s.heads * per_head));
  kv_b_proj_.forward(latent.data(), context, kv_b.data(), pool);

  // Per-head keys [k_nope | k_pe] (k_pe shared by every head) and values, position-major.
  ScratchFloats keys(static_cast<size_t>(context * s.heads * qk));
  ScratchFloats values(static_cast<size_t>(context * s.heads * v_dim));
  for (int64_t p = 0; p < context; ++p) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const float* src = &kv_b[(p * s.heads + h) * per_head];
      float* key = &keys[(p * s.heads + h) * qk];
      copy_floats(key, src, nope);
      copy_floats(key + nope, &rows[p * width + rank], rope);
      copy_floats(&values[(p * s.heads + h) * v_dim], src + nope, v_dim);
    }
  }
  // One "block" holding the whole context: positions index it directly.
  const int32_t only_block = 0;
  kernels::PagedKv kv;
  kv.k = keys.data();
  kv.v = values.data();
  kv.block_size = context;
  kv.kv_heads = s.heads;
  kv.head_dim = qk;
  kv.v_head_dim = v_dim;
  kv.block_table = std::span<const int32_t>(&only_block, 1);
  // The fused kernel in query tiles: every key row is shared by a tile of tokens (the per-token
  // kernel reads the whole context once per query token and head).
  const kernels::PagedAttentionFn attend =
      attend_ == &kernels::paged_attention ? &kernels::paged_attention_query_tiles : attend_;
  attend(q, tokens, positions, s.heads, kv, s.softmax_scale, attended, pool);
}

void MlaAttention::attend_latent(const float* q_latent, int64_t tokens, const int32_t* positions,
                                 const kernels::PagedKv& kv, float* out_latent, ThreadPool& pool,
                                 MlaSparseRows sparse) const {
  const auto& s = shape_;
  const int64_t width = s.cache_width();
  if (sparse.selection == nullptr) {
    attend_(q_latent, tokens, positions, s.heads, kv, s.softmax_scale, out_latent, pool);
    return;
  }
  // Each token over its own selected rows: a view whose "blocks" are single cache slots, in
  // the selection's (ascending) order.
  const DsaSelection& sel = *sparse.selection;
  std::vector<int32_t> slots;
  for (int64_t t = 0; t < tokens; ++t) {
    const auto row = static_cast<size_t>(sparse.first_token + t);
    const int64_t begin = sel.offsets[row], end = sel.offsets[row + 1];
    DI_CHECK(end > begin, "DSA: token at position ", positions[t],
             " follows a sparse token but has no selection");
    slots.resize(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) {
      const int32_t p = sel.positions[static_cast<size_t>(i)];
      DI_CHECK(p <= positions[t], "DSA: token at position ", positions[t],
               " selected a later position ", p);
      const int32_t block = kv.block_table[static_cast<size_t>(p / kv.block_size)];
      slots[static_cast<size_t>(i - begin)] =
          static_cast<int32_t>(block * kv.block_size + p % kv.block_size);
    }
    kernels::PagedKv selected = kv;
    selected.block_size = 1;
    selected.block_table = slots;
    const auto last = static_cast<int32_t>(end - begin - 1);
    attend_(q_latent + t * s.heads * width, 1, &last, s.heads, selected, s.softmax_scale,
            out_latent + t * s.heads * width, pool);
  }
}

void MlaAttention::attend_absorbed(const float* q, int64_t tokens, const int32_t* positions,
                                   const cache::KvCache& cache, int64_t layer,
                                   std::span<const int32_t> block_table, float* attended,
                                   ThreadPool& pool, MlaSparseRows sparse) const {
  const auto& s = shape_;
  const int64_t width = s.cache_width();
  const int64_t rank = s.kv_lora_rank;
  const int64_t nope = s.qk_nope_head_dim;
  const int64_t rope = s.qk_rope_head_dim;
  const int64_t qk = s.qk_head_dim();
  const int64_t v_dim = s.v_head_dim;

  // Latent-space queries [W_UK^T q_nope | q_pe] per head.
  ScratchFloats q_latent(static_cast<size_t>(tokens * s.heads * width));
  {
    ScratchFloats in(static_cast<size_t>(s.heads * tokens * nope));
    ScratchFloats out(static_cast<size_t>(s.heads * tokens * rank));
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < tokens; ++t)
        copy_floats(&in[(h * tokens + t) * nope], q + (t * s.heads + h) * qk, nope);
    per_head_linear(in.data(), s.heads, tokens, nope, w_uk_t(), rank, out.data(), pool);
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t t = 0; t < tokens; ++t) {
        float* dst = &q_latent[(t * s.heads + h) * width];
        copy_floats(dst, &out[(h * tokens + t) * rank], rank);
        copy_floats(dst + rank, q + (t * s.heads + h) * qk + nope, rope);
      }
    }
  }

  // MQA over the cached rows: keys are [c | k_pe]; values are the same rows, whose k_pe tail
  // is computed along and dropped (it lets the ordinary paged kernel read values in place).
  kernels::PagedKv kv = cache.view(layer, block_table);
  kv.v = kv.k;
  kv.v_scale = kv.k_scale;
  kv.v_head_dim = kv.head_dim;
  ScratchFloats out_latent(static_cast<size_t>(tokens * s.heads * width));
  attend_latent(q_latent.data(), tokens, positions, kv, out_latent.data(), pool, sparse);

  // W_UV per head: latent -> v_head_dim.
  ScratchFloats in(static_cast<size_t>(s.heads * tokens * rank));
  ScratchFloats out(static_cast<size_t>(s.heads * tokens * v_dim));
  for (int64_t h = 0; h < s.heads; ++h)
    for (int64_t t = 0; t < tokens; ++t)
      copy_floats(&in[(h * tokens + t) * rank], &out_latent[(t * s.heads + h) * width], rank);
  per_head_linear(in.data(), s.heads, tokens, rank, w_uv(), v_dim, out.data(), pool);
  for (int64_t h = 0; h < s.heads; ++h)
    for (int64_t t = 0; t < tokens; ++t)
      copy_floats(attended + (t * s.heads + h) * v_dim, &out[(h * tokens + t) * v_dim], v_dim);
}

}  // namespace deepinfer::model
