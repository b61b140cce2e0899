#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.h"

namespace deepinfer::server {

namespace {

// vLLM's buckets, extended downwards: a CPU engine on small models answers in milliseconds.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                         0.15,  0.2,    0.3,   0.4,  0.5,   0.75, 1.0,   2.5,
                                         5.0,   7.5,    10.0,  20.0, 40.0,  80.0};
const std::vector<double> kRequestBuckets = {
    0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,    10.0,
    15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kTokenBuckets = {1,     2,      5,      10,     20,     50,    100,
                                           200,   500,    1000,   2000,   5000,   10000, 20000,
                                           50000, 100000, 200000, 500000, 1000000};

class Writer {
 public:
  Writer(std::string& out, const std::string& model) : out_(out), model_(model) {}

  void header(const char* name, const char* type, const char* help) {
    out_ += str_cat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  // name{model_name="m"[,extra]} value
  void sample(const std::string& name, double value, const std::string& extra_labels = "") {
    out_ += name;
    out_ += "{model_name=\"" + escape_label_value(model_) + "\"";
    if (!extra_labels.empty()) out_ += "," + extra_labels;
    out_ += "} " + format_metric_value(value) + "\n";
  }
  void scalar(const char* name, const char* type, const char* help, double value) {
    header(name, type, help);
    sample(name, value);
  }
  void histogram(const char* name, const char* help, const Histogram& h) {
    header(name, "histogram", help);
    const auto s = h.snapshot();
    for (size_t i = 0; i < s.bounds.size(); ++i) {
      sample(str_cat(name, "_bucket"), static_cast<double>(s.cumulative[i]),
             "le=\"" + format_metric_value(s.bounds[i]) + "\"");
    }
    sample(str_cat(name, "_bucket"), static_cast<double>(s.count), "le=\"+Inf\"");
    sample(str_cat(name, "_sum"), s.sum);
    sample(str_cat(name, "_count"), static_cast<double>(s.count));
  }

 private:
  std::string& out_;
  const std::string& model_;
};

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  DI_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()), "histogram bounds must be ascending");
}

void Histogram::observe(double value) {
  // The first bucket whose upper bound is >= value (Prometheus buckets are "le").
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  std::lock_guard lock(mutex_);
  ++counts_[static_cast<size_t>(it - bounds_.begin())];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mutex_);
  Snapshot s;
  s.bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    running += counts_[i];
    s.cumulative.push_back(running);
  }
  s.cumulative.push_back(count_);
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Metrics::Metrics(std::string model_name)
    : model_name_(std::move(model_name)),
      ttft_(kTtftBuckets),
      inter_token_(kItlBuckets),
      e2e_(kRequestBuckets),
      queue_(kRequestBuckets),
      prompt_tokens_hist_(kTokenBuckets),
      generation_tokens_hist_(kTokenBuckets) {}

void Metrics::add_prompt_tokens(int64_t n) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += n;
}

void Metrics::add_generation_tokens(int64_t n) {
  std::lock_guard lock(mutex_);
  generation_tokens_ += n;
}

void Metrics::observe_time_to_first_token(double seconds) {
  ttft_.observe(seconds);
}
void Metrics::observe_inter_token_latency(double seconds) {
  inter_token_.observe(seconds);
}
void Metrics::observe_e2e_latency(double seconds) {
  e2e_.observe(seconds);
}
void Metrics::observe_queue_time(double seconds) {
  queue_.observe(seconds);
}

void Metrics::observe_request_tokens(int64_t prompt_tokens, int64_t generation_tokens) {
  prompt_tokens_hist_.observe(static_cast<double>(prompt_tokens));
  generation_tokens_hist_.observe(static_cast<double>(generation_tokens));
}

void Metrics::count_finished(engine::FinishReason reason) {
  std::lock_guard lock(mutex_);
  ++finished_[engine::finish_reason_name(reason)];
}

void Metrics::count_http_response(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++http_counts_[{endpoint, status}];
}

