#pragma once
// Shared fixtures of the engine tests: the tiny Qwen3 checkpoint (f32) loaded once, and an
// independent reference: the single-sequence greedy loop.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/greedy.h"
#include "model/causal_lm.h"

namespace deepinfer::engine::testing {

inline std::string tiny_qwen3_dir() {
  return std::string(DEEPINFER_TEST_DATA_DIR) + "/tiny-qwen3";
}

inline model::CausalLM& tiny_qwen3() {
  static std::unique_ptr<model::CausalLM> model = model::load_model(tiny_qwen3_dir(), {});
  return *model;
}

inline ThreadPool& test_pool() {
  static ThreadPool pool(2);
  return pool;
}

// Greedy continuation of `prompt` run alone through greedy_generate (not the engine).
inline std::vector<int32_t> solo_greedy(const std::vector<int32_t>& prompt, int64_t max_new) {
  auto& model = tiny_qwen3();
  const int64_t total = static_cast<int64_t>(prompt.size()) + max_new;
  cache::KvCache cache(model::kv_cache_spec(model, 16, (total + 15) / 16));
  GreedyOptions options;
  options.max_new_tokens = max_new;
  options.ignore_eos = true;
  return greedy_generate(model, cache, prompt, options, test_pool()).output_ids;
}

inline std::vector<int32_t> random_prompt(std::mt19937& rng, int64_t len) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = static_cast<int32_t>(rng() % 500);
  return p;
}

inline SamplingParams greedy_params(int64_t max_new) {
  SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = max_new;
  p.ignore_eos = true;
  return p;
}

// Steps until every request finished; returns the completions by request id and index.
inline std::map<RequestId, std::vector<Completion>> run_all(Engine& engine) {
  std::map<RequestId, std::vector<Completion>> done;
  while (engine.has_unfinished()) {
    for (const RequestOutput& out : engine.step()) {
      auto& c = done[out.id];
      for (const auto& d : out.completions) {
        if (c.size() <= static_cast<size_t>(d.index)) c.resize(static_cast<size_t>(d.index) + 1);
        accumulate(c[static_cast<size_t>(d.index)], d);
      }
    }
  }
  return done;
}

}  // namespace deepinfer::engine::testing
