#include "cli/model_flags.h"

#include "core/error.h"

namespace deepinfer::cli {

std::set<std::string> with_model_flags(std::set<std::string> value_flags) {
  value_flags.insert({"model", "threads", "dtype", "log-level"});
  return value_flags;
}

model::LoadOptions load_options_from(const Args& args) {
  model::LoadOptions options;
  const std::string dtype = args.get_or("dtype", "auto");
  if (dtype == "auto") return options;
  DI_CHECK(dtype == "f32" || dtype == "bf16" || dtype == "f16",
           "--dtype: expected auto, f32, bf16 or f16, got '", dtype, "'");
  options.weight_dtype = parse_dtype(dtype);
  return options;
}

std::unique_ptr<ThreadPool> thread_pool_from(const Args& args) {
  const int64_t threads = args.get_int("threads", 0);
  DI_CHECK(threads >= 0 && threads <= 4096, "--threads: expected 0 (all cores) to 4096, got ",
           threads);
  return std::make_unique<ThreadPool>(static_cast<int>(threads));
}

}  // namespace deepinfer::cli
