#include "validate/probe.h"

#include <numeric>

#include "cache/kv_cache.h"
#include "core/error.h"
#include "engine/greedy.h"

namespace deepinfer::validate {

namespace {

constexpr int64_t kBlockSize = 16;

cache::KvCache cache_for(const model::CausalLM& model, int64_t tokens, DType dtype) {
  return cache::KvCache(
      model::kv_cache_spec(model, kBlockSize, (tokens + kBlockSize - 1) / kBlockSize, dtype));
}

}  // namespace

void LayerCapture::observe(int64_t layer, std::string_view block, const float* data, int64_t tokens,
                           int64_t width) {
  entries_.push_back({layer, std::string(block),
                      std::vector<float>(data, data + static_cast<size_t>(tokens * width))});
}

const LayerCapture::Entry* LayerCapture::find(int64_t layer, std::string_view block) const {
  for (const Entry& e : entries_) {
    if (e.layer == layer && e.block == block) return &e;
  }
  return nullptr;
}

ModelProbe::ModelProbe(model::CausalLM& model, ThreadPool& pool, DType kv_cache_dtype)
    : model_(model), pool_(pool), kv_dtype_(kv_cache_dtype) {}

std::vector<float> ModelProbe::logits(std::span<const int32_t> tokens, int64_t prefill,
                                      LayerCapture* capture) {
  const auto n = static_cast<int64_t>(tokens.size());
  DI_CHECK(n >= 1 && prefill >= 1 && prefill <= n, "validate: prefill ", prefill, " of ", n,
           " tokens");
  const auto vocab = static_cast<size_t>(model_.vocab_size());
  cache::KvCache cache = cache_for(model_, n, kv_dtype_);
  std::vector<int32_t> table;
  cache.ensure_capacity(table, n);
  std::vector<float> out(static_cast<size_t>(n) * vocab);
  std::vector<int32_t> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), 0);
  const auto step = [&](int64_t begin, int64_t end, LayerCapture* watch) {
    model::ForwardBatch batch;
    batch.tokens = tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    batch.positions = std::span<const int32_t>(positions).subspan(static_cast<size_t>(begin),
                                                                  static_cast<size_t>(end - begin));
    batch.sequences.push_back({0, end - begin, table});
    for (int64_t r = 0; r < end - begin; ++r) batch.logit_rows.push_back(r);
    model_.set_observer(watch);
    try {
      model_.forward(batch, cache, out.data() + static_cast<size_t>(begin) * vocab, pool_);
    } catch (...) {
      model_.set_observer(nullptr);
      throw;
    }
    model_.set_observer(nullptr);
  };
  step(0, prefill, capture);
  for (int64_t p = prefill; p < n; ++p) step(p, p + 1, nullptr);
  cache.release(table);
  return out;
}

std::vector<int32_t> ModelProbe::greedy(std::span<const int32_t> prompt, int64_t max_new) {
  if (max_new == 0) return {};
  cache::KvCache cache =
      cache_for(model_, static_cast<int64_t>(prompt.size()) + max_new, kv_dtype_);
  engine::GreedyOptions options;
  options.max_new_tokens = max_new;
  options.ignore_eos = true;
  return engine::greedy_generate(model_, cache, prompt, options, pool_).output_ids;
}

}  // namespace deepinfer::validate
