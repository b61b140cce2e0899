// deepinfer serve: the OpenAI-compatible HTTP API (docs/API.md) in front of the engine.
#include <cstdio>

#include "cli/api_server.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/model_flags.h"
#include "core/error.h"
#include "core/log.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer serve MODEL [--host 127.0.0.1] [--port 8000] [flags]   (as vllm serve)\n"
    "   or: deepinfer serve --model MODEL [flags]\n"
    "  MODEL                   Hugging Face model directory (config.json, safetensors,\n"
    "                          tokenizer.json; the chat template from tokenizer_config.json)\n"
    "  --host / --port         where to listen (--port 0: any free port, logged)\n"
    "  --api-key KEY           /v1/* requests need 'Authorization: Bearer KEY' (else 401);\n"
    "                          --api-key-file FILE or $DEEPINFER_API_KEY keep it out of ps\n"
    "  --served-model-name N   the model id clients use (default: the directory's name)\n"
    "  --tokenizer DIR         tokenizer.json / tokenizer_config.json from another directory\n"
    "  --chat-template FILE    a Jinja file instead of the tokenizer's chat template(s)\n"
    "  --seed S                seeds the seeds of requests that give none (reproducible runs)\n"
    "  --max-logprobs N        most top logprobs a request may ask for (default 20)\n"
    "  --max-body-bytes N      larger request bodies get 413 (default 8 MiB)\n"
    "  --max-waiting-requests N  503 + Retry-After while N requests wait for their first\n"
    "                          token (default 4 x --max-num-seqs, at least 64; 0: no limit)\n"
    "  --max-waiting-tokens N  503 while the waiting requests' prompts hold N tokens\n"
    "                          (default twice the KV pool; 0: no limit)\n"
    "  --request-timeout S     a request still being sent after S seconds gets 408 (15)\n"
    "  --allowed-hosts H,...   Host headers accepted (default: loopback names when bound to\n"
    "                          loopback, any otherwise; '*': any)\n"
    "  --allowed-origins O,... CORS (as vLLM; JSON list or commas; default none), with\n"
    "                          --allowed-methods, --allowed-headers, --allow-credentials\n"
    "  --shutdown-timeout S    on SIGTERM, in-flight requests get S seconds, then are aborted\n"
    "  --http-threads N        threads running request handlers (default 8; connections\n"
    "                          and open streams hold none)\n"
    "  --tool-call-parser P    auto|none|hermes|deepseek_v3|deepseek_v31|glm45: how tool calls\n"
    "                          are read from the model's output (auto: from the chat template)\n"
    "  --enable-auto-tool-choice  accepted for vLLM compatibility: tool calls are always on\n"
    "  --disable-log-requests  never log requests (they are logged at --log-level debug)\n"
    "  --generation-config     auto: generation_config.json supplies temperature / top_p /\n"
    "                          top_k / min_p / repetition_penalty a request omits (as vLLM);\n"
    "                          vllm: it does not (OpenAI's defaults)\n"
    "  --threads T  --dtype auto|f32|bf16|f16  --matmul-precision f32|bf16  --log-level info\n"
    "  --quantization TYPE  quantize at load: q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k|q4_k_m|\n"
    "                       w8a8|fp8 (int8 = q8_0, int4 = q4_k_m; docs/QUANTIZATION.md)\n"
    "  (a recipe config: deepinfer run --config FILE --mode api)\n";

int run_serve(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
    std::printf("%s%s%s", kUsage, kEngineFlagsUsage, kParallelFlagsUsage);
    return 0;
  }
  std::set<std::string> value_flags = kServerFlags;
  value_flags.insert(
      {"served-model-name", "generation-config", "config", "seed", "chat-template", "tokenizer"});
  const Args args(
      argv, with_parallel_value_flags(with_engine_value_flags(with_model_flags(value_flags))),
      with_parallel_bool_flags(with_engine_bool_flags(kServerBoolFlags)), {.positional = "model"});
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  DI_CHECK(!args.has("config"),
           "--config: serve a recipe config with deepinfer run --config FILE --mode api");
  const std::string generation_mode = args.get_or("generation-config", "auto");
  DI_CHECK(generation_mode == "auto" || generation_mode == "vllm",
           "--generation-config: expected auto or vllm, got '", generation_mode, "'");
  DI_CHECK(args.has("model"), "give the model: deepinfer serve MODEL (or --model MODEL)");
  (void)server_options_from(args);  // bad server flags fail before the settings are read

  config::RecipeConfig config = recipe_from_flags(args, true);
  apply_setting_flags(config, args, {"served-model-name", "seed", "chat-template", "tokenizer"});
  return serve_api(args, config,
                   {.warm_up = false, .generation_defaults = generation_mode == "auto"});
}

const Registration registration("serve", "serve the OpenAI-compatible HTTP API", &run_serve);

}  // namespace
}  // namespace deepinfer::cli
