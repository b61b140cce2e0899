#include "model/layers/embedding.h"

#include "core/error.h"

namespace deepinfer::model {

Embedding Embedding::load(WeightLoader& weights, const std::string& name, int64_t vocab,
                          int64_t hidden) {
  return Embedding{weights.matrix(name, {vocab, hidden})};
}

void Embedding::forward(std::span<const int32_t> tokens, float* out) const {
  const int64_t vocab = weight.dim(0);
  const int64_t hidden = weight.dim(1);
  const size_t row_bytes = static_cast<size_t>(hidden) * dtype_size(weight.dtype());
  const auto* base = static_cast<const std::byte*>(weight.raw());
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    DI_CHECK(id >= 0 && id < vocab, "token id ", id, " is outside the vocabulary [0, ", vocab, ")");
    convert_to_f32(base + static_cast<size_t>(id) * row_bytes, weight.dtype(),
                   out + static_cast<int64_t>(t) * hidden, static_cast<size_t>(hidden));
  }
}

}  // namespace deepinfer::model
