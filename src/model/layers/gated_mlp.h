#pragma once
// SwiGLU feed-forward: down(silu(gate(x)) * up(x)), each projection with an optional bias
// (Llama's mlp_bias).
#include <string>

#include <memory>

#include "model/layers/feed_forward.h"
#include "model/layers/linear.h"
#include "model/layers/tensor_parallel.h"

namespace deepinfer::model {

// Under tensor parallelism gate / up are column parallel and down row parallel over the
// intermediate.
class GatedMlp : public FeedForward {
 public:
  // Split over the loader's tensor group.
  static std::unique_ptr<GatedMlp> load(WeightLoader& weights, const std::string& prefix,
                                        int64_t hidden, int64_t intermediate,
                                        bool with_bias = false);
  // Split as `split` says (the MoE layer's shared experts: over the moe tensor group, summed
  // by the MoE layer).
  static std::unique_ptr<GatedMlp> load(WeightLoader& weights, const std::string& prefix,
                                        int64_t hidden, int64_t intermediate, bool with_bias,
                                        const TensorSplit& split);
  // x [tokens, hidden] -> out [tokens, hidden]
  void forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const override;

 private:
  Linear gate_proj_, up_proj_;
  RowParallelLinear down_proj_;
};

}  // namespace deepinfer::model
