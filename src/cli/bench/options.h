#pragma once
// The flags of `deepinfer bench`: the articles' benchmark.py spelling (--config --dataset
// --num_samples --warmup), their kebab-case twins, and vLLM's `vllm bench serve` spelling
// (--dataset-name --dataset-path --num-prompts --input-len --output-len --goodput
// --save-result --result-filename), read into one BenchOptions.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/args.h"

namespace deepinfer::cli::bench {

struct BenchOptions {
  std::string mode = "offline";  // offline (in-process) | online (HTTP)

  // What is sent.
  std::string dataset_name = "random";  // random | sharegpt | auto (a dataset file's default)
  std::optional<std::string> dataset_path;
  int64_t num_samples = 0;  // 0 with --duration: as many as the duration allows
  int64_t warmup = 0;       // requests run first and left out of every statistic
  std::optional<int64_t> input_len;
  std::optional<int64_t> output_len;
  uint64_t seed = 0;

  // How it is sent.
  std::vector<double> request_rates;  // requests/s; infinity: all at once (the default)
  int64_t max_concurrency = 0;        // 0: no limit
  double duration_s = 0;              // > 0: stop sending after this many seconds

  // Service-level objectives for goodput (vLLM's --goodput ttft:MS tpot:MS e2el:MS).
  std::optional<double> slo_ttft_ms, slo_tpot_ms, slo_e2el_ms;

  // Results.
  bool json = false;  // the JSON on stdout instead of the table
  bool save_result = false;
  std::string result_filename;  // "" with --save-result: a name from mode, rate, model, time
  std::string result_dir;
  std::string plot;  // a .png file
  bool baseline_single = false;

  // Online.
  std::string base_url;           // "" : start `deepinfer serve` on a free port
  std::string served_model_name;  // "" : the first id of GET /v1/models
  double request_timeout_s = 600;
};

// Every flag bench accepts besides the model and engine flags: value and boolean ones.
std::set<std::string> bench_value_flags();
std::set<std::string> bench_bool_flags();

// vLLM gives `--goodput ttft:500 tpot:50` as several words: joins them into one value
// ("ttft:500,tpot:50") so the strict parser sees one flag and one value.
std::vector<std::string> join_multi_value_flags(const std::vector<std::string>& argv);

// Reads and checks the flags (Error naming the flag). Model and engine flags stay in `args`.
BenchOptions read_bench_options(const Args& args);

}  // namespace deepinfer::cli::bench
