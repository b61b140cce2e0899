#pragma once
// One model as deepinfer validate drives it: greedy continuations and next-token logits of every
// position, through the same forward pass and KV cache (with its dtype) that serving uses.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"

namespace deepinfer::validate {

// Block outputs of one forward pass, keyed (layer, block), in the order the model reported them.
class LayerCapture : public model::ForwardObserver {
 public:
  struct Entry {
    int64_t layer = 0;
    std::string block;
    std::vector<float> data;  // [tokens, width]
  };
  void observe(int64_t layer, std::string_view block, const float* data, int64_t tokens,
               int64_t width) override;
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(int64_t layer, std::string_view block) const;

 private:
  std::vector<Entry> entries_;
};

class ModelProbe {
 public:
  // `model` and `pool` must outlive the probe.
  ModelProbe(model::CausalLM& model, ThreadPool& pool, DType kv_cache_dtype);

  int64_t vocab() const { return model_.vocab_size(); }
  const model::CausalLM& model() const { return model_; }

  // Next-token logits for every position of `tokens`, [tokens.size(), vocab]: the first
  // `prefill` tokens in one forward pass (all rows, reported to `capture` when given), the rest
  // one token per step as decoding runs (so a quantized KV cache is read as in serving).
  std::vector<float> logits(std::span<const int32_t> tokens, int64_t prefill,
                            LayerCapture* capture = nullptr);
  // `max_new` greedy tokens after `prompt` (EOS does not stop it).
  std::vector<int32_t> greedy(std::span<const int32_t> prompt, int64_t max_new);

 private:
  model::CausalLM& model_;
  ThreadPool& pool_;
  DType kv_dtype_;
};

}  // namespace deepinfer::validate
