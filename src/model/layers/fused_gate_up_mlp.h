#pragma once
// SwiGLU feed-forward whose gate and up projections are stored as one matrix, as GLM does
// (mlp.gate_up_proj.weight [2 * intermediate, hidden]: gate rows first, then up rows):
// down(silu(x G^T) * (x U^T)) computed with a single linear over the fused weight, so the
// checkpoint tensor is used in place (mmap, no split copy).
#include <memory>
#include <string>

#include "model/layers/feed_forward.h"
#include "model/layers/linear.h"
#include "model/layers/tensor_parallel.h"

namespace deepinfer::model {

// Under tensor parallelism each rank takes its slice of the gate rows and of the up rows (two
// slices of the fused tensor, as two linears) and down_proj is row parallel.
class FusedGateUpMlp : public FeedForward {
 public:
  // Loads <prefix>.gate_up_proj and <prefix>.down_proj (no biases), split over the loader's
  // tensor group.
  static std::unique_ptr<FusedGateUpMlp> load(WeightLoader& weights, const std::string& prefix,
                                              int64_t hidden, int64_t intermediate);
  // x [tokens, hidden] -> out [tokens, hidden]
  void forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const override;

 private:
  int64_t intermediate_ = 0;    // this rank's
  Linear gate_up_proj_;         // unsplit: the fused weight in place
  Linear gate_proj_, up_proj_;  // split: this rank's gate rows and up rows
  RowParallelLinear down_proj_;
};

}  // namespace deepinfer::model
