#include "model/layers/fused_gate_up_mlp.h"

#include <vector>

#include "core/scratch.h"
#include "kernels/kernels.h"

namespace deepinfer::model {

std::unique_ptr<FusedGateUpMlp> FusedGateUpMlp::load(WeightLoader& weights,
                                                     const std::string& prefix, int64_t hidden,
                                                     int64_t intermediate) {
  auto mlp = std::make_unique<FusedGateUpMlp>();
  const TensorSplit split = TensorSplit::over(weights.tensor_group());
  const auto [begin, end] = split.part(intermediate, prefix + "'s intermediate size");
  mlp->intermediate_ = end - begin;
  const std::string fused = prefix + ".gate_up_proj";
  if (split.split()) {
    mlp->gate_proj_ =
        load_column_parallel(weights, fused, hidden, 2 * intermediate, false, begin, end);
    mlp->up_proj_ = load_column_parallel(weights, fused, hidden, 2 * intermediate, false,
                                         intermediate + begin, intermediate + end);
  } else {
    mlp->gate_up_proj_ = Linear::load(weights, fused, hidden, 2 * intermediate, false);
  }
  mlp->down_proj_ = RowParallelLinear::load(weights, prefix + ".down_proj", intermediate, hidden,
                                            false, begin, end, split);
  return mlp;
}

void FusedGateUpMlp::forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const {
  const int64_t width = intermediate_;
  if (gate_proj_.weight.defined()) {
    auto gate = ScratchFloats::uninitialized(static_cast<size_t>(tokens * width));
    auto up = ScratchFloats::uninitialized(gate.size());
    const Linear* projections[] = {&gate_proj_, &up_proj_};
    float* outputs[] = {gate.data(), up.data()};
    forward_same_input(projections, x, tokens, outputs, pool);
    kernels::silu_mul(gate.data(), up.data(), gate.data(), tokens * width);
    down_proj_.forward(gate.data(), tokens, out, pool);
    return;
  }
  // Row t of gate_up is [gate(x_t) | up(x_t)] (transformers: chunk(2, dim=-1)).
  auto gate_up = ScratchFloats::uninitialized(static_cast<size_t>(tokens * 2 * width));
  ScratchFloats act(static_cast<size_t>(tokens * width));
  gate_up_proj_.forward(x, tokens, gate_up.data(), pool);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = gate_up.data() + t * 2 * width;
    kernels::silu_mul(row, row + width, act.data() + t * width, width);
  }
  down_proj_.forward(act.data(), tokens, out, pool);
}

}  // namespace deepinfer::model
