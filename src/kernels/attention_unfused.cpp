// Attention as three separate passes (enable_atb_attention = false): the unfused baseline of
// the flash-style paged_attention, for A/B runs. Per (token, kv head) the context is gathered
// into f32 matrices, then: scores = Q_g K^T * scale (kernels::linear), kernels::softmax over
// each head's row, out = P V (kernels::linear over V^T). Nested inside the pool's task, the
// linears run on the calling thread.
#include <algorithm>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attend_i8.h"
#include "kernels/kernels.h"
#include "kernels/kv_element.h"

namespace deepinfer::kernels {
using detail::kv_element;

namespace {

// scores[h][p] = the int8 score (attend_i8.h) of query head h of q[heads][head_dim] and the
// K row at element row_at(p) of the cache, for p < len.
template <class RowAt>
void i8_scores(const float* q, int64_t heads, int64_t len, const RowAt& row_at, const PagedKv& kv,
               std::vector<float>& query, float* scores) {
  query.resize(static_cast<size_t>(detail::i8_query_floats(kv.head_dim, kv.quant_group)));
  for (int64_t h = 0; h < heads; ++h) {
    const detail::I8Query q8 =
        detail::quantize_query_i8(q + h * kv.head_dim, kv.head_dim, kv.quant_group, query.data());
    for (int64_t p = 0; p < len; ++p) {
      const int64_t at = row_at(p);
      scores[h * len + p] =
          detail::i8_score(q8, static_cast<const int8_t*>(kv.k) + at,
                           kv.k_scale + at / kv.quant_group, kv.head_dim, kv.quant_group);
    }
  }
}

}  // namespace

void paged_attention_unfused(const float* q, int64_t tokens, const int32_t* positions,
                             int64_t heads, const PagedKv& kv, float scale, float* out,
                             ThreadPool& pool) {
  DI_CHECK(tokens >= 0 && heads > 0 && kv.kv_heads > 0 && heads % kv.kv_heads == 0,
           "kernels::paged_attention_unfused: ", heads, " query heads cannot share ", kv.kv_heads,
           " kv heads (heads must be a positive multiple of kv_heads)");
  DI_CHECK(kv.block_size > 0 && kv.head_dim > 0 && kv.v_head_dim > 0,
           "kernels::paged_attention_unfused: bad cache geometry");
  DI_CHECK(kv.dtype == DType::f32 || kv.dtype == DType::bf16 || kv.dtype == DType::f16 ||
               (kv.dtype == DType::i8 && kv.quant_group > 0 &&
                kv.quant_group <= detail::kMaxI8ScoreGroup && kv.head_dim % kv.quant_group == 0),
           "kernels::paged_attention_unfused: a KV cache of ", dtype_name(kv.dtype),
           " is not supported (f32, bf16, f16 or i8 with a quant_group dividing head_dim, at most ",
           detail::kMaxI8ScoreGroup, ")");
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t blocks = positions[t] / kv.block_size + 1;
    DI_CHECK(positions[t] >= 0 && static_cast<int64_t>(kv.block_table.size()) >= blocks,
             "kernels::paged_attention_unfused: position ", positions[t], " of token ", t,
             " is outside the block table (", kv.block_table.size(), " blocks)");
  }
  const int64_t group = heads / kv.kv_heads;
  const int64_t hd = kv.head_dim;
  const int64_t vd = kv.v_head_dim;
  const int64_t v_stride = kv.v_row_stride ? kv.v_row_stride : vd;
  auto key_slot = [&](int64_t p, int64_t kvh) {
    const int64_t block = kv.block_table[static_cast<size_t>(p / kv.block_size)];
    return kv_cache_row(block * kv.block_size + p % kv.block_size, kvh, kv.kv_heads, kv.head_rows);
  };
  pool.parallel_for(tokens * kv.kv_heads, [&](int64_t begin, int64_t end) {
    std::vector<float> keys, values_t, scores, query_i8;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / kv.kv_heads;
      const int64_t kvh = item % kv.kv_heads;
      const int64_t len = positions[t] + 1;
      if (!detail::i8_integer_scores(kv)) keys.resize(static_cast<size_t>(len * hd));
      values_t.resize(static_cast<size_t>(vd * len));
      scores.resize(static_cast<size_t>(group * len));
      for (int64_t p = 0; p < len; ++p) {
        const int64_t slot = key_slot(p, kvh);
        if (!detail::i8_integer_scores(kv))
          for (int64_t d = 0; d < hd; ++d)
            keys[static_cast<size_t>(p * hd + d)] = kv_element(kv, kv.k, kv.k_scale, slot * hd, d);
        for (int64_t d = 0; d < vd; ++d)
          values_t[static_cast<size_t>(d * len + p)] =
              kv_element(kv, kv.v, kv.v_scale, slot * v_stride, d);
      }
      const float* q_group = q + (t * heads + kvh * group) * hd;
      // Pass 1: scores [group, len]; pass 2: softmax per head; pass 3: out [group, vd]. An
      // int8 cache scores on integers (attend_i8.h).
      if (detail::i8_integer_scores(kv)) {
        i8_scores(
            q_group, group, len, [&](int64_t p) { return key_slot(p, kvh) * hd; }, kv, query_i8,
            scores.data());
      } else {
        linear(q_group, group, hd, keys.data(), DType::f32, len, nullptr, scores.data(), pool);
      }
      for (float& s : scores) s *= scale;
      softmax(scores.data(), group, len);
      linear(scores.data(), group, len, values_t.data(), DType::f32, vd, nullptr,
             out + (t * heads + kvh * group) * vd, pool);
    }
  });
}

}  // namespace deepinfer::kernels
