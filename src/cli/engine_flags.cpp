#include "cli/engine_flags.h"

#include <fstream>
#include <sstream>

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
