// Every model family through the engine: batched (chunked prefill, prefix hits, preemption)
// equals the single-sequence greedy loop token for token. Catches a family whose forward is
// not batch-invariant or mishandles block tables (MLA's latent cache, MoE routing).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "engine/engine.h"
#include "engine/greedy.h"
#include "engine_test_util.h"

namespace deepinfer::engine {
namespace {

const char* const kFamilies[] = {
    "tiny-qwen2",       "tiny-qwen3-moe",        "tiny-glm",        "tiny-glm4", "tiny-glm4-moe",
    "tiny-deepseek-v2", "tiny-deepseek-v2-lite", "tiny-deepseek-v3"};

class EngineFamilies : public ::testing::TestWithParam<const char*> {};

// `kv_dtype`: the cache of both the engine and the loop (a quantized cache is quantized per
// token row, so batching must not change anything either).
void expect_batched_equals_loop(const char* family, DType kv_dtype) {
  const std::string dir = std::string(DEEPINFER_TEST_DATA_DIR) + "/" + family;
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " is absent";
  auto model = model::load_model(dir, {});
  ThreadPool& pool = testing::test_pool();
  std::mt19937 rng(17);
  const int64_t vocab = std::min<int64_t>(model->vocab_size(), 500);
  std::vector<int32_t> shared(9);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % vocab);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p = i % 2 ? shared : std::vector<int32_t>{};
    for (int64_t k = 0, n = 2 + static_cast<int64_t>(rng() % 24); k < n; ++k) {
      p.push_back(static_cast<int32_t>(rng() % vocab));
    }
    prompts.push_back(p);
  }
  EngineConfig config;
  config.block_size = 4;
  config.max_num_blocks = 36;
  config.max_num_batched_tokens = 16;
  config.enable_prefix_caching = true;
  config.kv_cache_dtype = kv_dtype;
  Engine engine(*model, pool, config);
  const auto results = engine.generate(prompts, {testing::greedy_params(10)});
  EXPECT_GT(engine.stats().num_preemptions, 0);
  EXPECT_GT(engine.stats().blocks.prefix_hit_tokens, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    cache::KvCache cache(model::kv_cache_spec(*model, 16, 4, kv_dtype));
    GreedyOptions options;
    options.max_new_tokens = 10;
    options.ignore_eos = true;
    const auto ref = greedy_generate(*model, cache, prompts[i], options, pool).output_ids;
    EXPECT_EQ(results[i].completions.at(0).token_ids, ref)
        << family << " " << dtype_name(kv_dtype) << " prompt " << i;
  }
}

TEST_P(EngineFamilies, BatchedGreedyEqualsTheSingleSequenceLoop) {
  expect_batched_equals_loop(GetParam(), DType::f32);
}

TEST_P(EngineFamilies, BatchedGreedyEqualsTheSingleSequenceLoopWithAnInt8Cache) {
  expect_batched_equals_loop(GetParam(), DType::i8);
}

INSTANTIATE_TEST_SUITE_P(Tiny, EngineFamilies, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace deepinfer::engine
