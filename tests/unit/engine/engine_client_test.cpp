#include "engine/engine_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "core/error.h"
#include "engine_test_util.h"

namespace deepinfer::engine {
namespace {

using testing::greedy_params;
using testing::random_prompt;
using testing::solo_greedy;
using testing::test_pool;
using testing::tiny_qwen3;

// Reads a stream to its end; returns the tokens of choice 0 and the final finish reason.
std::pair<std::vector<int32_t>, FinishReason> drain(RequestStream& stream) {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::none;
  while (auto out = stream.next()) {
    for (const auto& d : out->completions) {
      tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
      if (d.finish_reason != FinishReason::none) reason = d.finish_reason;
    }
    if (out->finished) break;
  }
  return {tokens, reason};
}

TEST(EngineClient, ConcurrentSubmittersGetTheirSoloOutputs) {
  EngineConfig config;
  config.block_size = 4;
  config.max_num_blocks = 64;
  Engine engine(tiny_qwen3(), test_pool(), config);
  EngineClient client(engine);
  std::vector<std::vector<int32_t>> prompts;
  std::mt19937 rng(11);
  for (int i = 0; i < 12; ++i) prompts.push_back(random_prompt(rng, 3 + i));
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<size_t, std::shared_ptr<RequestStream>>> mine;
      for (size_t i = static_cast<size_t>(t); i < prompts.size(); i += 4) {
        mine.emplace_back(i, client.submit(prompts[i], greedy_params(6)));
      }
      for (auto& [i, stream] : mine) got[i] = drain(*stream).first;
    });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], solo_greedy(prompts[i], 6)) << i;
  client.shutdown();
  EXPECT_EQ(engine.stats().blocks.free_blocks, 64);
}

TEST(EngineClient, AbortEndsTheStreamAndShutdownAbortsWhatIsLeft) {
  EngineConfig config;
  config.max_num_blocks = 32;
  Engine engine(tiny_qwen3(), test_pool(), config);
  std::atomic<int> callback_finals{0};
  FinishReason callback_reason = FinishReason::none;
  std::atomic<bool> release{false};
  std::thread releaser;
  {
    EngineClient client(engine);
    EXPECT_THROW(client.submit({}, greedy_params(1)), Error);
    auto stream = client.submit({1, 2, 3}, greedy_params(400));
    // A second request aborts both at its first output, from the loop thread: the aborts
    // are handled before the next step, so neither can finish by length first.
    std::atomic<bool> aborted{false};
    client.submit({7, 8}, greedy_params(400), 0, [&](const RequestOutput& out) {
      if (!aborted.exchange(true)) {
        client.abort(stream->id());
        client.abort(out.id);
      }
    });
    const auto [tokens, reason] = drain(*stream);
    EXPECT_EQ(reason, FinishReason::abort);
    // The first request may step a few times before the second is queued (timing), but it
    // must end by the abort, long before its 400-token length.
    EXPECT_LT(tokens.size(), 400u);
    EXPECT_TRUE(stream->done());
    EXPECT_FALSE(stream->next(std::chrono::milliseconds(1)).has_value());

    // The third request's first output holds the loop thread until the client's destructor
    // has asked for shutdown (released 50 ms after this scope ends), so the request cannot run
    // to its length (max_model_len 256) before the shutdown, however the threads are scheduled.
    client.submit({4, 5}, greedy_params(400), 0, [&](const RequestOutput& out) {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!out.finished) return;
      ++callback_finals;
      callback_reason = out.completions.at(0).finish_reason;
    });
    releaser = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release = true;
    });
  }  // destructor: shutdown aborts the long request still running
  releaser.join();
  EXPECT_EQ(callback_finals.load(), 1);
  EXPECT_EQ(callback_reason, FinishReason::abort);
  EXPECT_FALSE(engine.has_unfinished());
  EXPECT_EQ(engine.stats().blocks.free_blocks, 32);
}

}  // namespace
}  // namespace deepinfer::engine
