#pragma once
// Lockstep execution over ranks (expert parallelism at this milestone): rank 0 owns the
// tokenizer, the engine and the scheduler, and runs the model through a LockstepModel, which
// broadcasts every step's ForwardBatch (tokens, positions, per-sequence rows and block
// tables, logit rows) and the KV cache's geometry before running it. Every other rank runs
// run_lockstep_worker: receive a step, run the same forward (its MoE layers meet rank 0's in
// the expert all-to-alls), repeat until the stop message.
//
// This sits at CausalLM::forward, the one call every runner makes (the engine's step, the
// greedy loop of `generate`, bench's engine), so each of them runs distributed unchanged.
// Workers keep a KV cache of the same geometry and the same block tables as rank 0's
// (attention is replicated at this milestone); they allocate nothing themselves, rank 0's
// block manager decides.
//
// A command may load several models (validate: the model under test and its reference):
// each of rank 0's LockstepModels carries its index, in load order, and a worker follows
// all of them until each has sent its stop message. The wire format is step_message.h.
#include <memory>
#include <span>

#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "parallel/communicator.h"
#include "parallel/parallel_context.h"

namespace deepinfer::engine {

class LockstepModel : public model::CausalLM {
 public:
  // `world`: rank 0 of it is this process; every other rank runs run_lockstep_worker.
  // `layout` (optional): with attention data parallelism each rank runs only its attention
  // group's sequences of a step (attention_groups.h). `index`: this model's place among the
  // models the workers follow (load order).
  LockstepModel(std::unique_ptr<model::CausalLM> model,
                std::shared_ptr<parallel::Communicator> world,
                std::shared_ptr<const parallel::ParallelContext> layout = nullptr,
                int64_t index = 0);
  ~LockstepModel() override;  // stops the workers
  LockstepModel(const LockstepModel&) = delete;
  LockstepModel& operator=(const LockstepModel&) = delete;

  const io::ModelConfig& config() const override { return model_->config(); }
  model::KvLayout kv_layout() const override { return model_->kv_layout(); }
  void forward(const model::ForwardBatch& batch, cache::KvCache& cache, float* logits,
               ThreadPool& pool) override;
  // Rank 0's counters: the tokens it routed (every rank routes the same replicated batch).
  std::vector<std::vector<uint64_t>> expert_load() const override { return model_->expert_load(); }
  void reset_expert_load() override { model_->reset_expert_load(); }
  std::shared_ptr<const parallel::EplbState> eplb_state() const override {
    return model_->eplb_state();
  }

  // Sends the stop message (once; the destructor does it otherwise).
  void stop();

 private:
  std::unique_ptr<model::CausalLM> model_;
  std::shared_ptr<parallel::Communicator> world_;
  std::shared_ptr<const parallel::ParallelContext> layout_;
  int64_t index_ = 0;
  bool stopped_ = false;
};

// Ranks > 0: runs rank 0's steps through `models` (rank 0's LockstepModel of index i is
// models[i]) until every one of them has been stopped. Returns the number of steps run.
// `layout` as LockstepModel's.
int64_t run_lockstep_worker(std::span<model::CausalLM* const> models, parallel::Communicator& world,
                            ThreadPool& pool, const parallel::ParallelContext* layout = nullptr);
// One model (index 0).
int64_t run_lockstep_worker(model::CausalLM& model, parallel::Communicator& world, ThreadPool& pool,
                            const parallel::ParallelContext* layout = nullptr);

}  // namespace deepinfer::engine
