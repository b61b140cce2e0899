// Attention data parallelism over thread ranks: rank 0's engine assigns sequences to 2
// attention groups, each rank runs only its group's sequences, and the MoE layers exchange
// tokens over the expert group (ep 2). Every request's tokens and logprobs must equal one
// process's (the single-process engine is checked against transformers elsewhere).
#include "engine/attention_groups.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/lockstep.h"
#include "model/golden_test_util.h"
#include "parallel/parallel_context.h"
#include "parallel/thread_communicator.h"

namespace deepinfer::engine {
namespace {

TEST(AttentionGroups, SelectsAGroupsRowsAndLogitSlots) {
  const std::vector<int32_t> tokens = {10, 11, 12, 20, 30, 31}, positions = {0, 1, 2, 5, 0, 1};
  model::ForwardBatch step;
  step.tokens = tokens;
  step.positions = positions;
  step.sequences = {{0, 3, {}, 1}, {3, 1, {}, 0}, {4, 2, {}, 1}};
  step.logit_rows = {5, 3, 2};
  const GroupStep one = select_attention_group(step, 1);
  EXPECT_EQ(one.tokens, (std::vector<int32_t>{10, 11, 12, 30, 31}));
  EXPECT_EQ(one.positions, (std::vector<int32_t>{0, 1, 2, 0, 1}));
  ASSERT_EQ(one.batch.sequences.size(), 2u);
  EXPECT_EQ(one.batch.sequences[1].begin, 3);
  EXPECT_EQ(one.batch.logit_rows, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(one.logit_slots, (std::vector<int64_t>{0, 2}));
  const GroupStep zero = select_attention_group(step, 0);
  EXPECT_EQ(zero.batch.logit_rows, (std::vector<int64_t>{0}));
  EXPECT_EQ(zero.logit_slots, (std::vector<int64_t>{1}));
  EXPECT_TRUE(select_attention_group(step, 2).tokens.empty());  // a group with nothing
}

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 9; ++i) {
    std::vector<int32_t> p;
    for (int j = 0; j < 2 + (i * 5) % 11; ++j) p.push_back((i * 31 + j * 7 + 3) % 200);
    out.push_back(p);
  }
  return out;
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = 8;
  p.ignore_eos = true;
  p.logprobs = 3;
  return p;
}

EngineConfig engine_config(int64_t groups) {
  EngineConfig c;
  c.block_size = 4;
  c.max_num_blocks = 16;  // per group: small enough that sequences get preempted
  c.max_num_batched_tokens = 24;
  c.attention_groups = groups;
  return c;
}

std::vector<RequestResult> one_process(const std::string& dir) {
  ThreadPool pool(1);
  auto model = model::load_model(dir, {});
  Engine engine(*model, pool, engine_config(1));
  return engine.generate(prompts(), {greedy()});
}

// Rank 0's engine over `world` thread ranks laid out as `request` asks.
std::vector<RequestResult> distributed(const std::string& dir,
                                       const parallel::ParallelRequest& request, int world_size,
                                       int64_t* preemptions) {
  const auto sizes = parallel::ParallelSizes::resolve(request, world_size);
  parallel::testing::ThreadGroup group(world_size);
  std::vector<RequestResult> results;
  group.run([&](int rank) {
    auto world = std::make_shared<parallel::testing::ThreadCommunicator>(group, rank);
    auto context = parallel::ParallelContext::build(sizes, world);
    model::LoadOptions options;
    options.parallel = context;
    auto model = model::load_model(dir, options);
    ThreadPool pool(1);
    if (rank == 0) {
      LockstepModel driver(std::move(model), context->world(), context);
      Engine engine(driver, pool, engine_config(sizes.data));
      results = engine.generate(prompts(), {greedy()});
      *preemptions = engine.stats().num_preemptions;
    } else {
      run_lockstep_worker(*model, *context->world(), pool, context.get());
    }
  });
  return results;
}

void expect_same(const std::vector<RequestResult>& got, const std::vector<RequestResult>& ref,
                 const char* name) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const Completion& r = ref[i].completions[0];
    const Completion& g = got[i].completions[0];
    EXPECT_EQ(g.token_ids, r.token_ids) << name << " request " << i;
    ASSERT_EQ(g.logprobs.size(), r.logprobs.size());
    for (size_t t = 0; t < r.logprobs.size(); ++t)
      EXPECT_NEAR(g.logprobs[t].chosen, r.logprobs[t].chosen, 1e-5) << name << " " << i;
  }
}

parallel::ParallelRequest layout(int64_t tensor, int64_t data, int64_t expert) {
  parallel::ParallelRequest request;
  request.tensor.size = tensor;
  request.data.size = data;
  request.expert.size = expert;
  return request;
}

TEST(AttentionGroups, TwoGroupsWithExpertParallelismMatchOneProcess) {
  for (const char* name : {"tiny-deepseek-v2", "tiny-qwen3-moe"}) {
    const std::string dir = model::testing::model_dir(name);
    int64_t preemptions = 0;
    expect_same(distributed(dir, layout(1, 2, 2), 2, &preemptions), one_process(dir), name);
    EXPECT_GT(preemptions, 0) << "the pools were meant to run full";
  }
}

TEST(AttentionGroups, GroupsOfTwoRanksSplitTheirTokensAmongTheirExpertPeers) {
  // tp 2 x dp 2, ep 4: the MoE layers of each attention group's two ranks split that group's
  // tokens between them (expert token peers) while all four exchange over the expert group.
  const std::string dir = model::testing::model_dir("tiny-qwen3-moe");
  int64_t preemptions = 0;
  expect_same(distributed(dir, layout(2, 2, 4), 4, &preemptions), one_process(dir),
              "tiny-qwen3-moe");
}

}  // namespace
}  // namespace deepinfer::engine
