#pragma once
// Prometheus metrics of the API server, in the text exposition format (version 0.0.4), named
// like vLLM's `vllm:` metrics with a `deepinfer:` prefix and a model_name label. Thread-safe:
// the engine loop thread records token timings, HTTP threads record responses, /metrics reads.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/sequence.h"

namespace deepinfer::server {

class Histogram {
 public:
  // `upper_bounds` ascending; the +Inf bucket is implicit.
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), bounds + 1
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Prometheus sample value: shortest round-trip decimal, "+Inf", "-Inf", "NaN".
std::string format_metric_value(double value);
// Label value with \\, \" and \n escaped.
std::string escape_label_value(const std::string& value);

class Metrics {
 public:
  explicit Metrics(std::string model_name);

  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_e2e_latency(double seconds);
  void observe_queue_time(double seconds);
  void observe_request_tokens(int64_t prompt_tokens, int64_t generation_tokens);
  void count_finished(engine::FinishReason reason);  // one per finished sequence (choice)
  void count_http_response(const std::string& endpoint, int status);

  // The exposition text; gauges and engine-wide counters come from `stats`.
  std::string render(const engine::EngineStats& stats) const;

 private:
  std::string model_name_;
  mutable std::mutex mutex_;
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  std::map<std::string, int64_t> finished_;                     // by finish reason
  std::map<std::pair<std::string, int>, int64_t> http_counts_;  // (endpoint, status)
  Histogram ttft_;
  Histogram inter_token_;
  Histogram e2e_;
  Histogram queue_;
  Histogram prompt_tokens_hist_;
  Histogram generation_tokens_hist_;
};

}  // namespace deepinfer::server
