#pragma once
#include <span>
#include <string>

#include "core/tensor.h"
#include "model/weights.h"

namespace deepinfer::model {

struct Embedding {
  Tensor weight;  // [vocab, hidden], f32 / bf16 / f16 / q8_0 / q4_0 / q4_1 (shared with a
                  // tied lm_head)

  static Embedding load(WeightLoader& weights, const std::string& name, int64_t vocab,
                        int64_t hidden);
  // out [tokens.size(), hidden]; ids outside the vocabulary are an Error.
  void forward(std::span<const int32_t> tokens, float* out) const;
};

}  // namespace deepinfer::model
