// deepinfer bench: the articles' benchmark.py (--config --dataset --num_samples --warmup) and
// vLLM's benchmark (`vllm bench serve` flags): requests from a dataset or random prompts,
// in-process (--mode offline) or over the OpenAI API (--mode online), on a Poisson arrival
// schedule; throughput, TTFT / TPOT / ITL / end-to-end latency, goodput and peak memory as a
// table or JSON with one record per request (docs/BENCH.md).
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "cli/args.h"
#include "cli/bench/offline.h"
#include "cli/bench/online.h"
#include "cli/bench/options.h"
#include "cli/bench/plot.h"
#include "cli/bench/workload.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/model_flags.h"
#include "config/recipe_config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "parallel/mpi_communicator.h"

namespace deepinfer::cli {
namespace {

using bench::Json;

constexpr const char* kUsage =
    "usage: deepinfer bench [--mode offline|online] (--config FILE | --model DIR)\n"
    "         [--dataset FILE | --input-len L] [--num_samples N] [--warmup W] [flags]\n"
    "  --config FILE            a recipe (infer_config.json or .yaml, docs/CONFIG.md); flags win\n"
    "  --model DIR              the model (-m); --threads --dtype --quantization\n"
    "                           --matmul-precision as generate\n"
    "workload:\n"
    "  --dataset FILE           (= --dataset-path) a JSON list of prompts (strings or\n"
    "                           {\"prompt\": ..., \"output_len\": N}), jsonl, or ShareGPT\n"
    "                           conversations (the first human turn is the prompt)\n"
    "  --dataset-name NAME      random (default without a file) | sharegpt | auto\n"
    "  --num_samples N          (= --num-samples, --num-prompts) measured requests\n"
    "  --warmup W               (= --num-warmups) requests run first, excluded from statistics\n"
    "  --input-len L            random prompts: L random token ids\n"
    "  --output-len M           tokens per request (greedy, eos ignored); default: the\n"
    "                           ShareGPT answer's length, else the config's max_new_tokens,\n"
    "                           else 128\n"
    "  --seed S                 random prompts and arrival times (default 0)\n"
    "load:\n"
    "  --request-rate R[,R2..]  requests/s, Poisson arrivals; inf (default) sends all at once;\n"
    "                           several rates run one after another\n"
    "  --max-concurrency C      at most C requests in flight\n"
    "  --duration S             stop sending after S seconds\n"
    "online:\n"
    "  --mode online            streamed /v1/completions against --base-url URL, or a\n"
    "                           `deepinfer serve` bench starts on a free port and stops after\n"
    "  --base-url URL           a running OpenAI-compatible server (http://host:port)\n"
    "  --served-model-name N    the request's model (default: the first of GET /v1/models)\n"
    "  --request-timeout S      per request (default 600)\n"
    "  --max-waiting-requests N  --http-threads N  --api-key KEY   for the server bench starts\n"
    "results:\n"
    "  --slo-ttft-ms MS  --slo-tpot-ms MS  --slo-e2el-ms MS   goodput objectives\n"
    "  --goodput ttft:MS tpot:MS e2el:MS   the same, vLLM's spelling\n"
    "  --json                   the JSON on stdout instead of the table\n"
    "  --save-result [--result-filename F] [--result-dir D]   write the JSON to a file\n"
    "  --plot FILE.png          latency vs request rate (several rates) or TTFT / TPOT\n"
    "                           histograms (matplotlib in .venv; DEEPINFER_PYTHON overrides)\n"
    "  --baseline-single        offline: also one request alone, and the batched speed-up\n"
    "  --log-level info\n";

// The JSON of the whole invocation: the run itself, or {"runs": [...]} for several rates.
Json combined(const std::vector<Json>& runs) {
  if (runs.size() == 1) return runs.front();
  Json out;
  out["runs"] = runs;
  return out;
}

std::string default_result_name(const Json& first, const bench::BenchOptions& o) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  std::string model = first.value("model", std::string("model"));
  for (char& c : model) {
    if (c == '/' || c == ' ') c = '_';
  }
  return str_cat("deepinfer-", o.mode, "-", bench::rate_text(o.request_rates.front()), "qps-",
                 model, "-", stamp, ".json");
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  DI_CHECK(out.good(), path, ": cannot write the results");
  out << text;
  out.close();
  DI_CHECK(out.good(), path, ": write failed");
}

int run_bench(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
    std::printf("%s%s%s%s", kUsage, kEngineFlagsUsage, kModelFlagsUsage, kParallelFlagsUsage);
    return 0;
  }
  const Args args(bench::join_multi_value_flags(argv),
                  with_parallel_value_flags(
                      with_engine_value_flags(with_model_flags(bench::bench_value_flags()))),
                  with_model_bool_flags(
                      with_parallel_bool_flags(with_engine_bool_flags(bench::bench_bool_flags()))),
                  {.aliases = with_parallel_aliases({{"m", "model"}})});
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  const bench::BenchOptions options = bench::read_bench_options(args);
  if (options.mode == "offline") keep_freed_heap_memory(kKeptHeapBlockBytes);  // no server here

  config::RecipeConfig recipe;
  if (const auto path = args.get("config")) recipe = config::load_recipe(*path);
  apply_model_flags(recipe, args);
  apply_engine_flags(recipe, args);
  apply_parallel_flags(recipe, args);
  DI_CHECK(recipe.model_path.has() || !options.base_url.empty(),
           "give the model: --config FILE (a recipe) or --model DIR (see deepinfer bench --help)");

  const auto dataset = bench::read_dataset_of(options);
  const std::vector<Json> runs = options.mode == "offline"
                                     ? bench::bench_offline(options, recipe, dataset)
                                     : bench::bench_online(options, recipe, args, dataset);
  if (runs.empty()) return 0;  // a lockstep worker rank (mpirun): rank 0 reports
  const Json all = combined(runs);
  const std::string text = all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);

  std::string saved;
  if (options.save_result) {
    std::filesystem::path path = options.result_filename.empty()
                                     ? default_result_name(runs.front(), options)
                                     : options.result_filename;
    if (!options.result_dir.empty()) {
      std::filesystem::create_directories(options.result_dir);
      path = std::filesystem::path(options.result_dir) / path;
    }
    saved = path.string();
    write_file(saved, text + "\n");
    log::info("bench: results written to ", saved);
  }
  if (options.json) {
    std::printf("%s\n", all.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    for (const auto& run : runs) bench::print_table(run, stdout);
  }
  std::fflush(stdout);
  if (!options.plot.empty()) {
    std::string input = saved;
    if (input.empty()) {
      input = (std::filesystem::temp_directory_path() /
               str_cat("deepinfer-bench-", ::getpid(), ".json"))
                  .string();
      write_file(input, text);
    }
    struct Remove {
      std::string path;
      ~Remove() {
        if (!path.empty()) std::filesystem::remove(path);
      }
    } cleanup{saved.empty() ? input : ""};
    bench::plot_results(input, options.plot);
  }
  return 0;
}

const Registration registration("bench",
                                "benchmark offline or against the API (benchmark.py; vLLM's "
                                "bench serve flags)",
                                &run_bench);

}  // namespace
}  // namespace deepinfer::cli
