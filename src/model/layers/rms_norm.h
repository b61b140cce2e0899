#pragma once
#include <string>

#include "core/tensor.h"
#include "model/weights.h"

namespace deepinfer::model {

struct RmsNorm {
  Tensor weight;  // [dim] f32
  float eps = 1e-6f;

  static RmsNorm load(WeightLoader& weights, const std::string& name, int64_t dim, double eps);
  int64_t dim() const { return weight.numel(); }
  // Normalises each of `rows` rows of width dim(); y may alias x.
  void forward(const float* x, int64_t rows, float* y) const;
  // residual += x, then y = forward(residual), in one pass (kernels::add_rms_norm): bitwise
  // the same as the two steps. y must not alias residual or x.
  void forward_residual(float* residual, const float* x, int64_t rows, float* y) const;
};

}  // namespace deepinfer::model
