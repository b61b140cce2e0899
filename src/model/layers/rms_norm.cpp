#include "model/layers/rms_norm.h"

#include "kernels/kernels.h"

namespace deepinfer::model {

RmsNorm RmsNorm::load(WeightLoader& weights, const std::string& name, int64_t dim, double eps) {
  RmsNorm norm;
  norm.weight = weights.vector_f32(name, {dim});
  norm.eps = static_cast<float>(eps);
  return norm;
}

void RmsNorm::forward(const float* x, int64_t rows, float* y) const {
  kernels::rms_norm(x, weight.data<float>(), rows, dim(), eps, y);
}

void RmsNorm::forward_residual(float* residual, const float* x, int64_t rows, float* y) const {
  kernels::add_rms_norm(residual, x, weight.data<float>(), rows, dim(), eps, y);
}

}  // namespace deepinfer::model
