#include "cli/engine_flags.h"

#include <fstream>
#include <sstream>

#include "cache/kv_cache.h"
#include "core/error.h"

namespace deepinfer::cli {

const char* const kEngineFlagsUsage =
    "  engine: [--block-size 16] [--max-num-blocks N | --kv-cache-memory GIB]\n"
    "          [--kv-cache-dtype auto|f32|bf16|f16|int8] [--max-num-seqs 128] "
    "[--max-num-batched-tokens 2048]\n"
    "          [--max-model-len N] [--enable-prefix-caching] [--scheduling-policy fifo|priority]\n";

std::set<std::string> with_engine_value_flags(std::set<std::string> value_flags) {
  value_flags.insert({"block-size", "max-num-blocks", "kv-cache-memory", "kv-cache-dtype",
                      "max-num-seqs", "max-num-batched-tokens", "max-model-len",
                      "scheduling-policy"});
  return value_flags;
}

std::set<std::string> with_engine_bool_flags(std::set<std::string> bool_flags) {
  bool_flags.insert("enable-prefix-caching");
  return bool_flags;
}

engine::EngineConfig engine_config_from(const Args& args, const io::GenerationConfig& generation) {
  engine::EngineConfig config;
  config.block_size = args.get_int("block-size", config.block_size);
  config.max_num_blocks = args.get_int("max-num-blocks", 0);
  config.kv_cache_memory_gib = args.get_double("kv-cache-memory", 0.0);
  DI_CHECK(!(args.has("max-num-blocks") && args.has("kv-cache-memory")),
           "give at most one of --max-num-blocks and --kv-cache-memory");
  DI_CHECK(!args.has("max-num-blocks") || config.max_num_blocks > 0,
           "--max-num-blocks must be positive, got ", config.max_num_blocks);
  DI_CHECK(!args.has("kv-cache-memory") || config.kv_cache_memory_gib > 0,
           "--kv-cache-memory must be a positive number of GiB, got ", config.kv_cache_memory_gib);
  config.kv_cache_dtype = cache::parse_kv_cache_dtype(args.get_or("kv-cache-dtype", "auto"));
  config.max_num_seqs = args.get_int("max-num-seqs", config.max_num_seqs);
  config.max_num_batched_tokens =
      args.get_int("max-num-batched-tokens", config.max_num_batched_tokens);
  config.max_model_len = args.get_int("max-model-len", 0);
  DI_CHECK(!args.has("max-model-len") || config.max_model_len > 0,
           "--max-model-len must be positive, got ", config.max_model_len);
  config.enable_prefix_caching = args.flag("enable-prefix-caching");
  config.scheduling_policy =
      engine::parse_scheduling_policy(args.get_or("scheduling-policy", "fifo"));
  config.eos_token_ids = generation.eos_token_ids;
  return config;
}

double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream in(line.substr(6));
      double kib = 0;
      in >> kib;
      return kib / 1024.0;
    }
  }
  return 0;
}

}  // namespace deepinfer::cli
