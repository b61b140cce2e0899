#include "model/layers/tensor_parallel.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"

namespace deepinfer::model {

TensorSplit TensorSplit::over(std::shared_ptr<parallel::Communicator> group) {
  DI_CHECK(group != nullptr, "tensor split over no communicator");
  TensorSplit split;
  split.rank = group->rank();
  split.size = group->world_size();
  split.reduce = std::move(group);
  return split;
}

std::pair<int64_t, int64_t> TensorSplit::part(int64_t n, const std::string& what) const {
  DI_CHECK(n % size == 0, "tensor parallel size ", size, " does not divide ", what, " ", n,
           ": every rank must hold the same number");
  const int64_t each = n / size;
  return {rank * each, (rank + 1) * each};
}

Linear load_column_parallel(WeightLoader& weights, const std::string& prefix, int64_t in_features,
                            int64_t out_features, bool with_bias, int64_t begin, int64_t end,
                            MatrixUse use) {
  if (begin == 0 && end == out_features)
    return Linear::load(weights, prefix, in_features, out_features, with_bias, use);
  const Slice rows{0, begin, end};
  Linear linear;
  linear.in_features = in_features;
  linear.out_features = end - begin;
  linear.set_weight(weights, prefix + ".weight",
                    weights.matrix(prefix + ".weight", {out_features, in_features}, use, rows));
  if (with_bias) linear.bias = weights.vector_f32(prefix + ".bias", {out_features}, rows);
  return linear;
}

RowParallelLinear RowParallelLinear::load(WeightLoader& weights, const std::string& prefix,
                                          int64_t in_features, int64_t out_features, bool with_bias,
                                          int64_t begin, int64_t end, const TensorSplit& split) {
  RowParallelLinear row;
  if (begin == 0 && end == in_features) {
    DI_CHECK(!split.split(), prefix, ": a row-parallel linear split ", split.size,
             " ways must hold part of its input columns");
    row.linear_ = Linear::load(weights, prefix, in_features, out_features, with_bias);
    return row;
  }
  DI_CHECK(!with_bias || split.reduce, prefix,
           ": a row-parallel bias needs the group that sums the partial outputs");
  row.linear_.in_features = end - begin;
  row.linear_.out_features = out_features;
  row.linear_.set_weight(weights, prefix + ".weight",
                         weights.matrix(prefix + ".weight", {out_features, in_features},
                                        MatrixUse::projection, Slice{1, begin, end}));
  if (with_bias) row.bias_ = weights.vector_f32(prefix + ".bias", {out_features});
  row.reduce_ = split.reduce;
  return row;
}

void RowParallelLinear::forward(const float* x, int64_t rows, float* y, ThreadPool& pool) const {
  linear_.forward(x, rows, y, pool);
  const int64_t n = rows * linear_.out_features;
  if (reduce_) reduce_->all_reduce_sum(std::span<float>(y, static_cast<size_t>(n)));
  if (bias_.defined()) {
    const float* b = bias_.data<float>();
    for (int64_t r = 0; r < rows; ++r)
      kernels::add(y + r * linear_.out_features, b, y + r * linear_.out_features,
                   linear_.out_features);
  }
}

SplitRmsNorm SplitRmsNorm::load(WeightLoader& weights, const std::string& name, int64_t full,
                                int64_t begin, int64_t end, double eps,
                                std::shared_ptr<parallel::Communicator> group, bool counted) {
  DI_CHECK(0 <= begin && begin < end && end <= full, name, ": columns [", begin, ", ", end,
           ") outside its ", full);
  SplitRmsNorm norm;
  norm.full_ = full;
  norm.counted_ = counted;
  if (begin == 0 && end == full) {
    norm.part_ = RmsNorm::load(weights, name, full, eps);
  } else {
    norm.part_.weight = weights.vector_f32(name, {full}, Slice{0, begin, end});
    norm.part_.eps = static_cast<float>(eps);
  }
  if (group && group->world_size() > 1) norm.group_ = std::move(group);
  return norm;
}

void SplitRmsNorm::forward(const float* x, int64_t rows, float* y) const {
  if (!group_) {
    part_.forward(x, rows, y);
    return;
  }
  const int64_t dim = part_.dim();
  std::vector<float> sums(static_cast<size_t>(rows), 0.0f);
  if (counted_) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < dim; ++c) sum += static_cast<double>(x[r * dim + c]) * x[r * dim + c];
      sums[static_cast<size_t>(r)] = static_cast<float>(sum);
    }
  }
  group_->all_reduce_sum(sums);
  const float* w = part_.weight.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float scale =
        1.0f / std::sqrt(sums[static_cast<size_t>(r)] / static_cast<float>(full_) + part_.eps);
    for (int64_t c = 0; c < dim; ++c) y[r * dim + c] = x[r * dim + c] * scale * w[c];
  }
}

}  // namespace deepinfer::model
