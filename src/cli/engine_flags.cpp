#include "cli/engine_flags.h"

#include <fstream>
#include <sstream>

namespace deepinfer::cli {

const char* const kEngineFlagsUsage =
    "  engine: [--block-size 16]\n"
    "          [--max-num-blocks N | --kv-cache-memory GIB | --gpu-memory-utilization F]\n"
    "          [--kv-cache-dtype auto|f32|bf16|f16|int8] [--max-num-seqs 128] "
    "[--max-num-batched-tokens 2048]\n"
    "          [--max-model-len N] [--allow-long-max-model-len]\n"
    "          [--enable-prefix-caching | --no-enable-prefix-caching] "
    "[--scheduling-policy fifo|priority]\n"
    "  --kv-cache-memory GIB    KV pool size; never more blocks than max-num-seqs sequences of\n"
    "                           max-model-len tokens can use (the cap is logged)\n"
    "  --gpu-memory-utilization F  vLLM's spelling of --mem-fraction-static: weights + KV pool\n"
    "                           within F of the machine's RAM (this is a CPU build)\n"
    "  --max-model-len N        longest prompt + output; above the model's\n"
    "                           max_position_embeddings only with --allow-long-max-model-len\n";

std::set<std::string> with_engine_value_flags(std::set<std::string> value_flags) {
  value_flags.insert({"block-size", "max-num-blocks", "kv-cache-memory", "gpu-memory-utilization",
                      "kv-cache-dtype", "max-num-seqs", "max-num-batched-tokens", "max-model-len",
                      "scheduling-policy"});
  return value_flags;
}

std::set<std::string> with_engine_bool_flags(std::set<std::string> bool_flags) {
  bool_flags.insert(
      {"enable-prefix-caching", "no-enable-prefix-caching", "allow-long-max-model-len"});
  return bool_flags;
}

double peak_rss_mib(int pid) {
  std::ifstream status(pid > 0 ? "/proc/" + std::to_string(pid) + "/status" : "/proc/self/status");
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
