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
  linear.pack();
  return linear;
}

void Linear::pack() {
  packed = kernels::pack_weights(weight.raw(), weight.dtype(), out_features, in_features);
}

void Linear::forward(const float* x, int64_t rows, float* y, ThreadPool& pool) const {
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  if (packed.defined() && packed.source() == weight.raw() && packed.n() == out_features &&
      packed.k() == in_features) {
    kernels::linear(x, rows, packed, b, y, pool);
    return;
  }
  kernels::linear(x, rows, in_features, weight.raw(), weight.dtype(), out_features, b, y, pool);
}

}  // namespace deepinfer::model
