#pragma once
// --mode offline: the requests go to an engine in this process (no HTTP), on the same arrival
// schedule and concurrency limit as online; TTFT is submission -> first token.
#include <cstdint>

#include "cli/bench/results.h"
#include "cli/bench/schedule.h"
#include "cli/bench/workload.h"
#include "config/recipe_config.h"
#include "engine/engine.h"

namespace deepinfer::cli::bench {

// Runs requests workload.at(first), at(first + 1), ... under `limits` and `rate`.
RunResult run_offline(engine::Engine& engine, const Workload& workload, int64_t first,
                      const RunLimits& limits, double rate, uint64_t seed);

// The whole `deepinfer bench --mode offline`: loads the model, warms up, runs each rate; one
// JSON object per rate.
std::vector<Json> bench_offline(const BenchOptions& options, const config::RecipeConfig& config,
                                const std::vector<deepinfer::bench::DatasetEntry>& dataset);

}  // namespace deepinfer::cli::bench
