#include "cli/bench/offline.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <thread>

#include "cli/engine_flags.h"
#include "config/setup.h"
#include "core/error.h"
#include "core/log.h"
#include "parallel/mpi_communicator.h"

namespace deepinfer::cli::bench {
namespace {

using clock_type = std::chrono::steady_clock;

struct Live {
  size_t record = 0;
  double last_s = 0;
  bool seen_token = false;
};

engine::SamplingParams params_for(const BenchRequest& r) {
  engine::SamplingParams p;
  p.temperature = 0;  // greedy: the run does not depend on sampling
  p.max_new_tokens = r.output_len;
  p.ignore_eos = true;  // every request produces exactly its output length
  return p;
}

}  // namespace

RunResult run_offline(engine::Engine& engine, const Workload& workload, int64_t first,
                      const RunLimits& limits, double rate, uint64_t seed) {
  RunResult run;
  run.request_rate = rate;
  ArrivalSchedule schedule(rate, seed);
  std::map<engine::RequestId, Live> live;
  const auto start = clock_type::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(clock_type::now() - start).count();
  };
  int64_t sent = 0;
  double next_time = schedule.next();
  double last_finish = 0;
  while (true) {
    double now = elapsed();
    while (limits.may_send(sent, std::max(next_time, now)) && next_time <= now &&
           (limits.max_concurrency == 0 ||
            static_cast<int64_t>(live.size()) < limits.max_concurrency)) {
      const BenchRequest& r = workload.at(first + sent);
      RequestRecord rec;
      rec.index = sent;
      rec.sent_s = now;
      rec.prompt_tokens = static_cast<int64_t>(r.prompt_ids.size());
      try {
        const auto id = r.prompt_ids.empty() ? engine.add_request_text(r.prompt, params_for(r))
                                             : engine.add_request(r.prompt_ids, params_for(r));
        live[id] = {run.records.size(), now, false};
      } catch (const Error& e) {
        rec.reason = "rejected";
        rec.error = e.what();
      }
      run.records.push_back(std::move(rec));
      ++sent;
      next_time = schedule.next();
    }
    if (engine.has_unfinished()) {
      const auto outputs = engine.step();
      now = elapsed();
      for (const auto& out : outputs) {
        const auto it = live.find(out.id);
        if (it == live.end()) continue;
        Live& l = it->second;
        RequestRecord& rec = run.records[l.record];
        int64_t tokens = 0;
        for (const auto& d : out.completions) tokens += static_cast<int64_t>(d.token_ids.size());
        if (tokens > 0) {
          const double ms = (now - (l.seen_token ? l.last_s : rec.sent_s)) * 1e3;
          if (l.seen_token) {
            rec.itl_ms.push_back(ms);
          } else {
            rec.ttft_ms = ms;
          }
          l.seen_token = true;
          l.last_s = now;
          rec.output_tokens += tokens;
        }
        if (out.num_prompt_tokens > 0) rec.prompt_tokens = out.num_prompt_tokens;
        if (!out.finished) continue;
        if (out.error.empty()) {
          rec.completed = true;
          rec.e2e_ms = (now - rec.sent_s) * 1e3;
        } else {
          rec.reason = "engine";
          rec.error = out.error;
        }
        last_finish = now;
        live.erase(it);
      }
    } else if (limits.may_send(sent, std::max(next_time, now))) {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, next_time - now)));
    } else {
      break;
    }
  }
  run.elapsed_s = last_finish > 0 ? last_finish : elapsed();
  return run;
}

