#pragma once
// What one benchmark run measured: a record per request (sent, completed or failed and why,
// its timings and token counts) and the summaries computed from exactly those records, as JSON
// and as a table in the shape of vLLM's benchmark output.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench/options.h"

namespace deepinfer::cli::bench {

using Json = nlohmann::ordered_json;

struct RequestRecord {
  int64_t index = 0;  // order of sending among the measured requests
  double sent_s = 0;  // since the run started
  bool completed = false;
  std::string reason;   // a failure's kind: http_503, connect, timeout, stream, rejected, engine
  std::string error;    // and its message
  int http_status = 0;  // online
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double ttft_ms = 0;          // sent -> first content (text chunk / first token)
  double e2e_ms = 0;           // sent -> last byte of the response (last token)
  std::vector<double> itl_ms;  // gaps between content after the first

  // vLLM's time per output token: (e2e - ttft) / (output_tokens - 1); 0 for one token.
  double tpot_ms() const {
    return output_tokens > 1 ? (e2e_ms - ttft_ms) / static_cast<double>(output_tokens - 1) : 0;
  }
};

struct RunResult {
  double request_rate = 0;  // infinity: all at once
  double elapsed_s = 0;     // first request sent -> last one finished
  std::vector<RequestRecord> records;
  Json resources = Json::object();  // peak memory, KV blocks, preemptions, ...
};

// The run's JSON: `header` (mode, model, dataset, ...) first, then counts, throughput,
// latency summaries (mean, p50, p90, p99 over completed requests), goodput, `resources` and
// the per-request records.
Json run_json(const RunResult& run, const BenchOptions& options, const Json& header);

void print_table(const Json& run, std::FILE* out);

// "inf" or the number, as the JSON and file names show a rate.
std::string rate_text(double rate);

}  // namespace deepinfer::cli::bench
