// Pipeline parallelism over thread ranks (parallel/testing::ThreadCommunicator): rank 0 drives a
// LockstepModel, the other stages run the lockstep worker, and rank 0's logits must match one
// process (the single-process path is checked against transformers by the golden tests).
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "engine/lockstep.h"
#include "model/causal_lm.h"
#include "model/golden_test_util.h"
#include "parallel/parallel_context.h"
#include "parallel/pipeline_split.h"
#include "parallel/thread_communicator.h"

namespace deepinfer::model {
namespace {

using testing::model_dir;
using testing::relative_max_diff;

constexpr double kTolerance = 1e-5;

// A prefill step of three sequences (7, 3 and 5 tokens) and then one decode token each;
// logits at every sequence's last row. Returns the logits of both steps, concatenated.
std::vector<float> run_two_steps(CausalLM& model, ThreadPool& pool) {
  const int64_t vocab = model.vocab_size();
  cache::KvCache cache(kv_cache_spec(model, 4, 16));
  const std::vector<int64_t> lengths = {7, 3, 5};
  std::vector<std::vector<int32_t>> tables;
  for (int64_t len : lengths) {
    std::vector<int32_t> table;
    cache.ensure_capacity(table, len + 1);
    tables.push_back(table);
  }
  std::vector<float> all;
  for (int step = 0; step < 2; ++step) {
    std::vector<int32_t> tokens, positions;
    ForwardBatch batch;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const int64_t first = step == 0 ? 0 : lengths[s];
      const int64_t count = step == 0 ? lengths[s] : 1;
      batch.sequences.push_back({static_cast<int64_t>(tokens.size()), count, tables[s]});
      for (int64_t p = first; p < first + count; ++p) {
        tokens.push_back(static_cast<int32_t>((p * 7 + static_cast<int64_t>(s) * 13 + 1) %
                                              static_cast<int32_t>(vocab)));
        positions.push_back(static_cast<int32_t>(p));
      }
      batch.logit_rows.push_back(static_cast<int64_t>(tokens.size()) - 1);
    }
    batch.tokens = tokens;
    batch.positions = positions;
    std::vector<float> logits(batch.logit_rows.size() * static_cast<size_t>(vocab));
    model.forward(batch, cache, logits.data(), pool);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

std::vector<float> one_process(const std::string& name) {
  ThreadPool pool(1);
  auto model = load_model(model_dir(name), {});
  return run_two_steps(*model, pool);
}

// Rank 0's logits with `stages` pipeline stages of `tensor` tensor-parallel ranks each, over
// stages x tensor thread ranks.
std::vector<float> pipelined(const std::string& name, int64_t stages, int64_t micro_batches,
                             int64_t tensor = 1) {
  parallel::ParallelRequest request;
  request.pipeline.size = stages;
  request.tensor.size = tensor;
  const auto sizes = parallel::ParallelSizes::resolve(request, stages * tensor);
  parallel::testing::ThreadGroup group(static_cast<int>(stages * tensor));
  std::vector<float> logits;
  group.run([&](int rank) {
    auto world = std::make_shared<parallel::testing::ThreadCommunicator>(group, rank);
    auto context = parallel::ParallelContext::build(sizes, world);
    LoadOptions options;
    options.parallel = context;
    options.num_micro_batches = micro_batches;
    auto model = load_model(model_dir(name), options);
    EXPECT_EQ(model->kv_layout().num_layers,
              parallel::pipeline_layers(model->config().num_hidden_layers,
                                        context->pipeline_stage(), stages)
                  .size());
    ThreadPool pool(1);
    if (rank == 0) {
      engine::LockstepModel driver(std::move(model), context->world());
      logits = run_two_steps(driver, pool);
    } else {
      engine::run_lockstep_worker(*model, *context->world(), pool);
    }
  });
  return logits;
}

TEST(PipelineDecoder, TwoStagesOfTwoLayersMatchOneProcess) {
  // Tied embeddings: the last stage holds the embedding as its lm_head.
  const auto ref = one_process("tiny-qwen2");
  for (int64_t micro : {1, 2, 3}) {
    const auto got = pipelined("tiny-qwen2", 2, micro);
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_LE(relative_max_diff(got, ref), kTolerance) << micro << " micro-batches";
  }
}

TEST(PipelineDecoder, ThreeStagesOfMlaAndMoeLayersMatchOneProcess) {
  const auto ref = one_process("tiny-deepseek-v2");  // 3 layers: dense, MoE, MoE
  for (int64_t micro : {1, 3}) {
    const auto got = pipelined("tiny-deepseek-v2", 3, micro);
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_LE(relative_max_diff(got, ref), kTolerance) << micro << " micro-batches";
  }
  // Uneven: 3 layers over 2 stages ([0, 2) and [2, 3)).
  EXPECT_LE(relative_max_diff(pipelined("tiny-deepseek-v2", 2, 2), ref), kTolerance);
}

TEST(PipelineDecoder, TwoStagesOfTwoTensorParallelRanksMatchOneProcess) {
  // Each stage's layers split over its own tensor group (tp 2 x pp 2 on 4 ranks).
  const auto ref = one_process("tiny-qwen2");
  for (int64_t micro : {1, 2}) {
    const auto got = pipelined("tiny-qwen2", 2, micro, 2);
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_LE(relative_max_diff(got, ref), kTolerance) << micro << " micro-batches";
  }
  EXPECT_LE(
      relative_max_diff(pipelined("tiny-deepseek-v2", 2, 1, 2), one_process("tiny-deepseek-v2")),
      kTolerance);
}

}  // namespace
}  // namespace deepinfer::model
