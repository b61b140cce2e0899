#pragma once
// Tensor parallelism of one layer (docs/DISTRIBUTED.md, "Tensor parallelism"): which part of a
// split dimension this rank holds, and the linears built on it.
//   column parallel  a Linear holding output rows [begin, end) (and their bias): each rank
//                    computes its slice of the output; no communication.
//   row parallel     RowParallelLinear: input columns [begin, end), partial outputs summed over
//                    the group (all_reduce_sum, fixed order), the bias added once, after the sum.
//   split norm       SplitRmsNorm: an RMSNorm over a row whose columns [begin, end) are this
//                    rank's (MiniMax-M2's q/k norm over all heads, heads split over ranks): the
//                    per-row sum of squares all-reduced over the group.
// At size 1 all are the unsplit layer (bit for bit what one process computes).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "model/layers/linear.h"
#include "model/layers/rms_norm.h"
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

// y = x / sqrt(mean over the whole row of x^2 + eps) * weight, for rows of `full` columns of
// which this rank holds [begin, end) (and that part of the weight).
class SplitRmsNorm {
 public:
  // <name> [full] (f32), this rank's part. `counted` false: this rank's columns replicate
  // another rank's (KV heads replicated when tp > kv_heads) and add nothing to the sum, so
  // each column counts once. `group` null or of size 1: the plain RmsNorm of the whole row.
  static SplitRmsNorm load(WeightLoader& weights, const std::string& name, int64_t full,
                           int64_t begin, int64_t end, double eps,
                           std::shared_ptr<parallel::Communicator> group, bool counted = true);
  // x [rows, end - begin] -> y (may alias x). Every rank of the group calls it together.
  void forward(const float* x, int64_t rows, float* y) const;

 private:
  RmsNorm part_;  // this rank's columns of the weight
  int64_t full_ = 0;
  bool counted_ = true;
  std::shared_ptr<parallel::Communicator> group_;  // null: unsplit
};

}  // namespace deepinfer::model
