#pragma once
// Token embeddings and the output projection (lm_head), vocab parallel under tensor
// parallelism: rank r of tp holds vocabulary rows [r V', min((r + 1) V', vocab)) with V' =
// ceil(vocab / tp) (the vocabulary padded to a multiple of tp, as vLLM pads; the padding rows
// exist on no rank). The embedding looks up the ids in its rows, zeros for the others, and
// all-reduces; the lm_head computes its slice of the logits and all-gathers them.
#include <memory>
#include <span>
#include <string>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "model/layers/linear.h"
#include "model/layers/tensor_parallel.h"
#include "model/weights.h"
#include "parallel/communicator.h"

namespace deepinfer::model {

// This rank's vocabulary rows.
struct VocabPart {
  int64_t begin = 0;
  int64_t end = 0;       // <= vocab (the last ranks may hold fewer rows, or none)
  int64_t per_rank = 0;  // V', the padded slice every rank exchanges

  static VocabPart of(int64_t vocab, const TensorSplit& split);
};

struct Embedding {
  Tensor weight;  // [part rows, hidden], f32 / bf16 / f16 / q8_0 / q4_0 / q4_1 (shared with a
                  // tied lm_head)
  int64_t vocab = 0;
  VocabPart part{};
  std::shared_ptr<parallel::Communicator> reduce = nullptr;  // null: unsplit

  // This rank's rows of the loader's tensor group. `tied`: the lm_head too
  // (MatrixUse::tied_embedding: quantized with it under --quantize-lm-head).
  static Embedding load(WeightLoader& weights, const std::string& name, int64_t vocab,
                        int64_t hidden, bool tied = false);
  // out [tokens.size(), hidden]; ids outside the vocabulary are an Error.
  void forward(std::span<const int32_t> tokens, float* out) const;
};

class LmHead {
 public:
  // `name` [vocab, hidden] as an lm_head, this rank's rows.
  static LmHead load(WeightLoader& weights, const std::string& name, int64_t vocab, int64_t hidden);
  // Tied to the embedding: its rows (the same slice), packed (on huge pages if asked).
  static LmHead tied(const Embedding& embedding, bool huge_pages = false);
  // x [rows, hidden] -> logits [rows, vocab] (whole rows on every rank).
  void forward(const float* x, int64_t rows, float* logits, ThreadPool& pool) const;

 private:
  Linear linear_;  // this rank's rows
  int64_t vocab_ = 0;
  VocabPart part_;
  std::shared_ptr<parallel::Communicator> gather_;  // null: unsplit
};

}  // namespace deepinfer::model
