// The engine on the tiny Qwen3 checkpoint: batch invariance against the single-sequence
// greedy loop, seeded sampling, prefix caching, preemption, aborts, rejections, priorities.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/error.h"
#include "engine_test_util.h"

namespace deepinfer::engine {
namespace {

using testing::greedy_params;
using testing::random_prompt;
using testing::run_all;
using testing::solo_greedy;
using testing::test_pool;
using testing::tiny_qwen3;

TEST(Engine, ThirtyTwoMixedRequestsMatchSoloRunsUnderChunkingPrefixHitsAndPreemption) {
  std::mt19937 rng(1234);
  const auto shared = random_prompt(rng, 24);  // 6 blocks of 4 shared by some prompts
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> lengths;
  for (int i = 0; i < 32; ++i) {
    std::vector<int32_t> p;
    if (i % 3 == 0) p = shared;
    const auto extra = random_prompt(rng, 1 + static_cast<int64_t>(rng() % 40));
    p.insert(p.end(), extra.begin(), extra.end());
    prompts.push_back(p);
    lengths.push_back(1 + static_cast<int64_t>(rng() % 24));
  }
  EngineConfig config;
  config.block_size = 4;
  config.max_num_blocks = 48;          // 192 tokens for 32 sequences: forces preemption
  config.max_num_batched_tokens = 40;  // prompts up to 64 tokens: forces chunked prefill
  config.max_num_seqs = 32;
  config.enable_prefix_caching = true;
  Engine engine(tiny_qwen3(), test_pool(), config);
  std::vector<RequestId> ids;
  for (int i = 0; i < 32; ++i)
    ids.push_back(engine.add_request(prompts[i], greedy_params(lengths[i])));
  const auto done = run_all(engine);

  const EngineStats stats = engine.stats();
  EXPECT_GT(stats.num_preemptions, 0);
  EXPECT_GT(stats.blocks.prefix_hit_tokens, 0);
  EXPECT_EQ(stats.blocks.free_blocks, config.max_num_blocks);
  for (int i = 0; i < 32; ++i) {
    const auto& c = done.at(ids[i]).at(0);
    EXPECT_EQ(c.token_ids, solo_greedy(prompts[i], lengths[i])) << "request " << i;
    EXPECT_EQ(c.finish_reason, FinishReason::length);
  }
}

TEST(Engine, SeededSamplingDoesNotDependOnBatchComposition) {
  std::mt19937 rng(99);
  SamplingParams sampled;
  sampled.temperature = 0.9;
  sampled.top_k = 40;
  sampled.top_p = 0.95;
  sampled.repetition_penalty = 1.1;
  sampled.max_new_tokens = 12;
  sampled.ignore_eos = true;
  sampled.seed = 77;
  sampled.n = 3;
  const auto prompt = random_prompt(rng, 21);

  EngineConfig alone_config;
  alone_config.block_size = 4;
  alone_config.max_num_blocks = 64;
  Engine alone(tiny_qwen3(), test_pool(), alone_config);
  const RequestId a = alone.add_request(prompt, sampled);
  const auto ref = run_all(alone).at(a);
  ASSERT_EQ(ref.size(), 3u);
  EXPECT_NE(ref[0].token_ids, ref[1].token_ids);  // siblings draw different streams

  // Same request among others, in a small pool (preemptions) with small chunks.
  EngineConfig busy_config = alone_config;
  busy_config.max_num_blocks = 12;
  busy_config.max_num_batched_tokens = 9;
  Engine busy(tiny_qwen3(), test_pool(), busy_config);
  for (int i = 0; i < 6; ++i) {
    SamplingParams other = sampled;
    other.seed = 1000 + i;
    other.n = 1 + i % 2;
    other.temperature = 0.5 + 0.1 * i;
    busy.add_request(random_prompt(rng, 5 + i * 3), other);
  }
  const RequestId b = busy.add_request(prompt, sampled);
  const auto got = run_all(busy).at(b);
  EXPECT_GT(busy.stats().num_preemptions, 0);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got[i].token_ids, ref[i].token_ids) << "sibling " << i;
}

TEST(Engine, SecondRequestSharingThreeBlocksComputesOnlyTheSuffix) {
  std::mt19937 rng(5);
  const auto first = random_prompt(rng, 53);  // 3 full blocks of 16 + 5
  auto second = std::vector<int32_t>(first.begin(), first.begin() + 48);
  const auto tail = random_prompt(rng, 7);
  second.insert(second.end(), tail.begin(), tail.end());

  EngineConfig config;
  config.max_num_blocks = 32;
  config.enable_prefix_caching = true;
  Engine engine(tiny_qwen3(), test_pool(), config);
  engine.add_request(first, greedy_params(4));
  run_all(engine);
  const int64_t before = engine.stats().forward_tokens;
  const RequestId id = engine.add_request(second, greedy_params(6));
  std::vector<int32_t> tokens;
  int64_t cached = -1;
  while (engine.has_unfinished()) {
    for (const auto& out : engine.step()) {
      cached = out.num_cached_tokens;
      for (const auto& d : out.completions) {
        tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
      }
      EXPECT_EQ(out.id, id);
    }
  }
  EXPECT_EQ(cached, 48);
  // 7 suffix tokens, then 5 decode steps of one token.
  EXPECT_EQ(engine.stats().forward_tokens - before, 7 + 5);
  EXPECT_EQ(engine.stats().blocks.prefix_hit_tokens, 48);
  EXPECT_EQ(tokens, solo_greedy(second, 6));
}

TEST(Engine, NSiblingsShareThePromptBlocks) {
  std::mt19937 rng(8);
  const auto prompt = random_prompt(rng, 37);  // 2 full blocks of 16 shared, 5 recomputed
  SamplingParams p = greedy_params(5);
  p.n = 3;
  EngineConfig config;
  config.max_num_blocks = 16;
  Engine engine(tiny_qwen3(), test_pool(), config);
  const RequestId id = engine.add_request(prompt, p);
  const auto done = run_all(engine);
  const auto ref = solo_greedy(prompt, 5);
  for (const auto& c : done.at(id)) EXPECT_EQ(c.token_ids, ref);
  // Prompt once, 2 x 5 tail tokens, then 4 decodes for each of 3 siblings.
  EXPECT_EQ(engine.stats().forward_tokens, 37 + 2 * 5 + 3 * 4);
  EXPECT_EQ(engine.stats().blocks.free_blocks, 16);
}

TEST(Engine, NoLeakAfterManyRandomRequestsWithAbortsAndPreemptions) {
#ifdef NDEBUG
  const int kRequests = 1000;
#else
  const int kRequests = 120;  // sanitizer builds are slow
#endif
  std::mt19937 rng(2024);
  EngineConfig config;
  config.block_size = 4;
  config.max_num_blocks = 40;
  config.max_num_seqs = 24;
  config.max_num_batched_tokens = 48;
  config.enable_prefix_caching = true;
  config.scheduling_policy = SchedulingPolicy::priority;
  config.eos_token_ids = {511};
  Engine engine(tiny_qwen3(), test_pool(), config);
  const auto shared = random_prompt(rng, 12);
  std::map<RequestId, int> finals;  // final outputs seen per request
  std::vector<RequestId> live;
  int submitted = 0, aborted = 0;
  while (submitted < kRequests || engine.has_unfinished()) {
    for (int k = 0; k < 4 && submitted < kRequests; ++k, ++submitted) {
      auto prompt = random_prompt(rng, 1 + static_cast<int64_t>(rng() % 20));
      if (rng() % 2) prompt.insert(prompt.begin(), shared.begin(), shared.end());
      SamplingParams p = greedy_params(1 + static_cast<int64_t>(rng() % 8));
      p.ignore_eos = rng() % 2;
      p.n = 1 + static_cast<int64_t>(rng() % 4 == 0);
      if (rng() % 3 == 0) {
        p.temperature = 1.0;
        p.seed = rng();
      }
      live.push_back(engine.add_request(prompt, p, static_cast<int64_t>(rng() % 3)));
    }
    if (!live.empty() && rng() % 3 == 0) {
      const size_t i = rng() % live.size();
      aborted += engine.abort(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    for (const auto& out : engine.step()) {
      if (out.finished) ++finals[out.id];
    }
  }
  const EngineStats stats = engine.stats();
  EXPECT_EQ(static_cast<int>(finals.size()), kRequests);
  for (const auto& [id, count] : finals) EXPECT_EQ(count, 1) << "request " << id;
  EXPECT_GT(aborted, 0);
  EXPECT_GT(stats.num_preemptions, 0);
  EXPECT_EQ(stats.blocks.free_blocks, config.max_num_blocks);
  EXPECT_EQ(stats.running + stats.waiting + stats.unfinished_requests, 0);
  EXPECT_FALSE(engine.abort(live.empty() ? 12345 : live.back()));
}

TEST(Engine, RejectsRequestsThatCanNeverRun) {
  EngineConfig config;
  config.block_size = 4;
  config.max_num_blocks = 10;
  config.max_model_len = 32;
  Engine engine(tiny_qwen3(), test_pool(), config);
  try {
    engine.add_request(std::vector<int32_t>(33, 1), greedy_params(1));
    FAIL() << "a 33-token prompt was accepted with max_model_len 32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_model_len 32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(engine.add_request({}, greedy_params(1)), Error);
  EXPECT_THROW(engine.add_request({1, 512}, greedy_params(1)), Error);
  SamplingParams bad = greedy_params(1);
  bad.top_p = 0;
  EXPECT_THROW(engine.add_request({1}, bad), Error);
  SamplingParams stops = greedy_params(1);
  stops.stop = {"x"};
  EXPECT_THROW(engine.add_request({1}, stops), Error);  // no tokenizer
  EXPECT_FALSE(engine.has_unfinished());
  // A length that can never fit in the pool is refused when the engine is built.
  config.max_model_len = 41;
  EXPECT_THROW(Engine(tiny_qwen3(), test_pool(), config), Error);
  // By default max_model_len is capped at the pool: 10 blocks of 4.
  config.max_model_len = 0;
  Engine capped(tiny_qwen3(), test_pool(), config);
  EXPECT_EQ(capped.config().max_model_len, 40);
  EXPECT_THROW(capped.add_request(std::vector<int32_t>(41, 1), greedy_params(1)), Error);
}

// A pool sized by memory holds at most what max_num_seqs sequences of max_model_len can use:
// tiny-qwen3 takes 1 KiB per token, so 4 GiB would be 262144 blocks of 16, never touched.
TEST(Engine, MemorySizedPoolIsCappedAtWhatTheSequencesCanUse) {
  EngineConfig config;
  config.kv_cache_memory_gib = 4;
  config.max_num_seqs = 3;
  config.max_model_len = 100;  // 7 blocks of 16 each
  Engine engine(tiny_qwen3(), test_pool(), config);
  EXPECT_EQ(engine.config().max_num_blocks, 3 * 7);
  // Without max_model_len the model's max_position_embeddings (256) bounds a sequence.
  config.max_model_len = 0;
  Engine by_model(tiny_qwen3(), test_pool(), config);
  EXPECT_EQ(by_model.config().max_num_blocks, 3 * (256 / 16));
  EXPECT_EQ(by_model.config().max_model_len, 256);
  // A smaller memory budget stays as it is: 64 KiB = 64 tokens = 4 blocks.
  config.kv_cache_memory_gib = 64.0 / (1024 * 1024);
  Engine small(tiny_qwen3(), test_pool(), config);
  EXPECT_EQ(small.config().max_num_blocks, 4);
}

// EngineConfig::seed (serve --seed) seeds the requests that give no seed of their own.
TEST(Engine, EngineSeedMakesUnseededSamplingReproducible) {
  SamplingParams sampled = greedy_params(12);
  sampled.temperature = 1.0;
  const auto run = [&](std::optional<uint64_t> seed) {
    EngineConfig config;
    config.max_num_blocks = 16;
    config.seed = seed;
    Engine engine(tiny_qwen3(), test_pool(), config);
    return engine.generate({{1, 2, 3}, {4, 5}}, {sampled, sampled});
  };
  const auto a = run(7), b = run(7), c = run(8);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].completions[0].token_ids, b[i].completions[0].token_ids);
  }
  EXPECT_NE(a[0].completions[0].token_ids, c[0].completions[0].token_ids);
}

TEST(Engine, GenerationStopsAtMaxModelLenStopTokensAndEos) {
  std::mt19937 rng(3);
  const auto prompt = random_prompt(rng, 10);
  const auto ref = solo_greedy(prompt, 12);
  EngineConfig config;
  config.block_size = 4;
  config.max_num_blocks = 8;
  config.max_model_len = 16;
  config.eos_token_ids = {ref[4]};
  Engine engine(tiny_qwen3(), test_pool(), config);
  const RequestId capped = engine.add_request(prompt, greedy_params(12));
  SamplingParams stop_ids = greedy_params(12);
  stop_ids.stop_token_ids = {ref[2]};
  const RequestId stopped = engine.add_request(prompt, stop_ids);
  SamplingParams eos = greedy_params(12);
  eos.ignore_eos = false;
  const RequestId at_eos = engine.add_request(prompt, eos);
  const RequestId none = engine.add_request(prompt, greedy_params(0));
  const auto done = run_all(engine);

  const auto first = [&](int64_t n) { return std::vector<int32_t>(ref.begin(), ref.begin() + n); };
  EXPECT_EQ(done.at(capped)[0].token_ids, first(6));  // 10 + 6 = max_model_len
  EXPECT_EQ(done.at(capped)[0].finish_reason, FinishReason::length);
  const auto until = [&](int32_t token) {
    return first(std::find(ref.begin(), ref.end(), token) - ref.begin() + 1);
  };
  EXPECT_EQ(done.at(stopped)[0].token_ids, until(ref[2]));
  EXPECT_EQ(done.at(stopped)[0].finish_reason, FinishReason::stop);
  EXPECT_EQ(done.at(at_eos)[0].token_ids, until(ref[4]));
  EXPECT_EQ(done.at(at_eos)[0].finish_reason, FinishReason::stop);
  EXPECT_TRUE(done.at(none)[0].token_ids.empty());
  EXPECT_EQ(done.at(none)[0].finish_reason, FinishReason::length);
}

TEST(Engine, PriorityPolicyServesLowerValuesFirst) {
  EngineConfig config;
  config.max_num_blocks = 16;
  config.max_num_seqs = 1;
  config.scheduling_policy = SchedulingPolicy::priority;
  Engine engine(tiny_qwen3(), test_pool(), config);
  const RequestId a = engine.add_request({1, 2, 3}, greedy_params(2), 5);
  const RequestId b = engine.add_request({4, 5, 6}, greedy_params(2), -1);
  const RequestId c = engine.add_request({7, 8, 9}, greedy_params(2), 3);
  std::vector<RequestId> finished_order;
  while (engine.has_unfinished()) {
    for (const auto& out : engine.step()) {
      if (out.finished) finished_order.push_back(out.id);
    }
  }
  EXPECT_EQ(finished_order, (std::vector<RequestId>{b, c, a}));
}

TEST(Engine, AbortFreesBlocksAtOnceAndReportsAbort) {
  EngineConfig config;
  config.block_size = 4;
  config.max_num_blocks = 32;
  config.max_num_seqs = 1;
  Engine engine(tiny_qwen3(), test_pool(), config);
  const RequestId running = engine.add_request(std::vector<int32_t>(20, 3), greedy_params(50));
  SamplingParams two = greedy_params(50);
  two.n = 2;
  const RequestId waiting = engine.add_request(std::vector<int32_t>(9, 4), two);
  engine.step();
  engine.step();
  EXPECT_EQ(engine.block_manager().free_blocks(), 32 - 6);  // 22 tokens in 6 blocks
  EXPECT_TRUE(engine.abort(running));
  EXPECT_EQ(engine.block_manager().free_blocks(), 32);
  EXPECT_TRUE(engine.abort(waiting));
  EXPECT_FALSE(engine.abort(waiting));
  std::map<RequestId, RequestOutput> outs;
  for (auto& out : engine.step()) outs[out.id] = out;
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(outs[running].finished);
  EXPECT_EQ(outs[running].completions.at(0).finish_reason, FinishReason::abort);
  ASSERT_EQ(outs[waiting].completions.size(), 2u);  // both siblings reported
  EXPECT_EQ(outs[waiting].completions[1].finish_reason, FinishReason::abort);
  EXPECT_FALSE(engine.has_unfinished());
  EXPECT_EQ(engine.stats().blocks.free_blocks, 32);
}

TEST(Engine, GenerateReturnsResultsInInputOrderWithLogprobs) {
  EngineConfig config;
  config.max_num_blocks = 16;
  Engine engine(tiny_qwen3(), test_pool(), config);
  SamplingParams p = greedy_params(4);
  p.logprobs = 2;
  const std::vector<std::vector<int32_t>> prompts = {{5, 6, 7, 8}, {9}, {10, 11}};
  const auto results = engine.generate(prompts, {p});
  ASSERT_EQ(results.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(results[i].prompt_ids, prompts[i]);
    const auto& c = results[i].completions.at(0);
    EXPECT_EQ(c.token_ids, solo_greedy(prompts[i], 4));
    ASSERT_EQ(c.logprobs.size(), 4u);
    for (size_t t = 0; t < 4; ++t) {
      // Greedy: the chosen token is the most likely one under the raw distribution.
      ASSERT_EQ(c.logprobs[t].top.size(), 2u);
      EXPECT_EQ(c.logprobs[t].top[0].first, c.token_ids[t]);
      EXPECT_FLOAT_EQ(c.logprobs[t].top[0].second, c.logprobs[t].chosen);
      EXPECT_LT(c.logprobs[t].chosen, 0.0f);
    }
  }
}

}  // namespace
}  // namespace deepinfer::engine
