// deepinfer run: the articles' run_infer.py. Loads what a recipe config describes, warms the
// engine up, then chats in the terminal (--mode local) or serves the OpenAI-compatible API
// (--mode api). Command-line flags override the config's values.
#include <cstdio>
#include <set>

#include "cli/api_server.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/local_chat.h"
#include "cli/model_flags.h"
#include "config/apply.h"
#include "config/recipe_config.h"
#include "config/runtime.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer run --config FILE [--mode local|api] [--prompt TEXT] [overrides]\n"
    "   or: deepinfer run --model DIR [--mode local|api] [--prompt TEXT] [overrides]\n"
    "  --config FILE        infer_config.json (ep_config.json and model_config.json beside it\n"
    "                       are read too), a directory holding one, or a .yaml recipe in the\n"
    "                       public repository's layout (docs/CONFIG.md)\n"
    "  --mode local         chat in the terminal (default); /reset, /exit, Ctrl-D\n"
    "  --mode api           serve the OpenAI-compatible HTTP API (docs/API.md)\n"
    "  --prompt TEXT        local mode: answer this one message and exit\n"
    "  --npu_devices 0,1    (alias --devices) under mpirun: one device per rank, as many as\n"
    "                       mpirun -np starts; without mpirun the number listed sets the\n"
    "                       compute threads of the one process\n"
    "overrides (win over the config file):\n"
    "  --model DIR  --threads T  --dtype auto|f32|bf16|f16  --matmul-precision f32|bf16\n"
    "  --quantization none|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k|q4_k_m|w8a8|fp8\n"
    "                 (int8 = q8_0, int4 = q4_k_m; docs/QUANTIZATION.md)\n"
    "  --block-size N  --max-num-blocks N | --kv-cache-memory GIB | --mem-fraction-static F\n"
    "  --kv-cache-dtype auto|f32|bf16|f16|int8  --max-num-seqs N  --max-num-batched-tokens N\n"
    "  --gpu-memory-utilization F (= --mem-fraction-static)\n"
    "  --max-model-len N  --allow-long-max-model-len\n"
    "  --enable-prefix-caching | --no-enable-prefix-caching  --scheduling-policy fifo|priority\n"
    "  --max-new-tokens N  --temperature T  --top-p P  --top-k K  --repetition-penalty R\n"
    "  --seed S  --chat-template FILE  --tokenizer DIR  --log-level debug|info|warn|error\n"
    "api mode: --host 127.0.0.1  --port 8000  --api-key KEY  --served-model-name NAME\n"
    "          --api-key-file FILE  --max-body-bytes N  --max-waiting-requests N\n"
    "          --max-waiting-tokens N  --shutdown-timeout S  --request-timeout S\n"
    "          --http-threads N  --tool-call-parser P  --max-logprobs N\n"
    "          --allowed-hosts H,...  --allowed-origins O,...  (see deepinfer serve --help)\n"
    "          --disable-log-requests  --enable-auto-tool-choice (accepted: tools are on)\n";

// Value flags that are settings (model_flags.h): the model and engine flags, and these. The
// boolean ones are the engine's (--enable-prefix-caching).
std::set<std::string> setting_value_flags() {
  return with_engine_value_flags({"model", "threads", "dtype", "quantization", "matmul-precision",
                                  "npu_devices", "devices", "mem-fraction-static", "max-new-tokens",
                                  "temperature", "top-p", "top-k", "repetition-penalty", "seed",
                                  "served-model-name", "chat-template", "tokenizer"});
}

int run_run(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
    std::printf("%s%s", kUsage, kModelFlagsUsage);
    return 0;
  }
  std::set<std::string> value_flags = with_model_flags(setting_value_flags());
  value_flags.insert(kServerFlags.begin(), kServerFlags.end());
  value_flags.insert({"config", "mode", "prompt", "log-level"});
  const Args args(
      argv, with_parallel_value_flags(value_flags),
      with_model_bool_flags(with_parallel_bool_flags(with_engine_bool_flags(kServerBoolFlags))));
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));

  const std::string mode = args.get_or("mode", "local");
  DI_CHECK(mode == "local" || mode == "api", "--mode: expected local or api, got '", mode, "'");
  DI_CHECK(args.has("config") || args.has("model"),
           "give --config FILE (a recipe) or --model DIR (see deepinfer run --help)");
  DI_CHECK(mode == "local" || !args.has("prompt"),
           "--prompt answers once in local mode; the api mode takes prompts over HTTP");
  if (mode == "local") {
    keep_freed_heap_memory(kKeptHeapBlockBytes);  // no server in this process
    for (const auto& flags : {kServerFlags, kServerBoolFlags}) {
      for (const auto& flag : flags) {
        DI_CHECK(!args.has(flag), "--", flag, " applies to --mode api");
      }
    }
  }

  config::RecipeConfig config;
  if (const auto path = args.get("config")) config = config::load_recipe(*path);
  apply_setting_flags(config, args, setting_value_flags());
  apply_model_flags(config, args);
  apply_engine_flags(config, args);
  apply_parallel_flags(config, args);

  if (mode == "api") return serve_api(args, config, {});
  // Under mpirun only rank 0 chats (mpirun gives stdin to rank 0 alone); the others follow.
  if (config::launched_as_worker()) return config::follow_driver(config);

  const auto runtime = config::Runtime::start(config);
  if (const auto prompt = args.get("prompt")) {
    nlohmann::ordered_json messages = {{{"role", "user"}, {"content", *prompt}}};
    answer_chat(*runtime, messages, stdout);
    std::fputs("\n", stdout);
    return 0;
  }
  log::info("ready: local chat with ", runtime->served_name());
  return run_local_chat(*runtime);
}

const Registration registration("run",
                                "load a recipe config and chat locally or serve the API "
                                "(run_infer.py)",
                                &run_run);

}  // namespace
}  // namespace deepinfer::cli
