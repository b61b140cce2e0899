#pragma once
// The feed-forward slot of a decoder layer: a dense SwiGLU MLP or a mixture of experts.
#include <cstdint>
#include <span>

#include "core/thread_pool.h"

namespace deepinfer::model {

class FeedForward {
 public:
  virtual ~FeedForward() = default;
  // x [tokens, hidden] -> out [tokens, hidden]
  virtual void forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const = 0;
  // Mixture of experts only: token assignments per expert since the last reset (empty for a
  // dense MLP).
  virtual std::span<const uint64_t> expert_load() const { return {}; }
  virtual void reset_load_stats() {}
};

}  // namespace deepinfer::model
