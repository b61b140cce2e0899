#pragma once
// The seam between the engine and the model: "run this scheduled step". The runner turns a
// SchedulerOutput into a model::ForwardBatch (each chunk's new tokens and positions, its
// sequence's block table) and runs it; the engine only says which rows' logits it wants and
// samples from them. Distributed runs need nothing here: rank 0's model is then an
// engine::LockstepModel (lockstep.h), which broadcasts each batch before running it, so the
// engine, the greedy loop and bench share one path.
#include <cstdint>
#include <span>
#include <vector>

#include "cache/kv_cache.h"
#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "model/causal_lm.h"

namespace deepinfer::engine {

class ModelRunner {
 public:
  ModelRunner(model::CausalLM& model, ThreadPool& pool) : model_(model), pool_(pool) {}

  // Lays out the step: chunk i's tokens are batch rows [first_rows()[i], + its num_tokens).
  void prepare(const SchedulerOutput& out);
  const std::vector<int64_t>& first_rows() const { return first_rows_; }
  // Runs the prepared step, writing its K/V into `cache`; returns the next-token logits of
  // `logit_rows` (batch rows), [logit_rows.size(), vocab_size], valid until the next step.
  std::span<float> execute(std::vector<int64_t> logit_rows, cache::KvCache& cache);

 private:
  model::CausalLM& model_;
  ThreadPool& pool_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> positions_;
  std::vector<int64_t> first_rows_;
  model::ForwardBatch batch_;
  std::vector<float> logits_;
};

}  // namespace deepinfer::engine
