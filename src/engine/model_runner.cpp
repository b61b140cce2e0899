#include "engine/model_runner.h"

#include <algorithm>

namespace deepinfer::engine {

void ModelRunner::prepare(const SchedulerOutput& out) {
  tokens_.clear();
  positions_.clear();
  first_rows_.clear();
  batch_ = {};
  tokens_.reserve(static_cast<size_t>(out.num_tokens));
  positions_.reserve(static_cast<size_t>(out.num_tokens));
  for (const ScheduledChunk& c : out.chunks) {
    const Sequence& seq = *c.seq;
    const auto begin = static_cast<int64_t>(tokens_.size());
    for (int64_t p = seq.num_computed; p < seq.num_computed + c.num_tokens; ++p) {
      tokens_.push_back(seq.tokens[static_cast<size_t>(p)]);
      positions_.push_back(static_cast<int32_t>(p));
    }
    first_rows_.push_back(begin);
    batch_.sequences.push_back(
        {begin, c.num_tokens, seq.block_table, std::max<int64_t>(seq.attention_group, 0)});
  }
  batch_.tokens = tokens_;
  batch_.positions = positions_;
}

std::span<float> ModelRunner::execute(std::vector<int64_t> logit_rows, cache::KvCache& cache) {
  batch_.logit_rows = std::move(logit_rows);
  const auto vocab = static_cast<size_t>(model_.vocab_size());
  logits_.resize(batch_.logit_rows.size() * vocab);
  model_.forward(batch_, cache, logits_.data(), pool_);
  return logits_;
}

}  // namespace deepinfer::engine
