#include "model/layers/embedding.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/quant_blocks.h"

namespace deepinfer::model {

VocabPart VocabPart::of(int64_t vocab, const TensorSplit& split) {
  VocabPart part;
  part.per_rank = (vocab + split.size - 1) / split.size;
  part.begin = std::min(vocab, split.rank * part.per_rank);
  part.end = std::min(vocab, part.begin + part.per_rank);
  return part;
}

Embedding Embedding::load(WeightLoader& weights, const std::string& name, int64_t vocab,
                          int64_t hidden, bool tied) {
  const TensorSplit split = TensorSplit::over(weights.tensor_group());
  const MatrixUse use = tied ? MatrixUse::tied_embedding : MatrixUse::embedding;
  Embedding embedding;
  embedding.vocab = vocab;
  embedding.part = VocabPart::of(vocab, split);
  if (!split.split()) {
    embedding.weight = weights.matrix(name, {vocab, hidden}, use);
    return embedding;
  }
  embedding.weight = weights.matrix(name, {vocab, hidden}, use,
                                    Slice{0, embedding.part.begin, embedding.part.end});
  embedding.reduce = split.reduce;
  return embedding;
}

void Embedding::forward(std::span<const int32_t> tokens, float* out) const {
  const int64_t hidden = weight.dim(1);
  const size_t row_bytes = dtype_bytes(weight.dtype(), hidden);
  const auto* base = static_cast<const std::byte*>(weight.raw());
  // Block weights (a Q8_0 token_embd of a GGUF file): only the looked-up rows are decoded.
  const QuantTraits* blocks = block_traits(weight.dtype());
  // Unsplit (or built from a weight alone): every row is here.
  const int64_t total = reduce ? vocab : weight.dim(0);
  const int64_t first = reduce ? part.begin : 0;
  const int64_t last = reduce ? part.end : total;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    DI_CHECK(id >= 0 && id < total, "token id ", id, " is outside the vocabulary [0, ", total, ")");
    float* dst = out + static_cast<int64_t>(t) * hidden;
    if (id < first || id >= last) {  // another rank's row: it adds it
      std::fill_n(dst, hidden, 0.0f);
      continue;
    }
    const std::byte* row = base + static_cast<size_t>(id - first) * row_bytes;
    if (blocks) {
      blocks->dequantize_row(row, dst, hidden);
    } else {
      convert_to_f32(row, weight.dtype(), dst, static_cast<size_t>(hidden));
    }
  }
  // Exactly one rank holds each row, the others add zeros: the sum is the row, bit for bit.
  if (reduce) reduce->all_reduce_sum(std::span<float>(out, tokens.size() * hidden));
}

LmHead LmHead::load(WeightLoader& weights, const std::string& name, int64_t vocab, int64_t hidden) {
  const TensorSplit split = TensorSplit::over(weights.tensor_group());
  LmHead head;
  head.vocab_ = vocab;
  head.part_ = VocabPart::of(vocab, split);
  const std::string prefix = name.substr(0, name.size() - std::string(".weight").size());
  head.linear_ = load_column_parallel(weights, prefix, hidden, vocab, false, head.part_.begin,
                                      head.part_.end, MatrixUse::lm_head);
  if (split.split()) head.gather_ = split.reduce;
  return head;
}

LmHead LmHead::tied(const Embedding& embedding, bool huge_pages) {
  LmHead head;
  head.vocab_ = embedding.vocab;
  head.part_ = embedding.part;
  head.linear_.weight = embedding.weight;
  head.linear_.in_features = embedding.weight.dim(1);
  head.linear_.out_features = embedding.part.end - embedding.part.begin;
  head.linear_.pack(huge_pages);
  head.gather_ = embedding.reduce;
  return head;
}

void LmHead::forward(const float* x, int64_t rows, float* logits, ThreadPool& pool) const {
  if (!gather_) {
    linear_.forward(x, rows, logits, pool);
    return;
  }
  // My slice, padded to V' columns, then every rank's slice in rank order.
  const int64_t mine = part_.end - part_.begin;
  const int64_t width = part_.per_rank;
  std::vector<float> local(static_cast<size_t>(rows * mine));
  if (mine > 0 && rows > 0) linear_.forward(x, rows, local.data(), pool);
  std::vector<float> padded(static_cast<size_t>(rows * width), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(local.begin() + r * mine, mine, padded.begin() + r * width);
  const std::vector<float> all = gather_->all_gather<float>(padded);
  const int64_t ranks = gather_->world_size();
  for (int64_t q = 0; q < ranks; ++q) {
    const int64_t begin = std::min(vocab_, q * width);
    const int64_t count = std::min(vocab_, begin + width) - begin;
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(all.begin() + (q * rows + r) * width, count, logits + r * vocab_ + begin);
    }
  }
}

}  // namespace deepinfer::model
