#pragma once
// SwiGLU feed-forward whose gate and up projections are stored as one matrix, as GLM does
// (mlp.gate_up_proj.weight [2 * intermediate, hidden]: gate rows first, then up rows):
// down(silu(x G^T) * (x U^T)) computed with a single linear over the fused weight, so the
// checkpoint tensor is used in place (mmap, no split copy).
#include <memory>
#include <string>

#include "model/layers/feed_forward.h"
#include "model/layers/linear.h"

namespace deepinfer::model {

class FusedGateUpMlp : public FeedForward {
 public:
  // Loads <prefix>.gate_up_proj and <prefix>.down_proj (no biases).
  static std::unique_ptr<FusedGateUpMlp> load(WeightLoader& weights, const std::string& prefix,
                                              int64_t hidden, int64_t intermediate);
  // x [tokens, hidden] -> out [tokens, hidden]
  void forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const override;

 private:
  int64_t intermediate_ = 0;
  Linear gate_up_proj_, down_proj_;
};

}  // namespace deepinfer::model