std::vector<Json> bench_offline(const BenchOptions& o, const config::RecipeConfig& recipe,
                                const std::vector<deepinfer::bench::DatasetEntry>& dataset) {
  const bool text = o.dataset_name != "random";
  config::ModelSetup loaded =
      config::load_model_setup(recipe, {.require_tokenizer = text, .lockstep = true});
  if (config::is_lockstep_worker(loaded)) {
    config::run_lockstep_worker(loaded);
    return {};  // rank 0 reports
  }
  engine::EngineConfig config = loaded.engine;
  const tokenizer::Tokenizer* tok = loaded.tokenizer ? &*loaded.tokenizer : nullptr;

  WorkloadContext context;
  context.vocab_size = loaded.model->vocab_size();
  context.default_output_len = recipe.max_new_tokens.value_or(128);
  context.encode_prompts = true;
  context.dataset = &dataset;
  if (tok) context.encode = [tok](std::string_view s) { return tok->encode(s, true); };
  const Workload workload = make_workload(o, context);

  if (!recipe.max_num_blocks.has() && !recipe.kv_cache_memory_gib.has() &&
      !recipe.mem_fraction_static.has()) {
    // Size the pool for this workload (every running sequence at full length), so that
    // peak_rss_mb reflects the benchmark rather than a default budget.
    int64_t longest = 0;
    for (const auto& r : workload.prompts) {
      longest = std::max(longest, static_cast<int64_t>(r.prompt_ids.size()) + r.output_len);
    }
    const int64_t per_seq = (longest + config.block_size - 1) / config.block_size;
    int64_t concurrent =
        o.num_samples > 0 ? std::max(o.num_samples, o.warmup) : config.max_num_seqs;
    if (o.max_concurrency > 0) concurrent = std::min(concurrent, o.max_concurrency);
    config.max_num_blocks = per_seq * std::min(concurrent, config.max_num_seqs);
  }
  engine::Engine engine(*loaded.model, *loaded.pool, config, tok);

  RunLimits limits{o.num_samples, o.duration_s, o.max_concurrency};
  // Page faults and thread start-up fall outside every measurement: one short request, then
  // the --warmup requests (all at once), whose records are dropped.
  {
    BenchRequest tiny = workload.at(0);
    tiny.output_len = 2;
    Workload one{{tiny}, workload.source};
    run_offline(engine, one, 0, {1, 0, 0}, std::numeric_limits<double>::infinity(), o.seed);
  }
  if (o.warmup > 0) {
    log::info("bench: ", o.warmup, " warm-up requests (excluded from the statistics)");
    run_offline(engine, workload, 0, {o.warmup, 0, o.max_concurrency},
                std::numeric_limits<double>::infinity(), o.seed);
  }
  std::optional<double> single_rate;
  if (o.baseline_single) {
    const RunResult single = run_offline(engine, workload, o.warmup, {1, 0, 0},
                                         std::numeric_limits<double>::infinity(), o.seed);
    const double tpot = single.records.empty() ? 0 : single.records.front().tpot_ms();
    single_rate = tpot > 0 ? 1e3 / tpot : 0;
  }

  std::vector<Json> out;
  for (const double rate : o.request_rates) {
    const parallel::CommunicationStats before = parallel::communication_stats();
    RunResult run = run_offline(engine, workload, o.warmup, limits, rate, o.seed);
    const parallel::CommunicationStats after = parallel::communication_stats();
    const auto& blocks = engine.block_manager().stats();
    run.resources["threads"] = loaded.pool->size();
    run.resources["max_num_seqs"] = engine.config().max_num_seqs;
    run.resources["peak_rss_mb"] = peak_rss_mib();
    run.resources["peak_kv_blocks"] = blocks.peak_used_blocks;
    run.resources["kv_blocks"] = blocks.num_blocks;
    run.resources["preemptions"] = engine.stats().num_preemptions;
    run.resources["moe_dropped_assignments"] = engine.stats().moe.dropped;
    // Rank 0's share of the run inside MPI (collectives and messages, incl. waiting for slower
    // ranks): where a distributed layout's time goes. Zero in one process.
    run.resources["mpi_seconds"] = after.busy_seconds - before.busy_seconds;
    run.resources["mpi_bytes_sent"] = after.bytes_sent - before.bytes_sent;
    run.resources["mpi_calls"] = after.calls - before.calls;
    Json header;
    header["mode"] = "offline";
    header["model"] = std::filesystem::path(loaded.dir).filename().string();
    header["dataset"] = workload.source;
    header["num_prompts"] = static_cast<int64_t>(run.records.size());
    header["input_len"] = o.input_len ? Json(*o.input_len) : Json(nullptr);
    header["output_len"] = o.output_len ? Json(*o.output_len) : Json(nullptr);
    header["seed"] = o.seed;
    Json j = run_json(run, o, header);
    if (single_rate) {
      j["single_decode_tokens_per_s"] = *single_rate;
      j["speedup_vs_single"] =
          *single_rate > 0 ? j["output_tokens_per_s"].get<double>() / *single_rate : 0;
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace deepinfer::cli::bench
