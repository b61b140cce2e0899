// Decode at long context with DeepSeek Sparse Attention (issue #37): a DeepSeek-V3.2-shaped model
// (tools/make_bench_model.py --shape deepseek-v32-4l) decodes single tokens at depths of 8k, 32k
// and 128k, once as itself (the lightning indexer reads every past token's 128-wide key, MLA then
// reads the 2048 selected latent rows) and once as dense MLA (the same checkpoint as
// DeepseekV3ForCausalLM, indexer unread: every latent row each step), per KV cache dtype.
//
//   build/sparse_attention_bench --model bench/models/deepseek-v32-4l-random
//       [--depths 8192,32768,131072] [--kv f16,int8] [--steps 5] [--threads 2] [--no-dense]
//       [--json FILE]
//
// A prefill of 128k tokens would take hours on two cores, so the cache is filled directly: every
// layer's rows of positions [0, depth) get random values of the magnitudes the model writes
// (normalised latents and keys, ~N(0, 1)). Decode cost does not depend on the values, only on
// what is read and computed. TPOT is the median of --steps decode steps after one warm-up step
// (and a short untimed run first faults the mapped weights in).
// Prints a table and, with --json, the same as JSON; the KV bytes per token are the cache spec's,
// which `deepinfer info` prints.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/kv_cache.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "kernels/isa.h"
#include "model/causal_lm.h"
#include "model/weights.h"

using namespace deepinfer;

