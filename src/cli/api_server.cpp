#include "cli/api_server.h"

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

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
                                            "api-key-file",
                                            "max-body-bytes",
                                            "max-waiting-requests",
                                            "max-waiting-tokens",
                                            "shutdown-timeout",
                                            "http-threads",
                                            "request-timeout",
                                            "tool-call-parser",
                                            "max-logprobs",
                                            "allowed-hosts",
                                            "allowed-origins",
                                            "allowed-methods",
                                            "allowed-headers"};

const std::set<std::string> kServerBoolFlags = {"disable-log-requests", "enable-auto-tool-choice",
                                                "allow-credentials"};

namespace {

// A list flag as vLLM spells it ('["a", "b"]', JSON) or comma-separated ("a,b").
std::vector<std::string> list_flag(const Args& args, const std::string& name,
                                   std::vector<std::string> fallback) {
  const auto value = args.get(name);
  if (!value) return fallback;
  std::vector<std::string> out;
  if (!value->empty() && value->front() == '[') {
    nlohmann::json parsed = nlohmann::json::parse(*value, nullptr, false);
    DI_CHECK(parsed.is_array(), "--", name, ": expected a JSON list of strings, got '", *value,
             "'");
    for (const auto& item : parsed) {
      DI_CHECK(item.is_string(), "--", name, ": expected a JSON list of strings, got '", *value,
               "'");
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  size_t start = 0;
  while (start <= value->size()) {
    const size_t comma = std::min(value->find(',', start), value->size());
    std::string item = value->substr(start, comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

// --api-key, else --api-key-file (first line), else $DEEPINFER_API_KEY (as vLLM's
// VLLM_API_KEY): a key on the command line is visible to every local user in the process list.
std::string api_key_from(const Args& args) {
  DI_CHECK(!(args.has("api-key") && args.has("api-key-file")),
           "give --api-key or --api-key-file, not both");
  if (args.has("api-key")) {
    const std::string key = args.get_or("api-key", "");
    DI_CHECK(!key.empty(), "--api-key must not be empty");
    return key;
  }
  if (const auto file = args.get("api-key-file")) {
    std::string key = read_text_file(*file);
    key = key.substr(0, key.find_first_of("\r\n"));
    DI_CHECK(!key.empty(), "--api-key-file ", *file, ": the first line is empty");
    return key;
  }
  const char* env = std::getenv("DEEPINFER_API_KEY");
  return env == nullptr ? "" : env;
}

}  // namespace

server::ServerOptions server_options_from(const Args& args) {
  server::ServerOptions options;
  options.host = args.get_or("host", options.host);
  const int64_t port = args.get_int("port", options.port);
  DI_CHECK(port >= 0 && port <= 65535, "--port must be in [0, 65535], got ", port);
  options.port = static_cast<int>(port);
  options.api_key = api_key_from(args);
  options.max_body_bytes = args.get_int("max-body-bytes", options.max_body_bytes);
  DI_CHECK(options.max_body_bytes > 0, "--max-body-bytes must be positive");
  for (const auto& [flag, field] :
       {std::pair{"max-waiting-requests", &options.max_waiting_requests},
        std::pair{"max-waiting-tokens", &options.max_waiting_tokens}}) {
    *field = args.get_int(flag, *field);
    DI_CHECK(*field >= 0 || !args.has(flag), "--", flag, " must be >= 0 (0: no limit), got ",
             *field);
  }
  options.request_timeout_s = args.get_double("request-timeout", options.request_timeout_s);
  DI_CHECK(options.request_timeout_s > 0, "--request-timeout must be positive");
  options.allowed_hosts = list_flag(args, "allowed-hosts", {});
  options.allowed_origins = list_flag(args, "allowed-origins", {});
  options.allowed_methods = list_flag(args, "allowed-methods", options.allowed_methods);
  options.allowed_headers = list_flag(args, "allowed-headers", options.allowed_headers);
  options.allow_credentials = args.flag("allow-credentials");
  options.shutdown_timeout_s = args.get_double("shutdown-timeout", options.shutdown_timeout_s);
  DI_CHECK(options.shutdown_timeout_s >= 0, "--shutdown-timeout must be >= 0");
  const int64_t threads = args.get_int("http-threads", options.http_threads);
  DI_CHECK(threads >= 1 && threads <= 1024, "--http-threads must be in [1, 1024], got ", threads);
  options.http_threads = static_cast<int>(threads);
  options.tool_call_parser = args.get_or("tool-call-parser", options.tool_call_parser);
  options.log_requests = !args.flag("disable-log-requests");
  const int64_t max_logprobs = args.get_int("max-logprobs", 20);
  DI_CHECK(max_logprobs >= 0 && max_logprobs <= 20,
           "--max-logprobs must be in [0, 20] (OpenAI's limit), got ", max_logprobs);
  return options;
}

int serve_api(const Args& args, const config::RecipeConfig& config, const ApiOptions& options) {
  // Under mpirun only rank 0 serves: the others bind nothing and follow its steps.
  if (config::launched_as_worker()) return config::follow_driver(config);
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
  // A rank that stops answering (parallel/heartbeat.h): 503 for new requests, errors for the
  // open ones, before the job ends.
  rt->on_fault([&server](const std::string& message) { server.fail(message); });
  server.attach(rt->client(), rt->tokenizer(), std::move(info));
  log::info("service started, ready to accept requests on ", url);
  const int rc = server.wait();
  rt->client().shutdown();
  return rc;
}

}  // namespace deepinfer::cli
