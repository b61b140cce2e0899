// deepinfer serve: the OpenAI-compatible HTTP API (docs/API.md) in front of the engine.
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/model_flags.h"
#include "cli/model_setup.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine_client.h"
#include "server/server.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer serve --model DIR [--host 127.0.0.1] [--port 8000] [--api-key KEY]\n"
    "         [--served-model-name NAME] [--max-body-bytes 8388608] [--max-waiting-requests N]\n"
    "         [--shutdown-timeout 30] [--http-threads 256] [--generation-config auto|vllm]\n"
    "         [--threads T] [--dtype auto|f32|bf16|f16] [--log-level info] [engine flags]\n"
    "  --model DIR             Hugging Face model directory (config.json, safetensors,\n"
    "                          tokenizer.json; the chat template from tokenizer_config.json)\n"
    "  --host / --port         where to listen (--port 0: any free port, logged)\n"
    "  --api-key KEY           /v1/* requests need 'Authorization: Bearer KEY' (else 401)\n"
    "  --served-model-name N   the model id clients use (default: the directory's name)\n"
    "  --max-body-bytes N      larger request bodies get 413\n"
    "  --max-waiting-requests N  503 + Retry-After while N requests wait for their first\n"
    "                          token (0: no limit)\n"
    "  --shutdown-timeout S    on SIGTERM, in-flight requests get S seconds, then are aborted\n"
    "  --generation-config     auto: generation_config.json supplies temperature / top_p /\n"
    "                          top_k / min_p / repetition_penalty a request omits (as vLLM);\n"
    "                          vllm: it does not (OpenAI's defaults)\n"
    "  (a recipe config: deepinfer run --config FILE --mode api)\n";

int64_t positive_or_zero(const Args& args, const char* flag, int64_t fallback) {
  const int64_t value = args.get_int(flag, fallback);
  DI_CHECK(value >= 0, "--", flag, " must be >= 0, got ", value);
  return value;
}

int run_serve(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
    std::printf("%s%s", kUsage, kEngineFlagsUsage);
    return 0;
  }
  const Args args(
      argv,
      with_engine_value_flags(with_model_flags(
          {"host", "port", "api-key", "served-model-name", "max-body-bytes", "max-waiting-requests",
           "shutdown-timeout", "http-threads", "generation-config", "config"})),
      with_engine_bool_flags({}));
  if (const auto level = args.get("log-level")) log::set_level(log::parse_level(*level));
  DI_CHECK(!args.has("config"),
           "--config: serve a recipe config with deepinfer run --config FILE --mode api");
  const std::string generation_mode = args.get_or("generation-config", "auto");
  DI_CHECK(generation_mode == "auto" || generation_mode == "vllm",
           "--generation-config: expected auto or vllm, got '", generation_mode, "'");
  (void)args.require("model");

  server::ServerOptions options;
  options.host = args.get_or("host", options.host);
  const int64_t port = args.get_int("port", options.port);
  DI_CHECK(port >= 0 && port <= 65535, "--port must be in [0, 65535], got ", port);
  options.port = static_cast<int>(port);
  options.api_key = args.get_or("api-key", "");
  DI_CHECK(!args.has("api-key") || !options.api_key.empty(), "--api-key must not be empty");
  options.max_body_bytes = args.get_int("max-body-bytes", options.max_body_bytes);
  DI_CHECK(options.max_body_bytes > 0, "--max-body-bytes must be positive");
  options.max_waiting_requests = positive_or_zero(args, "max-waiting-requests", 0);
  options.shutdown_timeout_s = args.get_double("shutdown-timeout", options.shutdown_timeout_s);
  DI_CHECK(options.shutdown_timeout_s >= 0, "--shutdown-timeout must be >= 0");
  const int64_t threads = args.get_int("http-threads", options.http_threads);
  DI_CHECK(threads >= 1 && threads <= 4096, "--http-threads must be in [1, 4096], got ", threads);
  options.http_threads = static_cast<int>(threads);

  // Bind before loading: a taken port fails at once, and /health answers 503 while loading.
  server::ApiServer server(options);
  LoadedModel loaded = load_model_from_flags(args);
  DI_CHECK(loaded.tokenizer.has_value(), "serve needs tokenizer.json in ", loaded.dir,
           " (prompts and responses are text)");
  engine::Engine engine(*loaded.model, *loaded.pool, engine_config_from(args, loaded.generation),
                        &*loaded.tokenizer);
  server::ModelInfo info =
      server::model_info_from(loaded.dir, engine, loaded.generation, *loaded.tokenizer,
                              args.get_or("served-model-name", ""), generation_mode == "auto");
  if (!info.chat_template) {
    log::warn(loaded.dir, " has no chat template: /v1/chat/completions will answer 400");
  }
  engine::EngineClient client(engine);
  if (server.shutdown_requested()) return 0;  // SIGTERM while loading: nothing in flight
  server.attach(client, *loaded.tokenizer, std::move(info));
  const int rc = server.wait();
  client.shutdown();
  return rc;
}

const Registration registration("serve", "serve the OpenAI-compatible HTTP API", &run_serve);

}  // namespace
}  // namespace deepinfer::cli
