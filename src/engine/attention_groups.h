#pragma once
// Attention data parallelism in one step (SGLang's DP attention): the step rank 0 broadcasts
// holds every attention group's sequences, each tagged with its group
// (model::SequenceSlice::attention_group). Each rank runs the model over its own group's
// sequences only — its KV cache holds only them — and may have none this step: it still runs
// the forward with an empty batch, so its MoE layers join the expert all-to-alls. The logits
// of each group's rows then travel to rank 0 over the attention-data group (tensor rank 0 of
// each group sends), back into the step's logit-row order.
#include <cstdint>
#include <vector>

#include "cache/kv_cache.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "parallel/parallel_context.h"

namespace deepinfer::engine {

// One group's part of a step: its sequences packed (rows rebased), and for each of its logit
// rows the index of that row in the step's logit_rows.
struct GroupStep {
  std::vector<int32_t> tokens, positions;
  model::ForwardBatch batch;
  std::vector<int64_t> logit_slots;
};

GroupStep select_attention_group(const model::ForwardBatch& step, int64_t group);

// Runs this rank's group of `step` and (on rank 0) fills `logits` for every logit row of the
// step, [step.logit_rows.size(), vocab]. Collective over the layout's attention-data group.
void run_attention_groups(model::CausalLM& model, const model::ForwardBatch& step,
                          cache::KvCache& cache, float* logits, ThreadPool& pool,
                          const parallel::ParallelContext& layout);

}  // namespace deepinfer::engine
