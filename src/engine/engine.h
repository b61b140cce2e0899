#pragma once
// The serving engine: many requests share one model through the paged KV cache and the
// continuous-batching scheduler. Not thread-safe: one thread calls add_request / step /
// abort (EngineClient puts a thread-safe front on it).
//
//   Engine engine(model, pool, config, &tokenizer);
//   auto id = engine.add_request(prompt_ids, params);
//   while (engine.has_unfinished()) for (auto& out : engine.step()) ...;
//
// Outputs are batch-invariant: a request's tokens do not depend on what else is batched with
// it, how its prompt is chunked, or whether it was preempted and recomputed (the kernels are
// batch-invariant and sampling is stateless per (seed, step)).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/block_manager.h"
#include "cache/kv_cache.h"
#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/request_output.h"
#include "engine/sampling_params.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/causal_lm.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::engine {

struct EngineConfig {
  int64_t block_size = 16;
  // KV pool size: max_num_blocks if > 0, else kv_cache_memory_gib if > 0, else enough for
  // max_num_seqs sequences of max_model_len tokens, capped at kDefaultKvMemoryGib. A pool sized
  // by memory never holds more blocks than max_num_seqs sequences of max_model_len (or the
  // model's max_position_embeddings) can use: the rest would be allocated and never touched.
  int64_t max_num_blocks = 0;
  double kv_cache_memory_gib = 0;
  DType kv_cache_dtype = DType::f32;  // see cache::parse_kv_cache_dtype
  int64_t max_num_seqs = 128;
  int64_t max_num_batched_tokens = 2048;
  // Longest prompt + output; 0: the model's max_position_embeddings, capped at what the pool
  // holds. An explicit value larger than the pool is an error.
  int64_t max_model_len = 0;
  bool enable_prefix_caching = false;
  SchedulingPolicy scheduling_policy = SchedulingPolicy::fifo;
  std::vector<int64_t> eos_token_ids;  // from generation_config.json; honoured unless ignore_eos
  // Seeds the seeds of requests that give none (vLLM's --seed): the same requests in the same
  // order then sample the same tokens. Unset: a random seed per engine.
  std::optional<uint64_t> seed;
  // Attention data parallelism (parallel::ParallelContext::data_parallel_size): attention
  // groups with their own sequences, each a KV pool of max_num_blocks blocks on its ranks.
  // The scheduler keeps one block manager per group; this process's cache is group 0's.
  int64_t attention_groups = 1;
  // The KV pool on transparent huge pages (transparent_huge_pages, core/memory.h).
  bool kv_huge_pages = true;

  static constexpr double kDefaultKvMemoryGib = 2.0;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t forward_tokens = 0;    // token rows the model computed (prefill + decode)
  int64_t generated_tokens = 0;  // tokens sampled
  int64_t num_preemptions = 0;
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t unfinished_requests = 0;
  cache::BlockManagerStats blocks;
  parallel::EplbSummary moe;  // capacity drops and expert balance (MoE models)
};

class Engine {
 public:
  // `model`, `pool` and `tokenizer` (optional: text prompts, text deltas, stop strings) must
  // outlive the engine.
  Engine(model::CausalLM& model, ThreadPool& pool, const EngineConfig& config,
         const tokenizer::Tokenizer* tokenizer = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws Error (and queues nothing) for an invalid request: empty prompt,
  // ids outside the vocabulary, a prompt longer than max_model_len or the pool, invalid
  // params, stop strings without a tokenizer. `id`: use this id (must be unused), else the
  // next free one. Unseeded requests get a random seed here.
  RequestId add_request(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                        int64_t priority = 0, std::optional<RequestId> id = std::nullopt);
  // Text prompt, encoded with the tokenizer (special tokens added as transformers would).
  RequestId add_request_text(std::string_view prompt, const SamplingParams& params,
                             int64_t priority = 0, std::optional<RequestId> id = std::nullopt);
  // The checks of add_request, without queueing. Thread-safe (reads immutable state only).
  void check_request(std::span<const int32_t> prompt_ids, const SamplingParams& params) const;
  std::vector<int32_t> encode(std::string_view prompt) const;

  // Runs one model step (when anything is runnable) and reports every request that advanced,
  // finished or was aborted since the last step.
  std::vector<RequestOutput> step();
  // Finishes a request (reason abort) wherever it is; its blocks are freed at once and its
  // final output comes with the next step(). False when the id is unknown or finished.
  bool abort(RequestId id);
  bool has_unfinished() const { return !requests_.empty() || !pending_.empty(); }

  // Blocking convenience for an otherwise idle engine: runs the prompts to completion and
  // returns their results in input order.
  std::vector<RequestResult> generate(const std::vector<std::vector<int32_t>>& prompts,
                                      const std::vector<SamplingParams>& params);

  const EngineConfig& config() const { return config_; }  // resolved sizes
  EngineStats stats() const;
  // Attention group 0's (the only one without attention data parallelism).
  const cache::BlockManager& block_manager() const { return blocks_.front(); }
  const model::CausalLM& model() const { return model_; }
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_; }

 private:
  struct SequenceText;
  struct Request;

  Request& request_of(const Sequence& seq);
  void run_model(const SchedulerOutput& out);
  void process_token(Request& req, Sequence& seq, int32_t token, TokenLogprobs* logprobs);
  void finish_sequence(Request& req, Sequence& seq, FinishReason reason, std::string stop = {});
  void fork_siblings(Request& req);
  // Reports choices first_index..n-1, never created, as finished with `reason`.
  void finish_unforked(Request& req, FinishReason reason, int64_t first_index);
  CompletionDelta& delta_for(Request& req, const Sequence& seq);
  void collect_outputs(std::vector<RequestOutput>& outputs);

  model::CausalLM& model_;
  EngineConfig config_;
  const tokenizer::Tokenizer* tokenizer_;
  cache::KvCache cache_;
  std::vector<cache::BlockManager> blocks_;  // one per attention group
  Scheduler scheduler_;
  std::map<RequestId, std::unique_ptr<Request>> requests_;  // unfinished
  std::vector<std::unique_ptr<Request>> pending_;  // finished, final output not yet reported
  RequestId next_id_ = 1;
  uint64_t next_arrival_ = 0;
  std::mt19937_64 seed_source_;
  ModelRunner runner_;  // SchedulerOutput -> ForwardBatch -> model
  EngineStats counters_;
};

}  // namespace deepinfer::engine
