#pragma once
// Tensor parallelism of one layer (docs/DISTRIBUTED.md, "Tensor parallelism"): which part of a
// split dimension this rank holds, and the linears built on it.
//   column parallel  a Linear holding output rows [begin, end) (and their bias): each rank
//                    computes its slice of the output; no communication.
//   row parallel     RowParallelLinear: input columns [begin, end), partial outputs summed over
//                    the group (all_reduce_sum, fixed order), the bias added once, after the sum.
// At size 1 both are the unsplit Linear (bit for bit what one process computes).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "model/layers/linear.h"
#include "model/weights.h"
#include "parallel/communicator.h"

namespace deepinfer::model {

struct TensorSplit {
  int64_t rank = 0;
  int64_t size = 1;
  // Sums the partial outputs of row-parallel layers; null: the caller sums them (the MoE
  // layer reduces routed and shared experts together, once).
  std::shared_ptr<parallel::Communicator> reduce;

  // Split over `group` (rank and size from it), reducing over it.
  static TensorSplit over(std::shared_ptr<parallel::Communicator> group);
  bool split() const { return size > 1; }
  // This rank's part [begin, end) of `n` units; refuses (naming `what`, e.g. "layer 3's 14
  // attention heads", and the numbers) when the size does not divide n.
  std::pair<int64_t, int64_t> part(int64_t n, const std::string& what) const;
};

// A Linear holding output rows [begin, end) of <prefix>.weight [out, in] (and of its bias).
Linear load_column_parallel(WeightLoader& weights, const std::string& prefix, int64_t in_features,
                            int64_t out_features, bool with_bias, int64_t begin, int64_t end,
                            MatrixUse use = MatrixUse::projection);

class RowParallelLinear {
 public:
  // Input columns [begin, end) of <prefix>.weight [out, in]; the bias (whole) after the sum.
  static RowParallelLinear load(WeightLoader& weights, const std::string& prefix,
                                int64_t in_features, int64_t out_features, bool with_bias,
                                int64_t begin, int64_t end, const TensorSplit& split);
  // x [rows, end - begin] -> y [rows, out_features], summed over the split's group.
  void forward(const float* x, int64_t rows, float* y, ThreadPool& pool) const;
  int64_t in_features() const { return linear_.in_features; }
  int64_t out_features() const { return linear_.out_features; }

 private:
  Linear linear_;  // this rank's columns (with the bias when unsplit)
  Tensor bias_;    // split: added after the sum
  std::shared_ptr<parallel::Communicator> reduce_;
};

}  // namespace deepinfer::model
