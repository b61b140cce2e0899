#include "model/layers/embedding.h"

#include "core/error.h"
#include "core/quant_blocks.h"

namespace deepinfer::model {

Embedding Embedding::load(WeightLoader& weights, const std::string& name, int64_t vocab,
                          int64_t hidden) {
  return Embedding{weights.matrix(name, {vocab, hidden}, MatrixUse::embedding)};
}

void Embedding::forward(std::span<const int32_t> tokens, float* out) const {
  const int64_t vocab = weight.dim(0);
  const int64_t hidden = weight.dim(1);
  const size_t row_bytes = dtype_bytes(weight.dtype(), hidden);
  const auto* base = static_cast<const std::byte*>(weight.raw());
  // Block weights (a Q8_0 token_embd of a GGUF file): only the looked-up rows are decoded.
  const QuantTraits* blocks = block_traits(weight.dtype());
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    DI_CHECK(id >= 0 && id < vocab, "token id ", id, " is outside the vocabulary [0, ", vocab, ")");
    const std::byte* row = base + static_cast<size_t>(id) * row_bytes;
    float* dst = out + static_cast<int64_t>(t) * hidden;
    if (blocks) {
      blocks->dequantize_row(row, dst, hidden);
    } else {
      convert_to_f32(row, weight.dtype(), dst, static_cast<size_t>(hidden));
    }
  }
}

}  // namespace deepinfer::model
