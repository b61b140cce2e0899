#pragma once
// The attention slot of a decoder layer: GQA/MHA (Qwen, GLM, Llama) or MLA (DeepSeek).
#include <cstdint>

#include "cache/kv_cache.h"
#include "core/thread_pool.h"
#include "model/forward_batch.h"

namespace deepinfer::model {

class AttentionLayer {
 public:
  virtual ~AttentionLayer() = default;
  // x [tokens, hidden] -> out [tokens, hidden]. cos/sin: the decoder's rope tables for the
  // batch positions, [tokens, rotary_dim / 2]. Writes this layer's K/V of the new tokens.
  virtual void forward(const float* x, const ForwardBatch& batch, const float* cos,
                       const float* sin, cache::KvCache& cache, int64_t layer, float* out,
                       ThreadPool& pool) const = 0;
};

}  // namespace deepinfer::model
