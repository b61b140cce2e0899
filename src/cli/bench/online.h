#pragma once
// --mode online: streamed /v1/completions requests (stream_options.include_usage) to an
// OpenAI-compatible server, one connection and thread per request in flight, sent on the
// arrival schedule. TTFT is request sent -> first chunk with text; ITL the gaps between such
// chunks; token counts from the final usage chunk.
#include <string>

#include "cli/bench/results.h"
#include "cli/bench/schedule.h"
#include "cli/bench/workload.h"
#include "config/recipe_config.h"
#include "http/client.h"

namespace deepinfer::cli::bench {

struct OnlineTarget {
  http::Url url;
  std::string model;    // the request's "model"
  std::string api_key;  // "" : no Authorization header
  double timeout_s = 600;
};

RunResult run_online(const OnlineTarget& target, const Workload& workload, int64_t first,
                     const RunLimits& limits, double rate, uint64_t seed);

// The whole `deepinfer bench --mode online`: starts a server unless --base-url names one,
// warms up, runs each rate (sampling /metrics for the KV cache's peak usage), stops the
// server it started. One JSON object per rate.
std::vector<Json> bench_online(const BenchOptions& options, const config::RecipeConfig& recipe,
                               const Args& args,
                               const std::vector<deepinfer::bench::DatasetEntry>& dataset);

}  // namespace deepinfer::cli::bench
