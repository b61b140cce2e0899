#include "model/layers/linear.h"

#include "kernels/kernels.h"

namespace deepinfer::model {

Linear Linear::load(WeightLoader& weights, const std::string& prefix, int64_t in_features,
                    int64_t out_features, bool with_bias, MatrixUse use) {
  Linear linear;
  linear.in_features = in_features;
  linear.out_features = out_features;
  linear.weight = weights.matrix(prefix + ".weight", {out_features, in_features}, use);
  if (with_bias) linear.bias = weights.vector_f32(prefix + ".bias", {out_features});
  return linear;
}

void Linear::forward(const float* x, int64_t rows, float* y, ThreadPool& pool) const {
  kernels::linear(x, rows, in_features, weight.raw(), weight.dtype(), out_features,
                  bias.defined() ? bias.data<float>() : nullptr, y, pool);
}

}  // namespace deepinfer::model
