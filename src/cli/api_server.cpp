#include "cli/api_server.h"

#include "config/runtime.h"
#include "core/error.h"
#include "core/log.h"
#include "core/text_file.h"

namespace deepinfer::cli {
namespace {

// Request defaults: generation_config.json's (when asked for), then what the config sets.
server::SamplingDefaults request_defaults(const config::Runtime& rt, bool generation_defaults) {
  server::SamplingDefaults d;
  if (generation_defaults) d = server::sampling_defaults_from(rt.generation());
  const config::RecipeConfig& c = rt.config();
  const engine::SamplingParams& p = rt.sampling_defaults();
  if (c.do_sample.has() || c.temperature.has()) d.temperature = p.temperature;
  if (c.top_p.has() || c.do_sample.has()) d.top_p = p.top_p;
  if (c.top_k.has() || c.do_sample.has()) d.top_k = p.top_k;
  if (c.repetition_penalty.has()) d.repetition_penalty = p.repetition_penalty;
  if (c.max_new_tokens.has()) d.max_tokens = p.max_new_tokens;
  return d;
}

}  // namespace

const std::set<std::string> kServerFlags = {"host",
                                            "port",
                                            "api-key",
                                            "max-body-bytes",
                                            "max-waiting-requests",
                                            "shutdown-timeout",
                                            "http-threads",
                                            "tool-call-parser",
                                            "max-logprobs"};

const std::set<std::string> kServerBoolFlags = {"disable-log-requests", "enable-auto-tool-choice"};

server::ServerOptions server_options_from(const Args& args) {
  server::ServerOptions options;
  options.host = args.get_or("host", options.host);
  const int64_t port = args.get_int("port", options.port);
  DI_CHECK(port >= 0 && port <= 65535, "--port must be in [0, 65535], got ", port);
  options.port = static_cast<int>(port);
  options.api_key = args.get_or("api-key", "");
  DI_CHECK(!args.has("api-key") || !options.api_key.empty(), "--api-key must not be empty");
  options.max_body_bytes = args.get_int("max-body-bytes", options.max_body_bytes);
  DI_CHECK(options.max_body_bytes > 0, "--max-body-bytes must be positive");
  options.max_waiting_requests = args.get_int("max-waiting-requests", 0);
  DI_CHECK(options.max_waiting_requests >= 0, "--max-waiting-requests must be >= 0, got ",
           options.max_waiting_requests);
  options.shutdown_timeout_s = args.get_double("shutdown-timeout", options.shutdown_timeout_s);
  DI_CHECK(options.shutdown_timeout_s >= 0, "--shutdown-timeout must be >= 0");
  const int64_t threads = args.get_int("http-threads", options.http_threads);
  DI_CHECK(threads >= 1 && threads <= 4096, "--http-threads must be in [1, 4096], got ", threads);
  options.http_threads = static_cast<int>(threads);
  options.tool_call_parser = args.get_or("tool-call-parser", options.tool_call_parser);
  options.log_requests = !args.flag("disable-log-requests");
  const int64_t max_logprobs = args.get_int("max-logprobs", 20);
  DI_CHECK(max_logprobs >= 0 && max_logprobs <= 20,
           "--max-logprobs must be in [0, 20] (OpenAI's limit), got ", max_logprobs);
  return options;
}

int serve_api(const Args& args, const config::RecipeConfig& config, const ApiOptions& options) {
  server::ApiServer server(server_options_from(args));  // logs "listening on URL"
  const std::string url = str_cat("http://", args.get_or("host", "127.0.0.1"), ":", server.port());
  config::RuntimeOptions runtime_options;
  runtime_options.warm_up = options.warm_up;
  const auto rt = config::Runtime::start(config, runtime_options);
  server::ModelInfo info =
      server::model_info_from(rt->model_dir(), rt->engine(), rt->generation(), rt->tokenizer(),
                              rt->served_name(), options.generation_defaults);
  info.defaults = request_defaults(*rt, options.generation_defaults);
  info.max_logprobs = args.get_int("max-logprobs", info.max_logprobs);
  if (config.chat_template.has()) {
    // --chat-template replaces every template of the tokenizer, the tool_use one too.
    info.chat_template = std::make_shared<const tokenizer::ChatTemplate>(
        tokenizer::ChatTemplate::parse(read_text_file(*config.chat_template)));
    info.tool_template = nullptr;
  }
  if (!info.chat_template) {
    log::warn(rt->model_dir(), " has no chat template: /v1/chat/completions will answer 400");
  }
  if (server.shutdown_requested()) return 0;  // SIGTERM while loading: nothing in flight
  server.attach(rt->client(), rt->tokenizer(), std::move(info));
  log::info("service started, ready to accept requests on ", url);
  const int rc = server.wait();
  rt->client().shutdown();
  return rc;
}

}  // namespace deepinfer::cli
