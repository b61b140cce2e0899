// Lockstep expert parallelism without MPI: two ranks as threads (ThreadCommunicator), rank 0
// driving an engine and the greedy loop through a LockstepModel, rank 1 following in
// run_lockstep_worker, experts split between them. The tokens and logits must be those of one
// process bitwise (the kernels are batch-invariant and the MoE layer splits only the work).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "../parallel/thread_communicator.h"
#include "engine/engine.h"
#include "engine/greedy.h"
#include "engine/lockstep.h"
#include "engine_test_util.h"

namespace deepinfer::engine {
namespace {

using parallel::testing::ThreadCommunicator;
using parallel::testing::ThreadGroup;

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;  // engine, one per prompt
  std::vector<float> prompt_logits;          // greedy loop, last prompt position
  int64_t steps = 0;                         // engine steps + greedy forwards
};

const std::vector<std::vector<int32_t>> kPrompts = {
    {5, 9, 33, 2, 7, 71, 100, 3}, {44, 1, 8}, {5, 9, 33, 2, 7, 71, 100, 3, 12, 13, 14}};

// Runs the prompts through an engine (small pool: chunked prefill, prefix hits) and the last
// one through the greedy loop.
Outcome drive(model::CausalLM& model, ThreadPool& pool) {
  EngineConfig config;
  config.block_size = 4;
  config.max_num_blocks = 24;
  config.max_num_batched_tokens = 8;
  config.enable_prefix_caching = true;
  Engine engine(model, pool, config);
  Outcome run;
  for (const auto& r : engine.generate(kPrompts, {testing::greedy_params(6)})) {
    run.tokens.push_back(r.completions.at(0).token_ids);
  }
  run.steps = engine.stats().steps;
  cache::KvCache cache(model::kv_cache_spec(model, 16, 2));
  GreedyOptions options;
  options.max_new_tokens = 5;
  options.ignore_eos = true;
  const GreedyResult greedy = greedy_generate(model, cache, kPrompts.back(), options, pool);
  run.prompt_logits = greedy.prompt_logits;
  run.steps += 1 + greedy.decode_steps;
  return run;
}

class Lockstep : public ::testing::TestWithParam<const char*> {};

TEST_P(Lockstep, TwoRanksComputeWhatOneProcessDoes) {
  const std::string dir = std::string(DEEPINFER_TEST_DATA_DIR) + "/" + GetParam();
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " is absent";
  ThreadPool one(1);
  auto whole = model::load_model(dir, {});
  const Outcome want = drive(*whole, one);

  ThreadGroup world_group(2), expert_group(2);
  Outcome got;
  int64_t worker_steps = -1;
  world_group.run([&](int rank) {
    auto world = std::make_shared<ThreadCommunicator>(world_group, rank);
    auto expert = std::make_shared<ThreadCommunicator>(expert_group, rank);
    model::LoadOptions options;
    options.parallel = parallel::ParallelContext::from(world, expert);
    auto model = model::load_model(dir, options);
    ThreadPool pool(1);
    if (rank == 0) {
      LockstepModel lockstep(std::move(model), world);
      got = drive(lockstep, pool);
    } else {
      worker_steps = run_lockstep_worker(*model, *world, pool);
    }
  });
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.prompt_logits, want.prompt_logits);
  EXPECT_EQ(worker_steps, want.steps) << "the worker ran every step of rank 0, then stopped";
}

// Two models in one command (validate: the model under test and its reference): the worker
// follows both, each with its own cache, and stops once both were stopped.
TEST(LockstepTwoModels, WorkerFollowsEachModelUntilBothStop) {
  const std::string dir = std::string(DEEPINFER_TEST_DATA_DIR) + "/tiny-qwen3-moe";
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " is absent";
  ThreadPool one(1);
  auto whole = model::load_model(dir, {});
  const Outcome want = drive(*whole, one);

  ThreadGroup world_group(2), expert_a(2), expert_b(2);
  Outcome got_a, got_b;
  int64_t worker_steps = -1;
  world_group.run([&](int rank) {
    auto world = std::make_shared<ThreadCommunicator>(world_group, rank);
    const auto load = [&](ThreadGroup& group) {
      model::LoadOptions options;
      options.parallel =
          parallel::ParallelContext::from(world, std::make_shared<ThreadCommunicator>(group, rank));
      return model::load_model(dir, options);
    };
    auto a = load(expert_a);
    auto b = load(expert_b);
    ThreadPool pool(1);
    if (rank == 0) {
      LockstepModel first(std::move(a), world, nullptr, 0);
      LockstepModel second(std::move(b), world, nullptr, 1);
      got_a = drive(first, pool);
      got_b = drive(second, pool);
      first.stop();  // the worker keeps following the second
      got_b.steps += drive(second, pool).steps;
    } else {
      model::CausalLM* const both[] = {a.get(), b.get()};
      worker_steps = run_lockstep_worker(both, *world, pool);
    }
  });
  EXPECT_EQ(got_a.tokens, want.tokens);
  EXPECT_EQ(got_b.tokens, want.tokens);
  EXPECT_EQ(got_b.prompt_logits, want.prompt_logits);
  EXPECT_EQ(worker_steps, 3 * want.steps);
}

INSTANTIATE_TEST_SUITE_P(Tiny, Lockstep,
                         ::testing::Values("tiny-deepseek-v3", "tiny-qwen3-moe", "tiny-glm4-moe"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace deepinfer::engine
