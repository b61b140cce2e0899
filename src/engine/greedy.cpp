#include "engine/greedy.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/error.h"

namespace deepinfer::engine {

int32_t argmax(std::span<const float> values) {
  DI_CHECK(!values.empty(), "argmax of an empty vector");
  size_t best = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] > values[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

namespace {

// Runs tokens [begin, end) of `ids` (positions begin..end-1) and returns the last row's logits.
void run_step(model::CausalLM& model, cache::KvCache& cache, std::vector<int32_t>& block_table,
              std::span<const int32_t> ids, int64_t begin, int64_t end, std::vector<float>& logits,
              ThreadPool& pool) {
  cache.ensure_capacity(block_table, end);
  std::vector<int32_t> positions(static_cast<size_t>(end - begin));
  std::iota(positions.begin(), positions.end(), static_cast<int32_t>(begin));
  model::ForwardBatch batch;
  batch.tokens = ids.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
  batch.positions = positions;
  batch.sequences.push_back({0, end - begin, block_table});
  batch.logit_rows = {end - begin - 1};
  logits.resize(static_cast<size_t>(model.vocab_size()));
  model.forward(batch, cache, logits.data(), pool);
}

}  // namespace

GreedyResult greedy_generate(model::CausalLM& model, cache::KvCache& cache,
                             std::span<const int32_t> prompt, const GreedyOptions& options,
                             ThreadPool& pool) {
  DI_CHECK(!prompt.empty(), "the prompt is empty: give at least one token");
  using clock = std::chrono::steady_clock;
  GreedyResult result;
  std::vector<int32_t> ids(prompt.begin(), prompt.end());
  std::vector<int32_t> block_table;
  std::vector<float> logits;
  struct Release {
    cache::KvCache& cache;
    std::vector<int32_t>& table;
    ~Release() { cache.release(table); }
  } release{cache, block_table};

  const auto prompt_len = static_cast<int64_t>(prompt.size());
  const int64_t chunk = options.prefill_chunk > 0 ? options.prefill_chunk : prompt_len;
  const auto prefill_start = clock::now();
  for (int64_t begin = 0; begin < prompt_len; begin += chunk) {
    run_step(model, cache, block_table, ids, begin, std::min(prompt_len, begin + chunk), logits,
             pool);
  }
  result.prompt_logits = logits;
  const auto decode_start = clock::now();
  result.prefill_seconds = std::chrono::duration<double>(decode_start - prefill_start).count();

  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const int32_t next = argmax(logits);
    result.output_ids.push_back(next);
    ids.push_back(next);
    const bool is_eos = std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(),
                                  next) != options.eos_token_ids.end();
    if (is_eos && !options.ignore_eos) {
      result.stopped_at_eos = true;
      break;
    }
    if (step + 1 == options.max_new_tokens) break;
    const auto length = static_cast<int64_t>(ids.size());
    run_step(model, cache, block_table, ids, length - 1, length, logits, pool);
    ++result.decode_steps;
  }
  result.decode_seconds = std::chrono::duration<double>(clock::now() - decode_start).count();
  return result;
}

}  // namespace deepinfer::engine
