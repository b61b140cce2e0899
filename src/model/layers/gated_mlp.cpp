#include "model/layers/gated_mlp.h"

#include <vector>

#include "core/scratch.h"
#include "kernels/kernels.h"

namespace deepinfer::model {

std::unique_ptr<GatedMlp> GatedMlp::load(WeightLoader& weights, const std::string& prefix,
                                         int64_t hidden, int64_t intermediate, bool with_bias) {
  return load(weights, prefix, hidden, intermediate, with_bias,
              TensorSplit::over(weights.tensor_group()));
}

std::unique_ptr<GatedMlp> GatedMlp::load(WeightLoader& weights, const std::string& prefix,
                                         int64_t hidden, int64_t intermediate, bool with_bias,
                                         const TensorSplit& split) {
  auto mlp = std::make_unique<GatedMlp>();
  const auto [begin, end] = split.part(intermediate, prefix + "'s intermediate size");
  mlp->gate_proj_ = load_column_parallel(weights, prefix + ".gate_proj", hidden, intermediate,
                                         with_bias, begin, end);
  mlp->up_proj_ = load_column_parallel(weights, prefix + ".up_proj", hidden, intermediate,
                                       with_bias, begin, end);
  mlp->down_proj_ = RowParallelLinear::load(weights, prefix + ".down_proj", intermediate, hidden,
                                            with_bias, begin, end, split);
  return mlp;
}

void GatedMlp::forward(const float* x, int64_t tokens, float* out, ThreadPool& pool) const {
  const int64_t width = gate_proj_.out_features;
  auto gate = ScratchFloats::uninitialized(static_cast<size_t>(tokens * width));
  auto up = ScratchFloats::uninitialized(static_cast<size_t>(tokens * width));
  const Linear* projections[] = {&gate_proj_, &up_proj_};
  float* outputs[] = {gate.data(), up.data()};
  forward_same_input(projections, x, tokens, outputs, pool);
  kernels::silu_mul(gate.data(), up.data(), gate.data(), tokens * width);
  down_proj_.forward(gate.data(), tokens, out, pool);
}

}  // namespace deepinfer::model
