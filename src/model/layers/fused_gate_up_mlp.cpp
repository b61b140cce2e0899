#include "model/layers/fused_gate_up_mlp.h"

#include <vector>

#include "kernels/kernels.h"

namespace deepinfer::model {

std::unique_ptr<FusedGateUpMlp> FusedGateUpMlp::load(WeightLoader& weights,
                                                     const std::string& prefix, int64_t hidden,
                                                     int64_t intermediate) {
  auto mlp = std::make_unique<FusedGateUpMlp>();
  mlp->intermediate_ = intermediate;
  mlp->gate_up_proj_ =
      Linear::load(weights, prefix + ".gate_up_proj", hidden, 2 * intermediate, false);
  mlp->down_proj_ = Linear::load(weights, prefix + ".down_proj", intermediate, hidden, false);
  return mlp;
}

void FusedGateUpMlp::forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const {
  const int64_t width = intermediate_;
  // Row t of gate_up is [gate(x_t) | up(x_t)] (transformers: chunk(2, dim=-1)).
  std::vector<float> gate_up(static_cast<size_t>(tokens * 2 * width));
  std::vector<float> act(static_cast<size_t>(tokens * width));
  gate_up_proj_.forward(x, tokens, gate_up.data(), pool);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = gate_up.data() + t * 2 * width;
    kernels::silu_mul(row, row + width, act.data() + t * width, width);
  }
  down_proj_.forward(act.data(), tokens, out, pool);
}

}  // namespace deepinfer::model
