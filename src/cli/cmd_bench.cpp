// deepinfer bench --mode offline: throughput and latency of the serving engine on random
// prompts, all submitted at once (vLLM's offline throughput benchmark, plus TTFT / TPOT).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/model_flags.h"
#include "config/setup.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer bench --mode offline --model DIR --num-prompts N --input-len L\n"
    "         --output-len M [--max-num-seqs S] [--json] [--seed 0] [--baseline-single]\n"
    "         [--threads T] [--dtype auto|f32|bf16|f16]\n"
    "         [--matmul-precision f32|bf16] [--log-level info]\n"
    "  Random prompts of L tokens, M output tokens each (greedy, eos ignored), all submitted\n"
    "  at once. --baseline-single first runs one request alone and reports its decode rate\n"
    "  and the batched speed-up over it. Without --max-num-blocks / --kv-cache-memory the KV\n"
    "  pool holds min(N, S) sequences of L + M tokens.\n";

using clock_type = std::chrono::steady_clock;

struct Summary {
  double mean = 0, p50 = 0, p99 = 0;
};

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double total = 0;
  for (double x : v) total += x;
  s.mean = total / static_cast<double>(v.size());
  // Nearest-rank percentiles.
  const auto rank = [&](double q) {
    const auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
  };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  return s;
}

struct RunResult {
  double seconds = 0;
  int64_t output_tokens = 0;
  std::vector<double> ttft_ms;
  std::vector<double> tpot_ms;
  engine::EngineStats stats;
};

RunResult run_batch(engine::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                    int64_t output_len) {
  engine::SamplingParams params;
  params.temperature = 0;
  params.max_new_tokens = output_len;
  params.ignore_eos = true;
  RunResult r;
  const auto start = clock_type::now();
  std::map<engine::RequestId, std::pair<double, int64_t>> first;  // first-token time, count
  for (const auto& p : prompts) engine.add_request(p, params);
  while (engine.has_unfinished()) {
    const auto outputs = engine.step();
    const double now = std::chrono::duration<double>(clock_type::now() - start).count();
    for (const auto& out : outputs) {
      int64_t tokens = 0;
      for (const auto& d : out.completions) tokens += static_cast<int64_t>(d.token_ids.size());
      r.output_tokens += tokens;
      auto [it, fresh] = first.try_emplace(out.id, now, 0);
      if (fresh) r.ttft_ms.push_back(now * 1e3);
      it->second.second += tokens;
      if (out.finished && it->second.second > 1) {
        r.tpot_ms.push_back((now - it->second.first) * 1e3 /
                            static_cast<double>(it->second.second - 1));
      }
    }
  }
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  r.stats = engine.stats();
  return r;
}

nlohmann::ordered_json summary_json(const Summary& s) {
  return {{"mean", s.mean}, {"p50", s.p50}, {"p99", s.p99}};
}

int run_bench(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--help") {
    std::printf("%s%s", kUsage, kEngineFlagsUsage);
    return 0;
  }
  const Args args(argv,
                  with_engine_value_flags(
                      with_model_flags({"mode", "num-prompts", "input-len", "output-len", "seed"})),
                  with_engine_bool_flags({"json", "baseline-single"}));
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  const std::string mode = args.get_or("mode", "offline");
  DI_CHECK(mode == "offline", "--mode ", mode,
           ": only offline is implemented (serving benchmarks need the HTTP server)");
  const int64_t num_prompts = args.get_int("num-prompts", 0);
  const int64_t input_len = args.get_int("input-len", 0);
  const int64_t output_len = args.get_int("output-len", 0);
  DI_CHECK(num_prompts >= 1, "--num-prompts must be >= 1");
  DI_CHECK(input_len >= 1, "--input-len must be >= 1");
  DI_CHECK(output_len >= 1, "--output-len must be >= 1");
  (void)args.require("model");
  config::ModelSetup loaded =
      config::load_model_setup(recipe_from_flags(args, true), {.require_tokenizer = false});
  auto& model = loaded.model;
  auto& pool = loaded.pool;
  engine::EngineConfig config = loaded.engine;
  if (!args.has("max-num-blocks") && !args.has("kv-cache-memory")) {
    // Size the pool for this workload (every running sequence at full length), so that
    // peak_rss_mb reflects the benchmark rather than a default budget.
    const int64_t per_seq = (input_len + output_len + config.block_size - 1) / config.block_size;
    config.max_num_blocks = per_seq * std::min(num_prompts, config.max_num_seqs);
  }
  engine::Engine engine(*model, *pool, config);

  std::mt19937_64 rng(static_cast<uint64_t>(args.get_int("seed", 0)));
  const auto random_prompt = [&] {
    std::vector<int32_t> p(static_cast<size_t>(input_len));
    for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(model->vocab_size()));
    return p;
  };
  // Warm-up: one short request (page faults, thread start-up) outside the measurements.
  run_batch(engine, {random_prompt()}, 2);

  std::optional<RunResult> single;
  if (args.flag("baseline-single")) single = run_batch(engine, {random_prompt()}, output_len);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < num_prompts; ++i) prompts.push_back(random_prompt());
  const RunResult r = run_batch(engine, prompts, output_len);
  const auto& blocks = engine.block_manager().stats();

  const double n = static_cast<double>(num_prompts);
  nlohmann::ordered_json out;
  out["mode"] = mode;
  out["num_prompts"] = num_prompts;
  out["input_len"] = input_len;
  out["output_len"] = output_len;
  out["max_num_seqs"] = engine.config().max_num_seqs;
  out["threads"] = pool->size();
  out["elapsed_s"] = r.seconds;
  out["requests_per_s"] = n / r.seconds;
  out["input_tokens_per_s"] = n * static_cast<double>(input_len) / r.seconds;
  out["output_tokens_per_s"] = static_cast<double>(r.output_tokens) / r.seconds;
  out["ttft_ms"] = summary_json(summarize(r.ttft_ms));
  out["tpot_ms"] = summary_json(summarize(r.tpot_ms));
  out["peak_rss_mb"] = peak_rss_mib();
  out["peak_kv_blocks"] = blocks.peak_used_blocks;
  out["kv_blocks"] = blocks.num_blocks;
  out["preemptions"] = r.stats.num_preemptions;
  if (single) {
    // Decode rate of one sequence alone: tokens after the first over the time they took.
    const double tpot = summarize(single->tpot_ms).mean;
    const double single_rate = tpot > 0 ? 1e3 / tpot : 0;
    out["single_decode_tokens_per_s"] = single_rate;
    out["speedup_vs_single"] =
        single_rate > 0 ? static_cast<double>(r.output_tokens) / r.seconds / single_rate : 0;
  }
  if (args.flag("json")) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("%-28s %s\n", "metric", "value");
  for (const auto& [key, value] : out.items()) {
    if (value.is_object()) {
      std::printf("%-28s mean %.2f  p50 %.2f  p99 %.2f\n", key.c_str(), value["mean"].get<double>(),
                  value["p50"].get<double>(), value["p99"].get<double>());
    } else if (value.is_number_float()) {
      std::printf("%-28s %.2f\n", key.c_str(), value.get<double>());
    } else {
      std::printf("%-28s %s\n", key.c_str(), value.dump().c_str());
    }
  }
  return 0;
}

const Registration registration("bench", "benchmark the serving engine (--mode offline)",
                                &run_bench);

}  // namespace
}  // namespace deepinfer::cli
