#pragma once
// The interface every model family implements, and the registry that builds one from a
// Hugging Face checkpoint directory by its `architectures` entry.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "core/thread_pool.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/forward_batch.h"
#include "model/forward_observer.h"
#include "model/weights.h"
#include "parallel/eplb_state.h"

namespace deepinfer::model {

// Geometry of the per-token KV state one layer keeps (GQA: K/V per KV head).
struct KvLayout {
  int64_t num_layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;
  // Elements per int8 KV scale; 0: one scale per head row. MLA rows hold two parts of
  // different magnitude (normalised latent, roped key) that must not share a scale.
  int64_t quant_group = 0;
  // DeepSeek Sparse Attention: indexer keys of index_dim per token in the layers flagged in
  // index_layers (KvCacheSpec::index_dim); 0: none.
  int64_t index_dim = 0;
  std::vector<bool> index_layers = {};
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const io::ModelConfig& config() const = 0;
  virtual KvLayout kv_layout() const = 0;
  int64_t vocab_size() const { return config().vocab_size; }
  // Runs the batch, writing its K/V into `cache`, and stores next-token logits of
  // batch.logit_rows into logits [logit_rows.size(), vocab_size].
  virtual void forward(const ForwardBatch& batch, cache::KvCache& cache, float* logits,
                       ThreadPool& pool) = 0;
  // Per decoder layer, the token assignments of each expert since the last reset (empty for
  // dense layers and models): the router's decisions, for load balancing and diagnostics.
  virtual std::vector<std::vector<uint64_t>> expert_load() const { return {}; }
  virtual void reset_expert_load() {}
  // What the MoE layers share about expert load (capacity drops, balancedness, EPLB; null
  // for dense models): for /metrics, bench and the logs.
  virtual std::shared_ptr<const parallel::EplbState> eplb_state() const { return eplb_state_; }
  void set_eplb_state(std::shared_ptr<const parallel::EplbState> state) {
    eplb_state_ = std::move(state);
  }
  // Every later forward reports its block outputs to `observer` (nullptr: off, the default).
  // The observer must outlive its use; not thread-safe against a running forward.
  void set_observer(ForwardObserver* observer) { observer_ = observer; }

 protected:
  ForwardObserver* observer_ = nullptr;
  std::shared_ptr<const parallel::EplbState> eplb_state_;
};

using ModelBuilder =
    std::function<std::unique_ptr<CausalLM>(const io::ModelConfig&, WeightLoader&)>;

struct ModelFamily {
  std::string architecture;  // e.g. "Qwen2ForCausalLM"
  ModelBuilder build;
};

const std::vector<ModelFamily>& model_families();
std::vector<std::string> supported_architectures();

// What loading did with the weights (also logged): bytes held per dtype after quantizing.
struct LoadReport {
  WeightBytes weight_bytes;
  std::string quantization;  // WeightLoader::quantization_summary(); empty without it
};

// Loads config.json + safetensors of `dir` and builds the model. Throws Error for an
// unsupported architecture (listing the supported ones) or mismatched weights. `report`,
// when given, receives what the load did with the weights.
std::unique_ptr<CausalLM> load_model(const std::string& dir, const LoadOptions& options,
                                     LoadReport* report = nullptr);

// Builds the model of `config`'s architecture from `weights` (load_model without opening the
// directory; deepinfer convert builds with a recording loader). Error naming the supported
// architectures for an unknown one.
std::unique_ptr<CausalLM> build_model(const io::ModelConfig& config, WeightLoader& weights);
// The options load_model gives its WeightLoader for `config` (the q4_k_m mix takes the model's
// shape); deepinfer convert uses the same, so what it writes is what a load holds.
LoadOptions shaped_load_options(const LoadOptions& options, const io::ModelConfig& config);

// Elements per int8 KV scale for a layout: its quant_group (or one head row), capped at
// cache::kMaxKvQuantGroup.
int64_t kv_quant_group(const KvLayout& layout);

cache::KvCacheSpec kv_cache_spec(const CausalLM& model, int64_t block_size, int64_t num_blocks,
                                 DType dtype = DType::f32, bool huge_pages = false);

}  // namespace deepinfer::model