namespace {

std::vector<int64_t> split_ints(const std::string& s) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(std::stoll(s.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The checkpoint as its own architecture, or as dense MLA (DeepSeek-V3, indexer unread).
std::unique_ptr<model::CausalLM> load(const std::string& dir, bool dense) {
  if (!dense) return model::load_model(dir, {});
  io::ModelConfig config = io::ModelConfig::load(dir);
  config.architecture = "DeepseekV3ForCausalLM";
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  model::WeightLoader weights(checkpoint, {});
  for (int64_t i = 0; i < config.num_hidden_layers; ++i)
    weights.skip_prefix("model.layers." + std::to_string(i) + ".self_attn.indexer.");
  return model::build_model(config, weights);
}

// Positions [0, depth) of every layer: random rows, written in chunks.
void fill(cache::KvCache& cache, std::span<const int32_t> table, int64_t depth) {
  const auto& spec = cache.spec();
  constexpr int64_t kChunk = 4096;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> rows(static_cast<size_t>(kChunk * std::max(spec.head_dim, spec.index_dim)));
  std::vector<int32_t> positions(static_cast<size_t>(kChunk));
  for (int64_t layer = 0; layer < spec.num_layers; ++layer) {
    for (int64_t p0 = 0; p0 < depth; p0 += kChunk) {
      const int64_t n = std::min(kChunk, depth - p0);
      for (int64_t i = 0; i < n; ++i)
        positions[static_cast<size_t>(i)] = static_cast<int32_t>(p0 + i);
      for (float& v : rows) v = normal(rng);
      cache.write(layer, table, positions.data(), n, rows.data(), nullptr);
      if (cache.has_index(layer)) cache.write_index(layer, table, positions.data(), n, rows.data());
    }
  }
}

struct Result {
  std::string mode, kv;
  int64_t depth = 0;
  double tpot_ms = 0;
  int64_t kv_bytes_per_token = 0;
};

Result run(model::CausalLM& lm, const std::string& mode, const std::string& kv_name, int64_t depth,
           int64_t steps, ThreadPool& pool) {
  const DType kv = cache::parse_kv_cache_dtype(kv_name);
  const int64_t total = depth + steps + 1;
  cache::KvCache cache(model::kv_cache_spec(lm, 16, (total + 15) / 16, kv, true));
  std::vector<int32_t> table;
  cache.ensure_capacity(table, total);
  fill(cache, table, depth);
  std::vector<float> logits(static_cast<size_t>(lm.vocab_size()));
  std::vector<double> times;
  for (int64_t s = 0; s <= steps; ++s) {
    const int32_t token[] = {static_cast<int32_t>(100 + s)};
    const int32_t position[] = {static_cast<int32_t>(depth + s)};
    model::ForwardBatch batch{token, position, {{0, 1, table}}, {0}};
    const auto start = std::chrono::steady_clock::now();
    lm.forward(batch, cache, logits.data(), pool);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (s > 0) times.push_back(ms);  // step 0 warms caches and scratch
  }
  std::sort(times.begin(), times.end());
  return {mode, kv_name, depth, times[times.size() / 2], cache.spec().bytes_per_token()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, json_path;
  std::vector<int64_t> depths = {8192, 32768, 131072};
  std::vector<std::string> kvs = {"f16", "int8"};
  int64_t steps = 5;
  int threads = 2;
  bool dense = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--model" && i + 1 < argc) {
      model_dir = argv[++i];
    } else if (arg == "--depths" && i + 1 < argc) {
      depths = split_ints(argv[++i]);
    } else if (arg == "--kv" && i + 1 < argc) {
      kvs = split(argv[++i]);
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::stoll(argv[++i]);
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::stoi(argv[++i]);
    } else if (arg == "--no-dense") {
      dense = false;
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s --model DIR [--depths 8192,32768,131072] [--kv f16,int8] "
                   "[--steps 5] [--threads 2] [--no-dense] [--json FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  if (model_dir.empty() || steps < 1) {
    std::fprintf(stderr,
                 "%s: --model DIR is required (tools/make_bench_model.py --shape "
                 "deepseek-v32-4l writes one); --steps must be >= 1\n",
                 argv[0]);
    return 2;
  }
  ThreadPool pool(threads);
  std::vector<Result> results;
  for (const bool as_dense : {false, true}) {
    if (as_dense && !dense) continue;
    const std::string mode = as_dense ? "dense MLA" : "sparse (DSA)";
    auto lm = load(model_dir, as_dense);
    // Untimed: faults the mapped weights in (a first pass reads them from disk).
    run(*lm, mode, kvs.front(), 1024, 2, pool);
    for (const std::string& kv : kvs) {
      for (int64_t depth : depths) {
        results.push_back(run(*lm, mode, kv, depth, steps, pool));
        const Result& r = results.back();
        std::printf("%-13s %-5s depth %7lld: TPOT %9.2f ms\n", r.mode.c_str(), r.kv.c_str(),
                    static_cast<long long>(r.depth), r.tpot_ms);
        std::fflush(stdout);
      }
    }
  }
  std::printf("\nisa %s, %d threads\n\n",
              std::string(kernels::isa_name(kernels::active_isa())).c_str(), threads);
  std::printf(
      "| mode | KV cache | depth | TPOT ms | vs first depth | KV + indexer bytes/token |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  nlohmann::json out = {{"model", model_dir},
                        {"isa", std::string(kernels::isa_name(kernels::active_isa()))},
                        {"threads", threads},
                        {"steps", steps},
                        {"results", nlohmann::json::array()}};
  for (const Result& r : results) {
    double base = r.tpot_ms;
    for (const Result& b : results)
      if (b.mode == r.mode && b.kv == r.kv && b.depth == depths.front()) base = b.tpot_ms;
    std::printf("| %s | %s | %lld | %.1f | %.2fx | %lld |\n", r.mode.c_str(), r.kv.c_str(),
                static_cast<long long>(r.depth), r.tpot_ms, r.tpot_ms / base,
                static_cast<long long>(r.kv_bytes_per_token));
    out["results"].push_back({{"mode", r.mode},
                              {"kv_cache_dtype", r.kv},
                              {"depth", r.depth},
                              {"tpot_ms", r.tpot_ms},
                              {"ratio_to_first_depth", r.tpot_ms / base},
                              {"kv_bytes_per_token", r.kv_bytes_per_token}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(1) << "\n";
  return 0;
}
