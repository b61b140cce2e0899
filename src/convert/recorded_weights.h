#pragma once
// What a model build took from its WeightLoader (model::TensorRecorder), as the tensors of the
// converted checkpoint: per-expert matrices, or with --enable_moe_optimization each layer's
// expert stacks as transformers 5's fused <prefix>.gate_up_proj [E, 2I, H] / .down_proj
// [E, H, I] (what ExpertStack maps zero-copy), in whatever dtype the stack holds; W8A8 stacks
// with their row scales as <prefix>.gate_up_proj_scale [E, 2I, 1] / .down_proj_scale [E, H, 1].
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/weights.h"

namespace deepinfer::convert {

struct RecordedTensor {
  std::string name;
  Tensor tensor;
  std::optional<io::TensorSlice> slice;  // this rank's rows of the stored tensor
};

class RecordedWeights : public model::TensorRecorder {
 public:
  void record(const std::string& name, const Tensor& tensor, model::MatrixUse use,
              std::optional<io::TensorSlice> slice) override;
  void record_expert_stack(const std::string& prefix, int64_t num_experts, int64_t first,
                           const Tensor& gate_up, const Tensor& down, const Tensor& gate_up_scale,
                           const Tensor& down_scale) override;

  // The tensors to write, in name order (layer numbers compared as numbers).
  std::vector<RecordedTensor> tensors(bool stack_experts) const;

 private:
  struct Stack {
    int64_t num_experts;
    int64_t first;
    Tensor gate_up;
    Tensor down;
    Tensor gate_up_scale;  // W8A8 row scales [E, rows, 1], or undefined
    Tensor down_scale;
  };
  std::map<std::string, RecordedTensor> recorded_;
  std::map<std::string, Stack> stacks_;  // by prefix
};

// "a.10.b" after "a.9.b": digit runs compare as numbers.
bool natural_less(const std::string& a, const std::string& b);

}  // namespace deepinfer::convert