std::string Metrics::render(const engine::EngineStats& stats) const {
  std::string out;
  Writer w(out, model_name_);
  w.scalar("deepinfer:num_requests_running", "gauge",
           "Number of sequences in the model's batch (running).",
           static_cast<double>(stats.running));
  w.scalar("deepinfer:num_requests_waiting", "gauge",
           "Number of sequences waiting to be scheduled (queued or preempted).",
           static_cast<double>(stats.waiting));
  w.scalar("deepinfer:kv_cache_usage_perc", "gauge",
           "Fraction of KV-cache blocks in use (0 to 1; cached but unreferenced blocks count as "
           "free).",
           stats.blocks.usage());
  const auto& b = stats.blocks;
  w.scalar("deepinfer:kv_cache_total_blocks", "gauge",
           "KV-cache blocks in the pool (used blocks = kv_cache_usage_perc x this).",
           static_cast<double>(b.num_blocks));
  w.scalar("deepinfer:prefix_cache_hit_rate", "gauge",
           "Prompt tokens found in the prefix cache / prompt tokens looked up (0 when none).",
           b.prefix_query_tokens ? static_cast<double>(b.prefix_hit_tokens) /
                                       static_cast<double>(b.prefix_query_tokens)
                                 : 0.0);
  w.scalar("deepinfer:prefix_cache_queries_total", "counter",
           "Prompt tokens looked up in the prefix cache.",
           static_cast<double>(b.prefix_query_tokens));
  w.scalar("deepinfer:prefix_cache_hits_total", "counter",
           "Prompt tokens found in the prefix cache.", static_cast<double>(b.prefix_hit_tokens));
  w.scalar("deepinfer:num_preemptions_total", "counter",
           "Sequences preempted (their KV blocks freed, recomputed later).",
           static_cast<double>(stats.num_preemptions));
  w.scalar("deepinfer:moe_dropped_assignments_total", "counter",
           "MoE (token, expert) assignments dropped by capacity_factor, over the expert group.",
           static_cast<double>(stats.moe.dropped));
  if (stats.moe.layers > 0) {
    w.header("deepinfer:moe_balancedness", "gauge",
             "Mean / max rank load of the MoE experts over the EPLB window: placement=\"default\" "
             "as the experts would be split without EPLB, \"current\" as measured.");
    w.sample("deepinfer:moe_balancedness", stats.moe.balancedness_default, "placement=\"default\"");
    w.sample("deepinfer:moe_balancedness", stats.moe.balancedness, "placement=\"current\"");
    w.scalar("deepinfer:eplb_rebalances_total", "counter",
             "Expert re-placements made online (summed over MoE layers).",
             static_cast<double>(stats.moe.rebalances));
  }

  std::lock_guard lock(mutex_);
  w.scalar("deepinfer:prompt_tokens_total", "counter", "Prompt tokens of API requests processed.",
           static_cast<double>(prompt_tokens_));
  w.scalar("deepinfer:generation_tokens_total", "counter", "Tokens generated for API requests.",
           static_cast<double>(generation_tokens_));
  w.header("deepinfer:request_success_total", "counter",
           "Finished sequences by finish reason (stop, length, abort).");
  for (const char* reason : {"stop", "length", "abort"}) {
    const auto it = finished_.find(reason);
    w.sample("deepinfer:request_success_total",
             it == finished_.end() ? 0.0 : static_cast<double>(it->second),
             str_cat("finished_reason=\"", reason, "\""));
  }
  w.header("deepinfer:http_requests_total", "counter", "HTTP responses by endpoint and status.");
  for (const auto& [key, count] : http_counts_) {
    w.sample(
        "deepinfer:http_requests_total", static_cast<double>(count),
        str_cat("endpoint=\"", escape_label_value(key.first), "\",status=\"", key.second, "\""));
  }
  w.histogram("deepinfer:time_to_first_token_seconds",
              "Time from request arrival to its first generated token.", ttft_);
  w.histogram("deepinfer:inter_token_latency_seconds",
              "Time between consecutive outputs of a request.", inter_token_);
  w.histogram("deepinfer:e2e_request_latency_seconds",
              "Time from request arrival to its last token.", e2e_);
  w.histogram(
      "deepinfer:request_queue_time_seconds",
      "Time from submission to the engine until its first output (queue + prefill: the engine "
      "does not report admission times yet).",
      queue_);
  w.histogram("deepinfer:request_prompt_tokens", "Prompt tokens per request.", prompt_tokens_hist_);
  w.histogram("deepinfer:request_generation_tokens", "Generated tokens per request.",
              generation_tokens_hist_);
  return out;
}

}  // namespace deepinfer::server
