#pragma once
// SwiGLU feed-forward: down(silu(gate(x)) * up(x)), each projection with an optional bias
// (Llama's mlp_bias).
#include <string>

#include <memory>

#include "model/layers/feed_forward.h"
#include "model/layers/linear.h"

namespace deepinfer::model {

class GatedMlp : public FeedForward {
 public:
  static std::unique_ptr<GatedMlp> load(WeightLoader& weights, const std::string& prefix,
                                        int64_t hidden, int64_t intermediate,
                                        bool with_bias = false);
  // x [tokens, hidden] -> out [tokens, hidden]
  void forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const override;

 private:
  Linear gate_proj_, up_proj_, down_proj_;
};

}  // namespace deepinfer::model
